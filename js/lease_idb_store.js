// The default LeaseStore: leases kept in IndexedDB, in one object store `leases` keyed by [type, id].
// Every operation is ONE readwrite transaction: read the record, let the Rust core decide
// (`decideLease`, synchronous), and issue the write in the same success callback, with nothing
// awaited in between (a transaction commits as soon as no request is pending, so an await there would let
// another context in). IndexedDB serialises readwrite transactions on a store across every same-origin
// window and worker: so two contexts can never both take the same (type, id). localStorage gives no such
// guarantee. Works wherever `indexedDB` exists (windows, all workers).
import { decideLease, decideLeaseList, leaseKey } from '../pkg/weblocks_leases.js';

// The operations as the wasm edge numbers them (src/wasm/lease_operation.rs; tests/static/boundary_codes.test.mjs).
const TRY_LOCK = 0;
const CHECK = 1;
const RELEASE = 2;
const EXTEND = 3;

const OBJECT_STORE = 'leases';

function storageError(message) {
  return Object.assign(new Error(`lease storage failed: ${message}`), { name: 'LockError', code: 'StorageError' });
}

const describe = (domException, fallback) => (domException ? `${domException.name}: ${domException.message}` : fallback);

/** Open (creating on first use) the lease database `name`; resolves with a LeaseStore. */
export function openIndexedDbLeaseStore(name) {
  return new Promise((resolve, reject) => {
    if (typeof indexedDB === 'undefined') throw storageError('IndexedDB is not available in this context');
    const request = indexedDB.open(name, 1);
    request.onupgradeneeded = () => request.result.createObjectStore(OBJECT_STORE, { keyPath: ['type', 'id'] });
    request.onerror = () => reject(storageError(describe(request.error, 'the lease database could not be opened')));
    request.onsuccess = () => {
      const db = request.result;
      db.onversionchange = () => db.close(); // never block a future upgrade from another context
      resolve(indexedDbLeaseStore(db));
    };
  });
}

/** The LeaseStore over the open database `db` (closures, not a class: they minify to one letter). */
function indexedDbLeaseStore(db) {
  /**
   * Open a readwrite transaction, issue `read(store)`, and call `then(result, store)` in the read's success
   * callback while the transaction is active. Resolves with `then`'s answer once the transaction committed;
   * rejects with what `then` threw (nothing was written), or with a StorageError if the transaction aborted.
   */
  const transaction = (read, then) =>
    new Promise((resolve, reject) => {
      let tx;
      try {
        tx = db.transaction(OBJECT_STORE, 'readwrite');
      } catch (e) {
        throw storageError(describe(e, 'no transaction'));
      }
      const store = tx.objectStore(OBJECT_STORE);
      let settle = () => reject(storageError('the read never completed'));
      const request = read(store);
      request.onsuccess = () => {
        try {
          const answer = then(request.result, store);
          settle = () => resolve(answer);
        } catch (e) {
          settle = () => reject(e); // a decision that failed: it wrote nothing
        }
      };
      tx.oncomplete = () => settle();
      tx.onabort = () => reject(storageError(describe(tx.error, 'the transaction was aborted')));
    });

  /** Operation `method` on `args` (`leaseKey` throws a LockError at once for bad ones), then read, decide
   *  and write in one transaction. */
  const run = async (method, ...args) => {
    const key = leaseKey(method, args);
    return transaction(
      (store) => store.get(key),
      (current, store) => {
        const { outcome, put, delete: deleted } = decideLease(method, args, current, Date.now());
        if (put !== undefined) store.put(put);
        if (deleted !== undefined) store.delete(deleted);
        return outcome;
      },
    );
  };

  return {
    tryLock: (type, id, ttlMs) => run(TRY_LOCK, type, id, ttlMs, ...crypto.getRandomValues(new Uint8Array(16))),
    checkLock: (lockId) => run(CHECK, lockId),
    releaseLock: (lockId) => run(RELEASE, lockId),
    extendLockExpiration: (lockId, incMs) => run(EXTEND, lockId, incMs),
    list: () =>
      transaction(
        (store) => store.getAll(),
        (records, store) => {
          const { live, purge } = decideLeaseList(records, Date.now());
          for (const key of purge) store.delete(key);
          return live;
        },
      ),
  };
}
