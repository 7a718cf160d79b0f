// The lease service's soak (part of `npm run bench:leases`): one SQLite instance holding 100,000 live
// leases, 64 users working for a while as an application's pages do (tryLock, extend, release, each on
// its own key, 8 of them watched by a change stream; 4 more users calling `list` in a loop), first alone,
// then with abuse mixed in: 200 connections sending their request head one line every 5 s (reopened when
// the service closes them), and requests abandoned a few ms after they were sent. It reports the users'
// latencies in both phases, the service's resident memory and open descriptors before, during and after the
// abuse, and `list`'s latency at 100,000 leases. Traffic goes to 127.0.0.1 only; it stops by itself.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { startLeaseService, mintToken, temporarySqlite, rawConnection, rawPost, watchChanges } from '../tests/e2e/lease_service.mjs';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] : NaN;
};

/** Resident memory (bytes) and open descriptors of process `pid`, from /proc. */
function footprint(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const rss = Number(/VmRSS:\s+(\d+) kB/.exec(status)[1]) * 1024;
  return { rssBytes: rss, descriptors: fs.readdirSync(`/proc/${pid}/fd`).length };
}

/** `count` live leases of type `bulk`, written straight into the file before the service starts. */
function preload(file, count) {
  const now = Date.now(); // the service's clock is this machine's
  const sql = `
CREATE TABLE IF NOT EXISTS locks (type TEXT NOT NULL, id TEXT NOT NULL, lockid TEXT NOT NULL UNIQUE,
  expiration_time REAL NOT NULL, holder_sub TEXT NOT NULL, holder_name TEXT NOT NULL, acquired_time REAL NOT NULL,
  fence INTEGER NOT NULL, revoked_lockid TEXT, PRIMARY KEY (type, id)) WITHOUT ROWID;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count})
INSERT INTO locks SELECT 'bulk', printf('%06d', i), printf('%032x', i), ${now} + 86400000,
  'preloaded', 'preloaded', ${now}, 1, NULL FROM n;`;
  execFileSync('sqlite3', [file, sql]);
}

/** Milliseconds `call` takes, `times` times in a row: the median and the largest. */
async function timed(times, call) {
  const took = [];
  for (let i = 0; i < times; i++) {
    const start = performance.now();
    const answer = await call();
    took.push(performance.now() - start);
    if (answer.status !== 200) throw new Error(`answered ${answer.status}`);
  }
  return { p50Ms: percentile(took, 50), maxMs: Math.max(...took) };
}

/**
 * The soak on the service binary `binary` with `secret`: `{ list, phases: [{ name, p50Ms, p99Ms, ops,
 * errors }], footprint: { before, during, after } }`.
 */
export async function soak({ binary, secret, env, seconds = 60, users = 64, log = console.error }) {
  const db = temporarySqlite();
  log(`soak: preloading 100,000 leases`);
  preload(db.file, 100_000);
  const service = await startLeaseService({ database: db.url, secret, binary, env, minTtlMs: 1000 });
  const base = service.url;
  const token = (i) => mintToken(secret, { sub: `user-${i}`, name: `user ${i}` });
  const get = async (pathname, t) => {
    const response = await fetch(base + pathname, { headers: { authorization: `Bearer ${t}` } });
    return { status: response.status, body: await response.json() };
  };
  const post = async (pathname, t, body) => {
    const response = await fetch(base + pathname, {
      method: 'POST',
      headers: { authorization: `Bearer ${t}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: await response.json() };
  };
  const result = { users, seconds, phases: [], footprint: {} };
  try {
    const reader = token('reader');
    result.list = {
      all1000: await timed(20, () => get('/v1/list?limit=1000', reader)),
      ofType10: await timed(20, () => get('/v1/list?type=bulk&limit=10', reader)),
      emptyType: await timed(20, () => get('/v1/list?type=nothing', reader)),
      streamFirstState: await timed(5, async () => {
        const stream = await watchChanges(base, reader, { type: 'bulk' });
        await stream.next();
        stream.close();
        return { status: 200 };
      }),
    };
    log(`soak: list at 100,000 leases ${JSON.stringify(result.list)}`);

    // The users: each cycles tryLock, extend, release on its own key, 20 ms apart; 8 keys are watched.
    const watchers = [];
    for (let i = 0; i < 8; i++) watchers.push(await watchChanges(base, reader, { type: 'soak', id: `k${i}` }));
    const run = async (name, abuse) => {
      const latencies = [];
      let errors = 0;
      let running = true;
      const user = async (i) => {
        const t = token(i);
        while (running) {
          const start = performance.now();
          try {
            if (i >= users - 4) {
              const listed = await get('/v1/list?type=soak&limit=100', t);
              if (listed.status !== 200) errors++;
            } else {
              const taken = await post('/v1/tryLock', t, { type: 'soak', id: `k${i}`, ttlMs: 30_000 });
              if (taken.status !== 200) errors++;
              else {
                const extended = await post('/v1/extendLockExpiration', t, { lockId: taken.body.lockId, incMs: 1000 });
                const released = await post('/v1/releaseLock', t, { lockId: taken.body.lockId });
                if (extended.status !== 200 || released.status !== 200) errors++;
              }
            }
            latencies.push(performance.now() - start);
          } catch {
            errors++;
          }
          await sleep(20);
        }
      };
      const stopAbuse = abuse ? startAbuse(base, token('abuser')) : () => {};
      const workers = Array.from({ length: users }, (_, i) => user(i));
      await sleep((seconds * 1000) / 2);
      const during = footprint(service.pid);
      await sleep((seconds * 1000) / 2);
      running = false;
      await Promise.all(workers);
      const abused = stopAbuse();
      const phase = { name, cycles: latencies.length, errors, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99), ...abused };
      result.phases.push(phase);
      log(`soak: ${name}: ${JSON.stringify(phase)}`);
      return during;
    };
    await sleep(1000);
    result.footprint.before = footprint(service.pid);
    await run('without abuse', false);
    result.footprint.beforeAbuse = footprint(service.pid);
    result.footprint.during = await run('with abuse', true);
    // The slow connections the abuser left go within the header timeout (10 s by default).
    await sleep(15_000);
    result.footprint.after = footprint(service.pid);
    for (const watcher of watchers) watcher.close();
    log(`soak: footprint ${JSON.stringify(result.footprint)}`);
  } finally {
    await service.stop();
    db.remove();
  }
  return result;
}

/**
 * 200 connections sending one header line every 5 s (each reopened when the service closes it), and a
 * tryLock abandoned 5 ms after it is sent, every 20 ms. Returns a function that stops it all and reports
 * how many of each there were.
 */
function startAbuse(base, token) {
  let running = true;
  let slowOpened = 0;
  let abandoned = 0;
  const slow = new Set();
  const openSlow = () => {
    if (!running) return;
    const connection = rawConnection(base, 'GET /health HTTP/1.1\r\n');
    slowOpened++;
    slow.add(connection);
    connection.closed.then(() => {
      slow.delete(connection);
      openSlow();
    });
  };
  for (let i = 0; i < 200; i++) openSlow();
  const trickle = setInterval(() => {
    for (const connection of slow) connection.send('x-slow: 1\r\n');
  }, 5000);
  const abandon = setInterval(() => {
    const connection = rawConnection(base, rawPost('/v1/tryLock', token, { type: 'soak-abandoned', id: String(abandoned % 50), ttlMs: 1000 }));
    abandoned++;
    setTimeout(() => connection.abandon(), 5);
  }, 20);
  return () => {
    running = false;
    clearInterval(trickle);
    clearInterval(abandon);
    for (const connection of slow) connection.abandon();
    return { slowConnectionsOpened: slowOpened, requestsAbandoned: abandoned };
  };
}
