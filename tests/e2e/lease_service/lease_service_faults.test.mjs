// The lease service under faults and abuse: clients that go away mid-operation, a database that stops
// answering, connections that send their head slowly or nothing at all, more connections or streams
// than the service may hold. Each time, what others see: the key stays usable on every instance, no
// transaction stays open in PostgreSQL, /health answers, the service keeps serving.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { repoRoot } from '../server.mjs';
import {
  buildLeaseService,
  serviceBinary,
  startLeaseService,
  mintToken,
  newSecret,
  leaseClient,
  watchChanges,
  temporarySqlite,
  rawConnection,
  rawPost,
  silenceableProxy,
} from '../lease_service.mjs';
import { startPostgres, postgresBin } from '../postgres_cluster.mjs';

const secret = newSecret();
const alice = mintToken(secret, { sub: 'u-alice', name: 'alice' });
const bob = mintToken(secret, { sub: 'u-bob', name: 'bob', perms: ['takeover'] });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** `promise`, or a rejection naming `what` if it takes longer than `ms` (a hang must fail the test). */
function within(ms, what, promise) {
  let timer;
  const timeout = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Poll `probe` until it returns a truthy value or `ms` pass; the last value. */
async function eventually(ms, probe) {
  const end = Date.now() + ms;
  let value = await probe();
  while (!value && Date.now() < end) {
    await sleep(100);
    value = await probe();
  }
  return value;
}

/** tryLock (type, id) through `client` until granted: the key is usable (its previous leases are short). */
async function grantedEventually(client, type, id) {
  return within(10_000, `tryLock ${type}/${id}`, (async () => {
    for (;;) {
      const answer = await client.tryLock(type, id, 1000);
      if (answer.status === 200) return answer;
      assert.equal(answer.status, 409, JSON.stringify(answer.body));
      await sleep(100);
    }
  })());
}

describe('a client that goes away mid-operation changes nothing for others', () => {
  describe('on two instances sharing one PostgreSQL', () => {
    let cluster;
    let a;
    let b;
    before(async () => {
      cluster = await startPostgres();
      a = await startLeaseService({ database: cluster.url, secret });
      b = await startLeaseService({ database: cluster.url, secret });
    });
    after(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      cluster?.stop();
    });

    const inTransaction = () =>
      Number(cluster.psql("SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()"));

    /** Sessions other than the service's (psql) that hold the fencing row, still running. */
    const holders = () => Number(cluster.psql("SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%FOR UPDATE; SELECT pg_sleep%' AND state = 'active' AND pid <> pg_backend_pid()"));

    test('requests abandoned while another session holds the key\'s row lock: no transaction left open, the key usable on the other instance', { timeout: 60_000 }, async () => {
      const setup = leaseClient(a.url, alice);
      const first = await setup.tryLock('cancel', 'k', 1000);
      assert.equal(first.status, 200);
      assert.equal((await setup.releaseLock(first.body.lockId)).status, 200);
      // Another session holds the key's fencing row for 2 s, as any concurrent operation on it may.
      const sql = "BEGIN; SELECT fence FROM lock_fences WHERE type = 'cancel' AND id = 'k' FOR UPDATE; SELECT pg_sleep(2); COMMIT;";
      const psql = spawn(path.join(postgresBin(), 'psql'), [cluster.url, '-q', '-c', sql], { stdio: 'ignore' });
      const psqlDone = new Promise((resolve) => psql.once('exit', resolve));
      assert.ok(await eventually(5000, holders), 'the competing lock is held');
      // Eight clients ask A for the key and go away 300 ms later, their requests queued behind the lock.
      const abandoned = Array.from({ length: 8 }, () => rawConnection(a.url, rawPost('/v1/tryLock', alice, { type: 'cancel', id: 'k', ttlMs: 200 })));
      await sleep(300);
      for (const connection of abandoned) connection.abandon();
      await psqlDone;
      const granted = await grantedEventually(leaseClient(b.url, bob), 'cancel', 'k');
      assert.equal(granted.body.holder.sub, 'u-bob');
      assert.equal(await eventually(3000, () => inTransaction() === 0), true, 'no session left idle in transaction');
      // And A still serves the key: no connection of its pool is stuck.
      assert.equal((await leaseClient(b.url, bob).releaseLock(granted.body.lockId)).status, 200);
      await grantedEventually(leaseClient(a.url, alice), 'cancel', 'k');
    });

    test('20 clients racing one key through both instances, each giving up after 15 ms, 10 times: never wedged', { timeout: 120_000 }, async () => {
      for (let run = 0; run < 10; run++) {
        const id = `race-${run}`;
        const racers = Array.from({ length: 20 }, (_, i) => {
          const url = i % 2 ? b.url : a.url;
          const controller = new AbortController();
          setTimeout(() => controller.abort(), 15);
          return fetch(`${url}/v1/tryLock`, {
            method: 'POST',
            headers: { authorization: `Bearer ${alice}`, 'content-type': 'application/json' },
            body: JSON.stringify({ type: 'cancel-race', id, ttlMs: 200 }),
            signal: controller.signal,
          }).then((r) => r.text(), () => null);
        });
        await Promise.all(racers);
        await grantedEventually(leaseClient(run % 2 ? a.url : b.url, bob), 'cancel-race', id);
      }
      assert.equal(await eventually(3000, () => inTransaction() === 0), true, 'no session left idle in transaction');
    });
  });

  test('on SQLite: requests abandoned mid-operation leave the key usable', { timeout: 60_000 }, async () => {
    const db = temporarySqlite();
    const service = await startLeaseService({ database: db.url, secret });
    try {
      for (let run = 0; run < 5; run++) {
        const abandoned = Array.from({ length: 20 }, () => rawConnection(service.url, rawPost('/v1/tryLock', alice, { type: 'cancel', id: 'k', ttlMs: 200 })));
        await sleep(2);
        for (const connection of abandoned) connection.abandon();
        const granted = await grantedEventually(leaseClient(service.url, bob), 'cancel', 'k');
        assert.equal((await leaseClient(service.url, bob).releaseLock(granted.body.lockId)).status, 200);
      }
    } finally {
      await service.stop();
      db.remove();
    }
  });
});

describe('PostgreSQL that stops answering', () => {
  let cluster;
  before(async () => {
    cluster = await startPostgres();
  });
  after(() => cluster?.stop());

  // Set through the environment (the flags' other source), so that a build without them runs and shows
  // what it does without them.
  const fast = {
    WEBLOCKS_LEASE_HEALTH_TIMEOUT_MS: '1000',
    WEBLOCKS_LEASE_PG_CONNECT_TIMEOUT_MS: '1000',
    WEBLOCKS_LEASE_PG_POOL_WAIT_MS: '1000',
    WEBLOCKS_LEASE_PG_STATEMENT_TIMEOUT_MS: '1000',
  };

  test('/health and operations answer 503 within their bound while it is silent, and the service recovers', { timeout: 60_000 }, async () => {
    const proxy = await silenceableProxy(Number(new URL(cluster.url).port));
    const service = await startLeaseService({ database: cluster.url.replace(/:\d+\//, `:${proxy.port}/`), secret, env: fast });
    try {
      const client = leaseClient(service.url, alice);
      assert.equal((await client.call('GET', '/health')).status, 200);
      proxy.freeze();
      const health = await within(5000, '/health with a silent database', client.call('GET', '/health'));
      assert.deepEqual([health.status, health.body.error.code], [503, 'StorageError']);
      const taken = await within(5000, 'tryLock with a silent database', client.tryLock('silent', 'k'));
      assert.deepEqual([taken.status, taken.body.error.code], [503, 'StorageError']);
      proxy.thaw();
      const recovered = await eventually(15_000, async () => (await client.call('GET', '/health')).status === 200);
      assert.equal(recovered, true, `healthy again:\n${service.logs().slice(-2000)}`);
      assert.equal((await client.tryLock('silent', 'k')).status, 200);
    } finally {
      await service.stop();
      await proxy.close();
    }
  });

  test('started against a server that accepts and never answers: exits with an error naming it', { timeout: 30_000 }, async () => {
    const proxy = await silenceableProxy(Number(new URL(cluster.url).port));
    proxy.freeze();
    try {
      const start = startLeaseService({ database: `postgres://leases:pa55word@127.0.0.1:${proxy.port}/leases`, secret, env: fast });
      const error = await within(15_000, 'start against a silent server', start.then(() => assert.fail('it started'), (e) => e));
      assert.match(error.message, /exited \(1\)/);
      assert.match(error.message, new RegExp(`cannot connect to PostgreSQL at 127\\.0\\.0\\.1:${proxy.port} \\(user leases, database leases\\): no answer within 1000 ms`));
      assert.doesNotMatch(error.message, /pa55word/);
    } finally {
      await proxy.close();
    }
  });

  test('a refused connection says why and to which host, without the password', { timeout: 30_000 }, async () => {
    const proxy = await silenceableProxy(1);
    const port = proxy.port;
    await proxy.close(); // nothing listens there any more
    const error = await startLeaseService({ database: `postgres://leases:pa55word@127.0.0.1:${port}/leases`, secret, env: fast }).then(
      () => assert.fail('it started'),
      (e) => e,
    );
    assert.match(error.message, new RegExp(`cannot connect to PostgreSQL at 127\\.0\\.0\\.1:${port} \\(user leases, database leases\\): .*[Cc]onnection refused`));
    assert.doesNotMatch(error.message, /pa55word/);
  });

  test('list and a purge read through an index (EXPLAIN of the service\'s own statements)', { timeout: 240_000 }, () => {
    const run = spawnSync('cargo', ['test', '-p', 'weblocks-lease-server', '--lib', '--', '--ignored', '--test-threads=1', 'store::postgres::tests::'], {
      cwd: repoRoot,
      env: { ...process.env, WEBLOCKS_TEST_POSTGRES: cluster.url },
      encoding: 'utf8',
    });
    assert.equal(run.status, 0, run.stdout + run.stderr);
    assert.match(run.stdout, /test result: ok\. [1-9]\d* passed/);
  });
});

describe('connections that hold the service without a request', () => {
  let db;
  before(() => {
    db = temporarySqlite();
  });
  after(() => db?.remove());

  test('slow-header and silent connections are closed after the header timeout; others are served meanwhile', { timeout: 30_000 }, async () => {
    const service = await startLeaseService({ database: db.url, secret, env: { WEBLOCKS_LEASE_HEADER_TIMEOUT_MS: '1500', WEBLOCKS_LEASE_IDLE_TIMEOUT_MS: '60000' } });
    try {
      const slow = Array.from({ length: 30 }, () => rawConnection(service.url, 'GET /health HTTP/1.1\r\n'));
      const silent = Array.from({ length: 20 }, () => rawConnection(service.url));
      const trickle = setInterval(() => {
        for (const connection of slow) if (!connection.isClosed) connection.send('x-slow: 1\r\n');
      }, 300);
      try {
        assert.equal((await leaseClient(service.url).call('GET', '/health')).status, 200);
        const closedAfter = await within(10_000, 'closing slow connections', Promise.all([...slow, ...silent].map((c) => c.closed)));
        assert.ok(Math.min(...closedAfter) >= 1000, `closed early: ${Math.min(...closedAfter)} ms`);
      } finally {
        clearInterval(trickle);
      }
      // A kept-alive connection that sent its request and stays unused is closed too.
      const kept = rawConnection(service.url, 'GET /health HTTP/1.1\r\nhost: x\r\n\r\n');
      await within(10_000, 'closing an unused kept-alive connection', kept.closed);
      assert.match(kept.answer(), /^HTTP\/1\.1 200/);
    } finally {
      await service.stop();
    }
  });

  test('a connection that stops sending mid-body is closed after the idle timeout', { timeout: 30_000 }, async () => {
    const service = await startLeaseService({ database: db.url, secret, env: { WEBLOCKS_LEASE_HEADER_TIMEOUT_MS: '60000', WEBLOCKS_LEASE_IDLE_TIMEOUT_MS: '1500' } });
    try {
      const head = `POST /v1/tryLock HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${alice}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"type"`;
      const stalled = rawConnection(service.url, head);
      const closedAfter = await within(10_000, 'closing a stalled body', stalled.closed);
      assert.ok(closedAfter >= 1000, `closed early: ${closedAfter} ms`);
      // A change stream is not idle: its keep-alives (a third of the idle timeout) keep it open.
      const stream = await watchChanges(service.url, alice, { type: 'idle', id: 'k' });
      await sleep(3000);
      assert.equal(stream.ended, false, 'the stream stays open');
      stream.close();
    } finally {
      await service.stop();
    }
  });

  test('connections beyond --max-connections are closed at once; the service serves again when they go', { timeout: 30_000 }, async () => {
    const service = await startLeaseService({ database: db.url, secret, env: { WEBLOCKS_LEASE_MAX_CONNECTIONS: '20', WEBLOCKS_LEASE_HEADER_TIMEOUT_MS: '30000' } });
    try {
      const held = Array.from({ length: 20 }, () => rawConnection(service.url));
      await sleep(300);
      const extra = Array.from({ length: 5 }, () => rawConnection(service.url));
      const closedAfter = await within(5000, 'closing connections beyond the cap', Promise.all(extra.map((c) => c.closed)));
      assert.ok(held.every((c) => !c.isClosed), 'those within the cap stay open');
      assert.ok(closedAfter.every((ms) => ms < 5000), closedAfter.join());
      for (const connection of held) connection.abandon();
      const served = await eventually(5000, async () => {
        try {
          return (await leaseClient(service.url).call('GET', '/health')).status === 200;
        } catch {
          return false;
        }
      });
      assert.equal(served, true);
      assert.match(service.logs(), /connections refused: at the connection limit/);
    } finally {
      await service.stop();
    }
  });

  test('change streams beyond --max-streams are answered 503 ServiceBusy; a closed one frees its place', { timeout: 30_000 }, async () => {
    const service = await startLeaseService({ database: db.url, secret, env: { WEBLOCKS_LEASE_MAX_STREAMS: '2' } });
    try {
      const first = await watchChanges(service.url, alice, { type: 'busy', id: '1' });
      const second = await watchChanges(service.url, alice, { type: 'busy' });
      const third = await leaseClient(service.url, alice).call('GET', '/v1/events?type=busy&id=3');
      assert.deepEqual([third.status, third.body.error.code], [503, 'ServiceBusy']);
      first.close();
      const again = await eventually(5000, async () => {
        try {
          return await watchChanges(service.url, alice, { type: 'busy', id: '3' });
        } catch {
          return null;
        }
      });
      assert.ok(again, 'a place was freed');
      again.close();
      second.close();
    } finally {
      await service.stop();
    }
  });

  test('a shutdown with slow connections open ends without waiting out the grace period', { timeout: 40_000 }, async () => {
    const service = await startLeaseService({ database: db.url, secret, env: { WEBLOCKS_LEASE_HEADER_TIMEOUT_MS: '2000', WEBLOCKS_LEASE_SHUTDOWN_GRACE_MS: '30000' } });
    const slow = Array.from({ length: 20 }, () => rawConnection(service.url, 'GET /health HTTP/1.1\r\n'));
    const trickle = setInterval(() => slow.forEach((c) => c.isClosed || c.send('x-slow: 1\r\n')), 300);
    try {
      await sleep(200);
      const stopped = await within(15_000, 'the shutdown', service.stop());
      assert.equal(stopped, 0);
    } finally {
      clearInterval(trickle);
      slow.forEach((c) => c.abandon());
    }
  });
});

test('take-overs and releases are logged with the acting user', { timeout: 30_000 }, async () => {
  const db = temporarySqlite();
  const service = await startLeaseService({ database: db.url, secret });
  try {
    const taken = await leaseClient(service.url, alice).tryLock('audit', 'k');
    const over = await leaseClient(service.url, bob).takeOver('audit', 'k');
    assert.equal(over.status, 200);
    assert.equal((await leaseClient(service.url, bob).releaseLock(over.body.lockId)).status, 200);
    const logs = service.logs().replace(/\x1b\[[0-9;]*m/g, '');
    assert.match(logs, /lease taken over sub="?u-bob"? lease_type="?audit"? id="?k"? fence=2/);
    assert.match(logs, /lease released sub="?u-bob"? lease_type="?audit"? id="?k"?/);
    assert.ok(!logs.includes(taken.body.lockId) && !logs.includes(over.body.lockId), 'no lockId in the log');
  } finally {
    await service.stop();
    db.remove();
  }
});

test('--help names the secret, and a weak secret is refused with the reason', { timeout: 30_000 }, async () => {
  buildLeaseService();
  const help = spawnSync(serviceBinary, ['--help'], { encoding: 'utf8' });
  assert.match(help.stdout, /WEBLOCKS_LEASE_SECRET/);
  const db = temporarySqlite();
  try {
    const error = await startLeaseService({ database: db.url, secret: 'a'.repeat(64) }).then(
      () => assert.fail('it started'),
      (e) => e,
    );
    assert.match(error.message, /WEBLOCKS_LEASE_SECRET: the secret uses only 1 distinct bytes/);
  } finally {
    db.remove();
  }
});
