// A LeaseStore over the lease service (weblocks-lease-server, docs/LEASES.md): leases shared between the
// users of an application, kept in the service's database, instead of one browser's IndexedDB.
//
//   import { createLeases, serverLeaseStore } from 'weblocks';
//   const leases = createLeases(serverLeaseStore({ url: 'https://leases.example.com', token }));
//
// `token` is the user's HS256 JWT, minted by the application's backend (or a function returning it, or a
// promise of it, called for every request: a token about to expire can be replaced). Every request
// carries it as `Authorization: Bearer …`; the service decides and answers typed errors, which become
// `LockError`s with the service's code (plus the holder and since when, on a conflict).
//
// Besides the four operations and `list`, the service's store offers `takeOver` and `watch`, a change
// stream read with `fetch` (an EventSource cannot send the token).
//
// On a real network a request can fail, hang or lose its answer. Every request times out (`timeoutMs`,
// and never later than its caller's `signal`). A grant (`tryLock`, `takeOver`) carries a request id of
// 128 random bits, and one that fails for want of an answer (unreachable, timed out, a 5xx) is sent
// again with the same id, with backoff, while its ttl lasts: if the service had granted it, the retry
// gets that lease and lockId back instead of `AlreadyLocked` (the decisions: js/lease_deadline.js).
import { REQUEST_TIMEOUT_MS, attemptTimeoutMs, elapsedMs, isTransient, marginFor, nextAttempt, readClocks } from './lease_deadline.js';

/** How long `watch` waits before reconnecting a stream that dropped. */
const RECONNECT_MS = 1000;

/** 32 hex digits from the platform's cryptographic generator: a grant's request id. */
function randomRequestId() {
  let hex = '';
  for (const byte of crypto.getRandomValues(new Uint8Array(16))) hex += (byte < 16 ? '0' : '') + byte.toString(16);
  return hex;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const lockError = (code, message, details) => Object.assign(new Error(message), details, { name: 'LockError', code });

/**
 * The LeaseStore of the lease service at `url`, acting as the user of `token`. `timeoutMs`: the longest
 * one request may take (then it is aborted and fails with `StorageError`); a change stream has none.
 */
export function serverLeaseStore({ url, token, fetch: fetchImpl = globalThis.fetch.bind(globalThis), timeoutMs = REQUEST_TIMEOUT_MS }) {
  const base = String(url).replace(/\/+$/, '');
  const headers = async (more) => Object.assign({ authorization: `Bearer ${await (typeof token === 'function' ? token() : token)}` }, more);

  /**
   * The service's answer to `path` (a POST when there is a body), or the LockError it stands for. A
   * stream (`signal` given, no timeout) is returned as the response; any other answer is read whole
   * within `timeout` ms (or until `signal` aborts it), else it fails with a StorageError.
   */
  const request = async (path, body, { signal, timeout = timeoutMs } = {}) => {
    const streaming = path.startsWith('/v1/events');
    // A stream is aborted by its caller's signal only; any other request by its own controller too, on
    // its timeout.
    const controller = streaming ? undefined : new AbortController();
    const abort = () => controller.abort();
    let timer;
    let timedOut = false;
    if (controller) {
      if (signal && signal.aborted) abort();
      else if (signal) signal.addEventListener('abort', abort);
      timer = setTimeout(() => {
        timedOut = true;
        abort();
      }, timeout);
    }
    const failed = (e) => {
      if (streaming && signal && signal.aborted) return e;
      const why = timedOut
        ? `the lease service did not answer within ${Math.round(timeout)} ms`
        : signal && signal.aborted
          ? 'the request was aborted'
          : `the lease service is unreachable (${(e && e.message) || e})`;
      return lockError('StorageError', `lease storage failed: ${why}`, { cause: e });
    };
    try {
      let response;
      try {
        response = await fetchImpl(base + path, {
          method: body === undefined ? 'GET' : 'POST',
          headers: await headers(body === undefined ? { accept: 'text/event-stream' } : { 'content-type': 'application/json' }),
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: controller ? controller.signal : signal,
        });
      } catch (e) {
        throw failed(e);
      }
      if (!response.ok) return await refusal(response);
      if (streaming) return response;
      try {
        return await response.json();
      } catch (e) {
        throw failed(e); // the answer was cut short: a grant it reported is recovered by `grant`'s retry
      }
    } finally {
      clearTimeout(timer);
      if (controller && signal) signal.removeEventListener('abort', abort);
    }
  };
  /** The LockError of a refused request. */
  const refusal = async (response) => {
    const { error = {} } = await response.json().catch(() => ({}));
    throw lockError(error.code || 'StorageError', error.message || `lease storage failed: the lease service answered ${response.status}`, {
      expiresAt: error.expiresAt,
      holder: error.holder,
      acquiredAt: error.acquiredAt,
      status: response.status,
      now: error.now,
    });
  };
  /**
   * `tryLock` or `takeOver` (at `path`) with a request id of its own; sent again with that id, after a
   * failure that may have lost a grant's answer, while the ttl (less the deadline's margin) lasts.
   */
  const grant = async (path, type, id, ttlMs) => {
    const body = { type, id, ttlMs, requestId: randomRequestId() };
    const started = readClocks();
    const leftMs = () => ttlMs - marginFor(ttlMs) - elapsedMs(started, readClocks());
    for (let failures = 0; ; ) {
      try {
        // Half the time left, so that a retry fits, but never under a second (a ttl within the margin
        // leaves no time left, and still deserves one fair try).
        return await request(path, body, { timeout: Math.min(timeoutMs, Math.max(1000, attemptTimeoutMs(leftMs()))) });
      } catch (e) {
        failures += 1;
        const next = isTransient(e.code) && !(e.status >= 400 && e.status < 500) ? nextAttempt({ failures, leftMs: leftMs(), random: Math.random() }) : null;
        if (next === null) throw e;
        await sleep(next.delayMs);
      }
    }
  };
  const query = (type, id) => `type=${encodeURIComponent(type)}${id == null ? '' : `&id=${encodeURIComponent(id)}`}`;

  return {
    tryLock: (type, id, ttlMs) => grant('/v1/tryLock', type, id, ttlMs),
    takeOver: (type, id, ttlMs) => grant('/v1/takeOver', type, id, ttlMs),
    checkLock: (lockId) => request('/v1/checkLock', { lockId }),
    releaseLock: (lockId) => request('/v1/releaseLock', { lockId }),
    extendLockExpiration: (lockId, incMs, { signal } = {}) => request('/v1/extendLockExpiration', { lockId, incMs }, { signal }),
    list: async (type) => (await request(`/v1/list${type === undefined ? '' : `?${query(type)}`}`)).leases,

    /**
     * Call `onChange({ kind, type, id, fence, lease, now })` for each change of (type, id), or of every key
     * of `type` when `id` is null: first the current state (`kind` 'current'), then 'acquired', 'extended',
     * 'released', 'expired', 'takenOver'. `lease` is `{ holder, acquiredAt, expiresAt }` or null (free).
     * A dropped stream reconnects after a second and starts again from the current state; a refusal (a bad
     * token, type or id) stops it and calls `onError(lockError)`. Returns `stop()`.
     */
    watch(type, id, onChange, { onError } = {}) {
      const stopper = new AbortController();
      const { signal } = stopper;
      (async () => {
        while (!signal.aborted) {
          try {
            const response = await request(`/v1/events?${query(type, id)}`, undefined, { signal });
            const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
            let buffered = '';
            for (;;) {
              const { value, done } = await reader.read();
              if (done) break;
              buffered += value.replace(/\r\n?/g, '\n');
              let end;
              while ((end = buffered.indexOf('\n\n')) >= 0) {
                const data = buffered
                  .slice(0, end)
                  .split('\n')
                  .filter((line) => line.startsWith('data:'))
                  .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5))
                  .join('\n');
                buffered = buffered.slice(end + 2);
                if (data) onChange(JSON.parse(data));
              }
            }
          } catch (e) {
            if (signal.aborted) return;
            if (e && e.status >= 400 && e.status < 500) {
              if (onError) onError(e);
              return;
            }
          }
          await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS));
        }
      })();
      return () => stopper.abort();
    },
  };
}
