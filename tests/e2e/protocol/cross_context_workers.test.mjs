// Every kind of global scope shares one lock manager: two tabs, a dedicated worker, a shared worker and a
// service worker of one origin, each with the classic build (dist/weblocks.polyfill.js) installed where the
// native API was removed first (fixtures/xctx_classic_agent.js). A lock held in any of them blocks the
// others, FIFO across them, ifAvailable and steal span them all, and query() from a tab lists every
// scope's locks with its client id.
// Run: npm run build && node --test tests/e2e/protocol/cross_context_workers.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openPage, shareServerAndChromium } from '../browser.mjs';

const shared = shareServerAndChromium();

const fixtures = '/tests/e2e/fixtures/';
const agentUrl = (label, query = {}) =>
  `${fixtures}xctx_classic_agent.js?${new URLSearchParams({ label, polyfill: '/dist/weblocks.polyfill.js', ...query })}`;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Adds the agent, with its label, to a tab (a script tag: the classic build is found beside it). */
function addAgent(page, label, query) {
  return page.evaluate((src) => {
    const s = document.createElement('script');
    s.src = src;
    document.head.append(s);
  }, agentUrl(label, query));
}

/**
 * Tab `a` (the test's control page, which also starts the workers) and tab `b`; every agent says hello.
 * `query` goes to every agent (`{ transport: 'log' }`: no BroadcastChannel for weblocks).
 */
async function startOrigin(query = {}) {
  // One browser context: Playwright's browser.newPage() would give each tab its own storage partition.
  const context = await shared.browser.newContext();
  const control = await openPage(context);
  await control.goto(shared.server.url + fixtures.slice(1) + 'xctx_classic_page.html');
  // The control page records every report; commands go out on the command channel.
  await control.evaluate(() => {
    window.reports = [];
    new BroadcastChannel('xctx-report').onmessage = (e) => window.reports.push(e.data);
    window.commands = new BroadcastChannel('xctx-command');
  });
  await addAgent(control, 'a', query);
  const other = await openPage(context);
  await other.goto(shared.server.url + fixtures.slice(1) + 'xctx_classic_page.html');
  await addAgent(other, 'b', query);
  await control.evaluate(async (urls) => {
    window.dedicated = new Worker(urls.dedicated);
    window.shared = new SharedWorker(urls.shared);
    window.shared.port.start();
    const registration = await navigator.serviceWorker.register(urls.service, { scope: './sw-xctx/' });
    const worker = registration.installing ?? registration.waiting ?? registration.active;
    if (worker.state !== 'activated') {
      await new Promise((resolve) => worker.addEventListener('statechange', () => worker.state === 'activated' && resolve()));
    }
    worker.postMessage('stay alive');
    window.registration = registration;
  }, { dedicated: agentUrl('dedicated', query), shared: agentUrl('shared', query), service: agentUrl('service', query) });
  const labels = ['a', 'b', 'dedicated', 'shared', 'service'];
  const ready = {};
  for (let i = 0; i < 100 && Object.keys(ready).length < labels.length; i++) {
    await control.evaluate(() => window.commands.postMessage({ to: '*', op: 'hello' }));
    await sleep(50);
    for (const r of await control.evaluate(() => window.reports.filter((r) => r.ev === 'ready'))) ready[r.from] = r;
  }
  assert.deepEqual(Object.keys(ready).sort(), [...labels].sort(), 'every scope loaded the build');
  for (const label of labels) {
    assert.equal(ready[label].hadNative, true, `${label}: the native API was there and was removed`);
    assert.equal(ready[label].installed, true, `${label}: navigator.locks is the polyfill's`);
  }
  assert.deepEqual(
    labels.map((l) => ready[l].scope),
    ['page', 'page', 'dedicated worker', 'shared worker', 'service worker'],
  );
  const send = (command) => control.evaluate((c) => window.commands.postMessage(c), command);
  const events = () => control.evaluate(() => window.reports);
  async function expectEvent(from, tag, ev, timeout = 3000) {
    const deadline = Date.now() + timeout;
    for (;;) {
      const found = (await events()).find((r) => r.from === from && r.tag === tag && r.ev === ev);
      if (found) return found;
      if (Date.now() > deadline) assert.fail(`${from}/${tag}: no '${ev}' within ${timeout} ms; saw ${JSON.stringify(await events())}`);
      await sleep(10);
    }
  }
  async function expectNoEvent(from, tag, ev) {
    assert.equal((await events()).find((r) => r.from === from && r.tag === tag && r.ev === ev), undefined, `${from}/${tag}: unexpected '${ev}'`);
  }
  async function queryFrom(from, tag) {
    await send({ to: from, op: 'query', tag });
    return (await expectEvent(from, tag, 'snapshot')).snapshot;
  }
  async function close() {
    await control.evaluate(() => window.registration.unregister());
    const errors = [...control.errors, ...other.errors];
    await context.close();
    assert.deepEqual(errors, []);
  }
  return {
    ids: Object.fromEntries(labels.map((l) => [l, ready[l].clientId])),
    channels: Object.fromEntries(labels.map((l) => [l, ready[l].broadcastChannel])),
    send,
    expectEvent,
    expectNoEvent,
    query: queryFrom,
    close,
  };
}

for (const transport of ['broadcast', 'log']) {
  const title =
    transport === 'log'
      ? 'without BroadcastChannel (the IndexedDB log transport), a tab, a dedicated, a shared and a service worker share one lock manager: exclusion, FIFO, query()'
      : 'a tab, a dedicated, a shared and a service worker share one lock manager: exclusion, FIFO, query()';
  test(title, { timeout: 60_000 }, () => sharedAcrossScopes(transport));
}

async function sharedAcrossScopes(transport) {
  const o = await startOrigin(transport === 'log' ? { transport } : {});
  assert.equal(new Set(Object.values(o.ids)).size, 5, 'five distinct client ids');
  for (const [label, type] of Object.entries(o.channels)) {
    assert.equal(type, transport === 'log' ? 'undefined' : 'function', `${label}: BroadcastChannel as the test set it`);
  }
  await o.send({ to: 'shared', op: 'request', tag: 'h', name: 'doc' });
  await o.expectEvent('shared', 'h', 'granted');
  // Queued behind the shared worker's lock, in this order: the service worker, tab b, the dedicated worker.
  for (const from of ['service', 'b', 'dedicated']) {
    await o.send({ to: from, op: 'request', tag: 'w', name: 'doc' });
    for (let i = 0; i < 100; i++) {
      const { pending } = await o.query('a', `q-${from}-${i}`);
      if (pending.some((l) => l.clientId === o.ids[from])) break;
      await sleep(20);
    }
  }
  const snapshot = await o.query('a', 'q');
  assert.deepEqual(snapshot.held, [{ clientId: o.ids.shared, mode: 'exclusive', name: 'doc' }]);
  assert.deepEqual(snapshot.pending.map((l) => l.clientId), [o.ids.service, o.ids.b, o.ids.dedicated]);
  // The same view from the service worker.
  assert.deepEqual(await o.query('service', 'q2'), snapshot);
  await sleep(200);
  for (const from of ['service', 'b', 'dedicated']) await o.expectNoEvent(from, 'w', 'granted');
  // ifAvailable from tab a misses while a worker holds the name.
  await o.send({ to: 'a', op: 'request', tag: 'try', name: 'doc', options: { ifAvailable: true } });
  await o.expectEvent('a', 'try', 'null');
  // Release in turn: each waiter is granted only after the previous holder let go.
  await o.send({ to: 'shared', op: 'release', tag: 'h' });
  await o.expectEvent('service', 'w', 'granted');
  await sleep(100);
  await o.expectNoEvent('b', 'w', 'granted');
  await o.send({ to: 'service', op: 'release', tag: 'w' });
  await o.expectEvent('b', 'w', 'granted');
  await o.send({ to: 'b', op: 'release', tag: 'w' });
  await o.expectEvent('dedicated', 'w', 'granted');
  await o.send({ to: 'dedicated', op: 'release', tag: 'w' });
  await o.expectEvent('dedicated', 'w', 'released');
  assert.deepEqual(await o.query('shared', 'q3'), { held: [], pending: [] });
  await o.close();
}

test('steal from a tab takes the lock a service worker holds; the worker sees AbortError', { timeout: 60_000 }, async () => {
  const o = await startOrigin();
  await o.send({ to: 'service', op: 'request', tag: 'h', name: 'job' });
  await o.expectEvent('service', 'h', 'granted');
  await o.send({ to: 'dedicated', op: 'request', tag: 'w', name: 'job', options: { mode: 'shared' } });
  await sleep(100);
  await o.expectNoEvent('dedicated', 'w', 'granted');
  await o.send({ to: 'b', op: 'request', tag: 's', name: 'job', options: { steal: true } });
  await o.expectEvent('b', 's', 'granted');
  const rejected = await o.expectEvent('service', 'h', 'rejected');
  assert.equal(rejected.error, 'AbortError');
  const snapshot = await o.query('shared', 'q');
  assert.deepEqual(snapshot.held, [{ clientId: o.ids.b, mode: 'exclusive', name: 'job' }]);
  assert.deepEqual(snapshot.pending, [{ clientId: o.ids.dedicated, mode: 'shared', name: 'job' }]);
  await o.send({ to: 'b', op: 'release', tag: 's' });
  await o.expectEvent('dedicated', 'w', 'granted');
  await o.send({ to: 'dedicated', op: 'release', tag: 'w' });
  await o.expectEvent('dedicated', 'w', 'released');
  await o.close();
});
