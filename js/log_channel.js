// The I/O of the transport over a log in IndexedDB (docs/PROTOCOL.md §12). What the log writer decides
// (when to open and try again, when an append is tried again, what a connection's end means, the identity
// the participant is told, what hands an entry on) is the Rust core's (src/protocol/log_writer.rs), which
// runs in the simulation too; this object only makes the calls it asks for and forwards their events.
//
// The database `weblocks-log:<channel>` (version 1) has two stores: `log`, whose autoIncrement keys give
// the origin's messages one order (A1′), and `meta`, whose greatest key is the floor and whose value is the
// log's identity. The carrier, a BroadcastChannel, carries each committed entry to the others; without
// one, a localStorage `storage` event pokes the other documents, and carries a farewell.
//
// The edge (src/wasm/log_storage.rs) calls the methods with the handles, transactions and log objects the
// core numbers; each answers with events `{ type, key, data, id }` in a microtask of its own, never within
// the call (`key`: the handle, the transaction or the object). Closures rather than classes: their
// variables minify to one letter (the classic script's size).

import { theGlobal } from './global_object.js';

const DATABASE = 'weblocks-log:';
const POKE = 'weblocks:poke:';
const FAREWELL = 'weblocks:farewell:';

/** What wakes a context over the log (the participant's `Wake`): a carrier, pokes, or its own polls; as src/wasm/engine.rs numbers it (tests/static/boundary_codes.test.mjs). */
export const WAKE_CARRIER = 1;
export const WAKE_POKES = 2;
export const WAKE_POLLS = 3;

/** The events' types, as src/wasm/log_storage.rs numbers them (tests/static/boundary_codes.test.mjs). */
const OPENED = 1;
const OPEN_FAILED = 2;
const CLOSED = 3;
const VERSION_CHANGE = 4;
const APPENDED = 5;
const ABORTED = 6;
const STARTED = 7;
const READ = 8;
const READ_FAILED = 9;
const CARRIED = 10;
const POKED = 11;
/** Why an append aborted. */
const ABORT_QUOTA = 1;
const ABORT_UNUSABLE = 2;

/**
 * The Engine's `openChannel(name)` where the context coordinates over the log: the log storage object of
 * channel `name`; carried by BroadcastChannel where the origin's record says so (js/transport_choice.js),
 * else woken by pokes or polls, as its `wake` says. Where the global has no IndexedDB (outside a browser),
 * a function that opens nothing (the context locks alone).
 */
export function makeLogChannelFactory(globalObject = theGlobal, carried = typeof globalObject.BroadcastChannel === 'function', sweep = {}) {
  const { indexedDB, BroadcastChannel } = globalObject;
  if (typeof indexedDB !== 'object' || indexedDB === null) return () => undefined;
  let storage = null;
  try {
    storage = globalObject.localStorage;
    storage.getItem(POKE);
  } catch (e) {
    storage = null;
  }
  // A page's deletion of the log (`versionchange` without a version) also goes to the core's sweep
  // (`sweep.onDeletion`); once the core gives this context's connections up, `sweep.release()` closes
  // every connection to the log as the browser would (its writer opens the log again, behind the deletion).
  const releases = new Set();
  sweep.release = () => releases.forEach((release) => release());
  const open = (name) => makeLogStorage(globalObject, name, carried ? BroadcastChannel : null, storage, sweep, releases);
  open.wake = carried ? WAKE_CARRIER : storage !== null && typeof globalObject.document === 'object' ? WAKE_POKES : WAKE_POLLS;
  return open;
}

/** The log storage object of channel `name` (see the top of this file). */
function makeLogStorage(globalObject, name, Carrier, storage, sweep, releases) {
  const pokeKey = POKE + name;
  const farewellKey = FAREWELL + name;
  let handler = null;
  const emit = (type, key, data, id) => Promise.resolve().then(() => handler({ type, key, data, id }));
  // The open connections by handle, and the log objects' carriers or listeners.
  const connections = new Map();
  const objects = new Map();
  releases.add(() => {
    for (const [handle, db] of connections) {
      connections.delete(handle);
      db.close();
      emit(CLOSED, handle);
    }
  });
  // Runs a transaction over both stores on connection `handle`: `collect(t)` makes its requests,
  // `done(requests)` once it completed, `failed(unusable, error)` if it could not be made or aborted. It
  // ends once its requests are done (`commit()`, unless `keep`), not once this thread ran their callbacks:
  // a context in a long task would otherwise hold back every append of the origin.
  const transaction = (handle, mode, keep, collect, done, failed) => {
    const db = connections.get(handle);
    let t;
    try {
      t = db.transaction(['log', 'meta'], mode);
    } catch (e) {
      return failed(true);
    }
    let requests;
    t.oncomplete = () => done(requests);
    t.onabort = () => failed(false, t.error);
    try {
      requests = collect(t);
      if (t.commit && !keep) t.commit();
    } catch (e) {
      try {
        t.abort();
      } catch (e2) {
        // It finished already: its `complete` or `abort` event answers.
      }
    }
  };
  // The log's identity and floor: `{ id, floor }` once its request is done. The identity is the value of
  // `meta`'s greatest key if it is one (older versions wrote 0 there); else, given `make`, `make` is
  // written as it.
  const identify = (t, make) => {
    const meta = t.objectStore('meta');
    const log = { id: 0, floor: 0 };
    const cursor = meta.openCursor(null, 'prev');
    cursor.onsuccess = () => {
      const found = cursor.result;
      if (found) log.floor = found.key;
      if (found && Number.isSafeInteger(found.value) && found.value > 0) log.id = found.value;
      else if (make) meta.put((log.id = make), log.floor);
    };
    return log;
  };
  const readFailed = (tx) => (unusable) => emit(READ_FAILED, tx, unusable);
  return {
    listen(listener) {
      handler = listener;
    },
    open(handle) {
      let request;
      try {
        request = globalObject.indexedDB.open(DATABASE + name, 1);
      } catch (e) {
        return emit(OPEN_FAILED, handle);
      }
      request.onupgradeneeded = () => {
        request.result.createObjectStore('log', { autoIncrement: true });
        request.result.createObjectStore('meta');
      };
      request.onsuccess = () => {
        const db = request.result;
        connections.set(handle, db);
        db.onversionchange = (event) => {
          emit(VERSION_CHANGE, handle, event.newVersion);
          if (event.newVersion == null && sweep.onDeletion) sweep.onDeletion();
        };
        db.onclose = () => emit(CLOSED, handle);
        emit(OPENED, handle);
      };
      request.onerror = () => emit(OPEN_FAILED, handle);
    },
    close(handle) {
      const db = connections.get(handle);
      connections.delete(handle);
      if (db) db.close();
    },
    // Where it looks for the identity, the transaction stays open for that request (no `commit()`).
    append(handle, tx, data, make) {
      const collect = (t) => [t.objectStore('log').add({ data }), make !== 0 ? identify(t, make) : null];
      const why = (unusable, error) => (unusable ? ABORT_UNUSABLE : error && error.name === 'QuotaExceededError' ? ABORT_QUOTA : 0);
      transaction(handle, 'readwrite', make !== 0, collect, ([added, log]) => emit(APPENDED, tx, added.result, log === null ? 0 : log.id), (u, e) => emit(ABORTED, tx, why(u, e)));
    },
    start(handle, tx) {
      const collect = (t) => [identify(t, 0), t.objectStore('log').openKeyCursor(null, 'prev')];
      transaction(handle, 'readonly', false, collect, ([log, last]) => emit(STARTED, tx, last.result ? last.result.key : 0, log.id), readFailed(tx));
    },
    read(handle, tx, after) {
      const range = IDBKeyRange.lowerBound(after, true);
      const collect = (t) => [identify(t, 0), t.objectStore('log').getAllKeys(range), t.objectStore('log').getAll(range)];
      const done = ([log, keys, values]) => {
        const data = [log.floor];
        keys.result.forEach((key, k) => data.push(key, values.result[k].data));
        emit(READ, tx, data, log.id);
      };
      transaction(handle, 'readonly', false, collect, done, readFailed(tx));
    },
    // The floor is written blindly with the log's identity, so that trims of several contexts only
    // raise it; one that fails leaves the log only longer.
    trim(handle, upTo, id) {
      const collect = (t) => {
        t.objectStore('log').delete(IDBKeyRange.upperBound(upTo));
        const meta = t.objectStore('meta');
        meta.put(id, upTo);
        meta.delete(IDBKeyRange.upperBound(upTo, true));
      };
      transaction(handle, 'readwrite', false, collect, () => {}, () => {});
    },
    hear(object) {
      if (Carrier !== null) {
        const carrier = new Carrier(name);
        carrier.onmessage = (event) => emit(CARRIED, object, event.data);
        objects.set(object, carrier);
      } else if (storage !== null && globalObject.addEventListener) {
        const listener = (event) => {
          if (event.key === pokeKey) emit(POKED, object);
          else if (event.key === farewellKey && event.newValue !== null) emit(CARRIED, object, JSON.parse(event.newValue));
        };
        globalObject.addEventListener('storage', listener);
        objects.set(object, listener);
      }
    },
    unhear(object) {
      const heard = objects.get(object);
      if (Carrier !== null && heard) heard.onmessage = null;
      else if (heard) {
        globalObject.removeEventListener('storage', heard);
        objects.delete(object);
      }
    },
    closeCarrier(object) {
      const carrier = objects.get(object);
      objects.delete(object);
      if (carrier) carrier.close();
    },
    carry(object, frame) {
      const carrier = objects.get(object);
      if (carrier) carrier.postMessage(frame);
    },
    // Storage full or gone: the others still read while they wait.
    poke(key) {
      try {
        storage.setItem(pokeKey, `${key} ${Math.random()}`);
      } catch (e) {}
    },
    /** The listener that posts `data` (the participant's farewell) for the others to append, without running any script of ours. */
    farewell(object, data) {
      const carrier = objects.get(object);
      if (Carrier !== null && carrier) return carrier.postMessage.bind(carrier, data);
      if (storage !== null) return storage.setItem.bind(storage, farewellKey, JSON.stringify(data));
      return () => {};
    },
  };
}
