// Assumption A1 of the coordination protocol (docs/PROTOCOL.md), checked in Chromium: all contexts of an
// origin receive the BroadcastChannel messages of every sender in ONE total order, and a context sees its own
// messages' places in that order through a second channel object. 4 tabs, a dedicated worker and an iframe
// post interleaved bursts on one channel; every second channel object must record the identical sequence.
// (Firefox: total_order_firefox.test.mjs.) The fixture does not load weblocks: this is about the browser.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from '../server.mjs';
import { launchChromium, shareServerAndChromium } from '../browser.mjs';
import { compareRecordings, runTotalOrder } from '../fixtures/xctx_order_run.mjs';

const MESSAGES = 300;

const shared = shareServerAndChromium();

test('the comparison catches a reordering, a missing message and polite turn-taking (so the tests below can fail)', () => {
  const a = ['go', 'x:0', 'y:0', 'x:1', 'y:1'];
  const swapped = ['go', 'y:0', 'x:0', 'x:1', 'y:1'];
  assert.equal(compareRecordings({ x: a, y: swapped }, { messages: 2 }).differences.length, 1);
  assert.deepEqual(compareRecordings({ x: a, y: a.slice(0, 4) }, { messages: 2 }).incomplete, ['y: 4 of 5']);
  assert.equal(compareRecordings({ x: a, y: a }, { messages: 2 }).differences.length, 0);
  assert.equal(compareRecordings({ x: ['go', 'x:0', 'x:1', 'y:0', 'y:1'] }, { messages: 4 }).switches, 1);
  assert.equal(compareRecordings({ x: ['go', 'x:1', 'x:0'] }, { messages: 2 }).fifo, false);
});

for (const seed of [1, 2, 3]) {
  test(`Chromium: 4 tabs + a worker + an iframe see one total order of interleaved bursts (seed ${seed})`, async () => {
    const context = await shared.browser.newContext();
    try {
      const tabs = [];
      for (let i = 0; i < 4; i++) {
        const page = await context.newPage();
        await page.goto(shared.server.url + 'tests/e2e/fixtures/xctx_order.html');
        tabs.push(page);
      }
      const recordings = await runTotalOrder(tabs, { channel: `order-${seed}`, messages: MESSAGES, maxBurst: 12, seed: seed * 100 });
      const { participants, differences, incomplete, switches, fifo } = compareRecordings(recordings, { messages: MESSAGES });
      console.log(`# chromium seed ${seed}: ${participants.length} participants, ${participants.length * MESSAGES + 1} messages each, ${switches} sender switches, ${differences.length} differing recordings`);
      assert.equal(participants.length, 6);
      assert.deepEqual(incomplete, []);
      assert.ok(fifo, 'per-sender FIFO');
      assert.ok(switches >= 100, `the senders interleaved (${switches} switches)`);
      assert.deepEqual(differences, []);
    } finally {
      await context.close();
    }
  });
}
