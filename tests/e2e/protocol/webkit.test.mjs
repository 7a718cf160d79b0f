// WebKit, the engine of Safari and of every iOS browser: Debian's WebKitGTK through bench/lib/webkit.mjs, on a
// plain-http origin (weblocks.test, mapped to 127.0.0.1 in /etc/hosts by scripts/setup.sh), where it has
// BroadcastChannel and no native navigator.locks. WebKit's BroadcastChannel hands a post to the sender's own
// process first, so the contexts of an origin do not see one order of messages (tests/e2e/platform/
// total_order_webkit.test.mjs records it); weblocks coordinates over the IndexedDB log there, carried by
// BroadcastChannel (docs/PROTOCOL.md §12). These are the protocol's tests across WebKit's windows, frames and
// workers; the classic script's conformance is in tests/e2e/facade/webkit_facade.test.mjs, the leases' race in
// tests/e2e/leases/leases_webkit.test.mjs. Every test runs twice: with BroadcastChannel, and with it deleted
// before weblocks loads, as in Safari before 15.4. Needs the build (`npm run build`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch as launchWebKit } from '../../../bench/lib/webkit.mjs';
import { call, checkFifo, child, expectEvent, expectNoEvent, fixtureUrl, makeAgreeAnew, runCycles, sleep, untilPending, untilSnapshot } from '../fixtures/xctx_harness.mjs';
import { checkRemadeLog } from '../fixtures/log_lifecycle_run.mjs';
import { browserSession } from '../browser_session.mjs';

let server, webkit, plain;
let runs = 0;
browserSession(launchWebKit, (session) => ({ server, browser: webkit, plain } = session));

/** The two ways a WebKit origin coordinates: the log carried by BroadcastChannel, and the log alone. */
const TRANSPORTS = [
  { label: 'with BroadcastChannel', query: {}, broadcastChannel: 'function' },
  { label: 'without BroadcastChannel', query: { transport: 'log' }, broadcastChannel: 'undefined' },
];

// Forgets the origin's transport record when the contexts to come differ in having BroadcastChannel.
const agreeAnew = makeAgreeAnew(() => webkit.newTab(`${plain.url}tests/e2e/fixtures/xctx_classic_page.html`));

/** A window on the cross-context fixture, once its engine is ready. */
async function openWindow(label, query) {
  await agreeAnew(query.transport !== 'log');
  const tab = await webkit.newTab(fixtureUrl(plain, label, query));
  const { clientId, kind } = await tab.evaluate(() => window.agentReady);
  return Object.assign(tab, { label, clientId, kind });
}

/** Windows on the fixture (one origin); each is checked for page errors and closed after `body`. */
async function withWindows(labels, query, body) {
  const tabs = [];
  try {
    for (const label of labels) tabs.push(await openWindow(label, query));
    await body(tabs);
    for (const tab of tabs) if (!tab.closed) assert.deepEqual(await tab.collectErrors(), [], `errors in ${tab.label}`);
  } finally {
    for (const tab of tabs) if (!tab.closed) await tab.close();
  }
}

for (const { label, query, broadcastChannel } of TRANSPORTS) {
  test(`WebKit ${label}: plain http, no native API, weblocks over the IndexedDB log; exclusion and FIFO across windows, query() from the waiting window`, async () => {
    await withWindows(['a', 'b', 'c'], query, async ([a, b, c]) => {
      const seen = await a.evaluate(async () => {
        const { oneOrderEngine } = await import('/js/transport_choice.js');
        return { secure: isSecureContext, native: 'locks' in navigator, broadcastChannel: typeof BroadcastChannel, oneOrder: oneOrderEngine() };
      });
      assert.deepEqual(seen, { secure: false, native: false, broadcastChannel, oneOrder: false });
      await checkFifo([a, b, c], `fifo-${++runs}`, 200);
    });
  });

  test(`WebKit ${label}: shared then exclusive, ifAvailable and steal across windows`, async () => {
    const name = `modes-${++runs}`;
    await withWindows(['a', 'b', 'c'], query, async ([a, b, c]) => {
      await call(a, 'request', 's1', name, { mode: 'shared' });
      await call(b, 'request', 's2', name, { mode: 'shared' });
      await expectEvent(a, 's1', 'granted');
      await expectEvent(b, 's2', 'granted');
      await call(c, 'request', 'x', name);
      await untilPending(c, name, 1);
      await call(a, 'request', 'try', name, { ifAvailable: true });
      assert.equal((await expectEvent(a, 'try', 'null')).ev, 'null', 'ifAvailable while held: no lock');
      await call(a, 'release', 's1');
      await sleep(100);
      await expectNoEvent(c, 'x', 'granted');
      await call(b, 'release', 's2');
      await expectEvent(c, 'x', 'granted');
      // A steal takes the lock from the holder in another window, which learns it with an AbortError.
      await call(b, 'request', 'thief', name, { steal: true });
      await expectEvent(b, 'thief', 'granted');
      assert.equal((await expectEvent(c, 'x', 'rejected')).error, 'AbortError');
      await call(b, 'release', 'thief');
      await call(a, 'request', 'free', name, { ifAvailable: true });
      await expectEvent(a, 'free', 'granted');
      await call(a, 'release', 'free');
    });
  });

  test(`WebKit ${label}: query() from a window, an iframe and a dedicated worker shows the same locks`, async () => {
    const name = `query-${++runs}`;
    await withWindows(['a', 'b'], query, async ([a, b]) => {
      const frameId = await a.evaluate(() => window.spawnIframe('frame'));
      const workerId = await a.evaluate(() => window.spawnWorker('worker'));
      const frame = child(a, 'frame', frameId);
      const worker = child(a, 'worker', workerId);
      await call(worker, 'request', 'w', name);
      await expectEvent(worker, 'w', 'granted');
      await call(frame, 'request', 'f', name, { mode: 'shared' });
      // Two contexts' requests have no order until one is in the log: b asks once the frame's is.
      await untilPending(frame, name, 1);
      await call(b, 'request', 'b', name);
      for (const observer of [a, b, frame, worker]) {
        const snapshot = await untilSnapshot(observer, (s) => s.pending.filter((l) => l.name === name).length === 2, `2 pending on ${name} in ${observer.label}`);
        assert.deepEqual(snapshot.held.filter((l) => l.name === name).map((l) => l.clientId), [workerId], observer.label);
        assert.deepEqual(snapshot.pending.filter((l) => l.name === name).map((l) => [l.clientId, l.mode]), [[frameId, 'shared'], [b.clientId, 'exclusive']], observer.label);
      }
      await call(worker, 'release', 'w');
      await expectEvent(frame, 'f', 'granted');
      await call(frame, 'release', 'f');
      await expectEvent(b, 'b', 'granted');
      await call(b, 'release', 'b');
    });
  });

  test(`WebKit ${label}: 4 windows x 100 read-modify-write cycles on one name, every window joined first: 0 lost updates, 0 overlaps`, async () => {
    const name = `stress-${++runs}`;
    await withWindows(['t0', 't1', 't2', 't3'], query, async (tabs) => {
      // Warm: each window has taken part in the protocol before the cycles start.
      for (const tab of tabs) {
        await call(tab, 'request', 'warm', `${name}-warm`);
        await expectEvent(tab, 'warm', 'granted');
        await call(tab, 'release', 'warm');
      }
      const { overlaps, counter, elapsed } = await runCycles(tabs, { name, count: 100, db: `webkit-${name}` });
      console.log(`# webkit ${label} stress: 400 cycles in ${elapsed} ms (${Math.round((400 / elapsed) * 1000)} cycles/s), ${overlaps.length} overlaps, ${400 - counter} lost`);
      assert.deepEqual(overlaps, []);
      assert.equal(counter, 400);
    });
  });

  // A holder that closes says so (its farewell), and the browser closes its IndexedDB connections: the
  // waiter is granted at the first of the two.
  test(`WebKit ${label}: a closed holder window frees its lock for the waiter in another window (5 closes)`, async () => {
    const times = [];
    for (let i = 0; i < 5; i++) {
      const name = `close-${++runs}`;
      await withWindows(['holder', 'waiter'], query, async ([holder, waiter]) => {
        await call(holder, 'request', 'h', name);
        await expectEvent(holder, 'h', 'granted');
        await call(waiter, 'request', 'w', name);
        await untilPending(waiter, name, 1);
        const start = Date.now();
        await holder.close();
        const granted = await expectEvent(waiter, 'w', 'granted', 3000);
        times.push(granted.t - start);
      });
    }
    console.log(`# webkit ${label} close -> waiter granted: ${times.map(Math.round).join(', ')} ms`);
    assert.ok(Math.max(...times) < 400, `every close noticed at once: ${times.map(Math.round)}`);
  });

  // A holder whose main thread is blocked answers nobody. Its open IndexedDB connection shows that it lives:
  // it keeps its lock through the long task, as natively.
  test(`WebKit ${label}: a holder window in a 2.5 s long task keeps its lock while another window waits; the waiter is granted after the release`, async () => {
    const name = `long-${++runs}`;
    await withWindows(['holder', 'waiter'], query, async ([holder, waiter]) => {
      await call(holder, 'request', 'h', name);
      await expectEvent(holder, 'h', 'granted');
      await call(waiter, 'request', 'w', name);
      await untilPending(waiter, name, 1);
      await holder.evaluate(() => {
        const end = Date.now() + 2500;
        while (Date.now() < end); // the main thread runs nothing else meanwhile
      });
      await sleep(300); // the holder's message handlers catch up
      await expectNoEvent(holder, 'h', 'rejected');
      await expectNoEvent(waiter, 'w', 'granted');
      await call(holder, 'release', 'h');
      await expectEvent(holder, 'h', 'resolved');
      await expectEvent(waiter, 'w', 'granted');
      await call(waiter, 'release', 'w');
    });
  });

}

test("WebKit with BroadcastChannel: the log's database deleted and made anew while frames of the old log come again late: one lock manager", async () => {
  const scope = `remade-${++runs}`;
  await withWindows(['a', 'b'], { scope }, (tabs) => checkRemadeLog(tabs, scope));
});
