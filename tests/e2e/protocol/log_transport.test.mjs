// The fallback where BroadcastChannel is missing (Safari before 15.4, which also lacks the native API):
// the contexts coordinate over the IndexedDB log of js/log_channel.js, poked by `storage` events. Chromium
// has BroadcastChannel, so every context of these tests deletes it before loading weblocks (the fixture's
// `?transport=log`, passed on to its iframes and workers) and has its native navigator.locks removed: what
// runs is the log transport, in a real browser with real IndexedDB and real storage events.
// Needs the build (`npm run build`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { shareServerAndChromium } from '../browser.mjs';
import {
  call,
  checkFifo,
  crash,
  expectEvent,
  expectNoEvent,
  holderAndWaiter,
  openTab,
  percentile,
  runCycles,
  spawnIframe,
  spawnWorker,
  untilPending,
  untilSnapshot,
  withOrigin as withOriginOf,
} from '../fixtures/xctx_harness.mjs';

const LOG = { transport: 'log' };

const shared = shareServerAndChromium();

const withOrigin = (body) => withOriginOf(shared.browser, body);
const tabs = (context, ...labels) => Promise.all(labels.map((l) => openTab(context, shared.server, l, LOG)));

test('log transport: no BroadcastChannel in the fixture, and exclusion with FIFO across three tabs', async () => {
  await withOrigin(async (context) => {
    const [holder, w1, w2] = await tabs(context, 'holder', 'w1', 'w2');
    for (const page of [holder, w1, w2]) {
      assert.equal(await page.evaluate(() => typeof BroadcastChannel), 'undefined');
      assert.equal(page.kind, 'ponyfill');
    }
    await checkFifo([holder, w1, w2], 'fifo', 200);
  });
});

test('log transport: an iframe and a dedicated worker share the lock state; ifAvailable and steal across contexts; query() sees all', async () => {
  await withOrigin(async (context) => {
    const [page, other] = await tabs(context, 'page', 'other');
    const frame = await spawnIframe(page, 'frame');
    const worker = await spawnWorker(page, 'worker');
    assert.equal(await worker.evaluate(() => typeof BroadcastChannel), 'undefined');
    await call(worker, 'request', 'w', 'doc');
    await expectEvent(worker, 'w', 'granted');
    await call(frame, 'request', 'f', 'doc', { ifAvailable: true });
    await expectEvent(frame, 'f', 'null'); // ifAvailable: not available anywhere in the origin
    await expectNoEvent(frame, 'f', 'granted');
    await call(frame, 'request', 'r', 'shared', { mode: 'shared' });
    await call(other, 'request', 'r', 'shared', { mode: 'shared' });
    await expectEvent(frame, 'r', 'granted');
    await expectEvent(other, 'r', 'granted');
    const snapshot = await untilSnapshot(other, (s) => s.held.length === 3, 'three held locks');
    assert.deepEqual(
      snapshot.held.map((l) => `${l.name}/${l.mode}/${l.clientId}`).sort(),
      [`doc/exclusive/${worker.clientId}`, `shared/shared/${frame.clientId}`, `shared/shared/${other.clientId}`].sort(),
    );
    await call(page, 'request', 's', 'doc', { steal: true });
    await expectEvent(page, 's', 'granted');
    const lost = await expectEvent(worker, 'w', 'rejected');
    assert.equal(lost.error, 'AbortError', "the victim's released promise rejects with AbortError");
  });
});

test('log transport: 4 tabs x 40 exclusive read-modify-write cycles with an await inside: 0 lost updates, 0 overlaps', async () => {
  await withOrigin(async (context) => {
    const pages = await tabs(context, 't0', 't1', 't2', 't3');
    const { overlaps, counter, elapsed } = await runCycles(pages, { name: 'stress', count: 40, db: 'log-stress' });
    console.log(`# log transport stress: 160 cycles in ${elapsed} ms (${((160 / elapsed) * 1000).toFixed(0)} cycles/s), ${overlaps.length} overlaps, ${160 - counter} lost`);
    assert.deepEqual(overlaps, []);
    assert.equal(counter, 160);
  });
});

test('log transport: a closed holder tab and a crashed one free the lock for the waiter in another tab', async () => {
  const times = { close: [], crash: [] };
  for (const how of ['close', 'close', 'crash']) {
    await withOrigin(async (context) => {
      const { holder, waiter } = await holderAndWaiter(context, shared.server, how, LOG);
      const start = Date.now();
      await (how === 'close' ? holder.close() : crash(holder));
      const granted = await expectEvent(waiter, 'w', 'granted', 5000);
      times[how].push(granted.t - start);
    });
  }
  console.log(`# log transport: close -> granted ${times.close.map(Math.round).join(', ')} ms; crash -> granted ${times.crash.map(Math.round)} ms`);
  // A crash closes the page's IndexedDB connections, which the waiter learns from the storage backend.
  assert.ok(percentile(times.close, 50) < 1000, `close: ${times.close}`);
  assert.ok(Math.max(...times.crash) < 1000 + 150, `crash: ${times.crash}`);
});

/**
 * In `page`: trims the origin's log past every reader, as a member far ahead of the others does (docs/PROTOCOL.md
 * §12, "Trimming"): every entry up to the last one is deleted and the floor raised to it (its value 0, as a version
 * that kept no identity wrote it). Returns the floor.
 */
function trimLog(page) {
  return page.evaluate(
    () =>
      new Promise((resolve, reject) => {
        const open = indexedDB.open('weblocks-log:weblocks');
        open.onerror = () => reject(open.error);
        open.onsuccess = () => {
          const db = open.result;
          const transaction = db.transaction(['log', 'meta'], 'readwrite');
          const last = transaction.objectStore('log').openKeyCursor(null, 'prev');
          last.onsuccess = () => {
            const key = last.result.key;
            transaction.objectStore('log').delete(IDBKeyRange.upperBound(key));
            transaction.objectStore('meta').put(0, key);
            transaction.oncomplete = () => {
              db.close();
              resolve(key);
            };
          };
          transaction.onerror = () => reject(transaction.error);
        };
      }),
  );
}

test('log transport: a holder that fell behind a trim of the log (it missed messages) gives up its lock with an AbortError and can lock again', async () => {
  await withOrigin(async (context) => {
    const [holder, other] = await tabs(context, 'holder', 'other');
    await call(holder, 'request', 'h', 'g');
    await expectEvent(holder, 'h', 'granted');
    await call(other, 'request', 'x', 'x', { holdMs: 1 });
    await expectEvent(other, 'x', 'callback-done');
    // The holder's main thread is busy (it says so first, through storage) while the other tab posts and
    // the log is trimmed past it (6 s). Nobody waits for its lock, so nobody pings it: it is not evicted.
    const busy = holder.evaluate(() => {
      localStorage.setItem('log-test-busy', String(Date.now()));
      const end = Date.now() + 6000; // the other tab's request and the trim must fit in, on a loaded machine too
      while (Date.now() < end);
      return end;
    });
    await other.waitForFunction(() => localStorage.getItem('log-test-busy') !== null);
    await call(other, 'request', 'y', 'y', { holdMs: 1 });
    await expectEvent(other, 'y', 'callback-done');
    await trimLog(other);
    const trimmedAt = Date.now();
    const busyUntil = await busy;
    assert.ok(trimmedAt < busyUntil, `the trim (${trimmedAt}) came after the holder's busy loop (${busyUntil}): the machine was too slow`);
    const lost = await expectEvent(holder, 'h', 'rejected', 3000);
    assert.equal(lost.error, 'AbortError');
    assert.match(lost.message, /cut off/, 'the reset message');
    // Its Leave released the lock where the origin still counted it.
    await call(other, 'request', 'g', 'g');
    await expectEvent(other, 'g', 'granted', 3000);
    await call(holder, 'request', 'h2', 'g');
    await untilPending(other, 'g', 1);
    await call(other, 'release', 'g');
    await expectEvent(holder, 'h2', 'granted', 3000);
  });
});
