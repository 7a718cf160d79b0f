// Bundlers: the app in tests/fixtures/apps/bundled (a page and a module worker that import 'weblocks' and
// 'weblocks/polyfill' after removing the native API) is built with Vite, esbuild and webpack 5 against the
// packed package installed from its tarball, served, and run in headless Chromium:
// - each bundler emits (or, for esbuild, the documented copy puts) the wasm where the bundle fetches it;
//   it is loaded once per context, with its exact bytes, and no request fails;
// - in the page: the polyfill installed the ponyfill's objects, and locks work (shared/lock_checks.js);
// - two tabs of the app: each loads the package and its own locks work, with distinct client ids (what
//   the tabs see of each other is the cross-context tests' job, tests/e2e/cross_context*.test.mjs);
// - a module worker of the app: the same checks there;
// - Vite's dev server (dependency pre-bundling included) serves the same app, page and worker working.
// The bundlers run from this repository's node_modules (devDependencies), on the temporary app.
//
// Run: npm run build && node --test tests/e2e/package/package_bundlers.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createServer as createViteServer } from 'vite';
import { bundlers, wasmFilesIn } from '../bundlers.mjs';
import { startServer } from '../server.mjs';
import { launchChromium, openPage } from '../browser.mjs';
import { fixturesRoot, makeApp } from '../package_install.mjs';

const { expectedReport } = await import(path.join(fixturesRoot, 'shared', 'lock_checks.js'));

/** The page for the esbuild and webpack builds (Vite builds its own from the app's index.html). */
const bundleHtml = '<!doctype html><meta charset="utf-8"><title>weblocks bundled app</title><link rel="icon" href="data:,"><script type="module" src="./main.js"></script>';

/** What the esbuild and webpack builds of the app need (tests/e2e/bundlers.mjs). */
const bundleOptions = { entries: ['src/main.js', 'src/worker.js'], wasm: ['weblocks_bg.wasm'], html: bundleHtml };

let app;
let browser;
let wasmBytes;

before(async () => {
  app = makeApp('bundled');
  wasmBytes = fs.readFileSync(path.join(app.dir, 'node_modules', 'weblocks', 'pkg', 'weblocks_bg.wasm'));
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  app?.remove();
});

/**
 * Open the built app in a new browser context with `tabs` pages; records every response (pages and
 * their workers). Returns `{ pages, responses, close }`.
 */
async function openApp(url, tabs = 1) {
  const context = await browser.newContext();
  const responses = [];
  context.on('response', (response) => responses.push({ url: response.url(), status: response.status(), type: response.headers()['content-type'] }));
  const pages = [];
  for (let i = 0; i < tabs; i++) {
    const page = await openPage(context);
    await page.goto(url);
    await page.waitForFunction(() => window.appLoaded === true, undefined, { timeout: 10_000 });
    pages.push(page);
  }
  return { pages, responses, close: () => context.close() };
}

function assertWorked(report, where) {
  assert.equal(report.error, undefined, `${where}: ${report.error}`);
  assert.equal(report.nativeRemoved, true, `${where}: the native API was there and removed, so the checks exercise weblocks`);
  assert.equal(report.installed, true, `${where}: 'weblocks/polyfill' installed the ponyfill's objects`);
  assert.deepEqual(report.exercise, expectedReport, where);
}

/** The wasm responses among `responses`: exactly `count`, each 200 with application/wasm. */
function assertWasmLoaded(responses, count, where) {
  const wasm = responses.filter((r) => new URL(r.url).pathname.endsWith('.wasm'));
  assert.equal(wasm.length, count, `${where}: wasm responses ${JSON.stringify(wasm)}`);
  for (const r of wasm) {
    assert.equal(r.status, 200, `${where}: ${r.url}`);
    assert.equal(r.type, 'application/wasm', `${where}: ${r.url}`);
  }
  const failed = responses.filter((r) => r.status >= 400);
  assert.deepEqual(failed, [], `${where}: failed requests`);
}

for (const [name, buildApp] of Object.entries(bundlers)) {
  let server;
  let built = false;
  const outDir = () => path.join(app.dir, `dist-${name}`);

  test(`${name}: builds the app from the packed package; the wasm is emitted once, byte for byte`, { timeout: 60_000 }, async () => {
    await buildApp(app, outDir(), bundleOptions);
    const wasm = wasmFilesIn(outDir());
    assert.equal(wasm.length, 1, `wasm files in the output: ${wasm}`);
    assert.ok(fs.readFileSync(path.join(outDir(), wasm[0])).equals(wasmBytes), `${wasm[0]} is the package's wasm`);
    server = await startServer({ root: outDir() });
    built = true;
  });

  test(`${name}: page: the polyfill installs the ponyfill and locks work`, { timeout: 30_000 }, async (t) => {
    if (!built) return t.skip('the build failed');
    const session = await openApp(server.url);
    try {
      const [page] = session.pages;
      assertWorked(await page.evaluate(() => window.appReport('page:')), `${name} page`);
      assertWasmLoaded(session.responses, 1, `${name} page`);
      assert.deepEqual(page.errors, []);
    } finally {
      await session.close();
    }
  });

  test(`${name}: two tabs: each tab's own locks work, distinct client ids (cross-tab exclusion: cross_context*.test.mjs)`, { timeout: 30_000 }, async (t) => {
    if (!built) return t.skip('the build failed');
    const session = await openApp(server.url, 2);
    try {
      const [a, b] = session.pages;
      // One after the other, with distinct lock names, so that the checks stay valid once the tabs share
      // one lock manager.
      const reportA = await a.evaluate(() => window.appReport('tab-a:'));
      const reportB = await b.evaluate(() => window.appReport('tab-b:'));
      assertWorked(reportA, `${name} tab a`);
      assertWorked(reportB, `${name} tab b`);
      assert.notEqual(reportA.clientId, reportB.clientId, 'each tab is its own client');
      assertWasmLoaded(session.responses, 2, `${name} two tabs`);
      assert.deepEqual([...a.errors, ...b.errors], []);
    } finally {
      await session.close();
    }
  });

  test(`${name}: module worker: the polyfill installs and locks work there`, { timeout: 30_000 }, async (t) => {
    if (!built) return t.skip('the build failed');
    const session = await openApp(server.url);
    try {
      const [page] = session.pages;
      const pageReport = await page.evaluate(() => window.appReport('page:'));
      const workerReport = await page.evaluate(() => window.workerReport('worker:'));
      assertWorked(pageReport, `${name} page`);
      assertWorked(workerReport, `${name} worker`);
      assert.notEqual(workerReport.clientId, pageReport.clientId, 'the worker is its own client');
      assertWasmLoaded(session.responses, 2, `${name} page + worker`);
      assert.deepEqual(page.errors, []);
    } finally {
      await session.close();
      await server?.close();
    }
  });
}

test('vite dev server: page and module worker work, the wasm is served once per context', { timeout: 60_000 }, async () => {
  const server = await createViteServer({
    root: app.dir,
    configFile: false,
    logLevel: 'warn',
    server: { host: '127.0.0.1', port: 0, strictPort: false },
    worker: { format: 'es' },
  });
  try {
    await server.listen();
    const session = await openApp(server.resolvedUrls.local[0]);
    try {
      const [page] = session.pages;
      assertWorked(await page.evaluate(() => window.appReport('dev-page:')), 'vite dev page');
      assertWorked(await page.evaluate(() => window.workerReport('dev-worker:')), 'vite dev worker');
      assertWasmLoaded(session.responses, 2, 'vite dev page + worker');
      assert.deepEqual(page.errors, []);
    } finally {
      await session.close();
    }
  } finally {
    await server.close();
  }
});

test('esbuild without the wasm copied next to the bundle: requests reject with a clear load error', { timeout: 30_000 }, async () => {
  const outDir = path.join(app.dir, 'dist-esbuild');
  fs.rmSync(path.join(outDir, 'weblocks_bg.wasm'), { force: true });
  assert.ok(fs.existsSync(path.join(outDir, 'main.js')), 'the esbuild test built the app');
  const server = await startServer({ root: outDir });
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.goto(server.url);
    await page.waitForFunction(() => window.appLoaded === true, undefined, { timeout: 10_000 });
    const report = await page.evaluate(() => window.appReport('missing:'));
    assert.match(report.error ?? '', /weblocks: the lock engine \(WebAssembly\) failed to load/);
  } finally {
    await context.close();
    await server.close();
  }
});
