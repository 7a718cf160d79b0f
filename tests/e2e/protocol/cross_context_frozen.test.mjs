// Frozen pages in Chromium: a holder tab frozen with CDP Page.setWebLifecycleState (its `freeze`
// event fires, then no task of it runs) keeps its lock: a waiter in another tab is NOT granted while it is
// frozen, and after resuming it still holds and releases normally. A frozen page keeps its IndexedDB
// connections open, which shows that it lives: it keeps its lock however long it is frozen, as natively
// (never two holders). The browser is one that
// playwright attaches to without focus emulation (launchFreezableChromium): otherwise pages cannot be frozen.
// bfcache is not covered (playwright disables it; headless Chromium does not drive it reliably).
// Needs the build (`npm run build`).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from '../server.mjs';
import { call, expectEvent, expectNoEvent, holderAndWaiter, launchFreezableChromium, sleep, untilSnapshot } from '../fixtures/xctx_harness.mjs';

/** A freeze longer than any timing of the protocol (docs/PROTOCOL.md §7's table). */
const LONG_FREEZE_MS = 11_000;

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

// A frozen Chromium page stops its timers, and its IndexedDB connections stay open: it is alive, and keeps
// its locks however long it is frozen, as the native API keeps a frozen tab's locks (docs/PROTOCOL.md §8).
test(`a frozen holder keeps its lock for ${LONG_FREEZE_MS / 1000} s, like native; after resume it releases normally`, async () => {
  await withFreezableBrowser(async (context) => {
    const { holder, waiter } = await holderAndWaiter(context, server, 'frozen-long');
    const frozen = await freeze(context, holder);
    await new Promise((resolve) => setTimeout(resolve, LONG_FREEZE_MS));
    const early = (await call(waiter, 'events', 'w')).find((e) => e.ev === 'granted');
    assert.equal(early, undefined, 'the waiter was granted while the holder was frozen');
    await frozen.resume();
    const snapshot = await untilSnapshot(holder, (s) => s.held.length === 1, 'one holder');
    assert.deepEqual(snapshot.held.map((l) => l.clientId), [holder.clientId]);
    await call(holder, 'release', 'h');
    await expectEvent(waiter, 'w', 'granted', 3000);
    const rejected = (await call(holder, 'events', 'h')).find((e) => e.ev === 'rejected');
    assert.equal(rejected, undefined, 'the resumed holder lost its lock');
  });
});
