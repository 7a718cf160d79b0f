// Assumption A1 of the coordination protocol (docs/PROTOCOL.md) in Node.js: its BroadcastChannel keeps each
// sender's order but gives no one order across threads (recorded here: the main thread and 4 worker threads
// post interleaved bursts on one channel, as in total_order.test.mjs). So weblocks does not coordinate threads
// over it (js/transport_choice.js's `oneOrderEngine` is false there), and with no IndexedDB each thread locks alone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { compareRecordings } from '../fixtures/xctx_order_run.mjs';
import { oneOrderEngine } from '../../../js/transport_choice.js';

const fixture = new URL('../fixtures/xctx_order.js', import.meta.url).href;
const MESSAGES = 300;

/** A worker thread that joins the run and sends back its recording. */
function participant(config) {
  const source = `
    const { parentPort, workerData } = require('node:worker_threads');
    import(workerData.fixture).then(({ joinOrderRun }) => {
      joinOrderRun(workerData.config).then((recording) => parentPort.postMessage(recording));
      parentPort.postMessage('joined');
    });`;
  const worker = new Worker(source, { eval: true, workerData: { fixture, config } });
  let joined;
  const ready = new Promise((resolve) => (joined = resolve));
  const recording = new Promise((resolve, reject) => {
    worker.on('message', (m) => (m === 'joined' ? joined() : resolve(m)));
    worker.on('error', reject);
  });
  return { ready, recording, worker };
}

test('Node.js is not an engine weblocks trusts with one order: each thread locks alone', async () => {
  assert.equal(oneOrderEngine(), false);
  const { makeLogChannelFactory } = await import('../../../js/log_channel.js');
  const open = makeLogChannelFactory();
  assert.equal(typeof open, 'function');
  assert.equal(open('weblocks', []), undefined, 'no channel: the engine decides alone');
});

{
  const seed = 1;
  test('Node.js: the main thread and 4 worker threads keep each sender\'s order', async () => {
    const channel = `order-node-${seed}`;
    const ids = ['main', 'w0', 'w1', 'w2', 'w3'];
    const config = (id, i) => ({ channel, id, messages: MESSAGES, maxBurst: 12, seed: seed * 100 + i, expected: ids.length * MESSAGES + 1 });
    const workers = ids.slice(1).map((id, i) => participant(config(id, i + 1)));
    await Promise.all(workers.map((w) => w.ready));
    const { joinOrderRun } = await import(fixture);
    const main = joinOrderRun(config('main', 0));
    const go = new BroadcastChannel(channel);
    go.postMessage('go');
    go.close();
    const recordings = Object.fromEntries(await Promise.all([main, ...workers.map((w) => w.recording)].map(async (r, i) => [ids[i], await r])));
    for (const w of workers) await w.worker.terminate();
    const { participants, differences, incomplete, switches, fifo } = compareRecordings(recordings, { messages: MESSAGES });
    console.log(`# node seed ${seed}: ${participants.length} participants, ${switches} sender switches, ${differences.length} differing recordings`);
    assert.deepEqual(incomplete, []);
    assert.ok(fifo, 'per-sender FIFO');
    assert.ok(switches >= 100, `the senders interleaved (${switches} switches)`);
  });
}
