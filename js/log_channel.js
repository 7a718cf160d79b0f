// The transport over a log in IndexedDB (docs/PROTOCOL.md §12), for the engines whose BroadcastChannel is
// not known to deliver the messages of an origin in one order to every context (WebKit delivers a post to
// the sender's own process first), and for the globals that have no BroadcastChannel (Safari before
// 15.4). It does the I/O; the order is the Rust core's (src/protocol/log_order.rs).
//
// The protocol needs one order of the origin's messages that every context applies, its own included.
// IndexedDB gives one: the read/write transactions of an origin's connections on one object store run
// one at a time, and an autoIncrement key grows with each append (an aborted one gives its key back). So a
// post appends the message in a read/write transaction, and its key is its place in the order (A1′).
// What a context learns, it learns as entries `(key, data)`, in whatever order they come: its own
// appends once committed; the other contexts' from the BroadcastChannel of the same name, which carries
// each entry as soon as its writer's append commits (the carrier); and reads of the log, which the node
// asks for when a key is missing. Without a BroadcastChannel, a writer pokes the other documents through a
// localStorage `storage` event, and the node reads the log when poked, and every so often while it
// waits (workers get no pokes).
//
// The log is trimmed of entries older than KEEP_MS. A read reports the floor (the greatest key deleted):
// a node whose position is below it missed messages, and steps out and rejoins. So does a node whose
// append failed (its message is not in the log: a `gap` event), or whose read failed, or whose connection
// to the database ended; a node whose log cannot be reached at all (a `fail` event) refuses requests.
//
// The edge talks to one log object per context, through the shape of a channel: `postMessage(data)`
// appends, `onmessage` receives events `{ type, key, data }`: `entry`, `start` (the last key before this
// object's first read), `read` (a read ended; `key` is the floor), `carried` (a message on the carrier: a
// frame of an entry, or another context's farewell or deputy's vouch, for the node to append), `poke`,
// `gap`, `fail`. Each comes in a microtask of its own, never within the call that caused it.
//
// Written as closures rather than classes: their variables minify to one letter (the classic script's
// size).

import { theGlobal } from './lock_api.js';

const DATABASE = 'weblocks-log:';
const POKE = 'weblocks:poke:';
const FAREWELL = 'weblocks:farewell:';
const KEEP_MS = 5 * 60000;
const MARK_MS = 1000;

/** What wakes a context over the log (the node's `Wake`): a carrier, pokes, or its own polls. */
export const WAKE_CARRIER = 1;
export const WAKE_POKES = 2;
export const WAKE_POLLS = 3;

/** The waits before each attempt to open the log's database (the first at once); then the context refuses. */
const OPEN_BACKOFF_MS = [0, 100, 400, 1600];

/**
 * The Engine's `openChannel(name, header)` where the context coordinates over the log: `carried` where the
 * origin's record says the log is carried by BroadcastChannel (js/transport_choice.js; every context of the
 * origin then has one), else woken by pokes or polls. Its `wake` says what wakes the context. Where the
 * global has no IndexedDB (outside a browser), a function that opens nothing (the context locks alone).
 */
export function makeLogChannelFactory(globalObject = theGlobal, carried = typeof globalObject.BroadcastChannel === 'function') {
  const { indexedDB, BroadcastChannel } = globalObject;
  if (typeof indexedDB !== 'object' || indexedDB === null) return () => undefined;
  let storage = null;
  try {
    storage = globalObject.localStorage;
    storage.getItem(POKE);
  } catch (e) {
    storage = null;
  }
  const database = openDatabase(globalObject);
  const open = (name, header) => openLog(globalObject, database(name), name, header, carried ? new BroadcastChannel(name) : null, storage);
  open.wake = carried ? WAKE_CARRIER : storage !== null && typeof globalObject.document === 'object' ? WAKE_POKES : WAKE_POLLS;
  return open;
}

/**
 * `database(name)`: the log's database for channel `name`, opened once per global and kept open: `{ when(operation),
 * db, logs, lost(db), used() }`, where `when` runs an operation once the database is open (or failed for good:
 * then `db` is null), in call order. The name, version and stores never change (docs/PROTOCOL.md §9).
 *
 * The connection ends when another context deletes or upgrades the database (`versionchange`), when the
 * browser closes it (`close`: site data cleared, WebKit's "Connection to Indexed Database server lost"), or
 * when a transaction cannot be made on it: `lost(db)`. The log then ends here for every log object of this
 * global (a `gap`: its node steps out), and the database is opened again. An open that fails is tried
 * again after each wait of OPEN_BACKOFF_MS, and so is one whose connection keeps failing before any
 * transaction completes on it; after the last, every log object tells its node that it cannot reach the
 * log (a `fail`: the node refuses requests from then on). None of it is told within the call that met it.
 */
function openDatabase(globalObject) {
  const databases = new Map();
  return (name) => {
    if (!databases.has(name)) {
      // `logs`: the `emit` of each open log object of this database.
      const entry = { db: null, failed: false, waiting: [], logs: new Set() };
      let attempt = 0;
      entry.when = (operation) => {
        if (entry.db !== null || entry.failed) operation();
        else entry.waiting.push(operation);
      };
      const ready = () => {
        for (const operation of entry.waiting.splice(0)) operation();
      };
      const retry = () => {
        if (attempt < OPEN_BACKOFF_MS.length) {
          setTimeout(open, OPEN_BACKOFF_MS[attempt++]);
          return;
        }
        entry.failed = true;
        for (const emit of entry.logs) emit('fail');
        ready();
      };
      entry.lost = (db) => {
        if (entry.db !== db) return;
        entry.db = null;
        try {
          db.close();
        } catch (e) {
          // Closed already.
        }
        for (const emit of entry.logs) emit('gap');
        retry();
      };
      // A transaction completed: the connection works, and a later loss starts the waits over.
      entry.used = () => {
        attempt = 0;
      };
      const open = () => {
        let request;
        try {
          request = globalObject.indexedDB.open(DATABASE + name, 1);
        } catch (error) {
          retry();
          return;
        }
        request.onupgradeneeded = () => {
          request.result.createObjectStore('log', { autoIncrement: true });
          request.result.createObjectStore('meta');
        };
        request.onsuccess = () => {
          const db = request.result;
          entry.db = db;
          db.onversionchange = db.onclose = () => entry.lost(db);
          ready();
        };
        request.onerror = retry;
      };
      retry();
      databases.set(name, entry);
    }
    return databases.get(name);
  };
}

/** A context's log object on channel `name` (see the top of this file). */
function openLog(globalObject, database, name, header, carrier, storage) {
  const pokeKey = POKE + name;
  const farewellKey = FAREWELL + name;
  // A post of this object every MARK_MS, with its key: where to trim.
  const marks = [];
  let closed = false;
  // Appends not committed yet: after `close()`, the carrier stays open for them (the others learn of
  // each entry from it), and closes once they are done.
  let inflight = 0;
  const self = {
    onmessage: null,
    postMessage: append,
    read,
    start,
    close,
    /**
     * The listener that posts `data` (the node's farewell `Leave`) for the other contexts to append, without
     * running any script of ours: on the carrier, or as a localStorage value another document's `storage`
     * event carries.
     */
    farewell(data) {
      if (carrier !== null) return carrier.postMessage.bind(carrier, data);
      if (storage !== null) return storage.setItem.bind(storage, farewellKey, JSON.stringify(data));
      return () => {};
    },
  };
  // Every event reaches the node from a microtask of its own, never within the node's call that caused
  // it: a node that posts, reads or starts and is answered at once would re-enter itself.
  const emit = (type, key, data) => {
    Promise.resolve().then(() => {
      if (closed || self.onmessage === null) return;
      try {
        self.onmessage({ type, key, data });
      } catch (error) {
        setTimeout(() => {
          throw error;
        });
      }
    });
  };
  database.logs.add(emit);
  const onStorage = (event) => {
    if (event.key === pokeKey) emit('poke');
    else if (event.key === farewellKey && event.newValue !== null) emit('carried', undefined, JSON.parse(event.newValue));
  };
  if (carrier !== null) carrier.onmessage = (event) => emit('carried', undefined, event.data);
  else if (storage !== null && globalObject.addEventListener) globalObject.addEventListener('storage', onStorage);

  /** Appends `data`: an `entry` once committed, else a `gap` (its message is not in the log), or a `fail`. */
  function append(data) {
    inflight++;
    database.when(() => {
      const db = database.db;
      if (db === null) {
        emit('fail');
        settle();
        return;
      }
      let transaction;
      try {
        transaction = db.transaction(['log', 'meta'], 'readwrite');
      } catch (e) {
        database.lost(db);
        settle();
        return;
      }
      let added;
      transaction.oncomplete = () => {
        database.used();
        const key = added.result;
        emit('entry', key, data);
        if (carrier !== null) carrier.postMessage(header.concat([key], data));
        else poke(key);
        settle();
      };
      transaction.onabort = () => {
        emit('gap');
        settle();
      };
      try {
        added = transaction.objectStore('log').add({ data });
        added.onsuccess = () => mark(added.result);
        trim(transaction);
        if (transaction.commit) transaction.commit();
      } catch (e) {
        abort(transaction);
      }
    });
  }

  /** Remembers, once every MARK_MS, the key of a post of this object and when it was made. */
  function mark(key) {
    const now = Date.now();
    if (marks.length === 0 || now - marks[marks.length - 1][0] >= MARK_MS) marks.push([now, key]);
  }

  /**
   * Deletes, within an append, the entries older than KEEP_MS, as far as this object's marks tell. The floor
   * that reads report (the last key deleted) is the greatest key of the `meta` store: written blindly, so
   * that trims of several contexts can only raise it.
   */
  function trim(transaction) {
    const old = Date.now() - KEEP_MS;
    let upTo;
    while (marks.length > 0 && marks[0][0] < old) upTo = marks.shift()[1];
    if (upTo === undefined) return;
    transaction.objectStore('log').delete(IDBKeyRange.upperBound(upTo));
    const meta = transaction.objectStore('meta');
    meta.put(0, upTo);
    meta.delete(IDBKeyRange.upperBound(upTo, true));
  }

  /** Tells the other documents of the origin that the log has a new entry. */
  function poke(key) {
    try {
      if (storage !== null) storage.setItem(pokeKey, `${key} ${Math.random()}`);
    } catch (e) {
      // Storage full or gone: the others still read while they wait.
    }
  }

  /**
   * Runs a read-only transaction over the log, `collect(transaction)` its requests; `done(requests)` once
   * they are done. It ends as soon as its reads are done, not once this thread has run their callbacks: a
   * context whose thread is in a long task would otherwise hold back every append of the origin (a
   * read/write transaction waits for the read ones made before it). A read that fails is a `gap` (what it
   * would have shown is unknown: never a complete read), or a `fail` where the log cannot be reached.
   */
  function reading(collect, done) {
    database.when(() => {
      const db = database.db;
      if (db === null) return emit('fail');
      let transaction;
      try {
        transaction = db.transaction(['log', 'meta']);
      } catch (e) {
        return database.lost(db);
      }
      let requests;
      transaction.oncomplete = () => {
        database.used();
        done(requests);
      };
      transaction.onabort = () => emit('gap');
      try {
        requests = collect(transaction);
        if (transaction.commit) transaction.commit();
      } catch (e) {
        abort(transaction);
      }
    });
  }

  /** Reads the entries after `after` in key order, then reports the floor. */
  function read(after) {
    reading(
      (transaction) => {
        const range = IDBKeyRange.lowerBound(after, true);
        const log = transaction.objectStore('log');
        return [transaction.objectStore('meta').openKeyCursor(null, 'prev'), log.getAllKeys(range), log.getAll(range)];
      },
      ([floor, keys, values]) => {
        keys.result.forEach((key, k) => emit('entry', key, values.result[k].data));
        emit('read', floor.result ? floor.result.key : 0);
      },
    );
  }

  /**
   * Finds the last key of the log. Made before any append of this object (the edge starts a log before it
   * posts a Join), so every one of those comes after it.
   */
  function start() {
    reading(
      (transaction) => transaction.objectStore('log').openKeyCursor(null, 'prev'),
      (request) => emit('start', request.result ? request.result.key : 0),
    );
  }

  /** An append is done; the carrier of a closed object closes after its last one. */
  function settle() {
    inflight--;
    if (closed && inflight === 0 && carrier !== null) carrier.close();
  }

  function close() {
    if (closed) return;
    closed = true;
    database.logs.delete(emit);
    if (carrier !== null) {
      carrier.onmessage = null;
      if (inflight === 0) carrier.close();
    } else if (storage !== null && globalObject.removeEventListener) {
      globalObject.removeEventListener('storage', onStorage);
    }
  }

  return self;
}

/** Aborts `transaction` after a request could not be made on it (its `abort` event is the answer). */
function abort(transaction) {
  try {
    transaction.abort();
  } catch (e) {
    // It finished already: its `complete` or `abort` event answers.
  }
}
