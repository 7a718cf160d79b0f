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

/** How long `watch` waits before reconnecting a stream that dropped. */
const RECONNECT_MS = 1000;

const lockError = (code, message, details) => Object.assign(new Error(message), details, { name: 'LockError', code });

/** The LeaseStore of the lease service at `url`, acting as the user of `token`. */
export function serverLeaseStore({ url, token, fetch: fetchImpl = globalThis.fetch.bind(globalThis) }) {
  const base = String(url).replace(/\/+$/, '');
  const headers = async (more) => Object.assign({ authorization: `Bearer ${await (typeof token === 'function' ? token() : token)}` }, more);

  /** The service's answer to `path` (a POST when there is a body), or the LockError it stands for. */
  const request = async (path, body, signal) => {
    let response;
    try {
      response = await fetchImpl(base + path, {
        method: body === undefined ? 'GET' : 'POST',
        headers: await headers(body === undefined ? { accept: 'text/event-stream' } : { 'content-type': 'application/json' }),
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
      });
    } catch (e) {
      if (signal && signal.aborted) throw e;
      throw lockError('StorageError', `lease storage failed: the lease service is unreachable (${(e && e.message) || e})`, { cause: e });
    }
    if (response.ok) return path.startsWith('/v1/events') ? response : response.json();
    const { error = {} } = await response.json().catch(() => ({}));
    throw lockError(error.code || 'StorageError', error.message || `lease storage failed: the lease service answered ${response.status}`, {
      expiresAt: error.expiresAt,
      holder: error.holder,
      acquiredAt: error.acquiredAt,
      status: response.status,
    });
  };
  const query = (type, id) => `type=${encodeURIComponent(type)}${id == null ? '' : `&id=${encodeURIComponent(id)}`}`;

  return {
    tryLock: (type, id, ttlMs) => request('/v1/tryLock', { type, id, ttlMs }),
    takeOver: (type, id, ttlMs) => request('/v1/takeOver', { type, id, ttlMs }),
    checkLock: (lockId) => request('/v1/checkLock', { lockId }),
    releaseLock: (lockId) => request('/v1/releaseLock', { lockId }),
    extendLockExpiration: (lockId, incMs) => request('/v1/extendLockExpiration', { lockId, incMs }),
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
            const response = await request(`/v1/events?${query(type, id)}`, undefined, signal);
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
