// Bundlers and the leases' add-on: the app in tests/fixtures/apps/bundled_leases imports only
// 'weblocks/leases' and is built with Vite, esbuild and webpack 5 against the packed package installed from
// its tarball, served, and run in headless Chromium:
// - each bundler emits (or, for esbuild, the copy puts) the leases' wasm where the bundle fetches it, with
//   its exact bytes, and not the lock engine's: an app that uses only leases does not pay for locks;
// - in the page the lease story works (tryLock, a second tryLock rejected with a LockError, releaseLock,
//   list), the wasm is loaded once and no request fails.
// (tests/e2e/package/package_bundlers.test.mjs does the same for the lock entries, which carry no lease code.)
//
// Run: npm run build && node --test tests/e2e/package/package_bundlers_leases.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { bundlers, wasmFilesIn } from '../bundlers.mjs';
import { startServer } from '../server.mjs';
import { launchChromium, openPage } from '../browser.mjs';
import { makeApp } from '../package_install.mjs';

const bundleHtml = '<!doctype html><meta charset="utf-8"><title>weblocks bundled leases app</title><link rel="icon" href="data:,"><script type="module" src="./main.js"></script>';
const LEASES_WASM = 'weblocks_leases_bg.wasm';

/** What the esbuild and webpack builds of the app need (tests/e2e/bundlers.mjs). */
const bundleOptions = { entries: ['src/main.js'], wasm: [LEASES_WASM], html: bundleHtml };

let app;
let browser;
let leasesWasm;

before(async () => {
  app = makeApp('bundled_leases');
  leasesWasm = fs.readFileSync(path.join(app.dir, 'node_modules', 'weblocks', 'pkg', LEASES_WASM));
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  app?.remove();
});

for (const [name, buildApp] of Object.entries(bundlers)) {
  test(`${name}: an app of 'weblocks/leases' alone gets the leases' wasm and not the lock engine's; the lease story works`, { timeout: 90_000 }, async () => {
    const outDir = path.join(app.dir, `dist-${name}`);
    await buildApp(app, outDir, bundleOptions);
    const wasm = wasmFilesIn(outDir);
    assert.equal(wasm.length, 1, `wasm files in the output: ${wasm}`);
    assert.ok(fs.readFileSync(path.join(outDir, wasm[0])).equals(leasesWasm), `${wasm[0]} is the package's leases' wasm`);
    const server = await startServer({ root: outDir });
    const context = await browser.newContext();
    try {
      const responses = [];
      context.on('response', (r) => responses.push({ path: new URL(r.url()).pathname, status: r.status() }));
      const page = await openPage(context);
      await page.goto(server.url);
      await page.waitForFunction(() => window.appLoaded === true, undefined, { timeout: 10_000 });
      const report = await page.evaluate(() => window.leaseReport(`bundled-${Math.random()}`));
      assert.equal(report.error, undefined, report.error);
      assert.match(report.lockId, /^bundled-[0-9.]+\/1\/[0-9a-f]{32}$/);
      assert.deepEqual([report.again, report.left], ['true AlreadyLocked', []]);
      assert.equal(responses.filter((r) => r.path.endsWith('.wasm')).length, 1, JSON.stringify(responses));
      assert.deepEqual(responses.filter((r) => r.status >= 400), []);
      assert.deepEqual(page.errors, []);
    } finally {
      await context.close();
      await server.close();
    }
  });
}
