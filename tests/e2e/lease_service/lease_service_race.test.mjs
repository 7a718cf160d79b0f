// The lease service under contention and crashes.
// - The race: 50 clients × 200 rounds of tryLock on one (type, id), on two instances sharing one
//   PostgreSQL (clients alternate between them) and on one SQLite instance. Every round has exactly one
//   winner; every loser is told that winner's holder and fencing number (so no loser ever saw another
//   holder); the winners' fencing numbers are consecutive (200 grants in all: none happened unseen).
// - Durability: kill -9 an instance in the middle of a run of grants and releases, start it again on the
//   same database: every grant it answered is still held with its number, every release it answered
//   stays released, and nothing else is held but what was in flight at the kill (at most once per key).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startLeaseService, mintToken, newSecret, leaseClient, temporarySqlite } from '../lease_service.mjs';
import { startPostgres } from '../postgres_cluster.mjs';

const secret = newSecret();
const CLIENTS = 50;
const ROUNDS = 200;

const users = Array.from({ length: CLIENTS }, (_, i) => ({ sub: `u${i}`, token: mintToken(secret, { sub: `u${i}`, name: `user ${i}` }) }));

/** 50 clients × 200 rounds of tryLock on one key (client i on instance i % urls.length). */
async function race(urls) {
  const clients = users.map((user, i) => ({ ...user, client: leaseClient(urls[i % urls.length], user.token) }));
  const fences = [];
  const started = performance.now();
  for (let round = 0; round < ROUNDS; round++) {
    const answers = await Promise.all(clients.map(({ client }) => client.tryLock('race', 'the one', 60_000)));
    const winners = answers.flatMap((answer, i) => (answer.status === 200 ? [i] : []));
    assert.equal(winners.length, 1, `round ${round}: ${winners.length} winners`);
    const [winner] = winners;
    const { lockId, fence } = answers[winner].body;
    for (const [i, answer] of answers.entries()) {
      if (i === winner) continue;
      assert.equal(answer.status, 409, `round ${round}, client ${i}: ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.error.code, 'AlreadyLocked');
      assert.deepEqual([answer.body.error.holder.sub, answer.body.error.fence], [clients[winner].sub, fence], `round ${round}: a loser saw another holder`);
    }
    const check = await clients[winner].client.checkLock(lockId);
    assert.deepEqual([check.status, check.body.fence], [200, fence], `round ${round}: the winner lost its lease`);
    fences.push(fence);
    assert.equal((await clients[winner].client.releaseLock(lockId)).status, 200);
  }
  const seconds = (performance.now() - started) / 1000;
  for (let i = 1; i < fences.length; i++) assert.equal(fences[i], fences[i - 1] + 1, `fences ${fences[i - 1]} then ${fences[i]}`);
  return { seconds, first: fences[0], last: fences.at(-1) };
}

/**
 * Grants and releases on distinct keys from 16 workers until `kill()` (after ~1.5 s), then the instance is
 * started again by `restart()`, and every answered outcome is checked against what the database kept.
 */
async function crashAndRecover(url, kill, restart) {
  const token = mintToken(secret, { sub: 'worker', name: 'worker' });
  const client = leaseClient(url, token);
  const held = new Map(); // key -> fence of a grant answered and not released
  const released = new Map(); // key -> lockId of a release answered
  const inFlight = new Set(); // keys whose last request had no answer
  let running = true;
  const worker = async (w) => {
    for (let j = 0; running; j++) {
      const key = `${w}-${j}`;
      let granted;
      try {
        granted = await client.tryLock('durable', key, 600_000);
      } catch {
        inFlight.add(key);
        return;
      }
      assert.equal(granted.status, 200, JSON.stringify(granted.body));
      held.set(key, granted.body);
      if (j % 2 === 1) {
        try {
          const answer = await client.releaseLock(granted.body.lockId);
          assert.equal(answer.status, 200);
          held.delete(key);
          released.set(key, granted.body.lockId);
        } catch {
          inFlight.add(key);
          return;
        }
      }
    }
  };
  const workers = Array.from({ length: 16 }, (_, w) => worker(w));
  await new Promise((resolve) => setTimeout(resolve, 1500));
  await kill();
  running = false;
  await Promise.all(workers);
  const afterUrl = await restart();
  const again = leaseClient(afterUrl, token);
  for (const key of inFlight) held.delete(key);
  assert.ok(held.size > 20 && released.size > 20, `a real run: ${held.size} held, ${released.size} released`);
  // No lease lost: every answered grant still checks, with its number.
  for (const [key, lease] of held) {
    const check = await again.checkLock(lease.lockId);
    assert.deepEqual([check.status, check.body.fence], [200, lease.fence], `${key}: ${JSON.stringify(check.body)}`);
  }
  // No release undone.
  for (const [key, lockId] of released) {
    if (inFlight.has(key)) continue;
    assert.equal((await again.checkLock(lockId)).body.error?.code, 'NotFound', key);
  }
  // No lease duplicated or invented: the held keys are those answered, plus at most the in-flight ones.
  const listed = (await again.list('durable')).body.leases;
  const keys = listed.map((lease) => lease.id);
  assert.equal(new Set(keys).size, keys.length, 'one lease per key');
  for (const lease of listed) {
    assert.ok(held.has(lease.id) || inFlight.has(lease.id), `${lease.id} is held but was never granted`);
    if (held.has(lease.id)) assert.equal(lease.fence, held.get(lease.id).fence);
  }
  assert.ok(keys.length >= held.size);
  // Numbers keep growing across the crash.
  const [releasedKey] = released.keys();
  const regrant = await again.tryLock('durable', releasedKey, 1000);
  assert.equal(regrant.status, 200);
  assert.ok(regrant.body.fence > 1, `after a crash, ${releasedKey} was granted number ${regrant.body.fence}`);
  return { held: held.size, released: released.size, inFlight: inFlight.size };
}

describe('on two instances sharing one PostgreSQL', () => {
  let cluster;
  before(async () => {
    cluster = await startPostgres();
  });
  after(() => cluster?.stop());

  test(`${CLIENTS} clients × ${ROUNDS} rounds of tryLock on one key: exactly one winner per round`, { timeout: 180_000 }, async () => {
    const a = await startLeaseService({ database: cluster.url, secret });
    const b = await startLeaseService({ database: cluster.url, secret });
    try {
      const { seconds, first, last } = await race([a.url, b.url]);
      console.log(`# race, PostgreSQL, 2 instances: ${ROUNDS} rounds in ${seconds.toFixed(1)} s, fences ${first}..${last}`);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  test('kill -9 in the middle of a run: no lease lost or duplicated', { timeout: 120_000 }, async () => {
    let service = await startLeaseService({ database: cluster.url, secret });
    const figures = await crashAndRecover(
      service.url,
      () => service.kill(),
      async () => (service = await startLeaseService({ database: cluster.url, secret })).url,
    );
    await service.stop();
    console.log(`# durability, PostgreSQL: ${figures.held} held and ${figures.released} released across kill -9; ${figures.inFlight} in flight`);
  });
});

describe('on one SQLite instance', () => {
  test(`${CLIENTS} clients × ${ROUNDS} rounds of tryLock on one key: exactly one winner per round`, { timeout: 180_000 }, async () => {
    const db = temporarySqlite();
    const service = await startLeaseService({ database: db.url, secret });
    try {
      const { seconds, first, last } = await race([service.url]);
      console.log(`# race, SQLite: ${ROUNDS} rounds in ${seconds.toFixed(1)} s, fences ${first}..${last}`);
    } finally {
      await service.stop();
      db.remove();
    }
  });

  test('kill -9 in the middle of a run: no lease lost or duplicated', { timeout: 120_000 }, async () => {
    const db = temporarySqlite();
    let service = await startLeaseService({ database: db.url, secret });
    try {
      const figures = await crashAndRecover(
        service.url,
        () => service.kill(),
        async () => (service = await startLeaseService({ database: db.url, secret })).url,
      );
      console.log(`# durability, SQLite: ${figures.held} held and ${figures.released} released across kill -9; ${figures.inFlight} in flight`);
    } finally {
      await service.stop();
      db.remove();
    }
  });
});
