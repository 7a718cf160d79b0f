// The lease service (weblocks-lease-server) against SQLite (one instance) and a throwaway PostgreSQL (two
// instances on one database: requests alternate between them and streams are read from the other one, so
// every change crosses instances through LISTEN/NOTIFY). Each backend: the four lease operations with
// the holder and since when, takeOver and Revoked, fencing numbers, change streams (a page learns of a
// release, an expiry or a take-over within a second), and bad input, each answered by its status and
// error name with the tables unchanged. Then, on SQLite: CORS, and a graceful shutdown.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  startLeaseService,
  mintToken,
  newSecret,
  leaseClient,
  watchChanges,
  temporarySqlite,
  dumpSqlite,
} from '../lease_service.mjs';
import { startPostgres, dumpPostgres } from '../postgres_cluster.mjs';

const secret = newSecret();
const tokens = {
  alice: mintToken(secret, { sub: 'u-alice', name: 'alice' }),
  bob: mintToken(secret, { sub: 'u-bob', name: 'bob', perms: ['takeover'] }),
  carol: mintToken(secret, { sub: 'u-carol', name: 'carol' }),
};

const backends = {
  async sqlite() {
    const db = temporarySqlite();
    const a = await startLeaseService({ database: db.url, secret });
    return { a, b: a, dump: () => dumpSqlite(db.file), stop: async () => (await a.stop(), db.remove()) };
  },
  async postgres() {
    const cluster = await startPostgres();
    try {
      const a = await startLeaseService({ database: cluster.url, secret });
      const b = await startLeaseService({ database: cluster.url, secret });
      return { a, b, dump: () => dumpPostgres(cluster), stop: async () => (await a.stop(), await b.stop(), cluster.stop()) };
    } catch (e) {
      cluster.stop();
      throw e;
    }
  },
};

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

for (const [backend, open] of Object.entries(backends)) {
  describe(`the lease service on ${backend}`, () => {
    let service;
    let alice;
    let bob;
    let carol;
    before(async () => {
      service = await open();
      alice = leaseClient(service.a.url, tokens.alice);
      bob = leaseClient(service.b.url, tokens.bob);
      carol = leaseClient(service.a.url, tokens.carol);
    });
    after(() => service?.stop());

    test('a repeated request id returns the same lease to its user only, on either instance, and expires with the lease', async () => {
      const grant = (client, id, ttlMs, requestId) => client.call('POST', '/v1/tryLock', { type: 'retry.Article', id, ttlMs, requestId });
      const aliceOnB = leaseClient(service.b.url, tokens.alice);
      const first = await grant(alice, '1', 60_000, 'retry-request-0000000001');
      assert.equal(first.status, 200, JSON.stringify(first.body));
      assert.equal(first.body.expiresAt - first.body.now, 60_000, 'the answer says the database’s time');
      // The answer was lost; the retry reaches the other instance (behind a load balancer): the same lease.
      const again = await grant(aliceOnB, '1', 60_000, 'retry-request-0000000001');
      assert.deepEqual([again.status, again.body.lockId, again.body.fence], [200, first.body.lockId, first.body.fence]);
      const before = await service.dump();
      const bobs = await grant(bob, '1', 60_000, 'retry-request-0000000001');
      assert.deepEqual([bobs.status, bobs.body.error.code, bobs.body.error.holder.name], [409, 'AlreadyLocked', 'alice']);
      assert.ok(bobs.body.error.now >= first.body.now);
      assert.deepEqual(await service.dump(), before, 'the retries and the refusal wrote nothing');
      // A short lease: once it expired, the same id is a new grant (a new number and lockId).
      const short = await grant(alice, '2', 300, 'retry-request-0000000002');
      await sleep(450);
      const late = await grant(aliceOnB, '2', 60_000, 'retry-request-0000000002');
      assert.equal(late.status, 200);
      assert.notEqual(late.body.lockId, short.body.lockId);
      assert.equal(late.body.fence, short.body.fence + 1);
      for (const lockId of [first.body.lockId, late.body.lockId]) await alice.releaseLock(lockId);
    });

    test('health answers with the database', async () => {
      const health = await leaseClient(service.a.url).call('GET', '/health');
      assert.deepEqual([health.status, health.body], [200, { status: 'ok', database: backend }]);
    });

    test("the four lease operations (tryLock, checkLock, releaseLock, extendLockExpiration), with the holder's name and since when, and growing fencing numbers", async () => {
      const taken = await alice.tryLock('domain.Article', '10', 60_000);
      assert.equal(taken.status, 200, JSON.stringify(taken.body));
      const { lockId, fence, acquiredAt, expiresAt } = taken.body;
      assert.match(lockId, /^domain\.Article\/10\/[0-9a-f]{32}$/);
      assert.deepEqual(taken.body.holder, { sub: 'u-alice', name: 'alice' });
      assert.ok(Math.abs(acquiredAt - Date.now()) < 5000 && expiresAt === acquiredAt + 60_000, JSON.stringify(taken.body));

      const conflict = await bob.tryLock('domain.Article', '10', 60_000);
      assert.equal(conflict.status, 409);
      assert.equal(conflict.body.error.code, 'AlreadyLocked');
      assert.deepEqual(conflict.body.error.holder, { sub: 'u-alice', name: 'alice' });
      assert.equal(conflict.body.error.acquiredAt, acquiredAt, 'since when');

      const checked = await alice.checkLock(lockId);
      assert.deepEqual([checked.status, checked.body.fence, checked.body.expiresAt], [200, fence, expiresAt]);
      const extended = await alice.extend(lockId, 1000);
      assert.deepEqual([extended.status, extended.body.expiresAt], [200, expiresAt + 1000]);

      const listed = await carol.list('domain.Article');
      assert.equal(listed.status, 200);
      assert.deepEqual(listed.body.leases.map((l) => [l.id, l.holder.name, l.fence]), [['10', 'alice', fence]]);
      assert.ok(!JSON.stringify(listed.body).includes(lockId.slice(-32)), 'a list never shows a lockId');
      const row = service.dump().locks.find((r) => r.type === 'domain.Article' && r.id === '10');
      assert.match(row.lockid, /^[0-9a-f]{32}$/);
      assert.notEqual(row.lockid, lockId.slice(-32), 'the table keeps a digest, not the token');

      assert.deepEqual([(await alice.releaseLock(lockId)).status, (await alice.checkLock(lockId)).body.error.code], [200, 'NotFound']);
      const next = await bob.tryLock('domain.Article', '10', 60_000);
      assert.deepEqual([next.status, next.body.fence], [200, fence + 1], 'a number survives the release of its row');
      assert.equal((await alice.checkLock(lockId)).body.error.code, 'TakenOver');
      await bob.releaseLock(next.body.lockId);
    });

    test('takeOver needs the permission; the revoked holder is told Revoked and who has it now', async () => {
      const taken = await alice.tryLock('domain.Article', '11', 60_000);
      const before = service.dump();
      const refused = await carol.takeOver('domain.Article', '11', 60_000);
      assert.deepEqual([refused.status, refused.body.error.code], [403, 'Forbidden']);
      assert.deepEqual(service.dump(), before, 'a refused take-over changes nothing');

      const over = await bob.takeOver('domain.Article', '11', 30_000);
      assert.equal(over.status, 200, JSON.stringify(over.body));
      assert.equal(over.body.fence, taken.body.fence + 1);
      for (const answer of [await alice.checkLock(taken.body.lockId), await alice.extend(taken.body.lockId, 1000), await alice.releaseLock(taken.body.lockId)]) {
        assert.deepEqual([answer.status, answer.body.error.code, answer.body.error.holder?.name], [403, 'Revoked', 'bob']);
      }
      assert.equal((await bob.checkLock(over.body.lockId)).status, 200);
      await bob.releaseLock(over.body.lockId);
    });

    test('streams tell a page within a second of a release, an expiry and a take-over, across instances', async () => {
      const byKey = await watchChanges(service.b.url, tokens.bob, { type: 'domain.Article', id: '12' });
      const byType = await watchChanges(service.b.url, tokens.carol, { type: 'domain.Article' });
      try {
        const first = await byKey.next((c) => c.kind === 'current');
        assert.equal(first.lease, null);

        const taken = await alice.tryLock('domain.Article', '12', 60_000);
        const acquired = await byKey.next((c) => c.kind === 'acquired');
        assert.deepEqual([acquired.fence, acquired.lease.holder.name], [taken.body.fence, 'alice']);
        await byType.next((c) => c.kind === 'acquired' && c.id === '12');

        let sent = Date.now();
        await alice.releaseLock(taken.body.lockId);
        const released = await byKey.next((c) => c.kind === 'released');
        assert.ok(released.receivedAt - sent < 1000, `released heard after ${released.receivedAt - sent} ms`);
        assert.equal(released.lease, null);

        const short = await alice.tryLock('domain.Article', '12', 700);
        const expired = await byKey.next((c) => c.kind === 'expired', 5000);
        const late = expired.receivedAt - short.body.expiresAt;
        assert.ok(late >= -20 && late < 1000, `expiry heard ${late} ms after the lease ran out`);
        assert.equal(expired.fence, short.body.fence);
        const typeExpired = await byType.next((c) => c.kind === 'expired' && c.id === '12', 3000);
        assert.equal(typeExpired.fence, short.body.fence);

        const again = await alice.tryLock('domain.Article', '12', 60_000);
        await byKey.next((c) => c.kind === 'acquired' && c.fence === again.body.fence);
        sent = Date.now();
        const over = await bob.takeOver('domain.Article', '12', 60_000);
        const takenOver = await byKey.next((c) => c.kind === 'takenOver');
        assert.ok(takenOver.receivedAt - sent < 1000, `take-over heard after ${takenOver.receivedAt - sent} ms`);
        assert.deepEqual([takenOver.fence, takenOver.lease.holder.name], [over.body.fence, 'bob']);
        await bob.releaseLock(over.body.lockId);
        await byKey.next((c) => c.kind === 'released' && c.fence === over.body.fence);

        // Another key of the type reaches the type's stream only.
        const other = await alice.tryLock('domain.Article', '13', 60_000);
        await byType.next((c) => c.kind === 'acquired' && c.id === '13');
        await alice.releaseLock(other.body.lockId);
        await byType.next((c) => c.kind === 'released' && c.id === '13');
        assert.ok(byKey.changes.every((c) => c.id === '12'));
        // Each key's states only move forward in both streams.
        for (const stream of [byKey, byType]) {
          for (const id of new Set(stream.changes.map((c) => c.id))) {
            const fences = stream.changes.filter((c) => c.id === id).map((c) => c.fence);
            assert.deepEqual(fences, [...fences].sort((x, y) => x - y), `fences of ${id}: ${fences}`);
          }
        }
      } finally {
        byKey.close();
        byType.close();
      }
    });

    test('SQL metacharacters in type and id are plain names', async () => {
      const names = [
        ["domain.Article'; DROP TABLE locks; --", '1 OR 1=1'],
        ['"; DELETE FROM lock_fences; --', "x' OR 'a'='a"],
        ['%_\\', '$1 ?1 :id @id'],
        ['a/b%2F', 'ünïcødé 🔒'],
      ];
      const taken = [];
      for (const [type, id] of names) {
        const answer = await alice.tryLock(type, id, 60_000);
        assert.equal(answer.status, 200, `${type} ${id}: ${JSON.stringify(answer.body)}`);
        assert.deepEqual([answer.body.type, answer.body.id], [type, id]);
        const checked = await alice.checkLock(answer.body.lockId);
        assert.deepEqual([checked.body.type, checked.body.id], [type, id]);
        taken.push(answer.body);
      }
      const dump = service.dump();
      for (const [type, id] of names) assert.ok(dump.locks.some((r) => r.type === type && r.id === id), `${type} ${id} stored verbatim`);
      assert.ok((await carol.list("domain.Article'; DROP TABLE locks; --")).body.leases.length === 1);
      for (const lease of taken) assert.equal((await alice.releaseLock(lease.lockId)).status, 200);
    });

    test('bad input gets its status and error name, and changes nothing', async () => {
      const held = await alice.tryLock('domain.Article', '20', 60_000);
      const expiring = await alice.tryLock('domain.Article', '21', 150);
      await sleep(300);
      const before = service.dump();
      const anonymous = leaseClient(service.a.url);
      const forgedToken = leaseClient(service.a.url, mintToken('not the secret, but as long as it: 0123456789abcdef', { sub: 'u-alice' }));
      const expiredToken = leaseClient(service.a.url, mintToken(secret, { sub: 'u-alice', expiresIn: -3600 }));
      const unsigned = leaseClient(service.a.url, mintToken(secret, { sub: 'u-alice', header: { alg: 'none', typ: 'JWT' } }).replace(/[^.]+$/, ''));
      const forgedLockId = held.body.lockId.replace(/[0-9a-f]{32}$/, '0'.repeat(32));
      const cases = [
        ['malformed JSON', () => alice.call('POST', '/v1/tryLock', '{"type": "domain.Article", "id": '), 400, 'InvalidArgument'],
        ['not an object', () => alice.call('POST', '/v1/tryLock', '[1, 2]'), 400, 'InvalidArgument'],
        ['ttlMs as a string', () => alice.call('POST', '/v1/tryLock', { type: 'T', id: '1', ttlMs: '1000' }), 400, 'InvalidArgument'],
        ['type as a number', () => alice.call('POST', '/v1/tryLock', { type: 7, id: '1', ttlMs: 1000 }), 400, 'InvalidArgument'],
        ['a missing field', () => alice.call('POST', '/v1/tryLock', { type: 'T', ttlMs: 1000 }), 400, 'InvalidArgument'],
        ['an unknown field', () => alice.call('POST', '/v1/tryLock', { type: 'T', id: '1', ttlMs: 1000, holder: 'x' }), 400, 'InvalidArgument'],
        ['lockId as a number', () => alice.call('POST', '/v1/checkLock', { lockId: 42 }), 400, 'InvalidArgument'],
        ['an empty id', () => alice.tryLock('T', '', 1000), 400, 'InvalidArgument'],
        ['a type over 1024 bytes', () => alice.tryLock('x'.repeat(1025), '1', 1000), 400, 'InvalidArgument'],
        ['a control character in an id', () => alice.tryLock('T', 'a\u0000b', 1000), 400, 'InvalidArgument'],
        ['a ttl under the minimum', () => alice.tryLock('T', '1', 10), 400, 'InvalidArgument'],
        ['a ttl over the maximum', () => alice.tryLock('T', '1', 90_000_000), 400, 'InvalidArgument'],
        ['a negative increment', () => alice.extend(held.body.lockId, -5), 400, 'InvalidArgument'],
        ['an oversize body', () => alice.call('POST', '/v1/tryLock', { type: 'T', id: 'x'.repeat(20_000), ttlMs: 1000 }), 413, 'PayloadTooLarge'],
        ['a malformed lockId', () => alice.checkLock('not a lock id'), 400, 'InvalidArgument'],
        ['an unknown lockId', () => alice.checkLock(`never/locked/${'ab'.repeat(16)}`), 403, 'NotFound'],
        ['a forged lockId', () => alice.releaseLock(forgedLockId), 403, 'TakenOver'],
        ['an expired lockId, checked', () => alice.checkLock(expiring.body.lockId), 403, 'Expired'],
        ['an expired lockId, extended', () => alice.extend(expiring.body.lockId, 60_000), 403, 'Expired'],
        ['no token', () => anonymous.tryLock('domain.Article', '20', 1000), 401, 'Unauthorized'],
        ['no token, releasing', () => anonymous.releaseLock(held.body.lockId), 401, 'Unauthorized'],
        ['a forged token', () => forgedToken.releaseLock(held.body.lockId), 401, 'Unauthorized'],
        ['an expired token', () => expiredToken.releaseLock(held.body.lockId), 401, 'Unauthorized'],
        ['an unsigned token (alg none)', () => unsigned.tryLock('T', '1', 1000), 401, 'Unauthorized'],
        ['a non-bearer authorization', () => anonymous.call('GET', '/v1/list', undefined, { authorization: 'Basic YTpi' }), 401, 'Unauthorized'],
        ['a take-over without the permission', () => carol.takeOver('domain.Article', '20', 1000), 403, 'Forbidden'],
        ['a bad list limit', () => alice.call('GET', '/v1/list?limit=0'), 400, 'InvalidArgument'],
        ['a stream without a type', () => alice.call('GET', '/v1/events?id=1'), 400, 'InvalidArgument'],
        ['no such endpoint', () => alice.call('POST', '/v1/dropTable', {}), 404, 'NoSuchEndpoint'],
        ['the wrong method', () => alice.call('GET', '/v1/tryLock'), 405, 'MethodNotAllowed'],
      ];
      for (const [what, send, status, code] of cases) {
        const answer = await send();
        assert.deepEqual([answer.status, answer.body.error?.code], [status, code], `${what}: ${JSON.stringify(answer.body)}`);
        assert.ok(typeof answer.body.error.message === 'string' && !/panicked|backtrace|\.rs:\d/.test(answer.body.error.message), what);
      }
      assert.deepEqual(service.dump(), before, 'no bad request changed a table');
      assert.equal((await alice.checkLock(held.body.lockId)).status, 200, 'the held lease is intact');
      assert.equal((await leaseClient(service.a.url).call('GET', '/health')).status, 200, 'the service is still up');
      await alice.releaseLock(held.body.lockId);
    });
  });
}

describe('the lease service configured', () => {
  test('CORS answers the configured origins only, errors included', async () => {
    const db = temporarySqlite();
    const service = await startLeaseService({ database: db.url, secret, origins: ['http://app.example:8080'] });
    try {
      const preflight = (origin) =>
        fetch(`${service.url}/v1/tryLock`, {
          method: 'OPTIONS',
          headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' },
        });
      const allowed = await preflight('http://app.example:8080');
      assert.equal(allowed.headers.get('access-control-allow-origin'), 'http://app.example:8080');
      assert.match(allowed.headers.get('access-control-allow-headers') ?? '', /authorization/i);
      const other = await preflight('http://evil.example');
      assert.equal(other.headers.get('access-control-allow-origin'), null);
      const refused = await fetch(`${service.url}/v1/tryLock`, { method: 'POST', headers: { origin: 'http://app.example:8080' }, body: '{}' });
      assert.equal(refused.status, 401);
      assert.equal(refused.headers.get('access-control-allow-origin'), 'http://app.example:8080', 'a page can read why it failed');
    } finally {
      await service.stop();
      db.remove();
    }
  });

  test('a shutdown finishes the requests in flight, ends the streams and exits 0', async () => {
    const db = temporarySqlite();
    const service = await startLeaseService({ database: db.url, secret });
    const client = leaseClient(service.url, tokens.alice);
    const stream = await watchChanges(service.url, tokens.bob, { type: 'shutdown' });
    let stopping;
    try {
      // Requests keep coming while the signal arrives. A request the service took in gets its whole answer;
      // one that reaches a closing connection or a closed port is refused (a socket error) and does nothing.
      const answers = new Map();
      const load = Array.from({ length: 8 }, async (_, worker) => {
        for (let i = 0; i < 40; i++) {
          if (i === 5 && worker === 0) stopping = service.stop();
          const id = `${worker}-${i}`;
          try {
            answers.set(id, (await client.tryLock('shutdown', id, 60_000)).status);
          } catch (e) {
            answers.set(id, e.cause?.code ?? e.message);
          }
        }
      });
      await Promise.all(load);
      assert.equal(await stopping, 0, service.logs());
      const outcomes = [...answers.values()];
      const granted = [...answers].filter(([, status]) => status === 200).map(([id]) => id);
      assert.ok(granted.length > 0, `answers: ${outcomes}`);
      assert.ok(
        outcomes.every((o) => o === 200 || o === 'ECONNREFUSED' || o === 'UND_ERR_SOCKET' || o === 'ECONNRESET'),
        `no other answer than a grant or a refusal: ${outcomes}`,
      );
      // Exactly the leases answered for are in the database: nothing was done without its answer.
      const stored = dumpSqlite(db.file).locks.map((row) => row.id);
      assert.deepEqual(stored.sort(), granted.sort());
      await stream.next((c) => c.kind === 'acquired');
      assert.ok(stream.ended || (await sleep(200), stream.ended), 'the stream ended');
      assert.match(service.logs(), /shutting down[\s\S]*stopped/);
    } finally {
      stream.close();
      await service.stop();
      db.remove();
    }
  });
});
