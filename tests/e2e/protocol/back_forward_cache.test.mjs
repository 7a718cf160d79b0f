// The back/forward cache, in Chromium, Firefox and WebKit (docs/PROTOCOL.md §8). A page P holds a lock in a
// callback that ticks every 25 ms and navigates away (same origin), entering the cache; page Q asks for the lock
// before P leaves or after; then P goes back (restored from the cache, or loaded anew if it was evicted). Each
// page writes its hold (grant, ticks, end) to localStorage, and the test counts P's ticks that fell inside Q's
// hold and Q's that fell inside P's running callback.
// - Chromium and Firefox (BackForwardCache::Stay): P stays a member in the cache with its liveness database open;
//   the browser evicts it when Q watches that database or a message reaches its channel (in Firefox its own, posted
//   on entering), and Q is granted on that evidence; else P is restored with its lock and Q is granted when P's
//   callback ends. Never an overlap.
// - WebKit (BackForwardCache::Release): its native API releases a cached page's locks on entry, and the restored
//   callback runs on beside the next holder's. weblocks does the same; the test pins both, so that a change in
//   the engine shows.
// Pages are on the plain-http origin (weblocks.test: weblocks) and, for the native API, on 127.0.0.1; the
// fixture is served cacheable (a `no-store` page is never cached).
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot, startServer } from '../server.mjs';
import { plainHttpHost } from '../../../bench/lib/variants.mjs';

const FIXTURE = '/tests/e2e/fixtures/back_forward_cache.html';
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

let server;
before(async () => {
  assert.ok(fs.existsSync(path.join(repoRoot, 'dist', 'weblocks.polyfill.js')), 'run `npm run build` first');
  server = await startServer({ headers: { [FIXTURE]: { 'cache-control': 'private, max-age=0' } } });
});
after(async () => {
  await server?.close();
});

const origins = () => ({ native: `http://127.0.0.1:${server.port}`, weblocks: `http://${plainHttpHost}:${server.port}` });

/** Ticks of `a` inside `b`'s hold (from its grant to its end, or to `now` while it runs). */
const inside = (a, b, now) => (b.granted ? a.ticks.filter((t) => t >= b.granted && t <= (b.ended || now)).length : 0);

/**
 * One run: P holds `name` for 60 ticks; Q asks (for 12 ticks) `order` 'before' or 'after' P navigates away (400 ms
 * after); P goes back 1200 ms after leaving. Returns what happened, once Q's request has settled (or 12 s passed).
 */
async function run(browser, origin, order) {
  const name = `bfcache ${order} ${Date.now()}`;
  const holder = await browser.newTab(`${origin}${FIXTURE}?holder`);
  const waiter = await browser.newTab(`${origin}${FIXTURE}?waiter`);
  try {
    const api = await holder.evaluate(() => window.api);
    await holder.evaluate(([n]) => window.hold(n, 'P', 60).then(() => true), [name]);
    const ask = () => waiter.evaluate(([n]) => void window.hold(n, 'Q', 12), [name]);
    if (order === 'before') {
      await ask();
      await sleep(300);
    }
    const left = Date.now();
    holder.goto(`${origin}${FIXTURE}?away`);
    await sleep(400);
    if (order === 'after') await ask();
    await sleep(left + 1200 - Date.now());
    const back = Date.now();
    await holder.evaluate(() => void setTimeout(() => history.back(), 100));
    await sleep(600);
    let P, Q;
    for (const end = Date.now() + 12_000; Date.now() < end; await sleep(100)) {
      [P, Q] = await waiter.evaluate(() => window.records(['P', 'Q']));
      if (Q.outcome !== null && (P.outcome !== null || !P.ended)) break;
    }
    const shown = await holder.evaluate(() => ({ restored: window.shows.includes(true), errors: window.pageErrors }));
    const now = Date.now();
    // Back (restored or loaded anew), P locks again: a free name, and then the name Q held and released.
    const locksAgain = await holder.evaluate(async ([n]) => {
      // A P loaded anew (it was evicted) may still be loading its script.
      for (const end = Date.now() + 5000; !navigator.locks && Date.now() < end; ) await new Promise((resolve) => setTimeout(resolve, 50));
      const within = (promise) => Promise.race([promise, new Promise((resolve) => setTimeout(() => resolve(false), 5000))]);
      const free = await within(navigator.locks.request(`${n} again`, () => true));
      const same = await within(navigator.locks.request(n, () => true));
      return free === true && same === true;
    }, [name]);
    // P's callback ran from its grant to its end; cut short by its eviction, it ran until its last tick.
    const pEnd = P.ended || (shown.restored ? now : Math.max(P.granted, ...P.ticks));
    const overlapMs = Q.granted ? Math.max(0, Math.min(pEnd, Q.ended || now) - Math.max(P.granted, Q.granted)) : 0;
    return {
      api,
      order,
      restored: shown.restored,
      errors: shown.errors,
      qGrantedAfterLeaving: Q.granted ? Q.granted - left : null,
      qGrantedBeforeBack: Q.granted !== 0 && Q.granted < back,
      pOutcome: P.outcome,
      qOutcome: Q.outcome,
      pTicksInQ: inside(P, Q, now),
      qTicksInP: inside(Q, { granted: P.granted, ended: pEnd }, now),
      overlapMs,
      locksAgain,
    };
  } finally {
    await holder.close().catch(() => {});
    await waiter.close().catch(() => {});
  }
}

const describeRun = (r) =>
  `${r.api}, Q asks ${r.order} P leaves: P ${r.restored ? 'restored' : 'not restored'} (its request ${r.pOutcome ?? 'unsettled'}), ` +
  `Q granted ${r.qGrantedAfterLeaving === null ? 'never' : `${r.qGrantedAfterLeaving} ms after P left`}, ` +
  `${r.pTicksInQ} of P's ticks in Q's hold, ${r.qTicksInP} of Q's in P's, ${r.overlapMs} ms of two holders, ` +
  `P ${r.locksAgain ? 'locks again' : 'does not lock again within 5 s'}`;

for (const driverName of ['chromium', 'firefox']) {
  describe(driverName, () => {
    let browser;
    before(async () => {
      const driver = await import(`../../../bench/lib/${driverName}.mjs`);
      browser = await driver.launch({ backForwardCache: true });
    });
    after(async () => {
      await browser?.close();
    });

    for (const order of ['before', 'after']) {
      test(`${driverName}: a page that holds a lock in the back/forward cache never runs its callback while another context holds it (the waiter asks ${order} the holder leaves)`, { timeout: 120_000 }, async () => {
        // The native API, for the record (its behaviour is the engine's).
        const native = await run(browser, origins().native, order);
        console.log(`# ${driverName}: ${describeRun(native)}`);
        let restored = 0;
        for (let i = 0; i < 3; i++) {
          const r = await run(browser, origins().weblocks, order);
          console.log(`# ${driverName}: ${describeRun(r)}`);
          assert.equal(r.api, 'weblocks');
          assert.deepEqual(r.errors, []);
          assert.equal(r.pTicksInQ, 0, describeRun(r));
          assert.equal(r.qTicksInP, 0, describeRun(r));
          assert.equal(r.overlapMs, 0, describeRun(r));
          assert.equal(r.qOutcome, 'released', `Q is granted in the end: ${describeRun(r)}`);
          assert.equal(r.locksAgain, true, describeRun(r));
          // A restored P kept its lock: its callback ran to its end and its request fulfilled, no AbortError.
          if (r.restored) {
            restored++;
            assert.equal(r.pOutcome, 'released', describeRun(r));
          }
        }
        // A waiter that asks after the holder left evicts it, once its Join reaches the cached page's channel;
        // on a loaded machine that may come only after P is back, which then still holds the lock.
        console.log(`# ${driverName}: ${restored} of 3 restored`);
      });
    }
  });
}

describe('webkit', () => {
  let browser;
  before(async () => {
    const driver = await import('../../../bench/lib/webkit.mjs');
    browser = await driver.launch();
  });
  after(async () => {
    await browser?.close();
  });

  /** Pins what WebKit does: Q is granted while P is in the cache (released on entry), natively and with weblocks. */
  const released = (r, api) => {
    console.log(`# webkit: ${describeRun(r)}`);
    assert.equal(r.api, api);
    assert.deepEqual(r.errors, []);
    assert.equal(r.qGrantedBeforeBack, true, describeRun(r));
    assert.equal(r.qOutcome, 'released');
    // Back from the cache, the page locks again (no transaction of it left unfinished on the register).
    assert.equal(r.locksAgain, true, describeRun(r));
    // The lock a restored page held was released: its request rejects (natively too).
    if (r.restored) assert.equal(r.pOutcome, 'AbortError', describeRun(r));
  };

  test('webkit: a page entering the back/forward cache releases its lock, natively and with weblocks (pinned: a change in the engine shows)', { timeout: 180_000 }, async () => {
    released(await run(browser, origins().native, 'before'), 'native');
    released(await run(browser, origins().native, 'after'), 'native');
    released(await run(browser, origins().weblocks, 'before'), 'weblocks');
  });

  // Over the log, a context that first asks while the origin's only member is in the cache joins through the
  // register, which the cached page must not have left a transaction open on (PROTOCOL.md §8, Release).
  test('webkit: a newcomer that asks while the only member is in the back/forward cache is granted while it is cached, and the page locks again once back', { timeout: 90_000 }, async () => {
    released(await run(browser, origins().weblocks, 'after'), 'weblocks');
    released(await run(browser, origins().weblocks, 'after'), 'weblocks');
  });
});
