// End-to-end: the classic-script polyfill on a plain-http origin, where Chromium has no native
// navigator.locks. `weblocks.test` is mapped to 127.0.0.1 with --host-resolver-rules, so
// http://weblocks.test:PORT/ is NOT a secure context (127.0.0.1 and localhost would be). A script
// written for the native API (fixtures/native_style_scenarios.js) then runs unchanged, in the page
// and in a dedicated worker, from /dist/ and from a copy under another directory. The same script
// also runs against Chromium's native API on a secure origin, with the polyfill loaded there too
// (it must leave the native API alone), and must give the same results.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from '../server.mjs';
import { launchChromium, openPage } from '../browser.mjs';
import { expectedScenarioResults, withoutNativeApi } from '../fixtures/native_style_expected.mjs';

const polyfill = 'dist/weblocks.polyfill.js';
const vendoredPath = '/tests/e2e/fixtures/vendored/lib/weblocks.polyfill.js';

let server;
let browser;
let plainOrigin;
let secureOrigin;

before(async () => {
  server = await startServer({ routes: { [vendoredPath]: polyfill } });
  browser = await launchChromium({ args: ['--host-resolver-rules=MAP weblocks.test 127.0.0.1'] });
  plainOrigin = `http://weblocks.test:${server.port}`;
  secureOrigin = `http://127.0.0.1:${server.port}`;
});

after(async () => {
  await browser?.close();
  await server?.close();
});

/** Open `url`, check where we are, run the scenarios in the page and in a worker. */
async function runPageAndWorker(url, workerPolyfillUrl) {
  const page = await openPage(browser);
  try {
    const response = await page.goto(url);
    assert.equal(response.status(), 200, url);
    const pageSide = await page.evaluate(async () => ({
      protocol: location.protocol,
      before: self.before,
      early: await self.early,
      results: await nativeStyleScenarios('page'),
      globalWeblocks: typeof weblocks,
    }));
    const workerSide = await page.evaluate((u) => runInWorker(u), workerPolyfillUrl);
    assert.deepEqual(page.errors, [], 'page errors');
    return { page: pageSide, worker: workerSide, browserPage: page };
  } catch (e) {
    await page.close();
    throw e;
  }
}

test('plain-http page: not a secure context, no native API; the polyfill installs it and a native-style script runs unchanged, in the page and in a worker', async () => {
  const { page, worker, browserPage } = await runPageAndWorker(
    `${plainOrigin}/tests/e2e/fixtures/plain_http.html`,
    `/${polyfill}`,
  );
  try {
    assert.equal(page.protocol, 'http:');
    assert.deepEqual(page.before, withoutNativeApi, 'before the polyfill ran');
    assert.equal(page.globalWeblocks, 'object', 'the classic build defines the global `weblocks`');
    assert.equal(page.early, 'early shared', 'a request made before the wasm loaded is queued and granted');
    assert.deepEqual(page.results, expectedScenarioResults);

    assert.equal(worker.error, undefined, worker.error);
    assert.equal(worker.isWorker, true);
    assert.deepEqual(worker.before, withoutNativeApi, 'worker, before importScripts(polyfill)');
    assert.equal(worker.early, 'early shared');
    assert.deepEqual(worker.results, expectedScenarioResults);

    // The installed API looks like the platform's: a getter on Navigator.prototype, the globals, and
    // the ponyfill exports on `weblocks` are those same objects.
    const shape = await browserPage.evaluate(() => {
      const descriptor = Object.getOwnPropertyDescriptor(Navigator.prototype, 'locks');
      return {
        getter: typeof descriptor?.get,
        setter: typeof descriptor?.set,
        enumerable: descriptor?.enumerable,
        globalsAreExports: LockManager === weblocks.LockManager && Lock === weblocks.Lock && navigator.locks === weblocks.locks,
        notEnumerableGlobals: !Object.keys(window).includes('LockManager') && !Object.keys(window).includes('Lock'),
      };
    });
    assert.deepEqual(shape, { getter: 'function', setter: 'undefined', enumerable: true, globalsAreExports: true, notEnumerableGlobals: true });
  } finally {
    await browserPage.close();
  }
});

test('plain-http page: the classic script also works copied under another directory (page and worker)', async () => {
  const { page, worker, browserPage } = await runPageAndWorker(
    `${plainOrigin}/tests/e2e/fixtures/vendored/index.html`,
    vendoredPath,
  );
  try {
    assert.deepEqual(page.before, withoutNativeApi);
    assert.equal(page.early, 'early shared');
    assert.deepEqual(page.results, expectedScenarioResults);
    assert.equal(worker.error, undefined, worker.error);
    assert.deepEqual(worker.before, withoutNativeApi);
    assert.deepEqual(worker.results, expectedScenarioResults);
    const loadedFrom = await browserPage.evaluate(() =>
      performance.getEntriesByType('resource').map((e) => new URL(e.name).pathname).filter((p) => p.endsWith('weblocks.polyfill.js')),
    );
    assert.deepEqual(loadedFrom, [vendoredPath], 'the page loaded the polyfill from the sub-directory only');
  } finally {
    await browserPage.close();
  }
});

test('secure page: the polyfill leaves the native API alone, and the same script gives the same results natively', async () => {
  const { page, worker, browserPage } = await runPageAndWorker(
    `${secureOrigin}/tests/e2e/fixtures/native_baseline.html`,
    `/${polyfill}`,
  );
  try {
    assert.deepEqual(page.before, { secure: true, locksInNavigator: true, typeofLockManager: 'function', typeofLock: 'function' });
    const untouched = await browserPage.evaluate(() => ({
      sameLocks: navigator.locks === self.nativeLocks,
      sameLockManager: LockManager === self.NativeLockManager,
      ponyfillIsSeparate: weblocks.locks !== navigator.locks && weblocks.LockManager !== LockManager,
    }));
    assert.deepEqual(untouched, { sameLocks: true, sameLockManager: true, ponyfillIsSeparate: true });
    assert.equal(page.early, 'early shared');
    assert.deepEqual(page.results, expectedScenarioResults, 'native results in the page');
    assert.equal(worker.error, undefined, worker.error);
    assert.deepEqual(worker.before, { secure: true, locksInNavigator: true, typeofLockManager: 'function', typeofLock: 'function' });
    assert.deepEqual(worker.results, expectedScenarioResults, 'native results in a worker');
  } finally {
    await browserPage.close();
  }
});
