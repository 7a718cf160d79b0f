// The lease service (weblocks-lease-server) for the tests: built once per test process (debug build, the
// one `cargo test --workspace` already made), started on a free port with a fresh secret, stopped by the
// test (SIGTERM, or SIGKILL to crash it). Also: HS256 tokens minted as an application's backend would,
// a small client that returns every answer's status and JSON, and dumps of the database's two tables.
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from './server.mjs';
import { mintToken as mintWith } from '../../scripts/dev_lease_backend.mjs';

/**
 * The service's debug build, or the binary named by WEBLOCKS_LEASE_SERVER_BINARY (to run the tests
 * against another build, e.g. an older commit's, which is then not built).
 */
export const serviceBinary = process.env.WEBLOCKS_LEASE_SERVER_BINARY ?? path.join(repoRoot, 'target', 'debug', 'weblocks-lease-server');

let built = process.env.WEBLOCKS_LEASE_SERVER_BINARY !== undefined;
/** `cargo build` the service (a no-op when `cargo test --workspace` already built it). */
export function buildLeaseService() {
  if (built) return;
  const cargo = spawnSync('cargo', ['build', '-p', 'weblocks-lease-server', '--bin', 'weblocks-lease-server'], {
    cwd: repoRoot,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (cargo.status !== 0) throw new Error('cargo build -p weblocks-lease-server failed');
  built = true;
}

// Instances still running when this process exits (a test that failed or timed out) go with it.
const running = new Set();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** A random secret of 64 hex digits. */
export const newSecret = () => crypto.randomBytes(32).toString('hex');

/**
 * An HS256 JWT for `sub`, valid for `expiresIn` seconds (negative: already expired); `header` may be
 * forged. The demo's dev backend mints the same way (scripts/dev_lease_backend.mjs).
 */
export function mintToken(secret, { sub, name = sub, perms = [], expiresIn = 600, header }) {
  return mintWith(secret, { sub, name, perms }, { expiresIn, header });
}

/**
 * Start an instance on `database` (`sqlite:PATH` or a postgres URL), of the debug build unless `binary`
 * names another; resolves once it listens, with
 * `{ url, pid, logs(), stop(), kill(), exited }`. `stop` sends SIGTERM and resolves with the exit code;
 * `kill` sends SIGKILL.
 */
export async function startLeaseService({ database, secret, origins = [], minTtlMs = 100, maxTtlMs, args = [], env = {}, binary }) {
  if (binary === undefined) buildLeaseService();
  const flags = ['--listen', '127.0.0.1:0', '--database', database, '--min-ttl-ms', String(minTtlMs), ...args];
  if (maxTtlMs !== undefined) flags.push('--max-ttl-ms', String(maxTtlMs));
  if (origins.length > 0) flags.push('--origins', origins.join(','));
  const child = spawn(binary ?? serviceBinary, flags, {
    env: { PATH: process.env.PATH, RUST_LOG: 'info', WEBLOCKS_LEASE_SECRET: secret, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  running.add(child);
  let output = '';
  const exited = new Promise((resolve) =>
    child.once('exit', (code, signal) => {
      running.delete(child);
      resolve(code ?? signal);
    }),
  );
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL'); // never leave a process behind
      reject(new Error(`the lease service did not start in 30 s:\n${output}`));
    }, 30_000);
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (text) => {
      output += text;
      const listening = /listening address=(\S+)/.exec(output.replace(/\x1b\[[0-9;]*m/g, ''));
      if (listening) {
        clearTimeout(timer);
        resolve(`http://${listening[1]}`);
      }
    });
    exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the lease service exited (${code}) before listening:\n${output}`));
    });
  });
  const signalled = (signal) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    return exited;
  };
  return { url, pid: child.pid, logs: () => output, stop: () => signalled('SIGTERM'), kill: () => signalled('SIGKILL'), exited };
}

/** A client of the service at `url` acting with `token`: each call resolves with `{ status, body }`. */
export function leaseClient(url, token) {
  const call = async (method, pathname, body, headers = {}) => {
    const response = await fetch(url + pathname, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await response.text();
    let json;
    try {
      json = JSON.parse(text);
    } catch {
      json = { notJson: text };
    }
    return { status: response.status, body: json, headers: response.headers };
  };
  return {
    call,
    tryLock: (type, id, ttlMs = 60_000) => call('POST', '/v1/tryLock', { type, id, ttlMs }),
    takeOver: (type, id, ttlMs = 60_000) => call('POST', '/v1/takeOver', { type, id, ttlMs }),
    checkLock: (lockId) => call('POST', '/v1/checkLock', { lockId }),
    releaseLock: (lockId) => call('POST', '/v1/releaseLock', { lockId }),
    extend: (lockId, incMs) => call('POST', '/v1/extendLockExpiration', { lockId, incMs }),
    list: (type) => call('GET', `/v1/list${type === undefined ? '' : `?type=${encodeURIComponent(type)}`}`),
  };
}

/**
 * Read a change stream (`/v1/events?…`) with `token`: `{ changes, next(predicate, timeoutMs), close() }`,
 * where `changes` is every change received so far and `next` resolves with the first one (received or
 * to come) matching `predicate` after those already consumed by earlier `next` calls.
 */
export async function watchChanges(url, token, query) {
  const controller = new AbortController();
  const response = await fetch(`${url}/v1/events?${new URLSearchParams(query)}`, {
    headers: { authorization: `Bearer ${token}` },
    signal: controller.signal,
  });
  if (!response.ok) throw new Error(`events: ${response.status} ${await response.text()}`);
  const changes = [];
  const waiters = new Set();
  let consumed = 0;
  let ended = false;
  const settle = () => {
    for (const waiter of waiters) {
      const at = changes.findIndex((change, i) => i >= waiter.from && waiter.predicate(change));
      if (at >= 0) {
        waiters.delete(waiter);
        consumed = Math.max(consumed, at + 1);
        waiter.resolve(changes[at]);
      } else if (ended) {
        waiters.delete(waiter);
        waiter.reject(new Error(`the stream ended; received: ${JSON.stringify(changes)}`));
      }
    }
  };
  (async () => {
    const decoder = new TextDecoder();
    let buffered = '';
    try {
      for await (const chunk of response.body) {
        buffered += decoder.decode(chunk, { stream: true });
        let end;
        while ((end = buffered.indexOf('\n\n')) >= 0) {
          const data = buffered.slice(0, end).split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
          buffered = buffered.slice(end + 2);
          if (data) changes.push({ ...JSON.parse(data), receivedAt: Date.now() });
        }
        settle();
      }
    } catch {
      // aborted by close()
    }
    ended = true;
    settle();
  })();
  return {
    changes,
    get ended() {
      return ended;
    },
    next(predicate = () => true, timeoutMs = 5000) {
      return new Promise((resolve, reject) => {
        const waiter = { from: consumed, predicate, resolve, reject };
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`no matching change in ${timeoutMs} ms; received: ${JSON.stringify(changes)}`));
        }, timeoutMs);
        waiter.resolve = (value) => (clearTimeout(timer), resolve(value));
        waiter.reject = (error) => (clearTimeout(timer), reject(error));
        waiters.add(waiter);
        settle();
      });
    },
    close: () => controller.abort(),
  };
}

/** A fresh SQLite database URL in a temporary directory, and a function that removes the directory. */
export function temporarySqlite() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'weblocks-leases-'));
  const file = path.join(dir, 'leases.sqlite3');
  return { url: `sqlite:${file}`, file, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/** Both tables of a SQLite database as JSON text, read by the `sqlite3` command (the service keeps running). */
export function dumpSqlite(file) {
  const query = (sql) => execFileSync('sqlite3', ['-json', file, sql], { encoding: 'utf8' }).trim() || '[]';
  return {
    locks: JSON.parse(query('SELECT * FROM locks ORDER BY type, id')),
    fences: JSON.parse(query('SELECT * FROM lock_fences ORDER BY type, id')),
  };
}

/**
 * A raw TCP connection to the service at `url`, for what `fetch` cannot do: send `text` (a request, or
 * part of one), more later with `send`, give up with `abandon`. `closed` resolves with the ms from
 * opening to the service closing it; `answer()` is what the service sent so far.
 */
export function rawConnection(url, text = '') {
  const { hostname, port } = new URL(url);
  const socket = net.connect({ host: hostname, port: Number(port) });
  const opened = performance.now();
  let received = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk) => (received += chunk));
  socket.on('error', () => {});
  const closed = new Promise((resolve) => socket.once('close', () => resolve(performance.now() - opened)));
  if (text) socket.write(text);
  return {
    send: (more) => socket.write(more),
    abandon: () => socket.destroy(),
    answer: () => received,
    closed,
    get isClosed() {
      return socket.destroyed;
    },
  };
}

/** A POST's text with its head and JSON body, as `rawConnection` sends it. */
export function rawPost(pathname, token, body) {
  const json = JSON.stringify(body);
  return (
    `POST ${pathname} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${token}\r\n` +
    `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(json)}\r\n\r\n${json}`
  );
}

/**
 * A TCP proxy on 127.0.0.1 in front of `targetPort`, which can fall silent: `freeze()` stops passing
 * bytes either way on every connection, open or new (they stay open: a server that accepted and never
 * answers), `thaw()` lets the connections opened since through again. `{ port, freeze, thaw, close }`.
 */
export async function silenceableProxy(targetPort) {
  let frozen = false;
  const pairs = new Set();
  const server = net.createServer((client) => {
    client.on('error', () => {});
    if (frozen) {
      pairs.add({ client, upstream: null });
      return;
    }
    const upstream = net.connect({ host: '127.0.0.1', port: targetPort });
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    const pair = { client, upstream };
    pairs.add(pair);
    client.on('data', (chunk) => frozen || upstream.write(chunk));
    upstream.on('data', (chunk) => frozen || client.write(chunk));
    client.on('close', () => (upstream.destroy(), pairs.delete(pair)));
    upstream.on('close', () => (client.destroy(), pairs.delete(pair)));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    freeze: () => (frozen = true),
    thaw: () => {
      frozen = false;
      // What froze mid-conversation cannot resume: those connections are closed (their bytes were lost).
      for (const pair of pairs) {
        pair.client.destroy();
        pair.upstream?.destroy();
      }
      pairs.clear();
    },
    close: () => {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream?.destroy();
      }
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * A TCP proxy on 127.0.0.1 in front of `targetPort` that misbehaves the way phones and laptops' networks
 * do, per request (each request's head starts a chunk from the client, as browsers send them):
 * - `fail(match, fate, count = 1)`: the next `count` requests whose request line starts with `match`
 *   (e.g. 'POST /v1/tryLock') meet `fate`:
 *   - 'drop': never reach the service; the client gets the head of an answer without CORS headers and
 *     the connection is cut (a browser cannot send it again by itself: it already had an answer);
 *   - 'cut': reach the service, which answers; the client gets that answer's head and one byte of its
 *     body, then the connection is cut: a lost answer;
 *   - 'stall': reach nobody; the connection stays open and silent.
 * - `offline()`: every connection, open or new, falls silent (bytes dropped both ways: a captive
 *   portal, a sleeping laptop's stale socket); `online()` closes those and lets new ones through.
 * - `log`: `{ at, line, fate }` per request seen (`at`: Date.now()), fate 'pass' when it passed.
 */
export async function faultyProxy(targetPort) {
  let silent = false;
  const rules = [];
  const log = [];
  const pairs = new Set();
  const server = net.createServer((client) => {
    const pair = { client, upstream: null, silent };
    pairs.add(pair);
    client.on('error', () => {});
    client.on('close', () => (pair.upstream?.destroy(), pairs.delete(pair)));
    if (silent) return;
    const upstream = (pair.upstream = net.connect({ host: '127.0.0.1', port: targetPort }));
    // A cut answer's bytes must reach the client before its connection closes (else a browser would send
    // the request again by itself, as it may on a kept-alive connection that closed without an answer).
    let ending = false;
    const endClient = (bytes) => {
      ending = true;
      client.end(bytes);
      setTimeout(() => client.destroy(), 50);
    };
    upstream.on('error', () => ending || client.destroy());
    upstream.on('close', () => ending || client.destroy());
    let cutting = false;
    let stalled = false;
    client.on('data', (chunk) => {
      if (silent || pair.silent || stalled) return;
      const line = /^[A-Z]+ \S+/.exec(chunk.toString('latin1', 0, 300))?.[0];
      if (line !== undefined) {
        const rule = rules.find((r) => r.count > 0 && line.startsWith(r.match));
        const fate = rule ? rule.fate : 'pass';
        if (rule) rule.count -= 1;
        log.push({ at: Date.now(), line, fate });
        if (fate === 'drop') {
          endClient('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{');
          upstream.destroy();
          return;
        }
        if (fate === 'stall') {
          stalled = true;
          return;
        }
        if (fate === 'cut') cutting = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (silent || pair.silent) return;
      if (!cutting) return client.write(chunk);
      const headEnd = chunk.indexOf('\r\n\r\n');
      if (headEnd < 0) return client.write(chunk);
      endClient(chunk.subarray(0, headEnd + 5));
      upstream.destroy();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    log,
    fail: (match, fate, count = 1) => rules.push({ match, fate, count }),
    /** Forget the rules not yet used up. */
    heal: () => rules.splice(0),
    offline() {
      silent = true;
      for (const pair of pairs) pair.silent = true;
    },
    online() {
      silent = false;
      for (const pair of pairs) {
        if (!pair.silent) continue;
        pair.client.destroy();
        pair.upstream?.destroy();
      }
    },
    close: () => {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream?.destroy();
      }
      return new Promise((resolve) => server.close(resolve));
    },
  };
}
