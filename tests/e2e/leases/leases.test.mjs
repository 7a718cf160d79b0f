// Leases in Chromium (docs/LEASES.md): the ESM entry's `leases` over the IndexedDB store, driven in real
// tabs of one browser context (one origin, one IndexedDB). Each test gets a fresh context, so fresh storage.
// Needs the build (`npm run build`: pkg/ and dist/).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from '../server.mjs';
import { launchChromium, shareServerAndChromium } from '../browser.mjs';
import { race } from '../fixtures/leases_race_run.mjs';

const FIXTURE = 'tests/e2e/fixtures/leases.html';
const RACE_ROUNDS = 300;

const shared = shareServerAndChromium();

/** A new tab on the fixture, with page errors collected; `context` shares storage between its tabs. */
async function openTab(context) {
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => m.type() === 'error' && page.errors.push(`console.error: ${m.text()}`));
  await page.goto(shared.server.url + FIXTURE);
  assert.equal(await page.evaluate(() => window.fixtureReady), true);
  return page;
}

/** `leases[method](...args)` in `page`: `{ ok }` or `{ error: { name, code, message, expiresAt, isLockError } }`. */
function call(page, method, ...args) {
  return page.evaluate(([m, a]) => window.leaseCall(m, ...a), [method, args]);
}

async function ok(page, method, ...args) {
  const result = await call(page, method, ...args);
  assert.ok(!result.error, `${method}(${JSON.stringify(args)}) failed: ${JSON.stringify(result.error)}`);
  return result.ok;
}

async function fails(page, code, method, ...args) {
  const result = await call(page, method, ...args);
  assert.ok(result.error, `${method}(${JSON.stringify(args)}) should fail with ${code}, got ${JSON.stringify(result.ok)}`);
  assert.equal(result.error.code, code, `${method}(${JSON.stringify(args)}): ${result.error.message}`);
  assert.equal(result.error.name, 'LockError');
  assert.equal(result.error.isLockError, true, 'an instance of the exported LockError class');
  return result.error;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function withContext(body) {
  const context = await shared.browser.newContext();
  try {
    return await body(context);
  } finally {
    await context.close();
  }
}

test('the edit-form story in one tab: acquire, conflict, check, list, release', () =>
  withContext(async (context) => {
    const tab = await openTab(context);
    const before = Date.now();
    const lockId = await ok(tab, 'tryLock', 'domain.Article', '10', { ttlMs: 60_000 });
    assert.match(lockId, /^domain\.Article\/10\/[0-9a-f]{32}$/);
    const conflict = await fails(tab, 'AlreadyLocked', 'tryLock', 'domain.Article', '10', { ttlMs: 1000 });
    const info = await ok(tab, 'checkLock', lockId);
    assert.deepEqual(Object.keys(info).sort(), ['expiresAt', 'id', 'type']);
    assert.equal(conflict.expiresAt, info.expiresAt, 'AlreadyLocked says until when');
    assert.ok(info.expiresAt >= before + 60_000 && info.expiresAt <= Date.now() + 60_000, `${info.expiresAt}`);
    const listed = await ok(tab, 'list');
    assert.deepEqual(listed, [{ type: 'domain.Article', id: '10', expiresAt: info.expiresAt }]);
    assert.ok(!JSON.stringify(listed).includes(lockId.slice(-32)), 'list never shows the token');
    const extended = await ok(tab, 'extendLockExpiration', lockId, 30_000);
    assert.equal(extended.expiresAt, info.expiresAt + 30_000);
    assert.equal(await ok(tab, 'releaseLock', lockId), undefined);
    await fails(tab, 'NotFound', 'checkLock', lockId);
    assert.deepEqual(await ok(tab, 'list'), []);
    const again = await ok(tab, 'tryLock', 'domain.Article', '10');
    assert.notEqual(again, lockId, 'every lease has a new lockId');
    const defaultTtl = (await ok(tab, 'checkLock', again)).expiresAt - Date.now();
    assert.ok(defaultTtl > 4 * 60_000 && defaultTtl <= 5 * 60_000, `default ttl is 5 minutes, got ${defaultTtl}`);
    assert.deepEqual(tab.errors, []);
  }));

test('bad arguments reject with InvalidArgument and store nothing', () =>
  withContext(async (context) => {
    const tab = await openTab(context);
    await fails(tab, 'InvalidArgument', 'tryLock', '', '1');
    await fails(tab, 'InvalidArgument', 'tryLock', 'Order', '');
    await fails(tab, 'InvalidArgument', 'tryLock', 'Order', 1);
    await fails(tab, 'InvalidArgument', 'tryLock', undefined, '1');
    await fails(tab, 'InvalidArgument', 'tryLock', 'x'.repeat(1025), '1');
    for (const ttlMs of [0, -1, 24 * 3600_000 + 1, '1000', null]) {
      await fails(tab, 'InvalidArgument', 'tryLock', 'Order', '1', { ttlMs });
    }
    // NaN and Infinity do not survive page.evaluate's serialisation: pass them from inside the page.
    const inPage = await tab.evaluate(async () =>
      Promise.all(
        [NaN, Infinity, -Infinity].map((ttlMs) => window.leaseCall('tryLock', 'Order', '1', { ttlMs })),
      ).then((rs) => rs.map((r) => r.error?.code)),
    );
    assert.deepEqual(inPage, ['InvalidArgument', 'InvalidArgument', 'InvalidArgument']);
    const loneSurrogate = await tab.evaluate(() => window.leaseCall('tryLock', 'Order', '\uD800'));
    assert.equal(loneSurrogate.error?.code, 'InvalidArgument');
    for (const lockId of ['', 'nonsense', 'Order/1/xyz', 42, undefined]) {
      await fails(tab, 'InvalidArgument', 'checkLock', lockId);
      await fails(tab, 'InvalidArgument', 'releaseLock', lockId);
    }
    const lockId = await ok(tab, 'tryLock', 'Order', '1', { ttlMs: 60_000 });
    for (const incMs of [0, -5, '10', undefined]) await fails(tab, 'InvalidArgument', 'extendLockExpiration', lockId, incMs);
    assert.equal((await ok(tab, 'list')).length, 1, 'only the valid lease was stored');
    const keepAlive = await tab.evaluate(() => {
      try {
        weblocks.leases.keepAlive('whatever', { everyMs: 0 });
      } catch (e) {
        return e instanceof weblocks.LockError && e.code;
      }
    });
    assert.equal(keepAlive, 'InvalidArgument');
  }));

test(`two tabs race tryLock on the same (type, id) ${RACE_ROUNDS} times: exactly one winner each round`, () =>
  withContext(async (context) => {
    const tabs = [await openTab(context), await openTab(context)];
    const { results, ms, wins, doubleWins, noWinner } = await race(tabs, {
      rounds: RACE_ROUNDS,
      makeLeases: '() => weblocks.leases',
      channel: 'race-real',
    });
    console.log(`# race: ${RACE_ROUNDS} rounds in ${ms} ms, wins per tab ${wins.join('/')}`);
    assert.deepEqual(doubleWins, [], 'rounds with two winners');
    assert.deepEqual(noWinner, [], 'rounds without a winner');
    for (const r of results) for (const x of r) assert.ok(x.includes('/') || x === 'AlreadyLocked', x);
    // Both tabs won rounds, so the calls really overlapped (a tab that always came second would prove little).
    assert.ok(wins.every((w) => w > 0), `wins per tab: ${wins}`);
    assert.equal((await ok(tabs[0], 'list')).length, RACE_ROUNDS);
    for (const tab of tabs) assert.deepEqual(tab.errors, []);
  }));

test('control: the same race catches a store that reads and writes in separate transactions', () =>
  withContext(async (context) => {
    const tabs = [await openTab(context), await openTab(context)];
    const { doubleWins } = await race(tabs, {
      rounds: 100,
      makeLeases:
        "async () => weblocks.createLeases((await import('/tests/e2e/fixtures/leases_naive_store.js')).openNaiveStore('naive'))",
      channel: 'race-naive',
    });
    console.log(`# race control: the non-atomic store granted ${doubleWins.length} of 100 rounds twice`);
    assert.ok(doubleWins.length > 0, 'the race must be able to expose a non-atomic store');
  }));

test('a lease survives a reload and the closing of every tab', () =>
  withContext(async (context) => {
    const tab = await openTab(context);
    const lockId = await ok(tab, 'tryLock', 'domain.Article', '7', { ttlMs: 60_000 });
    const { expiresAt } = await ok(tab, 'checkLock', lockId);
    await tab.reload();
    assert.equal(await tab.evaluate(() => window.fixtureReady), true);
    assert.equal((await ok(tab, 'checkLock', lockId)).expiresAt, expiresAt);
    await fails(tab, 'AlreadyLocked', 'tryLock', 'domain.Article', '7');
    await tab.goto('about:blank');
    await tab.close();
    const later = await openTab(context);
    assert.deepEqual(await ok(later, 'list'), [{ type: 'domain.Article', id: '7', expiresAt }]);
    await fails(later, 'AlreadyLocked', 'tryLock', 'domain.Article', '7');
    await ok(later, 'releaseLock', lockId);
    await ok(later, 'tryLock', 'domain.Article', '7');
  }));

test('expiry: an expired lease fails checks, can be taken over, and its stale lockId cannot release the new one', () =>
  withContext(async (context) => {
    const [a, b] = [await openTab(context), await openTab(context)];
    const stale = await ok(a, 'tryLock', 'Order', '1', { ttlMs: 400 });
    await ok(a, 'checkLock', stale);
    await fails(b, 'AlreadyLocked', 'tryLock', 'Order', '1');
    await sleep(500);
    const expired = await fails(a, 'Expired', 'checkLock', stale);
    assert.ok(expired.expiresAt <= Date.now());
    await fails(a, 'Expired', 'extendLockExpiration', stale, 10_000);
    assert.deepEqual(await ok(b, 'list'), [], 'list hides expired leases');
    const fresh = await ok(b, 'tryLock', 'Order', '1', { ttlMs: 60_000 });
    // The page that held it passed its deadline: it says Expired for good, without asking the store;
    // another page, which asks the store, hears TakenOver; a release always asks the store.
    await fails(a, 'Expired', 'checkLock', stale);
    await fails(b, 'TakenOver', 'checkLock', stale);
    await fails(b, 'TakenOver', 'extendLockExpiration', stale, 10_000);
    await fails(a, 'TakenOver', 'releaseLock', stale);
    const info = await ok(b, 'checkLock', fresh);
    assert.deepEqual((await ok(a, 'list')).map((l) => l.expiresAt), [info.expiresAt], 'the new lease is untouched');
  }));

test('keepAlive extends while the page is open, stops on stop(), and reports a lost lease', () =>
  withContext(async (context) => {
    const tab = await openTab(context);
    const outcome = await tab.evaluate(async () => {
      const { leases } = weblocks;
      const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
      // A ttl well above the page's deadline margin (250 ms + 0.1 %) plus a loaded machine's extension time.
      const lockId = await leases.tryLock('doc', 'kept', { ttlMs: 1200 });
      const stop = leases.keepAlive(lockId, { everyMs: 200 });
      await sleep(3000); // 2.5 ttls
      const aliveAfter1500 = await leases.checkLock(lockId).then(() => true, (e) => e.code);
      stop();
      await sleep(1500);
      const afterStop = await leases.checkLock(lockId).then(() => 'alive', (e) => e.code);
      const other = await leases.tryLock('doc', 'lost', { ttlMs: 60_000 });
      let lost;
      const lostReported = new Promise((resolve) => {
        leases.keepAlive(other, { everyMs: 100, onLost: (e) => resolve((lost = e)) });
      });
      await leases.releaseLock(other); // someone (here: this page) removes it behind keepAlive's back
      await Promise.race([lostReported, sleep(2000)]);
      return { aliveAfter1500, afterStop, lostCode: lost?.code, lostIsLockError: lost instanceof weblocks.LockError };
    });
    assert.deepEqual(outcome, { aliveAfter1500: true, afterStop: 'Expired', lostCode: 'NotFound', lostIsLockError: true });
  }));

test('the page’s deadline holds for IndexedDB leases: checkLock says Expired a margin before the store would, and keepAlive reports it', () =>
  withContext(async (context) => {
    const tab = await openTab(context);
    const outcome = await tab.evaluate(async () => {
      const { leases } = weblocks;
      const lockId = await leases.tryLock('doc', 'deadline', { ttlMs: 3000 });
      const { expiresAt } = await leases.checkLock(lockId);
      // Busy-wait, on the store's own clock, past the page's deadline (253 ms before the expiry), not to the expiry.
      while (Date.now() < expiresAt - 120);
      const refusal = await leases.checkLock(lockId).then(() => null, (e) => ({ code: e.code, deadline: e.deadline, at: Date.now(), expiresAt: e.expiresAt }));
      // keepAlive on a lease whose deadline has passed reports it at its first look.
      const lost = await new Promise((resolve) => leases.keepAlive(lockId, { everyMs: 50, onLost: (e) => resolve([e.code, e.deadline]) }));
      return { expiresAt, refusal, lost };
    });
    assert.deepEqual([outcome.refusal.code, outcome.refusal.deadline], ['Expired', true]);
    assert.equal(outcome.refusal.expiresAt, outcome.expiresAt, 'the local Expired names the store’s expiry');
    assert.ok(outcome.refusal.at < outcome.expiresAt, `refused at ${outcome.refusal.at}, before the store's expiry ${outcome.expiresAt}`);
    assert.deepEqual(outcome.lost, ['Expired', true]);
  }));

test('keepAlive in the back/forward cache: paused on a persisted pagehide; on pageshow it resumes, or reports the deadline that passed', () =>
  withContext(async (context) => {
    const tab = await openTab(context);
    const outcome = await tab.evaluate(async () => {
      const { leases } = weblocks;
      const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
      const transition = (type) => dispatchEvent(new PageTransitionEvent(type, { persisted: true }));
      const lockId = await leases.tryLock('doc', 'bfcache', { ttlMs: 1500 });
      let lost = null;
      leases.keepAlive(lockId, { everyMs: 100, onLost: (e) => (lost = [e.code, e.deadline]) });
      await sleep(300);
      transition('pagehide');
      await sleep(150); // an extension in flight settles
      const before = (await leases.checkLock(lockId)).expiresAt;
      await sleep(400);
      const during = (await leases.checkLock(lockId)).expiresAt;
      transition('pageshow');
      await sleep(400);
      const after = (await leases.checkLock(lockId)).expiresAt;
      transition('pagehide');
      await sleep(1700); // past the deadline while in the cache
      const lostWhileCached = lost;
      transition('pageshow');
      return { paused: during === before, resumed: after > during, lostWhileCached, lost };
    });
    assert.deepEqual(outcome, { paused: true, resumed: true, lostWhileCached: null, lost: ['Expired', true] });
  }));

test('keepAlive adds the time that really elapsed, so late timers (a busy or throttled page) do not lose the lease', () =>
  withContext(async (context) => {
    const tab = await openTab(context);
    const outcome = await tab.evaluate(async () => {
      const { leases } = weblocks;
      const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
      const block = (ms) => {
        for (const end = performance.now() + ms; performance.now() < end; );
      };
      const run = async (id, options) => {
        const lockId = await leases.tryLock('doc', id, { ttlMs: 1500 });
        let lost = null;
        const stop = leases.keepAlive(lockId, { everyMs: 100, ...options, onLost: (e) => (lost = e.code) });
        for (let i = 0; i < 3; i++) {
          block(1000); // the 100 ms timer fires once, 1 s late
          await sleep(150);
        }
        const state = await leases.checkLock(lockId).then(() => 'alive', (e) => e.code);
        stop();
        return { state, lost };
      };
      return { elapsed: await run('elapsed', {}), fixed: await run('fixed', { incMs: 100 }) };
    });
    assert.deepEqual(outcome.elapsed, { state: 'alive', lost: null });
    // A fixed increment (keepAlive's `incMs`) falls behind (100 ms added per 1 s): the control shows the
    // difference.
    assert.deepEqual(outcome.fixed, { state: 'Expired', lost: 'Expired' });
  }));

test('keepAlive stops on pagehide: a closed tab stops extending and its lease expires', () =>
  withContext(async (context) => {
    const [a, b] = [await openTab(context), await openTab(context)];
    const lockId = await a.evaluate(async () => {
      const lockId = await weblocks.leases.tryLock('doc', 'closed', { ttlMs: 500 });
      weblocks.leases.keepAlive(lockId, { everyMs: 100 });
      return lockId;
    });
    await sleep(800);
    await ok(b, 'checkLock', lockId); // kept alive past its ttl
    await a.close({ runBeforeUnload: true });
    await sleep(700);
    await fails(b, 'Expired', 'checkLock', lockId);
    await ok(b, 'tryLock', 'doc', 'closed');
  }));

test('a dedicated worker (no window, no localStorage) uses the same leases', () =>
  withContext(async (context) => {
    const tab = await openTab(context);
    const outcome = await tab.evaluate(async () => {
      const worker = new Worker('/tests/e2e/fixtures/leases_worker.js', { type: 'module' });
      const replies = [];
      let wake;
      worker.onmessage = ({ data }) => (replies.push(data), wake?.());
      worker.onerror = (e) => (replies.push({ workerError: e.message }), wake?.());
      const next = async () => {
        while (!replies.length) await new Promise((resolve) => (wake = resolve));
        return replies.shift();
      };
      const inWorker = (method, ...args) => (worker.postMessage({ method, args }), next());
      const hello = await next();
      const taken = await inWorker('tryLock', 'domain.Article', '99', { ttlMs: 60_000 });
      const pageTry = await window.leaseCall('tryLock', 'domain.Article', '99');
      const pageList = await window.leaseCall('list');
      const released = await inWorker('releaseLock', taken.ok);
      const pageTryAgain = await window.leaseCall('tryLock', 'domain.Article', '99');
      const workerTry = await inWorker('tryLock', 'domain.Article', '99');
      worker.terminate();
      return { hello, taken, pageTry, pageList, released, pageTryAgain, workerTry };
    });
    assert.deepEqual(outcome.hello, { ready: true }, 'the worker has no window and no localStorage');
    assert.match(outcome.taken.ok, /^domain\.Article\/99\/[0-9a-f]{32}$/);
    assert.equal(outcome.pageTry.error?.code, 'AlreadyLocked');
    assert.deepEqual(outcome.pageList.ok.map((l) => l.id), ['99']);
    assert.ok(!outcome.released.error && outcome.released.ok === undefined, JSON.stringify(outcome.released));
    assert.ok(outcome.pageTryAgain.ok, JSON.stringify(outcome.pageTryAgain));
    assert.equal(outcome.workerTry.error?.code, 'AlreadyLocked');
    assert.equal(outcome.workerTry.error?.isLockError, true);
  }));

test('the classic leases add-on, loaded after the classic script, exposes weblocks.leases and weblocks.LockError', () =>
  withContext(async (context) => {
    const page = await context.newPage();
    const blank = shared.server.url + 'blank-for-classic.html'; // a page of the origin without the ESM entry
    await page.route(blank, (route) => route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>classic</title>' }));
    await page.goto(blank);
    await page.addScriptTag({ url: '/dist/weblocks.polyfill.js' });
    assert.equal(await page.evaluate(() => 'leases' in weblocks || 'LockError' in weblocks), false, 'the classic script alone has no leases');
    await page.addScriptTag({ url: '/dist/weblocks.leases.js' });
    const outcome = await page.evaluate(async () => {
      const { leases, LockError } = globalThis.weblocks;
      const lockId = await leases.tryLock('classic', '1', { ttlMs: 60_000 });
      const conflict = await leases.tryLock('classic', '1').catch((e) => e);
      return { lockId, conflict: conflict instanceof LockError && conflict.code };
    });
    assert.match(outcome.lockId, /^classic\/1\/[0-9a-f]{32}$/);
    assert.equal(outcome.conflict, 'AlreadyLocked');
    // Either file loaded a second time keeps the first leases and LockError (errors stay `instanceof LockError`).
    await page.evaluate(() => (window.firstWeblocks = { ...globalThis.weblocks }));
    await page.addScriptTag({ url: '/dist/weblocks.polyfill.js' });
    await page.addScriptTag({ url: '/dist/weblocks.leases.js' });
    const reused = await page.evaluate(async () => {
      const { leases, LockError } = globalThis.weblocks;
      const error = await leases.tryLock('classic', '1').catch((e) => e);
      return [leases === firstWeblocks.leases, LockError === firstWeblocks.LockError, error instanceof LockError];
    });
    assert.deepEqual(reused, [true, true, true]);
  }));

test('the classic leases add-on without the classic script says to load that first, and defines nothing', () =>
  withContext(async (context) => {
    const page = await context.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    const blank = shared.server.url + 'blank-for-classic.html';
    await page.route(blank, (route) => route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>classic</title>' }));
    await page.goto(blank);
    await page.addScriptTag({ url: '/dist/weblocks.leases.js' });
    assert.equal(await page.evaluate(() => typeof globalThis.weblocks), 'undefined');
    assert.equal(errors.length, 1, `page errors: ${errors}`);
    assert.match(errors[0], /weblocks\.leases\.js needs the classic script weblocks\.polyfill\.js/);
  }));
