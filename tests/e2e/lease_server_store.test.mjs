// The leases API over the lease service: `createLeases(serverLeaseStore({ url, token }))` from the ESM
// leases' add-on (`weblocks/leases`; in Node, through its `node` entry), and `weblocks.serverLeaseStore` from
// the classic leases' add-on (dist/weblocks.leases.js) in Chromium. Same methods and LockError codes as the IndexedDB
// store, plus the holder and since when on a conflict, takeOver, watch, and keepAlive against the service.
// Needs the build (`npm run build`).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createLeases, serverLeaseStore, LockError } from '../../js/leases_entry_node.js';
import { startLeaseService, mintToken, newSecret, temporarySqlite } from './lease_service.mjs';
import { startServer } from './server.mjs';
import { withBrowser, openPage } from './browser.mjs';

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
  const lockId = await alice.tryLock('domain.Article', '3', { ttlMs: 600 });
  const stopKeepAlive = alice.keepAlive(lockId, { everyMs: 150 });
  await sleep(1200);
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
