// Leases, an extension next to the standard API: offline pessimistic locks that outlive a page load (the
// classic offline-lock API: tryLock, checkLock, releaseLock, extendLockExpiration), plus keepAlive and list.
// See docs/LEASES.md. The decisions are the Rust core's (src/lease/); this file adds promises, `LockError`,
// option defaults and keepAlive, over any `LeaseStore`:
//
//   interface LeaseStore {                       // every method returns a promise
//     tryLock(type, id, ttlMs)           -> { lockId, type, id, expiresAt }
//     checkLock(lockId)                  -> { type, id, expiresAt }
//     releaseLock(lockId)                -> undefined
//     extendLockExpiration(lockId, incMs)-> { type, id, expiresAt }
//     list(type?)                        -> [{ type, id, expiresAt }]   (live leases only, never a token)
//     takeOver(type, id, ttlMs)          -> { lockId, ... }   optional (the lease service's store)
//     watch(type, id, onChange, options) -> stop()            optional, synchronous
//   }
//
// A store rejects with an object whose `name` is 'LockError' and whose `code` is one of LOCK_ERROR_CODES;
// anything else it throws becomes a LockError with code 'StorageError'. The default store keeps leases in
// IndexedDB (lease_idb_store.js): one readwrite transaction per operation, decided by the Rust core.
import { openIndexedDbLeaseStore } from './lease_idb_store.js';
import { theGlobal } from './global_object.js';

/** The ttl of `tryLock` without `ttlMs`: 5 minutes: long enough to fill in a form, short enough that an abandoned edit frees the record soon. */
export const DEFAULT_TTL_MS = 5 * 60 * 1000;
/** keepAlive's default period: extend every minute, well inside the default ttl. */
export const DEFAULT_KEEP_ALIVE_MS = 60 * 1000;
/** The IndexedDB database of the default store. */
export const DEFAULT_DATABASE_NAME = 'weblocks-leases';

export const LOCK_ERROR_CODES = Object.freeze([
  'InvalidArgument', // bad type/id/ttlMs/incMs/everyMs, or a string that is not a lockId
  'AlreadyLocked', //   tryLock: someone else holds a live lease on (type, id); see `expiresAt`
  'NotFound', //        no lease for this lockId (released, or expired over a day ago)
  'Expired', //         the lease of this lockId has expired (see `expiresAt`); nobody took it over yet
  'TakenOver', //       the lease expired or was released, and someone else holds (type, id) now
  'Revoked', //         lease service: the lease was live when a holder allowed to took it over (takeOver)
  'Unauthorized', //    lease service: no token, or one that does not verify (forged, expired)
  'Forbidden', //       lease service: the token lacks the permission (takeOver needs `takeover`)
  'StorageError', //    the store failed (IndexedDB unavailable, aborted transaction, service unreachable...)
]);

/**
 * Why a lease operation failed: `name` is 'LockError', `code` is one of LOCK_ERROR_CODES. The lease
 * service adds, when another lease holds the key, its `holder` (`{ sub, name }`) and `acquiredAt`.
 */
export class LockError extends Error {
  constructor(code, message, { expiresAt, holder, acquiredAt, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'LockError';
    this.code = code;
    if (expiresAt !== undefined) this.expiresAt = expiresAt;
    if (holder !== undefined) Object.assign(this, { holder, acquiredAt });
  }
}

/** `e.message`, or `e` itself where it has none (or is null or undefined). */
function messageOf(e) {
  const message = e == null ? undefined : e.message;
  return message == null ? e : message;
}

function toLockError(e) {
  if (e instanceof LockError) return e;
  if (e != null && e.name === 'LockError' && LOCK_ERROR_CODES.includes(e.code)) {
    return new LockError(e.code, e.message, e);
  }
  return new LockError('StorageError', `lease storage failed: ${messageOf(e)}`, { cause: e });
}

/**
 * The leases API over `store`: a LeaseStore, or a function returning one (or a promise of one), called
 * on first use; if opening fails, the next call tries again.
 */
export function createLeases(store) {
  let opened;
  const getStore = () => {
    if (opened === undefined) {
      opened = Promise.resolve()
        .then(() => (typeof store === 'function' ? store() : store))
        .catch((e) => {
          opened = undefined;
          throw e;
        });
    }
    return opened;
  };
  const call = async (method, ...args) => {
    try {
      return await (await getStore())[method](...args);
    } catch (e) {
      throw toLockError(e);
    }
  };

  const leases = {
    /** Take the lease on (type, id) for `ttlMs`; resolves with its lockId (a string: keep it). */
    async tryLock(type, id, { ttlMs = DEFAULT_TTL_MS } = {}) {
      return (await call('tryLock', type, id, ttlMs)).lockId;
    },
    /** Resolves with `{ type, id, expiresAt }` while the lease is live; rejects otherwise. */
    checkLock: (lockId) => call('checkLock', lockId),
    /** Remove the lease (even an expired one, unless someone took it over). */
    async releaseLock(lockId) {
      await call('releaseLock', lockId);
    },
    /** Move a live lease's expiry `incMs` later; resolves with `{ type, id, expiresAt }`. */
    extendLockExpiration: (lockId, incMs) => call('extendLockExpiration', lockId, incMs),
    /** The live leases, `[{ type, id, expiresAt }]` (no tokens), for a "being edited elsewhere" UI; the
     *  lease service's store takes a type to list only its leases. */
    list: (type) => call('list', type),
    /** Lease service: take the lease on (type, id) whoever holds it (the token needs the `takeover`
     *  permission); resolves with the lockId. The replaced holder's next check or extend fails with `Revoked`. */
    async takeOver(type, id, { ttlMs = DEFAULT_TTL_MS } = {}) {
      return (await call('takeOver', type, id, ttlMs)).lockId;
    },
    /** Lease service: `onChange(change)` for each change of (type, id), or of any key of `type` when `id` is
     *  null, starting with the current state; `onError(lockError)` if the stream cannot be opened. Returns `stop`. */
    watch(type, id, onChange, { onError } = {}) {
      let stop;
      const failed = (e) => onError && onError(toLockError(e));
      const watching = call('watch', type, id, onChange, { onError: failed }).then((s) => (stop = s), failed);
      return () => watching.then(() => stop && stop());
    },
    /**
     * Extend the lease every `everyMs` while this page is open; stops on `pagehide`, on `stop()`, or when an
     * extension fails (then `onLost(lockError)` is called). Returns `stop`. Each extension adds the time
     * elapsed since the previous one, so the lease keeps the time it had left when keepAlive started even
     * when timers run late (hidden tabs are throttled, to once a minute in the worst case: keep that much
     * left); pass `incMs` to add a fixed amount instead.
     */
    keepAlive(lockId, { everyMs = DEFAULT_KEEP_ALIVE_MS, incMs, onLost } = {}) {
      if (!(typeof everyMs === 'number' && everyMs > 0 && Number.isFinite(everyMs))) {
        throw new LockError('InvalidArgument', 'invalid argument: everyMs must be a positive finite number of milliseconds');
      }
      let extending = false;
      let extendedAt = Date.now();
      const tick = async () => {
        if (extending) return; // the previous extension is still running; the next tick covers its time
        extending = true;
        const now = Date.now();
        try {
          await leases.extendLockExpiration(lockId, incMs != null ? incMs : Math.max(now - extendedAt, 1));
          extendedAt = now;
        } catch (e) {
          if (!stopped) {
            stop();
            if (onLost != null) onLost(e);
          }
        } finally {
          extending = false;
        }
      };
      let stopped = false;
      const timer = setInterval(tick, everyMs);
      const stop = () => {
        if (stopped) return;
        stopped = true;
        clearInterval(timer);
        if (typeof theGlobal.removeEventListener === 'function') theGlobal.removeEventListener('pagehide', stop);
      };
      if (typeof theGlobal.addEventListener === 'function') theGlobal.addEventListener('pagehide', stop);
      return stop;
    },
  };
  return leases;
}

/**
 * The leases API over the default IndexedDB store. `whenWasmReady()` must resolve once the leases' wasm
 * module is initialised (the entry points pass js/lease_wasm.js's `leaseWasmReady`).
 */
export function createWasmLeases(whenWasmReady, { databaseName = DEFAULT_DATABASE_NAME } = {}) {
  return createLeases(async () => {
    await whenWasmReady();
    return openIndexedDbLeaseStore(databaseName);
  });
}
