// Issue 3 in Firefox (Debian's firefox-esr through the bench's driver, bench/lib/firefox.mjs): a smoke test
// that weblocks' tabs of one origin share one lock manager there too: exclusion and FIFO handoff across
// tabs, the handoff latency, a short read-modify-write stress with the overlap marker, and a closed holder.
// The tabs use the ponyfill with the native navigator.locks removed (fixtures/xctx_page.html).
// Needs the build (`npm run build`).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from './server.mjs';
import { launch as launchFirefox } from '../../bench/lib/firefox.mjs';
import { call, expectEvent, expectNoEvent, fixtureUrl, percentile, sleep, untilPending } from './fixtures/xctx_harness.mjs';

let server;
let firefox;
let runs = 0;

before(async () => {
  server = await startServer();
  firefox = await launchFirefox();
});

after(async () => {
  await firefox?.close();
  await server?.close();
});

/** Tabs on the fixture (one origin: the browser's one profile); closed after `body` unless it closed them. */
async function withTabs(labels, body) {
  const tabs = [];
  try {
    for (const label of labels) {
      const tab = await firefox.newTab(fixtureUrl(server, label));
      const { clientId, kind } = await tab.evaluate(() => window.agentReady);
      tabs.push(Object.assign(tab, { label, clientId, kind }));
    }
    await body(tabs);
    for (const tab of tabs) assert.deepEqual(tab.errors, [], `errors in ${tab.label}`);
  } finally {
    for (const tab of tabs) if (!tab.closed) await tab.close();
  }
}

test('Firefox: exclusion across tabs, FIFO handoff, query() from the waiting tab', async () => {
  const name = `ff-x-${++runs}`;
  await withTabs(['a', 'b', 'c'], async ([a, b, c]) => {
    assert.equal(a.kind, 'ponyfill');
    assert.equal(await a.evaluate(() => 'locks' in navigator), false, 'native API removed');
    await call(a, 'request', 'h', name);
    await expectEvent(a, 'h', 'granted');
    await call(b, 'request', 'w', name, { holdMs: 20 });
    await untilPending(a, name, 1);
    await call(c, 'request', 'w', name);
    await untilPending(a, name, 2);
    const snapshot = await call(c, 'query');
    assert.deepEqual(snapshot.held.map((l) => l.clientId), [a.clientId]);
    assert.deepEqual(snapshot.pending.map((l) => l.clientId), [b.clientId, c.clientId]);
    await sleep(300);
    await expectNoEvent(b, 'w', 'granted');
    await call(a, 'release', 'h');
    const tb = (await expectEvent(b, 'w', 'granted')).t;
    const tc = (await expectEvent(c, 'w', 'granted')).t;
    assert.ok(tb < tc, 'FIFO');
    assert.ok(tc >= (await expectEvent(b, 'w', 'resolved')).t - 1, 'the second waiter is granted after the first finished');
  });
});

test('Firefox: handoff latency between two tabs (ping-pong), p50/p95', async () => {
  const name = `ff-pp-${++runs}`;
  await withTabs(['a', 'b'], async (tabs) => {
    const rounds = 50;
    const loop = (tab) =>
      tab.evaluate(
        async ([n, lockName]) => {
          const now = () => performance.timeOrigin + performance.now();
          const spans = [];
          for (let i = 0; i < n; i++) {
            await window.agent.locks.request(lockName, async () => {
              const granted = now();
              await new Promise((resolve) => setTimeout(resolve, 1));
              spans.push([granted, now()]);
            });
          }
          return spans;
        },
        [rounds, name],
      );
    const [sa, sb] = await Promise.all(tabs.map(loop));
    const spans = [...sa.map((s) => [...s, 'a']), ...sb.map((s) => [...s, 'b'])].sort((x, y) => x[0] - y[0]);
    const handoffs = [];
    for (let i = 1; i < spans.length; i++) {
      assert.ok(spans[i][0] >= spans[i - 1][1] - 1, `grant ${i} overlaps the previous holder`);
      if (spans[i][2] !== spans[i - 1][2]) handoffs.push(spans[i][0] - spans[i - 1][1]);
    }
    console.log(`# firefox handoff between tabs: ${handoffs.length} handoffs, p50 ${percentile(handoffs, 50).toFixed(1)} ms, p95 ${percentile(handoffs, 95).toFixed(1)} ms`);
    assert.ok(handoffs.length >= rounds / 2, `the tabs alternated (${handoffs.length} handoffs)`);
  });
});

test('Firefox: 3 tabs x 60 read-modify-write cycles on one name: 0 lost updates, 0 overlaps', async () => {
  const name = `ff-stress-${++runs}`;
  await withTabs(['t0', 't1', 't2'], async (tabs) => {
    const db = `xctx-${name}`;
    const started = Date.now();
    const results = await Promise.all(tabs.map((t) => call(t, 'cycles', { name, count: 60, db, holder: t.label })));
    const counter = await tabs[0].evaluate(async (d) => (await import('/tests/e2e/fixtures/xctx_agent.js')).readCounter(d), db);
    console.log(`# firefox stress: 180 cycles in ${Date.now() - started} ms, counter ${counter}`);
    assert.deepEqual(results.flatMap((r) => r.overlaps), []);
    assert.equal(counter, 180);
  });
});

test('Firefox: a closed holder tab frees its lock for the waiter in another tab', async () => {
  const name = `ff-close-${++runs}`;
  await withTabs(['holder', 'waiter'], async ([holder, waiter]) => {
    await call(holder, 'request', 'h', name);
    await expectEvent(holder, 'h', 'granted');
    await call(waiter, 'request', 'w', name);
    await untilPending(waiter, name, 1);
    const start = Date.now();
    await holder.close();
    holder.closed = true;
    const granted = await expectEvent(waiter, 'w', 'granted', 3000);
    console.log(`# firefox close -> waiter granted: ${(granted.t - start).toFixed(0)} ms`);
    assert.ok(granted.t - start < 1000, `${granted.t - start} ms: the close was announced (not an eviction)`);
  });
});
