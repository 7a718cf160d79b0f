// A small static file server for the browser tests: serves the repository root on 127.0.0.1 (a free
// port), with the MIME types browsers insist on (application/wasm for streaming instantiation,
// text/javascript for module and worker scripts) and no caching, so every run loads the fresh build.
import http from 'node:http';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

const mimeTypes = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
};

/**
 * Start serving `root` (default: the repository root).
 * `routes` maps extra URL paths to file paths (relative to `root`), e.g. to serve one file under a
 * second path; `headers` maps URL paths to more response headers (e.g. a Content-Security-Policy).
 * `handle(req, res)`, if given, is asked first and answers the requests it resolves true for (the demo's
 * dev-only backend). Returns `{ url, port, close }`; `url` ends with '/'.
 */
export async function startServer({ root = repoRoot, routes = {}, headers: extraHeaders = {}, host = '127.0.0.1', port = 0, handle } = {}) {
  const base = path.resolve(root);
  const server = http.createServer(async (req, res) => {
    const headers = { 'cache-control': 'no-store' };
    try {
      if (handle && (await handle(req, res))) return;
      const pathname = decodeURIComponent(new URL(req.url, 'http://x').pathname);
      const routed = routes[pathname] ?? pathname;
      const relative = routed.endsWith('/') ? routed + 'index.html' : routed;
      const file = path.resolve(base, '.' + path.posix.normalize('/' + relative));
      if (file !== base && !file.startsWith(base + path.sep)) throw Object.assign(new Error('outside root'), { code: 'ENOENT' });
      const stat = await fs.stat(file);
      if (!stat.isFile()) throw Object.assign(new Error('not a file'), { code: 'ENOENT' });
      const body = await fs.readFile(file);
      headers['content-type'] = mimeTypes[path.extname(file)] ?? 'application/octet-stream';
      Object.assign(headers, extraHeaders[pathname]);
      res.writeHead(200, headers);
      res.end(req.method === 'HEAD' ? undefined : body);
    } catch (e) {
      res.writeHead(e.code === 'ENOENT' || e.code === 'ENOTDIR' ? 404 : 500, { ...headers, 'content-type': 'text/plain' });
      res.end(String(e.message));
    }
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const bound = server.address().port;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}/`,
    port: bound,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
