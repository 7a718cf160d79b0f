// Assumption A1 of the coordination protocol (docs/PROTOCOL.md), checked in Firefox (Debian's firefox-esr
// through the bench's driver, bench/lib/firefox.mjs): all contexts of an origin receive the BroadcastChannel
// messages of every sender in ONE total order, seen through a second channel object. Same run as
// total_order.test.mjs: 4 tabs + a dedicated worker + an iframe posting interleaved bursts on one channel.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch as launchFirefox } from '../../../bench/lib/firefox.mjs';
import { compareRecordings, runTotalOrder } from '../fixtures/xctx_order_run.mjs';
import { browserSession } from '../browser_session.mjs';

const MESSAGES = 300;

let server, firefox;
browserSession(launchFirefox, (session) => ({ server, browser: firefox } = session));

for (const seed of [1, 2, 3]) {
  test(`Firefox: 4 tabs + a worker + an iframe see one total order of interleaved bursts (seed ${seed})`, async () => {
    const tabs = [];
    try {
      for (let i = 0; i < 4; i++) tabs.push(await firefox.newTab(server.url + 'tests/e2e/fixtures/xctx_order.html'));
      const recordings = await runTotalOrder(tabs, { channel: `order-${seed}`, messages: MESSAGES, maxBurst: 12, seed: seed * 100 });
      const { participants, differences, incomplete, switches, fifo } = compareRecordings(recordings, { messages: MESSAGES });
      console.log(`# firefox seed ${seed}: ${participants.length} participants, ${participants.length * MESSAGES + 1} messages each, ${switches} sender switches, ${differences.length} differing recordings`);
      assert.equal(participants.length, 6);
      assert.deepEqual(incomplete, []);
      assert.ok(fifo, 'per-sender FIFO');
      assert.ok(switches >= 100, `the senders interleaved (${switches} switches)`);
      assert.deepEqual(differences, []);
      for (const tab of tabs) assert.deepEqual(tab.errors, []);
    } finally {
      for (const tab of tabs) await tab.close();
    }
  });
}
