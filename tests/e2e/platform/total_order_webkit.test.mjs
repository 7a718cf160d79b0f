// Assumption A1 of the coordination protocol (docs/PROTOCOL.md §2), checked in WebKit (Debian's WebKitGTK through
// bench/lib/webkit.mjs, on the plain-http origin): its BroadcastChannel keeps each sender's order but hands a
// post to the sender's own process first, so the contexts of an origin do not see one order of messages. The
// test records that, and asserts what weblocks relies on there: per-sender FIFO (it coordinates over the
// IndexedDB log instead, docs/PROTOCOL.md §12).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch as launchWebKit } from '../../../bench/lib/webkit.mjs';
import { compareRecordings, runTotalOrder } from '../fixtures/xctx_order_run.mjs';
import { browserSession } from '../browser_session.mjs';

let server, webkit, plain;
browserSession(launchWebKit, (session) => ({ server, browser: webkit, plain } = session));

test('WebKit: BroadcastChannel keeps each sender\'s order, not one order across processes (weblocks does not rely on one)', async () => {
  const tabs = [];
  try {
    for (let i = 0; i < 4; i++) tabs.push(await webkit.newTab(plain.url + 'tests/e2e/fixtures/xctx_order.html'));
    const messages = 300;
    const recordings = await runTotalOrder(tabs, { channel: 'order-webkit', messages, maxBurst: 12, seed: 100 });
    const { participants, differences, incomplete, switches, fifo } = compareRecordings(recordings, { messages });
    console.log(`# webkit: ${participants.length} participants, ${switches} sender switches, ${differences.length} of ${participants.length - 1} recordings differ from the first`);
    assert.equal(participants.length, 6);
    assert.deepEqual(incomplete, []);
    assert.ok(fifo, 'per-sender FIFO');
  } finally {
    for (const tab of tabs) await tab.close();
  }
});
