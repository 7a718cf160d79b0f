// Serves the repository root for the demo: `node scripts/serve.mjs [--host H] [--port P]`.
import { startServer } from '../tests/e2e/server.mjs';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const server = await startServer({ host: arg('host', '127.0.0.1'), port: Number(arg('port', 8080)) });
console.log(`weblocks demo: open ${server.url}www/ in several tabs (Ctrl-C stops)`);
