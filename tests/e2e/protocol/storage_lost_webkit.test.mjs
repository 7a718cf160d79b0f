// Storage lost under live windows, in WebKit: WebKitGTK's storage process (`WebKitNetworkProcess`, where its
// IndexedDB lives) is killed while window P holds `x` in a callback that ticks every 25 ms and window Q waits
// for `x`. WebKit then closes every IndexedDB connection of the open windows, and they cannot open one again
// until reloaded ("Connection to Indexed Database server lost"), while a window loaded afterwards can; iOS
// does the same to a background tab's connections. What weblocks must do (docs/PROTOCOL.md §7, "storage
// lost"): no two holders; P told that its lock is lost; every later request of P and Q rejected at once with
// an `OperationError` that names the cause and says that a reload restores it, and one console line each; a
// window loaded afterwards locks at once.
//
// The WebDriver session ends with the storage process, so the windows drive themselves through the test
// server (fixtures/storage_lost_page.js). The process is found among this test's own descendants, by pid.
// Needs the build (`npm run build`), WebKitGTK and Xvfb.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startReportServer } from '../fixtures/report_server.mjs';
import { launch } from '../../../bench/lib/webkit.mjs';
import { descendants, isAlive } from '../../../bench/lib/processes.mjs';
import { plainHttpHost } from '../../../bench/lib/variants.mjs';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const TRIES = 5;

test('WebKit: storage process killed under a holder and a waiter: no two holders, every later request refused at once and why, a new window locks', async () => {
  const server = await startReportServer('/storage-lost');
  const browser = await launch();
  try {
    const page = (role, label) => `http://${plainHttpHost}:${server.port}/tests/e2e/fixtures/storage_lost.html?role=${role}&label=${label}`;
    await browser.newTab(page('holder', 'P'));
    await server.until('P', 'granted');
    await browser.newTab(page('waiter', 'Q'));
    await browser.newTab(page('blank', 'R'));
    await server.until('Q', 'ready');
    await server.until('R', 'ready');
    server.send('Q', { type: 'ask' });
    await sleep(500); // Q's request is queued behind P's hold
    const network = descendants().filter((p) => /WebKitNetworkProcess/.test(p.command));
    assert.equal(network.length, 1, `one storage process of this browser: ${JSON.stringify(network)}`);
    const killedAt = Date.now();
    process.kill(network[0].pid, 'SIGKILL');
    // P's callback runs on (it ticks) and ends when told; Q's request is settled either way.
    await sleep(3000);
    server.send('P', { type: 'end' });
    await server.until('P', 'callback end');
    const pOutcome = (await Promise.race([server.until('P', 'request rejected'), server.until('P', 'released')]))[0];
    const qOutcome = (await Promise.race([server.until('Q', 'request rejected'), server.until('Q', 'granted')]))[0];
    console.log(`# P's request: ${pOutcome.type} ${pOutcome.name ?? ''} ${pOutcome.at - killedAt} ms after the kill: ${pOutcome.message ?? ''}`);
    console.log(`# Q's request: ${qOutcome.type} ${qOutcome.name ?? ''} ${qOutcome.at - killedAt} ms after the kill: ${qOutcome.message ?? ''}`);
    assert.ok(!isAlive(network[0].pid), 'the storage process is gone');
    // No two holders: no tick of P's callback inside a hold of Q's.
    const qGrants = server.reports('Q', 'granted');
    const pEnd = server.reports('P', 'callback end')[0].at;
    for (const g of qGrants) assert.ok(g.at >= pEnd, `Q granted at ${g.at - killedAt} ms while P's callback ran (it ended at ${pEnd - killedAt})`);
    // Then each of P and Q tries again: every try refused at once, saying why and what restores it.
    for (const label of ['P', 'Q']) {
      server.send(label, { type: 'tries', count: TRIES });
      const tries = await server.until(label, 'try', { count: TRIES, ms: 30_000 });
      const refused = tries.filter((t) => t.result === 'rejected' && t.name === 'OperationError');
      console.log(`# ${label}: ${refused.length} of ${TRIES} tries refused with OperationError, ${Math.max(...tries.map((t) => t.ms))} ms at most: ${tries[0].message ?? tries[0].result}`);
      assert.equal(refused.length, TRIES, `${label}'s tries: ${JSON.stringify(tries)}`);
      for (const t of tries) {
        assert.ok(t.ms < 500, `${label}'s try ${t.n} refused after ${t.ms} ms, not at once`);
        assert.match(t.message, /storage/i, 'the message names the cause');
        assert.match(t.message, /reload/i, 'the message says what restores it');
      }
      const lines = server.reports(label, 'console');
      assert.equal(lines.length, 1, `${label} says so once in the console: ${JSON.stringify(lines)}`);
      server.send(label, { type: 'probes' });
      for (const probe of await server.until(label, 'probe', { count: 2 })) {
        console.log(`# ${label}: IndexedDB in the ${probe.where} after the kill: ${probe.ok ? 'opens' : `fails (${probe.name}: ${probe.message})`}`);
      }
    }
    // A window loaded after the kill locks at once.
    server.send('R', { type: 'load' });
    const [fresh] = await server.until('R', 'fresh');
    console.log(`# a window loaded after the kill: ${fresh.result} in ${fresh.ms} ms ${fresh.message ?? ''}`);
    assert.equal(fresh.result, 'granted', JSON.stringify(fresh));
    for (const label of ['P', 'Q', 'R']) assert.deepEqual(server.reports(label, 'page error'), [], `errors in ${label}`);
  } finally {
    await browser.close().catch(() => {});
    await server.close();
  }
});
