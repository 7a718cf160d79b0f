// In real Chromium tabs, iframes and dedicated workers, every same-origin context that loaded weblocks shares
// ONE lock manager (the scenarios of the spec's motivation across contexts). Each test gets a fresh browser
// context (a fresh origin state); the contexts use the ponyfill `locks` of js/index.js (or the classic script
// where said) with the native navigator.locks removed, so what is tested is weblocks.
// Fixtures: fixtures/xctx_page.html, xctx_worker.js, xctx_agent.js; Node side: fixtures/xctx_harness.mjs.
// Needs the build (`npm run build`: pkg/ and dist/).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from '../server.mjs';
import { launchChromium, shareServerAndChromium } from '../browser.mjs';
import {
  call,
  describeLocks,
  expectEvent,
  expectNoEvent,
  measureHandoffs,
  openTab,
  readCounter,
  sleep,
  spawnIframe,
  spawnWorker,
  untilPending,
  untilSnapshot,
  withOrigin as withOriginOf,
} from '../fixtures/xctx_harness.mjs';

const shared = shareServerAndChromium();

/** Run `body(context)` in a fresh browser context; fails on any page error in its tabs. */
const withOrigin = (body) => withOriginOf(shared.browser, body);

const tabs = (context, ...labels) => Promise.all(labels.map((l) => openTab(context, shared.server, l)));

test('the fixture tests weblocks: native navigator.locks removed, the ponyfill in use, distinct client ids', async () => {
  await withOrigin(async (context) => {
    const [a, b] = await tabs(context, 'a', 'b');
    for (const page of [a, b]) {
      assert.equal(page.kind, 'ponyfill');
      assert.equal(await page.evaluate(() => 'locks' in navigator), false, 'native API removed');
    }
    assert.match(a.clientId, /\S/);
    assert.notEqual(a.clientId, b.clientId);
  });
});

test('exclusion and FIFO across tabs: 3 waiters in 3 tabs queued in a known order are granted in that order', async () => {
  await withOrigin(async (context) => {
    const [holder, ...waiters] = await tabs(context, 'holder', 'w1', 'w2', 'w3');
    await call(holder, 'request', 'h', 'fifo');
    await expectEvent(holder, 'h', 'granted');
    // Queue each waiter only once the previous one is visible as pending: the order is known.
    for (const [i, w] of waiters.entries()) {
      await call(w, 'request', 'w', 'fifo', { holdMs: 30 });
      await untilPending(holder, 'fifo', i + 1);
    }
    await sleep(100);
    for (const w of waiters) await expectNoEvent(w, 'w', 'granted');
    const snapshot = await call(waiters[2], 'query');
    assert.deepEqual(
      snapshot.pending.filter((p) => p.name === 'fifo').map((p) => p.clientId),
      waiters.map((w) => w.clientId),
      'query() from any tab shows the queue in request order',
    );
    await call(holder, 'release', 'h');
    const granted = [];
    for (const w of waiters) granted.push({ label: w.label, t: (await expectEvent(w, 'w', 'granted')).t, done: (await expectEvent(w, 'w', 'callback-done')).t });
    const order = [...granted].sort((x, y) => x.t - y.t).map((g) => g.label);
    assert.deepEqual(order, ['w1', 'w2', 'w3']);
    for (let i = 1; i < granted.length; i++) {
      // Clocks of two processes: allow 2 ms of skew between performance.timeOrigin values.
      assert.ok(granted[i].t >= granted[i - 1].done - 2, `${granted[i].label} granted before ${granted[i - 1].label} finished`);
    }
  });
});

test('shared readers in two tabs, then a writer in a third waits for both; a later reader queues behind the writer', async () => {
  await withOrigin(async (context) => {
    const [r1, r2, writer, r3] = await tabs(context, 'r1', 'r2', 'writer', 'r3');
    await call(r1, 'request', 'r', 'doc', { mode: 'shared' });
    await call(r2, 'request', 'r', 'doc', { mode: 'shared' });
    await expectEvent(r1, 'r', 'granted');
    await expectEvent(r2, 'r', 'granted');
    await call(writer, 'request', 'w', 'doc');
    await untilPending(r1, 'doc', 1);
    await call(r3, 'request', 'r', 'doc', { mode: 'shared' });
    await untilPending(r1, 'doc', 2);
    const snapshot = await call(r3, 'query');
    assert.deepEqual(describeLocks(snapshot.held), describeLocks([
      { name: 'doc', mode: 'shared', clientId: r1.clientId },
      { name: 'doc', mode: 'shared', clientId: r2.clientId },
    ]));
    await call(r1, 'release', 'r');
    await sleep(150);
    await expectNoEvent(writer, 'w', 'granted');
    await call(r2, 'release', 'r');
    const grantedWriter = await expectEvent(writer, 'w', 'granted');
    assert.equal(grantedWriter.mode, 'exclusive');
    await sleep(100);
    await expectNoEvent(r3, 'r', 'granted');
    await call(writer, 'release', 'w');
    assert.equal((await expectEvent(r3, 'r', 'granted')).mode, 'shared');
  });
});

test('ifAvailable across tabs: null while another tab holds the name (any mode conflict), granted when free', async () => {
  await withOrigin(async (context) => {
    const [a, b] = await tabs(context, 'a', 'b');
    await call(a, 'request', 'x', 'ia-x');
    await call(a, 'request', 's', 'ia-s', { mode: 'shared' });
    await expectEvent(a, 'x', 'granted');
    await expectEvent(a, 's', 'granted');
    await call(b, 'request', 'x', 'ia-x', { ifAvailable: true });
    await call(b, 'request', 'xs', 'ia-x', { ifAvailable: true, mode: 'shared' });
    await call(b, 'request', 's-ex', 'ia-s', { ifAvailable: true });
    await call(b, 'request', 's-sh', 'ia-s', { ifAvailable: true, mode: 'shared' });
    await call(b, 'request', 'free', 'ia-free', { ifAvailable: true });
    await expectEvent(b, 'x', 'null');
    await expectEvent(b, 'xs', 'null');
    await expectEvent(b, 's-ex', 'null');
    await expectEvent(b, 's-sh', 'granted');
    await expectEvent(b, 'free', 'granted');
    await call(a, 'release', 'x');
    await expectEvent(a, 'x', 'resolved');
    await call(b, 'request', 'x2', 'ia-x', { ifAvailable: true });
    await expectEvent(b, 'x2', 'granted');
  });
});

test('steal across tabs: the thief holds, the victim rejects with AbortError in its own tab and its callback keeps running', async () => {
  await withOrigin(async (context) => {
    const [victim, thief, observer] = await tabs(context, 'victim', 'thief', 'observer');
    await call(victim, 'request', 'v', 'stolen');
    await expectEvent(victim, 'v', 'granted');
    await call(observer, 'request', 'o', 'stolen'); // a waiter: stays queued behind the thief
    await untilPending(victim, 'stolen', 1);
    await call(thief, 'request', 't', 'stolen', { steal: true });
    await expectEvent(thief, 't', 'granted');
    const rejected = await expectEvent(victim, 'v', 'rejected');
    assert.equal(rejected.error, 'AbortError');
    await expectNoEvent(victim, 'v', 'callback-done');
    const snapshot = await untilSnapshot(observer, (s) => s.held.length === 1, 'one holder');
    assert.deepEqual(describeLocks(snapshot.held), describeLocks([{ name: 'stolen', mode: 'exclusive', clientId: thief.clientId }]));
    assert.deepEqual(describeLocks(snapshot.pending), describeLocks([{ name: 'stolen', mode: 'exclusive', clientId: observer.clientId }]));
    assert.equal(await call(victim, 'release', 'v'), true, 'the stolen callback was still running');
    await expectEvent(victim, 'v', 'callback-done');
    await sleep(100);
    await expectNoEvent(observer, 'o', 'granted');
    await call(thief, 'release', 't');
    await expectEvent(observer, 'o', 'granted');
  });
});

test('abort across tabs: an aborted waiter leaves the origin queue; the next waiter in another tab is granted', async () => {
  await withOrigin(async (context) => {
    const [holder, quitter, next] = await tabs(context, 'holder', 'quitter', 'next');
    await call(holder, 'request', 'h', 'abort');
    await expectEvent(holder, 'h', 'granted');
    await call(quitter, 'request', 'q', 'abort', { abortable: true });
    await untilPending(holder, 'abort', 1);
    await call(next, 'request', 'n', 'abort');
    await untilPending(holder, 'abort', 2);
    await call(quitter, 'abort', 'q');
    assert.equal((await expectEvent(quitter, 'q', 'rejected')).error, 'AbortError');
    const snapshot = await untilSnapshot(next, (s) => s.pending.length === 1, 'the aborted request gone');
    assert.deepEqual(snapshot.pending.map((p) => p.clientId), [next.clientId]);
    await call(holder, 'release', 'h');
    await expectEvent(next, 'n', 'granted');
    await expectNoEvent(quitter, 'q', 'granted');
  });
});

test('query() from a tab, an iframe and a dedicated worker sees every context\'s held and pending locks with their client ids', async () => {
  await withOrigin(async (context) => {
    const [a, b] = await tabs(context, 'a', 'b');
    const frame = await spawnIframe(a, 'frame');
    const worker = await spawnWorker(b, 'worker');
    const ids = [a, b, frame, worker].map((c) => c.clientId);
    assert.equal(new Set(ids).size, 4, `distinct client ids: ${ids}`);
    await call(a, 'request', 'h', 'q-x');
    await call(frame, 'request', 'h', 'q-s', { mode: 'shared' });
    await call(worker, 'request', 'h', 'q-s', { mode: 'shared' });
    await call(worker, 'request', 'p', 'q-x', { mode: 'shared' });
    await untilPending(a, 'q-x', 1); // then the order of the two waiters on q-x is known
    await call(b, 'request', 'p', 'q-x');
    await call(frame, 'request', 'p', 'q-s');
    const expected = {
      held: describeLocks([
        { name: 'q-x', mode: 'exclusive', clientId: a.clientId },
        { name: 'q-s', mode: 'shared', clientId: frame.clientId },
        { name: 'q-s', mode: 'shared', clientId: worker.clientId },
      ]),
      pending: describeLocks([
        { name: 'q-x', mode: 'shared', clientId: worker.clientId },
        { name: 'q-x', mode: 'exclusive', clientId: b.clientId },
        { name: 'q-s', mode: 'exclusive', clientId: frame.clientId },
      ]),
    };
    await untilSnapshot(a, (s) => s.held.length === 3 && s.pending.length === 3, 'all six requests');
    for (const observer of [a, b, frame, worker]) {
      const s = await call(observer, 'query');
      assert.deepEqual({ held: describeLocks(s.held), pending: describeLocks(s.pending) }, expected, `query() in ${observer.label}`);
    }
    // Pending order per name is the queue order, in every context.
    const fromWorker = await call(worker, 'query');
    assert.deepEqual(fromWorker.pending.filter((p) => p.name === 'q-x').map((p) => p.clientId), [worker.clientId, b.clientId]);
  });
});

test('one name contended by a tab, its same-origin iframe and a dedicated worker: no overlap, no lost update', async () => {
  await withOrigin(async (context) => {
    const [tab] = await tabs(context, 'tab');
    const frame = await spawnIframe(tab, 'frame');
    const worker = await spawnWorker(tab, 'worker');
    const db = 'xctx-mixed';
    const count = 40;
    const results = await Promise.all(
      [tab, frame, worker].map((c) => call(c, 'cycles', { name: 'mixed', count, db, holder: c.label })),
    );
    const counter = await readCounter(tab, db);
    assert.deepEqual(results.flatMap((r) => r.overlaps), []);
    assert.equal(counter, 3 * count, 'lost updates');
  });
});

test('the classic script in one tab and the ponyfill in another share the origin\'s lock manager', async () => {
  await withOrigin(async (context) => {
    const classic = await openTab(context, shared.server, 'classic', { api: 'classic' });
    const [pony] = await tabs(context, 'pony');
    assert.equal(classic.kind, 'classic');
    await call(classic, 'request', 'c', 'interop');
    await expectEvent(classic, 'c', 'granted');
    await call(pony, 'request', 'p', 'interop');
    await untilPending(classic, 'interop', 1);
    await sleep(100);
    await expectNoEvent(pony, 'p', 'granted');
    await call(classic, 'release', 'c');
    await expectEvent(pony, 'p', 'granted');
  });
});

test('a tab with nothing to do closes its channel objects: none of the origin\'s messages wake it while two other tabs hand a lock back and forth, and it takes part again when it asks', async () => {
  await withOrigin(async (context) => {
    // Every page counts its open objects on the origin's channel and the messages they receive (the
    // library makes them through the global BroadcastChannel, looked up when it makes one).
    await context.addInitScript(() => {
      const Native = BroadcastChannel;
      self.channelCount = { open: 0, received: 0 };
      self.BroadcastChannel = class extends Native {
        constructor(name) {
          super(name);
          this.counted = name === 'weblocks';
          if (!this.counted) return;
          channelCount.open++;
          this.addEventListener('message', () => channelCount.received++);
        }
        close() {
          if (this.counted) channelCount.open--;
          this.counted = false;
          super.close();
        }
      };
    });
    const [idle, a, b] = await tabs(context, 'idle', 'a', 'b');
    const count = (page) => page.evaluate(() => ({ ...channelCount }));
    assert.equal((await count(a)).open, 0, 'a tab that never asked for a lock has no channel object open');
    await call(idle, 'request', 'i', 'idle-first', { holdMs: 0 });
    await expectEvent(idle, 'i', 'resolved');
    assert.equal((await count(idle)).open, 2, 'a member listens on two channel objects');
    // a and b hand a lock back and forth: the idle tab sees their first request and makes way.
    const first = await measureHandoffs([a, b], { rounds: 5, name: 'pingpong' });
    assert.deepEqual(first.overlaps, []);
    const before = await count(idle);
    assert.equal(before.open, 0, 'the idle tab closed its channel objects');
    const { handoffs, overlaps } = await measureHandoffs([a, b], { rounds: 20, name: 'pingpong' });
    assert.deepEqual(overlaps, []);
    assert.ok(handoffs.length >= 20, `the lock went back and forth (${handoffs.length} handoffs)`);
    assert.equal((await count(idle)).received, before.received, 'the idle tab received none of their messages');
    assert.ok((await count(a)).received > 20, 'the busy tabs did receive each other\'s messages');
    // It asks again: it rejoins (with a state transfer) and waits behind the current holder.
    await call(a, 'request', 'h', 'pingpong');
    await expectEvent(a, 'h', 'granted');
    await call(idle, 'request', 'w', 'pingpong');
    await untilPending(a, 'pingpong', 1);
    assert.equal((await count(idle)).open, 2);
    await sleep(100);
    await expectNoEvent(idle, 'w', 'granted');
    const seen = await call(idle, 'query');
    assert.deepEqual(describeLocks(seen.held.filter((l) => l.name === 'pingpong')), [`pingpong/exclusive/${a.clientId}`]);
    await call(a, 'release', 'h');
    await expectEvent(idle, 'w', 'granted');
  });
});
