// The classic-script build (dist/weblocks.polyfill.js, from `npm run build`) in headless Chromium: in a
// page and in dedicated, shared and service workers where the native API was removed first, it installs
// `navigator.locks`, `LockManager` and `Lock` with the same property shapes as Chromium's native ones,
// adds exactly one other global (`weblocks`), and locks can be requested and queried. It also loads from
// an unrelated path and from file://, and leaves a native implementation alone. The legacy build
// (dist/weblocks.legacy.js, the same core compiled to JavaScript) does the same in a page without
// WebAssembly and in a dedicated worker, works in a page whose Content-Security-Policy forbids compiling
// wasm (where the classic script's engine cannot load), and shares one lock manager with the classic script;
// its leases' add-on (dist/weblocks.leases-legacy.js) gives leases in a page without WebAssembly.
//
// Run: npm run build && node --test tests/e2e/facade/build_smoke.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { repoRoot, startServer } from '../server.mjs';
import { launchChromium, openPage } from '../browser.mjs';

const polyfillFile = path.join(repoRoot, 'dist', 'weblocks.polyfill.js');
const legacyPath = '/dist/weblocks.legacy.js';
// The smoke page again, under a Content-Security-Policy that allows scripts of the origin and no wasm
// compilation ('wasm-unsafe-eval' or 'unsafe-eval').
const cspPage = '/csp/build_smoke.html';
// Served under an unrelated, deeper path too: the build must not depend on where it lives.
const polyfillPath = '/some/other/place/weblocks.polyfill.js';
const fixtures = 'tests/e2e/fixtures/';
const workerPath = `/${fixtures}build_smoke_worker.js?polyfill=${encodeURIComponent(polyfillPath)}`;

/** What `buildSmoke.exercise()` (fixtures/build_smoke_checks.js) returns when the API works. */
const expectedUse = {
  granted: {
    name: 'smoke',
    mode: 'exclusive',
    isLock: true,
    held: ['smoke:exclusive', 'other:shared'],
    heldByThisContext: true,
  },
  ifAvailableMiss: null,
  after: { held: 0, pending: 0 },
  sameObject: true,
  instance: true,
};

let server;
let browser;

before(async () => {
  assert.ok(fs.existsSync(polyfillFile), `${polyfillFile} is missing: run \`npm run build\` first`);
  server = await startServer({
    routes: { [polyfillPath]: 'dist/weblocks.polyfill.js', [cspPage]: `${fixtures}build_smoke.html`, '/csp/build_smoke_checks.js': `${fixtures}build_smoke_checks.js` },
    headers: { [cspPage]: { 'content-security-policy': "script-src 'self'" } },
  });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await server?.close();
});

/** In the page: remove the native API, load the build with a <script> tag from `src`, use it. */
function installInPage() {
  return async (src) => {
    const nativeShape = 'locks' in navigator ? buildSmoke.shape() : null;
    const hadNative = buildSmoke.removeNative();
    const before = new Set(Object.getOwnPropertyNames(self));
    await buildSmoke.loadScript(src);
    const added = Object.getOwnPropertyNames(self).filter((n) => !before.has(n)).sort();
    return { hadNative, nativeShape, added, shape: buildSmoke.shape(), result: await buildSmoke.exercise() };
  };
}

function assertInstalled(report) {
  assert.equal(report.error, undefined);
  assert.equal(report.hadNative, true, 'the native API was there and was removed, so the test proves something');
  assert.deepEqual(report.added, ['Lock', 'LockManager', 'weblocks']);
  assert.deepEqual(report.shape, report.nativeShape, 'installed shapes equal the native ones');
  assert.deepEqual(report.result, expectedUse);
}

test('page: installs where navigator.locks was removed, with native shapes; request and query work', { timeout: 30_000 }, async () => {
  const page = await openPage(browser);
  await page.goto(server.url + fixtures + 'build_smoke.html');
  const report = await page.evaluate(installInPage(), polyfillPath);
  assertInstalled(report);
  assert.equal(report.shape.navigatorLocks.get, 'function get locks/0');
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('page: leaves a native navigator.locks alone; the ponyfill object still works', { timeout: 30_000 }, async () => {
  const page = await openPage(browser);
  await page.goto(server.url + fixtures + 'build_smoke.html');
  const report = await page.evaluate(async (src) => {
    const getter = Object.getOwnPropertyDescriptor(Navigator.prototype, 'locks').get;
    const native = { locks: navigator.locks, LockManager: self.LockManager, Lock: self.Lock };
    await buildSmoke.loadScript(src);
    return {
      sameGetter: Object.getOwnPropertyDescriptor(Navigator.prototype, 'locks').get === getter,
      sameObjects: navigator.locks === native.locks && self.LockManager === native.LockManager && self.Lock === native.Lock,
      ponyfillIsSeparate: weblocks.locks !== navigator.locks && !(weblocks.locks instanceof native.LockManager),
      installAgain: weblocks.install(),
      ponyfillWorks: await weblocks.locks.request('p', (lock) => `${lock.name}:${lock.mode}:${lock instanceof weblocks.Lock}`),
    };
  }, polyfillPath);
  assert.deepEqual(report, {
    sameGetter: true,
    sameObjects: true,
    ponyfillIsSeparate: true,
    installAgain: false,
    ponyfillWorks: 'p:exclusive:true',
  });
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('page: loading the build twice keeps one instance (one lock manager per context)', { timeout: 30_000 }, async () => {
  const page = await openPage(browser);
  await page.goto(server.url + fixtures + 'build_smoke.html');
  const report = await page.evaluate(async (src) => {
    buildSmoke.removeNative();
    await buildSmoke.loadScript(src);
    const first = { weblocks: self.weblocks, locks: navigator.locks, LockManager: self.LockManager };
    await buildSmoke.loadScript(src);
    return {
      sameExports: self.weblocks.locks === first.weblocks.locks && self.weblocks.clientId === first.weblocks.clientId,
      sameInstalled: navigator.locks === first.locks && self.LockManager === first.LockManager,
      stillWorks: await navigator.locks.request('twice', (lock) => lock.name),
    };
  }, polyfillPath);
  assert.deepEqual(report, { sameExports: true, sameInstalled: true, stillWorks: 'twice' });
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('page on file://: the build loads from a file URL and installs', { timeout: 30_000 }, async () => {
  const page = await openPage(browser);
  await page.goto(pathToFileURL(path.join(repoRoot, fixtures, 'build_smoke.html')).href);
  const report = await page.evaluate(installInPage(), pathToFileURL(polyfillFile).href);
  assert.deepEqual(report.added, ['Lock', 'LockManager', 'weblocks']);
  assert.deepEqual(report.result, expectedUse);
  assert.deepEqual(page.errors, []);
  await page.close();
});

/** The report of a dedicated worker of the fixture that loads `build` (a URL path) with importScripts. */
async function dedicatedWorkerReport(build) {
  const page = await openPage(browser);
  await page.goto(server.url + fixtures + 'build_smoke.html');
  const report = await page.evaluate(
    (url) =>
      new Promise((resolve, reject) => {
        const worker = new Worker(url);
        worker.onerror = (e) => reject(new Error(`worker error: ${e.message}`));
        worker.onmessage = (e) => resolve(e.data);
        worker.postMessage('run');
      }),
    `/${fixtures}build_smoke_worker.js?polyfill=${encodeURIComponent(build)}`,
  );
  assert.deepEqual(page.errors, []);
  await page.close();
  return report;
}

test('dedicated worker: importScripts installs the polyfill; request and query work', { timeout: 30_000 }, async () => {
  const report = await dedicatedWorkerReport(polyfillPath);
  assertInstalled(report);
  assert.equal(report.shape.navigatorLocks.get, 'function get locks/0');
});

test('shared worker: importScripts installs the polyfill; request and query work', { timeout: 30_000 }, async () => {
  const page = await openPage(browser);
  await page.goto(server.url + fixtures + 'build_smoke.html');
  const report = await page.evaluate(
    (url) =>
      new Promise((resolve, reject) => {
        const worker = new SharedWorker(url);
        worker.onerror = () => reject(new Error('shared worker failed to start'));
        worker.port.onmessage = (e) => resolve(e.data);
        worker.port.postMessage('run');
      }),
    workerPath,
  );
  assertInstalled(report);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('service worker: importScripts installs the polyfill; request and query work', { timeout: 30_000 }, async () => {
  const page = await openPage(browser);
  await page.goto(server.url + fixtures + 'build_smoke.html');
  const report = await page.evaluate(async (url) => {
    const registration = await navigator.serviceWorker.register(url, { scope: './sw-scope/' });
    try {
      const worker = registration.installing ?? registration.waiting ?? registration.active;
      if (worker.state !== 'activated') {
        await new Promise((resolve) => worker.addEventListener('statechange', () => worker.state === 'activated' && resolve()));
      }
      const answer = new Promise((resolve) => navigator.serviceWorker.addEventListener('message', (e) => resolve(e.data), { once: true }));
      worker.postMessage('run');
      return await answer;
    } finally {
      await registration.unregister();
    }
  }, workerPath);
  assertInstalled(report);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('legacy build, page without WebAssembly: installs with native shapes; request and query work', { timeout: 30_000 }, async () => {
  const page = await openPage(browser);
  await page.goto(server.url + fixtures + 'build_smoke.html');
  await page.evaluate(() => delete self.WebAssembly);
  const report = await page.evaluate(installInPage(), legacyPath);
  assertInstalled(report);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test("legacy build and its leases' add-on, page without WebAssembly: the leases work; the classic add-on's say why they cannot", { timeout: 30_000 }, async () => {
  const page = await openPage(browser);
  await page.goto(server.url + fixtures + 'build_smoke.html');
  await page.evaluate(() => delete self.WebAssembly);
  const leaseStory = async (addOn) => {
    await buildSmoke.loadScript('/dist/weblocks.legacy.js');
    await buildSmoke.loadScript(addOn);
    const { leases, LockError } = weblocks;
    try {
      const lockId = await leases.tryLock('smoke', 'legacy', { ttlMs: 60_000 });
      const again = await leases.tryLock('smoke', 'legacy').catch((e) => e instanceof LockError && e.code);
      await leases.releaseLock(lockId);
      return { lockId, again, left: (await leases.list()).length };
    } catch (e) {
      return { code: e.code, message: e.message };
    }
  };
  const story = await page.evaluate(leaseStory, '/dist/weblocks.leases-legacy.js');
  assert.match(story.lockId ?? JSON.stringify(story), /^smoke\/legacy\/[0-9a-f]{32}$/);
  assert.deepEqual([story.again, story.left], ['AlreadyLocked', 0]);
  assert.deepEqual(page.errors, []);
  await page.close();
  // The WebAssembly add-on in the same page: every operation rejects, saying why.
  const other = await openPage(browser);
  await other.goto(server.url + fixtures + 'build_smoke.html');
  await other.evaluate(() => delete self.WebAssembly);
  const failed = await other.evaluate(leaseStory, '/dist/weblocks.leases.js');
  assert.equal(failed.code, 'StorageError');
  assert.match(failed.message, /the lease engine \(WebAssembly\) failed to load/);
  await other.close();
});

test('legacy build, dedicated worker: importScripts installs the polyfill; request and query work', { timeout: 30_000 }, async () => {
  assertInstalled(await dedicatedWorkerReport(legacyPath));
});

test("page whose CSP forbids compiling wasm: the classic script's engine cannot load, the legacy build works", { timeout: 30_000 }, async () => {
  const attempt = async (src) => {
    const page = await openPage(browser);
    await page.goto(server.url + cspPage.slice(1));
    const outcome = await page.evaluate(async (url) => {
      buildSmoke.removeNative();
      await buildSmoke.loadScript(url);
      try {
        return { granted: await navigator.locks.request('csp', (lock) => lock.name) };
      } catch (e) {
        return { error: String(e.message) };
      }
    }, src);
    await page.close();
    return outcome;
  };
  const classic = await attempt(polyfillPath);
  assert.match(classic.error ?? '', /WebAssembly\) failed to load/, JSON.stringify(classic));
  assert.deepEqual(await attempt(legacyPath), { granted: 'csp' });
});

test('legacy build and classic script in two tabs share one lock manager', { timeout: 30_000 }, async () => {
  const context = await browser.newContext();
  try {
    const [legacy, classic] = [await context.newPage(), await context.newPage()];
    for (const page of [legacy, classic]) await page.goto(server.url + fixtures + 'build_smoke.html');
    await legacy.evaluate(async (src) => {
      delete self.WebAssembly;
      buildSmoke.removeNative();
      await buildSmoke.loadScript(src);
      self.held = new Promise((granted) => {
        navigator.locks.request('one manager', () => {
          granted();
          return new Promise((release) => (self.release = release));
        });
      });
      await self.held;
    }, legacyPath);
    const seen = await classic.evaluate(async (src) => {
      buildSmoke.removeNative();
      await buildSmoke.loadScript(src);
      const missed = await navigator.locks.request('one manager', { ifAvailable: true }, (lock) => lock);
      const { held } = await navigator.locks.query();
      return { missed, holders: held.filter((h) => h.name === 'one manager').length };
    }, polyfillPath);
    assert.deepEqual(seen, { missed: null, holders: 1 });
    await legacy.evaluate(() => self.release());
    const after = await classic.evaluate(() => navigator.locks.request('one manager', { ifAvailable: true }, (lock) => lock !== null));
    assert.equal(after, true);
  } finally {
    await context.close();
  }
});
