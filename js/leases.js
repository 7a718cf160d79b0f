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
import {
  attemptTimeoutMs,
  deadlineFrom,
  elapsedMs,
  hasPassed,
  isTransient,
  nextAttempt,
  readClocks,
  reportedLeftMs,
  timeLeftMs,
} from './lease_deadline.js';

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
  constructor(code, message, { expiresAt, holder, acquiredAt, cause, deadline } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'LockError';
    this.code = code;
    if (expiresAt !== undefined) this.expiresAt = expiresAt;
    if (deadline === true) this.deadline = true; // decided by this page's deadline, not by the store
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

/** A LockError `Expired` decided by this page: the lease's deadline (see js/lease_deadline.js) passed. */
function deadlineError(lockId, deadline) {
  return new LockError('Expired', `the lease of ${lockId} counts as expired on this page: its deadline passed (the store expires it at ${new Date(deadline.expiresAt).toISOString()})`, {
    expiresAt: deadline.expiresAt,
    deadline: true,
  });
}

/** `promise`, or a StorageError once `timeoutMs` has passed (then `controller`, if any, is aborted). */
function withTimeout(promise, timeoutMs, controller, what) {
  let timer;
  const timedOut = new Promise((resolve, reject) => {
    timer = setTimeout(() => {
      if (controller) controller.abort();
      reject(new LockError('StorageError', `lease storage failed: ${what} did not complete within ${Math.round(timeoutMs)} ms`));
    }, timeoutMs);
  });
  const settled = () => clearTimeout(timer);
  return Promise.race([promise, timedOut]).then(
    (value) => (settled(), value),
    (e) => {
      settled();
      throw e;
    },
  );
}

const newAbortController = () => (typeof AbortController === 'function' ? new AbortController() : undefined);

/**
 * The leases API over `store`: a LeaseStore, or a function returning one (or a promise of one), called
 * on first use; if opening fails, the next call tries again.
 *
 * Each lease this API has seen a store's answer for gets a deadline of this page's (js/lease_deadline.js):
 * the time left the store reported, minus a margin, from when the request was sent, by the larger of the
 * monotonic and the wall-clock elapsed time. From then on `checkLock` and `extendLockExpiration` reject
 * with `Expired` (`deadline: true`) without asking the store, and keepAlive calls `onLost`: the page
 * stops believing in a lease before the store can give it to anyone else.
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

  /** lockId -> its deadline, for the leases this page holds. */
  const deadlines = new Map();
  /** lockId -> the deadline that passed: expired here for good, whatever a late answer says. */
  const expiredHere = new Map();
  /** Rejects with the local `Expired` once `lockId`'s deadline has passed. */
  const refuseAfterDeadline = (lockId) => {
    const deadline = deadlines.get(lockId);
    if (deadline !== undefined && hasPassed(deadline, readClocks())) {
      deadlines.delete(lockId);
      expiredHere.set(lockId, deadline);
    }
    const expired = expiredHere.get(lockId);
    if (expired !== undefined) throw deadlineError(lockId, expired);
  };
  /** `promise`, or the local `Expired` once `lockId`'s deadline passes first (a request that hangs past
   *  it, offline, is not waited for: from the deadline on the answer is Expired). */
  const beforeDeadline = (lockId, promise) =>
    new Promise((resolve, reject) => {
      let timer;
      const arm = () => {
        const deadline = deadlines.get(lockId);
        if (deadline === undefined) return;
        timer = setTimeout(() => {
          try {
            refuseAfterDeadline(lockId);
            arm(); // another answer moved the deadline meanwhile
          } catch (e) {
            reject(e);
          }
        }, Math.max(0, timeLeftMs(deadline, readClocks())) + 1);
      };
      arm();
      promise.then(
        (value) => (clearTimeout(timer), resolve(value)),
        (e) => (clearTimeout(timer), reject(e)),
      );
    });
  /** `method` on the store, then the deadline of the lease its answer reports (sent: before the call). */
  const reporting = async (method, ...args) => {
    const sent = readClocks();
    const calling = call(method, ...args);
    const grants = method === 'tryLock' || method === 'takeOver';
    const answer = await (grants ? calling : beforeDeadline(args[0], calling));
    const lockId = answer.lockId !== undefined ? answer.lockId : args[0];
    // An answer that arrives after the deadline passed does not bring the lease back on this page.
    if (expiredHere.has(lockId)) throw deadlineError(lockId, expiredHere.get(lockId));
    if (typeof answer.expiresAt === 'number') {
      deadlines.set(lockId, deadlineFrom(sent, reportedLeftMs(answer, sent), answer.expiresAt));
    }
    return answer;
  };
  /** A definite answer that `lockId` holds nothing: its deadline is of no more use. */
  const forget = (lockId, e) => {
    if (e.code !== 'StorageError') deadlines.delete(lockId);
    throw e;
  };

  const leases = {
    /** Take the lease on (type, id) for `ttlMs`; resolves with its lockId (a string: keep it). */
    async tryLock(type, id, { ttlMs = DEFAULT_TTL_MS } = {}) {
      return (await reporting('tryLock', type, id, ttlMs)).lockId;
    },
    /** Resolves with `{ type, id, expiresAt }` while the lease is live; rejects otherwise (with `Expired`
     *  at once, without asking the store, once this page's deadline for it has passed). */
    async checkLock(lockId) {
      refuseAfterDeadline(lockId);
      return reporting('checkLock', lockId).catch((e) => forget(lockId, e));
    },
    /** Remove the lease (even an expired one, unless someone took it over). */
    async releaseLock(lockId) {
      await call('releaseLock', lockId);
      deadlines.delete(lockId);
      expiredHere.delete(lockId);
    },
    /** Move a live lease's expiry `incMs` later; resolves with `{ type, id, expiresAt }`. `signal` aborts
     *  the request where the store can (the lease service's). */
    async extendLockExpiration(lockId, incMs, { signal } = {}) {
      refuseAfterDeadline(lockId);
      return reporting('extendLockExpiration', lockId, incMs, { signal }).catch((e) => forget(lockId, e));
    },
    /** The live leases, `[{ type, id, expiresAt }]` (no tokens), for a "being edited elsewhere" UI; the
     *  lease service's store takes a type to list only its leases. */
    list: (type) => call('list', type),
    /** Lease service: take the lease on (type, id) whoever holds it (the token needs the `takeover`
     *  permission); resolves with the lockId. The replaced holder's next check or extend fails with `Revoked`. */
    async takeOver(type, id, { ttlMs = DEFAULT_TTL_MS } = {}) {
      return (await reporting('takeOver', type, id, ttlMs)).lockId;
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
     * Extend the lease every `everyMs` (or at half its time left, if sooner) while this page is open;
     * stops on `pagehide` (a page put in the back/forward cache pauses, and on `pageshow` resumes or
     * reports the loss), on `stop()`, or when the lease is lost: then `onLost(lockError)` is called once, with the store's definite answer (`Expired`,
     * `TakenOver`, `Revoked`, `NotFound`, `Unauthorized`...) or with `Expired` and `deadline: true` when
     * this page's deadline passed first. A failed extension (the store unreachable, a timeout) is tried
     * again with backoff while the deadline leaves time; each try times out well before the deadline,
     * so a hung request never stalls the lease. Returns `stop`. Each extension adds the time elapsed since
     * the previous successful one, so the lease keeps the time it had left when keepAlive started even
     * when timers run late (hidden tabs are throttled, to once a minute in the worst case: keep that much
     * left); pass `incMs` to add a fixed amount instead.
     */
    keepAlive(lockId, { everyMs = DEFAULT_KEEP_ALIVE_MS, incMs, onLost } = {}) {
      if (!(typeof everyMs === 'number' && everyMs > 0 && Number.isFinite(everyMs))) {
        throw new LockError('InvalidArgument', 'invalid argument: everyMs must be a positive finite number of milliseconds');
      }
      let stopped = false;
      let paused = false;
      let inFlight = false;
      let failures = 0;
      let failingSince;
      let tickTimer;
      let deadlineTimer;
      let extendedAt = Date.now();
      const clearTimers = () => {
        clearTimeout(tickTimer);
        clearTimeout(deadlineTimer);
      };
      const lose = (e) => {
        if (stopped) return;
        stop();
        if (onLost != null) onLost(e);
      };
      /** Whether the deadline has passed (then the loss is reported). */
      const deadlinePassed = () => {
        try {
          refuseAfterDeadline(lockId);
          return false;
        } catch (e) {
          lose(e);
          return true;
        }
      };
      /** A timer for the deadline itself: the loss is reported at the deadline even while a try hangs. */
      const watchDeadline = () => {
        clearTimeout(deadlineTimer);
        const deadline = deadlines.get(lockId);
        if (deadline === undefined) return;
        deadlineTimer = setTimeout(() => deadlinePassed() || watchDeadline(), Math.max(0, timeLeftMs(deadline, readClocks())) + 1);
      };
      const schedule = (ms) => {
        clearTimeout(tickTimer);
        tickTimer = setTimeout(extend, ms);
      };
      /** The time the lease has left by this page's deadline; without one yet (a lockId this API has not
       *  seen an answer for), the `everyMs` after the first failure. */
      const leftMs = () => {
        const deadline = deadlines.get(lockId);
        if (deadline !== undefined) return timeLeftMs(deadline, readClocks());
        return failingSince === undefined ? everyMs : everyMs - elapsedMs(failingSince, readClocks());
      };
      const extend = async () => {
        if (stopped || paused || inFlight || deadlinePassed()) return;
        inFlight = true;
        const now = Date.now();
        const controller = newAbortController();
        try {
          const timeoutMs = attemptTimeoutMs(leftMs());
          const extension = leases.extendLockExpiration(lockId, incMs != null ? incMs : Math.max(now - extendedAt, 1), {
            signal: controller && controller.signal,
          });
          await withTimeout(extension, timeoutMs, controller, 'the lease extension');
          extendedAt = now;
          failures = 0;
          failingSince = undefined;
          if (!stopped) {
            watchDeadline();
            // Every `everyMs`, or sooner when the lease has less than twice that left.
            schedule(Math.min(everyMs, Math.max(0, leftMs() / 2)));
          }
        } catch (e) {
          if (stopped || deadlinePassed()) return;
          const error = toLockError(e);
          if (!isTransient(error.code)) return lose(error);
          failures += 1;
          if (failingSince === undefined) failingSince = readClocks();
          const next = nextAttempt({ failures, leftMs: leftMs(), random: Math.random() });
          if (next !== null) schedule(next.delayMs);
          else if (!deadlines.has(lockId)) lose(error);
          // else: no time for another try; the deadline's timer reports the loss.
        } finally {
          inFlight = false;
        }
      };
      /** Back from the background (or from the back/forward cache): the timers may have been held back. */
      const wake = () => {
        if (stopped || deadlinePassed()) return;
        const wasPaused = paused;
        paused = false;
        watchDeadline();
        if (inFlight) return;
        const dueInMs = everyMs - (Date.now() - extendedAt);
        if (dueInMs <= 0) schedule(0);
        else if (wasPaused) schedule(dueInMs); // its timer was cleared on pagehide
      };
      const onVisibility = () => typeof document !== 'undefined' && document.visibilityState === 'visible' && wake();
      const onPageHide = (event) => {
        if (event && event.persisted) {
          paused = true; // in the back/forward cache: nothing runs; pageshow decides
          clearTimers();
        } else stop();
      };
      const listen = (target, type, handler, add) => {
        if (target && typeof target.addEventListener === 'function') {
          if (add) target.addEventListener(type, handler);
          else target.removeEventListener(type, handler);
        }
      };
      const theDocument = typeof document !== 'undefined' ? document : undefined;
      const stop = () => {
        if (stopped) return;
        stopped = true;
        clearTimers();
        listen(theGlobal, 'pagehide', onPageHide, false);
        listen(theGlobal, 'pageshow', wake, false);
        listen(theDocument, 'visibilitychange', onVisibility, false);
      };
      listen(theGlobal, 'pagehide', onPageHide, true);
      listen(theGlobal, 'pageshow', wake, true);
      listen(theDocument, 'visibilitychange', onVisibility, true);
      watchDeadline();
      schedule(everyMs);
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
