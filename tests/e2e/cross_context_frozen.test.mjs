// Issue 3's frozen pages in Chromium: a holder tab frozen with CDP Page.setWebLifecycleState (its `freeze`
// event fires, then no task of it runs) keeps its lock: a waiter in another tab is NOT granted while it is
// frozen (the design keeps an announced frozen context alive for a bounded grace, 10 s), and after resuming
// it still holds and releases normally. Frozen beyond the grace, it is presumed gone: the waiter is granted
// and the resumed holder learns it with an AbortError (never two holders). The browser is one that
// playwright attaches to without focus emulation (launchFreezableChromium): otherwise pages cannot be frozen.
// bfcache is not covered (playwright disables it; headless Chromium does not drive it reliably).
// Needs the build (`npm run build`).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from './server.mjs';
import { call, expectEvent, expectNoEvent, holderAndWaiter, launchFreezableChromium, sleep, untilSnapshot } from './fixtures/xctx_harness.mjs';

const FREEZE_GRACE_MS = 10_000; // src/protocol/node.rs Config::freeze_grace

let server;

before(async () => {
  server = await startServer();
});

after(async () => {
  await server?.close();
});

/** Run `body(context)` in a fresh freezable browser (a fresh origin state), closed afterwards. */
async function withFreezableBrowser(body) {
  const chromium = await launchFreezableChromium();
  try {
    return await body(chromium.context);
  } finally {
    await chromium.close();
  }
}

/**
 * Freeze `page` (a hidden background tab) over CDP; `resume()` unfreezes it and returns when its `freeze` and
 * `resume` events fired (page clock, ms), which shows it really was frozen.
 */
async function freeze(context, page) {
  assert.equal(await page.evaluate(() => document.visibilityState), 'hidden', 'the holder is a background tab');
  await page.evaluate(() => {
    document.addEventListener('freeze', () => (window.frozeAt = Date.now()));
    document.addEventListener('resume', () => (window.resumedAt = Date.now()));
  });
  const session = await context.newCDPSession(page);
  const frozenAt = Date.now();
  await session.send('Page.setWebLifecycleState', { state: 'frozen' });
  return {
    frozenAt,
    async resume() {
      await session.send('Page.setWebLifecycleState', { state: 'active' });
      return page.evaluate(() => ({ frozeAt: window.frozeAt, resumedAt: window.resumedAt }));
    },
  };
}

test('a frozen holder keeps its lock for 3.5 s (no grant elsewhere), then still holds after resuming and releases normally', async () => {
  await withFreezableBrowser(async (context) => {
    const { holder, waiter } = await holderAndWaiter(context, server, 'frozen');
    const frozen = await freeze(context, holder);
    await sleep(3500);
    await expectNoEvent(waiter, 'w', 'granted');
    const snapshot = await call(waiter, 'query');
    assert.deepEqual(snapshot.held.map((l) => l.clientId), [holder.clientId], 'the frozen tab still holds');
    const { frozeAt, resumedAt } = await frozen.resume();
    assert.ok(frozeAt >= frozen.frozenAt && resumedAt - frozeAt >= 3400, `frozen from ${frozeAt} to ${resumedAt}`);
    await sleep(300);
    await expectNoEvent(holder, 'h', 'rejected');
    await expectNoEvent(waiter, 'w', 'granted');
    const start = Date.now();
    await call(holder, 'release', 'h');
    await expectEvent(holder, 'h', 'resolved');
    const granted = await expectEvent(waiter, 'w', 'granted');
    console.log(`# frozen 3.5 s: kept its lock; after resuming, release -> waiter granted in ${(granted.t - start).toFixed(0)} ms`);
  });
});

// Known bug (reported to the lead): Chromium still runs a frozen page's BroadcastChannel message handlers
// (its timers stop), so the frozen holder keeps answering pings and is never evicted: the grace is not
// applied and the waiter waits until the holder is resumed. Remove `todo` once fixed.
const FROZEN_ANSWERS_PINGS = 'a frozen Chromium page still answers pings from its message handler, so the grace never ends';

test('frozen beyond the grace: the waiter is granted after it, and the resumed holder gets an AbortError (never two holders)', { todo: FROZEN_ANSWERS_PINGS }, async () => {
  await withFreezableBrowser(async (context) => {
    const { holder, waiter } = await holderAndWaiter(context, server, 'frozen-long');
    const frozen = await freeze(context, holder);
    const granted = await expectEvent(waiter, 'w', 'granted', FREEZE_GRACE_MS + 5000);
    const after = granted.t - frozen.frozenAt;
    console.log(`# frozen beyond the grace (${FREEZE_GRACE_MS} ms): waiter granted ${after.toFixed(0)} ms after the freeze`);
    assert.ok(after >= FREEZE_GRACE_MS - 200, `not before the grace: ${after} ms`);
    await frozen.resume();
    const rejected = await expectEvent(holder, 'h', 'rejected', 3000);
    assert.equal(rejected.error, 'AbortError');
    assert.ok(rejected.t <= (await call(waiter, 'events', 'w')).find((e) => e.ev === 'granted').t + 5000);
    const snapshot = await untilSnapshot(holder, (s) => s.held.length === 1, 'one holder');
    assert.deepEqual(snapshot.held.map((l) => l.clientId), [waiter.clientId]);
    // The resumed tab takes part again.
    await call(holder, 'request', 'again', 'frozen-long');
    await call(waiter, 'release', 'w');
    await expectEvent(holder, 'again', 'granted');
  });
});
