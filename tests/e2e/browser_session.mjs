// One browser and one test server for a test file: launched before its tests, closed after them (the browser
// first, so that no page of it is left talking to a closed server). `set` receives `{ server, browser, plain }`
// once both are up, where `plain` is the plain-http origin (`plainHttpHost`, mapped to 127.0.0.1) of the same
// server, on which the engines have no native API.
import { before, after } from 'node:test';
import { startServer } from './server.mjs';
import { plainHttpHost } from '../../bench/lib/variants.mjs';

/** Registers the file's `before` and `after` hooks; `launch` is a driver's (bench/lib/*.mjs), `start` the server's. */
export function browserSession(launch, set, start = startServer) {
  let server;
  let browser;
  before(async () => {
    server = await start();
    browser = await launch();
    set({ server, browser, plain: { url: `http://${plainHttpHost}:${server.port}/` } });
  });
  after(async () => {
    await browser?.close();
    await server?.close();
  });
}
