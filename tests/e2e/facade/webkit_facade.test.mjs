// The classic script's conformance in WebKit (Debian's WebKitGTK through bench/lib/webkit.mjs): on the plain-http
// origin, where WebKit has no native navigator.locks, it installs one and a native-style script runs unchanged
// in a page and a worker, with BroadcastChannel and without it (Safari before 15.4); on a secure origin it
// leaves the native API alone, and the same script gives the same results natively. Needs the build.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch as launchWebKit } from '../../../bench/lib/webkit.mjs';
import { makeAgreeAnew } from '../fixtures/xctx_harness.mjs';
import { expectedScenarioResults, withoutNativeApi } from '../fixtures/native_style_expected.mjs';
import { browserSession } from '../browser_session.mjs';

let server, webkit, plain;
browserSession(launchWebKit, (session) => ({ server, browser: webkit, plain } = session));

/** The two ways a WebKit origin coordinates: the log carried by BroadcastChannel, and the log alone. */
const TRANSPORTS = [
  { label: 'with BroadcastChannel', broadcastChannel: 'function' },
  { label: 'without BroadcastChannel', broadcastChannel: 'undefined' },
];

// Forgets the origin's transport record when the contexts to come differ in having BroadcastChannel.
const agreeAnew = makeAgreeAnew(() => webkit.newTab(`${plain.url}tests/e2e/fixtures/xctx_classic_page.html`));

for (const { label, broadcastChannel } of TRANSPORTS) {
  test(`WebKit ${label}: the classic script installs navigator.locks on plain http, and a native-style script runs unchanged in a page and a worker`, async () => {
    const url = `${plain.url}tests/e2e/fixtures/plain_http.html${broadcastChannel === 'undefined' ? '?broadcastchannel=none' : ''}`;
    await agreeAnew(broadcastChannel === 'function');
    const tab = await webkit.newTab(url);
    try {
      const page = await tab.evaluate(async () => ({
        before: self.before,
        early: await self.early,
        results: await nativeStyleScenarios('page'),
        broadcastChannel: typeof BroadcastChannel,
      }));
      assert.deepEqual(page.before, withoutNativeApi);
      assert.equal(page.broadcastChannel, broadcastChannel);
      assert.equal(page.early, 'early shared');
      assert.deepEqual(page.results, expectedScenarioResults);
      const worker = await tab.evaluate((u) => runInWorker(u), '/dist/weblocks.polyfill.js');
      assert.equal(worker.error, undefined, worker.error);
      assert.deepEqual(worker.before, withoutNativeApi);
      assert.deepEqual(worker.results, expectedScenarioResults);
    } finally {
      await tab.close();
    }
  });
}

test('WebKit: on a secure origin (localhost) the classic script leaves the native API alone, and the same script gives the same results natively', async () => {
  const tab = await webkit.newTab(`http://localhost:${server.port}/tests/e2e/fixtures/native_baseline.html`);
  try {
    const page = await tab.evaluate(async () => ({
      before: self.before,
      untouched: navigator.locks === self.nativeLocks && weblocks.locks !== navigator.locks,
      results: await nativeStyleScenarios('page'),
    }));
    assert.deepEqual(page.before, { secure: true, locksInNavigator: true, typeofLockManager: 'function', typeofLock: 'function' });
    assert.equal(page.untouched, true);
    assert.deepEqual(page.results, expectedScenarioResults, 'native results');
  } finally {
    await tab.close();
  }
});
