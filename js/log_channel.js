// The transport over a log in IndexedDB (docs/PROTOCOL.md §12), for the engines whose BroadcastChannel is
// not known to deliver the messages of an origin in one order to every context (WebKit delivers a post to
// the sender's own process first), and for the globals that have no BroadcastChannel (Safari before
// 15.4). It does the I/O; the order is the Rust core's (src/protocol/log_order.rs).
//
// The protocol needs one order of the origin's messages that every context applies, its own included.
// IndexedDB gives one: the read/write transactions of an origin's connections on one object store run one
// at a time, and an autoIncrement key grows with each append (an aborted one gives its key back). So a post
// appends the message in a read/write transaction, and its key is its place in the order (A1′). What a
// context learns, it learns as entries `(key, data)`, in whatever order they come: its own appends once
// committed; the other contexts' from the BroadcastChannel of the same name, which carries each entry as
// soon as its writer's append commits (the carrier); and reads of the log, which the participant asks for
// when a key is missing. Without a BroadcastChannel, a writer pokes the other documents through a
// localStorage `storage` event, and the participant reads the log when poked, and every so often while it
// waits (workers get no pokes).
//
// The participant says how far to trim the log (`trim`: entries no member of its history needs). A read
// reports the floor (the greatest key deleted): a participant whose position is below it missed messages,
// and steps out and rejoins. So does a participant whose append failed (its message is not in the log: a
// `gap` event), or whose read failed, or whose connection to the database ended; a participant whose log
// cannot be reached at all (a `fail` event) refuses requests. An append that finds the storage quota full
// is tried again, later, before this object's next ones.
//
// Keys name entries only within one database: one deleted and made anew starts again at 1. So the log has
// an identity, a random number kept as the value of `meta`'s records (the floor's, or key 0 before any
// trim): an append makes one where there is none (a database an older version made, or one whose floor an
// older version wrote), in that append's transaction, so all agree on it. Every carrier frame names the
// identity its append found, and each read, and an append that found another, tells the participant the
// identity it found (an `identity` event): the participant takes frames of that log only. Once its
// connection has ended, an object posts and emits nothing more but the gap.
//
// The edge talks to one log object per context, through the shape of a channel: `postMessage(data)`
// appends, `onmessage` receives events `{ type, key, data }`: `entry`, `start` (the last key before this
// object's first read), `read` (a read ended; `key` is the floor), `identity` (before `start` and `read`:
// `key` is the identity that read found), `carried` (a message on the carrier: a frame of an entry, or
// another context's farewell, for the participant to append), `poke`, `gap`, `fail`. Each
// comes in a microtask of its own, never within the call that caused it.
//
// Written as closures rather than classes: their variables minify to one letter (the classic script's
// size).

import { theGlobal } from './global_object.js';

const DATABASE = 'weblocks-log:';
const POKE = 'weblocks:poke:';
const FAREWELL = 'weblocks:farewell:';
// An append that finds the quota full is tried again after QUOTA_WAIT_MS, doubling, QUOTA_TRIES times;
// then it is a gap (the participant steps out, and rejoins if it still waits).
const QUOTA_WAIT_MS = 50;
const QUOTA_TRIES = 8;

/** What wakes a context over the log (the participant's `Wake`): a carrier, pokes, or its own polls; as src/wasm/engine.rs numbers it (tests/e2e/boundary_codes.test.mjs). */
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
  const database = openDatabase(globalObject, sweep);
  const open = (name, header) => openLog(globalObject, database(name), name, header, carried ? new BroadcastChannel(name) : null, storage);
  open.wake = carried ? WAKE_CARRIER : storage !== null && typeof globalObject.document === 'object' ? WAKE_POKES : WAKE_POLLS;
  return open;
}

/**
 * `database(name)`: the log's database for channel `name`, opened once per global and kept open: `{ when(operation),
 * db, logs, lost(db), used() }`, where `when` runs an operation once the database is open (or failed for good:
 * then `db` is null), in call order. The name, version and stores never change (docs/PROTOCOL.md §9).
 *
 * The connection is not given up on `versionchange` by itself: a page's deletion of the database (logout code
 * clearing every database) waits until the core gives this context's connections up (it holds no lock and is
 * out of the protocol: src/protocol/evidence/sweep.rs) or it is gone, and a context that starts meanwhile
 * waits behind the deletion, so a log is never made anew under a context that still runs on the old one.
 * The connection ends when the browser closes it (`close`: site data cleared from its settings, WebKit's
 * "Connection to Indexed Database server lost"), or when a transaction cannot be made on it: `lost(db)`.
 * The log then ends here for every log object of this global (a `gap`: its participant steps out), and the
 * database is opened again. An open that fails is
 * tried again after each wait of OPEN_BACKOFF_MS, and so is one whose connection keeps failing before any
 * transaction completes on it; after the last, every log object tells its participant that it cannot reach
 * the log (a `fail`: the participant refuses requests from then on). None of it is told within the call
 * that met it.
 */
function openDatabase(globalObject, sweep) {
  const databases = new Map();
  // A page's deletion of the log (`versionchange` without a version) is forwarded (`sweep.onDeletion`);
  // once the core gives the context's connections up, `sweep.release()` ends this one as a lost one
  // (every log object of the global is out of the protocol then), opened again behind the deletion.
  sweep.release = () => {
    for (const entry of databases.values()) if (entry.db !== null) entry.lost(entry.db);
  };
  return (name) => {
    if (!databases.has(name)) {
      // `logs`: how each open log object of this database hears of a `gap` (its connection ended) or a
      // `fail`.
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
        for (const hear of entry.logs) hear('fail');
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
        for (const hear of entry.logs) hear('gap');
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
          db.onversionchange = (event) => {
            if (event.newVersion == null && sweep.onDeletion) sweep.onDeletion();
          };
          db.onclose = () => entry.lost(db);
          ready();
        };
        request.onerror = retry;
      };
      // The first wait is none: opened within the call, a timer's turn sooner.
      attempt = 1;
      open();
      databases.set(name, entry);
    }
    return databases.get(name);
  };
}

/** A new log identity: a random integer in [1, 2^53). */
function newIdentity() {
  return Math.floor(Math.random() * (Number.MAX_SAFE_INTEGER - 1)) + 1;
}

/** Whether `value`, found in `meta`, is a log's identity (older versions wrote 0 there). */
function isIdentity(value) {
  return typeof value === 'number' && value > 0 && value <= Number.MAX_SAFE_INTEGER && Math.floor(value) === value;
}

/** A context's log object on channel `name` (see the top of this file). */
function openLog(globalObject, database, name, header, carrier, storage) {
  const pokeKey = POKE + name;
  const farewellKey = FAREWELL + name;
  // The transactions of this object's appends under way; an append that found the quota full and waits
  // to be tried again (the `tries`-th time), and the appends made since, which wait behind it.
  let writing = 0;
  let retrying = null;
  let tries = 0;
  const held = [];
  // The log's identity, as this object's last transaction found it (0: none yet), and as it last told
  // the participant.
  let known = 0;
  let reported = 0;
  let closed = false;
  // The connection this object was opened on has ended: its log has ended for this object.
  let lost = false;
  // Appends not committed yet: after `close()`, the carrier stays open for them (the others learn of
  // each entry from it), and closes once they are done.
  let inflight = 0;
  const self = {
    onmessage: null,
    postMessage: append,
    read,
    start,
    trim,
    close,
    /**
     * The listener that posts `data` (the participant's farewell `Leave`) for the other contexts to append,
     * without running any script of ours: on the carrier, or as a localStorage value another document's
     * `storage` event carries.
     */
    farewell(data) {
      if (carrier !== null) return carrier.postMessage.bind(carrier, data);
      if (storage !== null) return storage.setItem.bind(storage, farewellKey, JSON.stringify(data));
      return () => {};
    },
  };
  // Every event reaches the participant from a microtask of its own, never within the participant's call
  // that caused it: a participant that posts, reads or starts and is answered at once would re-enter
  // itself. Once the connection has ended, nothing more is emitted (the gap that tells so was the last).
  const emit = (type, key, data) => {
    if (lost) return;
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
  const gap = () => {
    emit('gap');
    // The appends waiting behind one that failed: its context steps out, and its messages after a missing
    // one are not for the log.
    while (held.length > 0) {
      held.pop();
      settle();
    }
  };
  const hear = (type) => {
    if (type !== 'gap') return emit(type);
    gap();
    lost = true;
  };
  database.logs.add(hear);
  const onStorage = (event) => {
    if (event.key === pokeKey) emit('poke');
    else if (event.key === farewellKey && event.newValue !== null) emit('carried', undefined, JSON.parse(event.newValue));
  };
  if (carrier !== null) carrier.onmessage = (event) => emit('carried', undefined, event.data);
  else if (storage !== null && globalObject.addEventListener) globalObject.addEventListener('storage', onStorage);

  /** Appends `data`: an `entry` once committed, else a `gap` (its message is not in the log), or a `fail`. */
  function append(data) {
    inflight++;
    if (retrying !== null) held.push(data);
    else database.when(() => write(data));
  }

  /** Appends `data`, and hands on the committed entry (to this context, and on the carrier or with a poke). */
  function write(data) {
    if (lost) return settle();
    const db = database.db;
    if (db === null) {
      emit('fail');
      return settle();
    }
    let transaction;
    try {
      transaction = db.transaction(['log', 'meta'], 'readwrite');
    } catch (e) {
      database.lost(db);
      return settle();
    }
    // Where this object knows of no identity yet, it reads the log's or makes one: then the transaction
    // must stay open for that request (no `commit()`), which is once per object. Once known, it holds for
    // as long as this object's connection: the database cannot be deleted or made anew under an open
    // connection, and this one is closed only with its `close`, after which this object appends nothing
    // more.
    const make = known === 0;
    let added;
    let log;
    writing++;
    transaction.oncomplete = () => {
      writing--;
      database.used();
      if (lost) return settle();
      const key = added.result;
      if (log.id !== reported) emit('identity', (reported = log.id));
      emit('entry', key, data);
      if (carrier !== null) carrier.postMessage(header.concat([key, log.id], data));
      else poke(key);
      if (retrying === data) {
        retrying = null;
        tries = 0;
        for (const next of held.splice(0)) database.when(() => write(next));
      }
      settle();
    };
    transaction.onabort = () => {
      writing--;
      const quota = transaction.error !== null && transaction.error.name === 'QuotaExceededError';
      // Tried again, later, only where no later append of this object is under way (it could commit
      // first, out of order): the appends made meanwhile wait behind it.
      if (quota && !lost && writing === 0 && tries < QUOTA_TRIES) {
        retrying = data;
        setTimeout(() => database.when(() => write(data)), QUOTA_WAIT_MS << tries++);
        return;
      }
      retrying = null;
      gap();
      settle();
    };
    try {
      added = transaction.objectStore('log').add({ data });
      log = make ? identify(transaction, true) : { id: known };
      if (transaction.commit && !make) transaction.commit();
    } catch (e) {
      abort(transaction);
    }
  }

  /**
   * The log's identity and floor, within a transaction over `meta`: `{ id, floor }` once its request is
   * done. The identity is the value of the greatest key of `meta` (the floor, or 0), if it is one; else
   * (within a read/write transaction, `make`) a new one, written there. Either becomes the one `known`.
   */
  function identify(transaction, make) {
    const meta = transaction.objectStore('meta');
    const log = { id: 0, floor: 0 };
    const cursor = meta.openCursor(null, 'prev');
    cursor.onsuccess = () => {
      const found = cursor.result;
      if (found) log.floor = found.key;
      if (found && isIdentity(found.value)) log.id = found.value;
      else if (make) meta.put((log.id = newIdentity()), log.floor);
      known = log.id;
    };
    return log;
  }

  /**
   * Deletes the entries up to key `upTo`, which no member needs (the participant says), and raises the
   * floor. The floor is the greatest key of `meta`, written blindly with the log's identity as its value,
   * so that trims of several contexts can only raise it. Not before this object knows the identity (it
   * never writes another log's): the log is only longer until then.
   */
  function trim(upTo) {
    database.when(() => {
      if (database.db === null || lost || known === 0) return;
      try {
        const transaction = database.db.transaction(['log', 'meta'], 'readwrite');
        transaction.objectStore('log').delete(IDBKeyRange.upperBound(upTo));
        const meta = transaction.objectStore('meta');
        meta.put(known, upTo);
        meta.delete(IDBKeyRange.upperBound(upTo, true));
        if (transaction.commit) transaction.commit();
      } catch (e) {
        // The log is only longer; the next trim deletes these entries too.
      }
    });
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
      if (lost) return;
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
        return [identify(transaction, false), log.getAllKeys(range), log.getAll(range)];
      },
      ([found, keys, values]) => {
        emit('identity', (reported = found.id));
        keys.result.forEach((key, k) => emit('entry', key, values.result[k].data));
        emit('read', found.floor);
      },
    );
  }

  /**
   * Finds the last key of the log. Made before any append of this object (the edge starts a log before it
   * posts a Join), so every one of those comes after it.
   */
  function start() {
    reading(
      (transaction) => [identify(transaction, false), transaction.objectStore('log').openKeyCursor(null, 'prev')],
      ([found, last]) => {
        emit('identity', (reported = found.id));
        emit('start', last.result ? last.result.key : 0);
      },
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
    database.logs.delete(hear);
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
