// The classic script as a no-build user gets it: dist/weblocks.polyfill.js from the packed package
// (reachable through `exports` as 'weblocks/classic' and 'weblocks/dist/weblocks.polyfill.js'), loaded
// with a <script> tag in headless Chromium (tests/fixtures/apps/script_tag/index.html):
// - it defines exactly one global, `weblocks`, holding the same names as the ESM entry's exports, and no
//   leases: its leases' add-on dist/weblocks.leases.js (also in the package), loaded after it, adds the
//   exports of `weblocks/leases` there, and its embedded wasm works;
// - with the native API present it leaves it alone, and `weblocks.locks` (the ponyfill) works;
// - with the native API removed it also installs `navigator.locks`, `LockManager` and `Lock`;
// - it is one self-contained file: no other request (the wasm is embedded, LZMA-compressed);
// - where DecompressionStream is missing (older browsers) it works the same: the wasm is decoded in JS.
// (tests/e2e/facade/build_smoke.test.mjs covers workers, file:// and property shapes of the repository's build.)
//
// Run: npm run build && node --test tests/e2e/package/package_script_tag.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from '../server.mjs';
import { launchChromium, openPage } from '../browser.mjs';
import { fixturesRoot, makeApp } from '../package_install.mjs';

const { expectedReport } = await import(path.join(fixturesRoot, 'shared', 'lock_checks.js'));

let app;
let server;
let browser;
let resolved;
let esmExports;
let leasesExports;

/** Evaluate `expression` (an ES module body's expression) with Node in the app directory; JSON result. */
function nodeInApp(expression) {
  const code = `console.log(JSON.stringify(await (async () => ${expression})()))`;
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', code], { cwd: app.dir, encoding: 'utf8' }));
}

before(async () => {
  app = makeApp('script_tag');
  resolved = nodeInApp(
    "['weblocks/classic', 'weblocks/dist/weblocks.polyfill.js', 'weblocks/dist/weblocks.leases.js'].map((s) => import.meta.resolve(s))",
  );
  esmExports = nodeInApp("Object.keys(await import('weblocks')).sort()");
  leasesExports = nodeInApp("Object.keys(await import('weblocks/leases')).sort()");
  const [classicFile, , addOnFile] = resolved.map((url) => path.relative(app.dir, fileURLToPath(url)));
  server = await startServer({
    root: app.dir,
    routes: { '/vendor/weblocks.polyfill.js': classicFile, '/vendor/weblocks.leases.js': addOnFile },
  });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await server?.close();
  app?.remove();
});

test("exports: 'weblocks/classic' and 'weblocks/dist/weblocks.polyfill.js' are the packed classic build", () => {
  const expected = path.join(app.dir, 'node_modules', 'weblocks', 'dist', 'weblocks.polyfill.js');
  assert.deepEqual(resolved.slice(0, 2).map((url) => fileURLToPath(url)), [expected, expected]);
});

/** Load the fixture page (`search`: its query string); returns its report, the responses and errors. */
async function loadPage(search) {
  const context = await browser.newContext();
  try {
    const responses = [];
    // blob: URLs are not loaded from anywhere.
    context.on('response', (r) => r.url().startsWith('blob:') || responses.push({ path: new URL(r.url()).pathname, status: r.status() }));
    const page = await openPage(context);
    await page.goto(server.url + 'index.html' + search);
    await page.waitForFunction(() => window.pageReport !== undefined, undefined, { timeout: 10_000 });
    const report = await page.evaluate(() => window.pageReport);
    return { report, responses, errors: page.errors };
  } finally {
    await context.close();
  }
}

function assertOneSelfContainedFile(responses) {
  assert.deepEqual(
    responses.filter((r) => r.path !== '/index.html' && !r.path.startsWith('/shared/')),
    [{ path: '/vendor/weblocks.polyfill.js', status: 200 }],
    'the page loads one file of weblocks, and nothing else (the wasm is embedded)',
  );
}

test('native API present: exactly one global `weblocks` with the ESM exports; native left alone; the ponyfill works', { timeout: 30_000 }, async () => {
  const { report, responses, errors } = await loadPage('');
  assert.equal(report.error, undefined, report.error);
  assert.equal(report.nativeRemoved, false);
  assert.deepEqual(report.globalsAdded, ['weblocks']);
  assert.equal(report.navigatorLocks, 'native');
  assert.deepEqual(report.weblocksKeys, esmExports, 'the global holds the same names as the ESM entry');
  assert.deepEqual(report.exercise, expectedReport);
  assertOneSelfContainedFile(responses);
  assert.deepEqual(errors, []);
});

test("the leases' add-on, loaded after the classic script, adds the leases' exports; one file, its wasm embedded", { timeout: 30_000 }, async () => {
  const context = await browser.newContext();
  try {
    const responses = [];
    context.on('response', (r) => r.url().startsWith('blob:') || responses.push({ path: new URL(r.url()).pathname, status: r.status() }));
    const page = await openPage(context);
    await page.goto(server.url + 'index.html');
    await page.waitForFunction(() => window.pageReport !== undefined, undefined, { timeout: 10_000 });
    await page.addScriptTag({ url: '/vendor/weblocks.leases.js' });
    const keys = await page.evaluate(() => Object.keys(weblocks).sort());
    assert.deepEqual(keys, [...esmExports, ...leasesExports].sort(), "the names of the ESM entry and of 'weblocks/leases'");
    assert.equal(await page.evaluate(() => typeof weblocks.createLeases(weblocks.serverLeaseStore({ url: '/', token: 't' })).takeOver), 'function');
    const lease = await page.evaluate(async () => {
      const lockId = await weblocks.leases.tryLock('packed', '1', { ttlMs: 60_000 });
      const again = await weblocks.leases.tryLock('packed', '1').catch((e) => e instanceof weblocks.LockError && e.code);
      await weblocks.leases.releaseLock(lockId);
      return { lockId, again, left: await weblocks.leases.list() };
    });
    assert.match(lease.lockId, /^packed\/1\/[0-9a-f]{32}$/);
    assert.deepEqual([lease.again, lease.left], ['AlreadyLocked', []]);
    assert.deepEqual(
      responses.filter((r) => r.path !== '/index.html' && !r.path.startsWith('/shared/')),
      [
        { path: '/vendor/weblocks.polyfill.js', status: 200 },
        { path: '/vendor/weblocks.leases.js', status: 200 },
      ],
      'the two files, and nothing else (both embed their wasm)',
    );
    assert.deepEqual(page.errors, []);
  } finally {
    await context.close();
  }
});

test('native API removed: installs navigator.locks, LockManager, Lock, plus the one global `weblocks`', { timeout: 30_000 }, async () => {
  const { report, responses, errors } = await loadPage('?remove-native');
  assert.equal(report.error, undefined, report.error);
  assert.equal(report.nativeRemoved, true);
  assert.deepEqual(report.globalsAdded, ['Lock', 'LockManager', 'weblocks']);
  assert.equal(report.navigatorLocks, 'weblocks');
  assert.deepEqual(report.exercise, expectedReport);
  assertOneSelfContainedFile(responses);
  assert.deepEqual(errors, []);
});

test('no DecompressionStream (older browsers): the embedded wasm is decoded in JS (LZMA), needing none; installs and works', { timeout: 30_000 }, async () => {
  const { report, responses, errors } = await loadPage('?remove-native&no-decompression-stream');
  assert.equal(report.error, undefined, report.error);
  assert.equal(report.decompressionStream, 'undefined');
  assert.deepEqual(report.globalsAdded, ['Lock', 'LockManager', 'weblocks']);
  assert.equal(report.navigatorLocks, 'weblocks');
  assert.deepEqual(report.exercise, expectedReport);
  assertOneSelfContainedFile(responses);
  assert.deepEqual(errors, []);
});
