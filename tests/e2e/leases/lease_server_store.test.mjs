// The leases API over the lease service: `createLeases(serverLeaseStore({ url, token }))` from the ESM
// leases' add-on (`weblocks/leases`; in Node, through its `node` entry), and `weblocks.serverLeaseStore` from
// the classic leases' add-on (dist/weblocks.leases.js) in Chromium. Same methods and LockError codes as the IndexedDB
// store, plus the holder and since when on a conflict, takeOver, watch, and keepAlive against the service.
// Needs the build (`npm run build`).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createLeases, serverLeaseStore, LockError } from '../../../js/leases_entry_node.js';
import { startLeaseService, mintToken, newSecret, temporarySqlite } from '../lease_service.mjs';
import { startServer } from '../server.mjs';
import { withBrowser, openPage } from '../browser.mjs';

const secret = newSecret();
let db;
let service;
let web;

before(async () => {
  db = temporarySqlite();
  // A page of the origin without the ESM entry, served from 127.0.0.1 like the service (a page Chromium
  // does not know the address of would need a permission to reach a loopback address).
  const blank = async (req, res) => {
    if (req.url !== '/blank.html') return false;
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<!doctype html><title>classic</title>');
    return true;
  };
  web = await startServer({ handle: blank });
  service = await startLeaseService({ database: db.url, secret, origins: [web.url.replace(/\/$/, '')] });
});

after(async () => {
  await web?.close();
  await service?.stop();
  db?.remove();
});

const leasesOf = (sub, perms = []) => createLeases(serverLeaseStore({ url: service.url, token: mintToken(secret, { sub, name: sub, perms }) }));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function rejection(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail('expected a rejection');
}

test('the four operations, list, and a conflict that names the holder and since when', async () => {
  const alice = leasesOf('alice');
  const bob = leasesOf('bob');
  const lockId = await alice.tryLock('domain.Article', '1', { ttlMs: 60_000 });
  assert.match(lockId, /^domain\.Article\/1\/[0-9a-f]{32}$/);
  const info = await alice.checkLock(lockId);
  assert.deepEqual([info.type, info.id, info.holder.name, typeof info.fence], ['domain.Article', '1', 'alice', 'number']);

  const conflict = await rejection(bob.tryLock('domain.Article', '1', { ttlMs: 60_000 }));
  assert.ok(conflict instanceof LockError, String(conflict));
  assert.deepEqual([conflict.code, conflict.holder.name, conflict.acquiredAt, conflict.expiresAt], ['AlreadyLocked', 'alice', info.acquiredAt, info.expiresAt]);

  const extended = await alice.extendLockExpiration(lockId, 5000);
  assert.equal(extended.expiresAt, info.expiresAt + 5000);
  assert.deepEqual((await bob.list('domain.Article')).map((l) => [l.id, l.holder.name]), [['1', 'alice']]);
  await alice.releaseLock(lockId);
  assert.equal((await rejection(alice.checkLock(lockId))).code, 'NotFound');
  assert.equal((await rejection(alice.tryLock('domain.Article', '', { ttlMs: 1000 }))).code, 'InvalidArgument');
});

test('takeOver, Revoked, and Forbidden without the permission', async () => {
  const alice = leasesOf('alice');
  const lockId = await alice.tryLock('domain.Article', '2', { ttlMs: 60_000 });
  assert.equal((await rejection(leasesOf('carol').takeOver('domain.Article', '2'))).code, 'Forbidden');
  const bobs = await leasesOf('bob', ['takeover']).takeOver('domain.Article', '2', { ttlMs: 60_000 });
  const revoked = await rejection(alice.extendLockExpiration(lockId, 1000));
  assert.deepEqual([revoked.code, revoked.holder?.name], ['Revoked', 'bob']);
  await leasesOf('bob').releaseLock(bobs);
});

test('watch reports the current state then each change; keepAlive keeps a lease past its ttl', async () => {
  const alice = leasesOf('alice');
  const changes = [];
  const stop = alice.watch('domain.Article', '3', (change) => changes.push(change));
  const until = async (predicate) => {
    for (let i = 0; i < 100 && !changes.some(predicate); i++) await sleep(20);
    return changes.find(predicate);
  };
  assert.ok(await until((c) => c.kind === 'current' && c.lease === null));
  // A ttl well above the page's deadline margin (250 ms + 0.1 %) plus a loaded machine's round trip.
  const lockId = await alice.tryLock('domain.Article', '3', { ttlMs: 1200 });
  const stopKeepAlive = alice.keepAlive(lockId, { everyMs: 200 });
  await sleep(2400);
  assert.equal((await alice.checkLock(lockId)).holder.name, 'alice', 'kept alive for twice its ttl');
  assert.ok(await until((c) => c.kind === 'extended'));
  stopKeepAlive();
  assert.ok(await until((c) => c.kind === 'expired'), JSON.stringify(changes));
  stop();
  await sleep(50);
  const seen = changes.length;
  await alice.tryLock('domain.Article', '3', { ttlMs: 1000 });
  await sleep(300);
  assert.equal(changes.length, seen, 'nothing arrives after stop()');
});

/** A fetch that passes requests to the real one, except those `fault(url, body)` answers for: 'fail'
 *  (rejects: a network error), 'hang' (never settles unless aborted), 'lose' (reaches the service, whose
 *  answer is then lost). */
function faultyFetch(fault) {
  return async (url, init) => {
    const fate = fault(String(url), init.body === undefined ? undefined : JSON.parse(init.body));
    if (fate === 'fail') throw new TypeError('fetch failed (the test dropped it)');
    if (fate === 'hang') {
      return new Promise((resolve, reject) => init.signal?.addEventListener('abort', () => reject(init.signal.reason)));
    }
    const response = await fetch(url, init);
    if (fate === 'lose') {
      await response.text();
      throw new TypeError('fetch failed (the test lost the answer)');
    }
    return response;
  };
}

test('on a faulty network: one failed extension is tried again; hung requests end in onLost before the service’s expiry', async () => {
  let failNext = false;
  let hang = false;
  const extensions = [];
  const alice = createLeases(
    serverLeaseStore({
      url: service.url,
      token: mintToken(secret, { sub: 'alice' }),
      fetch: faultyFetch((url) => {
        if (!url.endsWith('/v1/extendLockExpiration')) return 'pass';
        if (hang) return extensions.push({ at: Date.now(), fate: 'hang' }) && 'hang';
        const fate = failNext ? 'fail' : 'pass';
        failNext = false;
        extensions.push({ at: Date.now(), fate });
        return fate;
      }),
    }),
  );
  const direct = leasesOf('alice');
  // The first case: a 4 s lease extended every 300 ms; one extension fails.
  const lockId = await alice.tryLock('net', '1', { ttlMs: 4000 });
  const lost = [];
  const stop = alice.keepAlive(lockId, { everyMs: 300, onLost: (e) => lost.push({ at: Date.now(), code: e.code, deadline: e.deadline }) });
  await sleep(700);
  failNext = true;
  await sleep(1500);
  const failed = extensions.findIndex((e) => e.fate === 'fail');
  assert.ok(failed >= 0 && extensions.slice(failed + 1).some((e) => e.fate === 'pass'), JSON.stringify(extensions));
  console.log(`# node: a failed extension was tried again ${extensions[failed + 1].at - extensions[failed].at} ms later`);
  assert.deepEqual(lost, []);
  assert.equal((await direct.checkLock(lockId)).type, 'net');
  stop();

  // The second case: a 2 s lease extended every 400 ms; then every request hangs.
  const short = await alice.tryLock('net', '2', { ttlMs: 2000 });
  alice.keepAlive(short, { everyMs: 400, onLost: (e) => lost.push({ at: Date.now(), code: e.code, deadline: e.deadline }) });
  await sleep(500);
  hang = true;
  const hungAt = Date.now();
  for (let i = 0; i < 200 && lost.length === 0; i++) await sleep(20);
  // The service's expiry, asked directly (the lease may still be live there: onLost comes first).
  const serviceExpiry = await direct.checkLock(short).then((info) => info.expiresAt, (e) => e.expiresAt);
  assert.deepEqual(lost.map((l) => [l.code, l.deadline]), [['Expired', true]]);
  console.log(`# node: requests hung; onLost ${lost[0].at - hungAt} ms later, ${serviceExpiry - lost[0].at} ms before the service's expiry`);
  assert.ok(lost[0].at < serviceExpiry, `onLost at ${lost[0].at}, expiry ${serviceExpiry}`);
  assert.ok(extensions.filter((e) => e.fate === 'hang').length >= 2, 'a hung extension did not stall the next tries');
  const local = await rejection(alice.checkLock(short));
  assert.deepEqual([local.code, local.deadline], ['Expired', true]);

  // A check sent while the lease still had time, whose request then hangs: Expired at the deadline, not
  // StorageError at the request's 10 s timeout.
  hang = false;
  let hangChecks = false;
  const bob = createLeases(
    serverLeaseStore({
      url: service.url,
      token: mintToken(secret, { sub: 'bob' }),
      fetch: faultyFetch((url) => (hangChecks && url.endsWith('/v1/checkLock') ? 'hang' : 'pass')),
    }),
  );
  const bobs = await bob.tryLock('net', '5', { ttlMs: 1500 });
  hangChecks = true;
  const asked = Date.now();
  const hung = await rejection(bob.checkLock(bobs));
  const waited = Date.now() - asked;
  const bobsExpiry = (await leasesOf('bob').checkLock(bobs).catch((e) => e)).expiresAt;
  console.log(`# node: a hung checkLock said Expired after ${waited} ms, ${bobsExpiry - Date.now()} ms before the service's expiry`);
  assert.deepEqual([hung.code, hung.deadline], ['Expired', true]);
  assert.ok(waited < 1500, `at the deadline (${waited} ms)`);
});

test('timers that ran late (a machine that slept, a page frozen): the deadline is reported, nothing is extended after it', async () => {
  const sent = [];
  const alice = createLeases(
    serverLeaseStore({
      url: service.url,
      token: mintToken(secret, { sub: 'alice' }),
      fetch: faultyFetch((url) => (url.endsWith('/v1/extendLockExpiration') && sent.push(Date.now()), 'pass')),
    }),
  );
  const lockId = await alice.tryLock('net', '4', { ttlMs: 2000 });
  const lost = [];
  alice.keepAlive(lockId, { everyMs: 300, onLost: (e) => lost.push({ at: Date.now(), code: e.code, deadline: e.deadline }) });
  await sleep(400);
  // Nothing runs for 2.5 s: every timer (the ticks, the deadline's) fires late, after the deadline.
  const frozenAt = Date.now();
  for (const end = frozenAt + 2500; Date.now() < end; );
  await sleep(100);
  assert.deepEqual(lost.map((l) => [l.code, l.deadline]), [['Expired', true]]);
  assert.deepEqual(sent.filter((at) => at >= frozenAt), [], 'no extension was sent once the deadline had passed');
  const local = await rejection(alice.checkLock(lockId));
  assert.deepEqual([local.code, local.deadline], ['Expired', true]);
});

test('a lost tryLock answer: the retry (same request id) gets the granted lease; another user is still refused', async () => {
  let lose = 1;
  const bodies = [];
  const alice = createLeases(
    serverLeaseStore({
      url: service.url,
      token: mintToken(secret, { sub: 'alice' }),
      fetch: faultyFetch((url, body) => {
        if (!url.endsWith('/v1/tryLock')) return 'pass';
        bodies.push(body);
        return lose-- > 0 ? 'lose' : 'pass';
      }),
    }),
  );
  const started = performance.now();
  const lockId = await alice.tryLock('net', '3', { ttlMs: 5000 });
  const took = performance.now() - started;
  console.log(`# node: a lost tryLock answer, granted on the retry after ${Math.round(took)} ms`);
  assert.equal(bodies.length, 2);
  assert.match(bodies[0].requestId, /^[0-9a-f]{32}$/);
  assert.equal(bodies[1].requestId, bodies[0].requestId, 'the retry carries the same request id');
  const info = await leasesOf('alice').checkLock(lockId);
  assert.equal(info.fence, 1, 'one lease granted');
  const bob = await rejection(leasesOf('bob').tryLock('net', '3', { ttlMs: 5000 }));
  assert.deepEqual([bob.code, bob.holder.sub], ['AlreadyLocked', 'alice']);
  // A lease shorter than the page's margin still gets its one fair try (and no retry).
  const brief = await alice.tryLock('net', '6', { ttlMs: 200 });
  assert.match(brief, /^net\/6\//);
  // A definite refusal is not retried.
  const refused = await rejection(alice.tryLock('net', '3', { ttlMs: 5000 }));
  assert.equal(refused.code, 'AlreadyLocked');
  assert.equal(bodies.length, 4);
});

test('a bad token is Unauthorized, an unreachable service a StorageError; a refused stream calls onError', async () => {
  const forged = createLeases(serverLeaseStore({ url: service.url, token: mintToken('another secret of the same length 0123456789ab', { sub: 'x' }) }));
  assert.equal((await rejection(forged.tryLock('T', '1', { ttlMs: 1000 }))).code, 'Unauthorized');
  const errors = [];
  forged.watch('T', '1', () => assert.fail('no change for a refused stream'), { onError: (e) => errors.push(e) });
  for (let i = 0; i < 50 && errors.length === 0; i++) await sleep(20);
  assert.deepEqual(errors.map((e) => [e instanceof LockError, e.code]), [[true, 'Unauthorized']]);
  const nowhere = createLeases(serverLeaseStore({ url: 'http://127.0.0.1:9', token: 't' }));
  const unreachable = await rejection(nowhere.checkLock('T/1/' + '0'.repeat(32)));
  assert.deepEqual([unreachable instanceof LockError, unreachable.code], [true, 'StorageError']);
  // A token function is asked for each request.
  let asked = 0;
  const refreshed = createLeases(serverLeaseStore({ url: service.url, token: async () => (asked++, mintToken(secret, { sub: 'dora' })) }));
  await refreshed.releaseLock(await refreshed.tryLock('T', 'refresh', { ttlMs: 1000 }));
  assert.equal(asked, 2);
});

test('the classic leases add-on puts serverLeaseStore on the weblocks global, across origins (CORS)', async () => {
  await withBrowser({}, async (browser) => {
    const page = await openPage(browser);
    await page.goto(`${web.url}blank.html`);
    await page.addScriptTag({ url: '/dist/weblocks.polyfill.js' });
    await page.addScriptTag({ url: '/dist/weblocks.leases.js' });
    const token = mintToken(secret, { sub: 'erin', name: 'erin' });
    const result = await page.evaluate(
      async ({ url, token }) => {
        const leases = weblocks.createLeases(weblocks.serverLeaseStore({ url, token }));
        const lockId = await leases.tryLock('classic', '1', { ttlMs: 5000 });
        const error = await leases.tryLock('classic', '1', { ttlMs: 5000 }).catch((e) => e);
        await leases.releaseLock(lockId);
        return { lockId, isLockError: error instanceof weblocks.LockError, code: error.code, holder: error.holder.name };
      },
      { url: service.url, token },
    );
    assert.match(result.lockId, /^classic\/1\//);
    assert.deepEqual([result.isLockError, result.code, result.holder], [true, 'AlreadyLocked', 'erin']);
    assert.deepEqual(page.errors.filter((e) => e.startsWith('pageerror')), []);
  });
});
