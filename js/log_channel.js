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
// append failed (its message is not in the log: a `gap` event).
//
// The edge talks to one log object per context, through the shape of a channel: `postMessage(data)`
// appends, `onmessage` receives events `{ type, key, data }`: `entry`, `start` (the last key before this
// object's first read), `read` (a read ended; `key` is the floor), `carried` (a message on the carrier: a
// frame of an entry, or another context's farewell or deputy's vouch, for the node to append), `poke`,
// `gap`.
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

/**
 * Whether this is Blink or Gecko, the engines in which the test command checks what the protocol relies on
 * beyond the specifications: that BroadcastChannel delivers every message of an origin in one order to
 * every context, the sender's own second channel object included (assumption A1 of docs/PROTOCOL.md,
 * tests/e2e/total_order*.test.mjs; WebKit and Node.js do not give it), and that a worker's channel posts
 * while its page's main thread is busy (the deputy, js/deputy.js; WebKit's waits for the page). The engine
 * is told by what its JavaScript engine has and the others lack, the same in every context of one browser
 * whatever a page does to its user agent string: V8's `Intl.v8BreakIterator` (Blink; Node.js has none,
 * and Deno is left out) and SpiderMonkey's `stack` accessor on `Error.prototype` (Gecko; Servo is left
 * out). Anything else takes the IndexedDB log, which needs no such assumption, and has no deputy.
 */
export function testedEngine(globalObject = theGlobal) {
  const { Intl, Error, Deno, navigator } = globalObject;
  const v8 = typeof Intl === 'object' && Intl !== null && typeof Intl.v8BreakIterator === 'function';
  const stack = Object.getOwnPropertyDescriptor(Error.prototype, 'stack');
  const spiderMonkey = stack !== undefined && typeof stack.get === 'function';
  const servo = typeof navigator === 'object' && navigator !== null && /Servo\//.test(navigator.userAgent);
  return (v8 && Deno === undefined) || (spiderMonkey && !servo);
}

/** Whether this engine's BroadcastChannel gives the origin's messages one order (see `testedEngine`). */
export const givesOneOrder = testedEngine;

/**
 * The Engine's `openChannel(name, header)` where the context coordinates over the log: the engine's
 * BroadcastChannel does not give one order (or there is none) and there is IndexedDB. Its `wake` says what
 * wakes the context. `undefined` where the engine's BroadcastChannel gives one order; where there is
 * neither that nor IndexedDB, a function that opens nothing (the context locks alone).
 */
export function makeLogChannelFactory(globalObject = theGlobal, oneOrder = givesOneOrder(globalObject)) {
  const { indexedDB, BroadcastChannel } = globalObject;
  const carrier = typeof BroadcastChannel === 'function';
  if (carrier && oneOrder) return undefined;
  if (typeof indexedDB !== 'object' || indexedDB === null) return () => undefined;
  let storage = null;
  try {
    storage = globalObject.localStorage;
    storage.getItem(POKE);
  } catch (e) {
    storage = null;
  }
  const database = openDatabase(globalObject);
  const open = (name, header) => openLog(globalObject, database(name), name, header, carrier ? new BroadcastChannel(name) : null, storage);
  open.wake = carrier ? WAKE_CARRIER : storage !== null && typeof globalObject.document === 'object' ? WAKE_POKES : WAKE_POLLS;
  return open;
}

/**
 * `database(name)`: the log's database for channel `name`, opened once per global and kept open: `{ when(operation),
 * db }`, where `when` runs an operation once the database is open (or failed: then `db` is null), in call order.
 */
function openDatabase(globalObject) {
  const databases = new Map();
  return (name) => {
    if (!databases.has(name)) {
      const entry = { db: null, failed: false, waiting: [], lost: new Set() };
      const when = (operation) => {
        if (entry.db !== null || entry.failed) operation();
        else entry.waiting.push(operation);
      };
      const fail = (error) => {
        if (entry.failed) return;
        entry.failed = true;
        console.warn(
          `weblocks: IndexedDB is not usable here (${error && error.name ? error.name : error}); locks are coordinated within this context only.`,
        );
        for (const operation of entry.waiting.splice(0)) operation();
      };
      const open = () => {
        let request;
        try {
          request = globalObject.indexedDB.open(DATABASE + name, 1);
        } catch (error) {
          fail(error);
          return;
        }
        request.onupgradeneeded = () => {
          request.result.createObjectStore('log', { autoIncrement: true });
          request.result.createObjectStore('meta');
        };
        request.onsuccess = () => {
          entry.db = request.result;
          // Another context deletes or upgrades the database: the log ends here for every reader.
          entry.db.onversionchange = () => {
            entry.db.close();
            entry.db = null;
            for (const gap of entry.lost) gap();
            open();
          };
          for (const operation of entry.waiting.splice(0)) operation();
        };
        request.onerror = () => fail(request.error);
      };
      open();
      entry.when = when;
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
  // Where the database failed: the keys this object hands its own appends (it then coordinates with itself).
  let alone = 0;
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
  const emit = (type, key, data) => {
    if (closed) return;
    try {
      if (self.onmessage !== null) self.onmessage({ type, key, data });
    } catch (error) {
      setTimeout(() => {
        throw error;
      });
    }
  };
  const gap = () => emit('gap');
  database.lost.add(gap);
  const onStorage = (event) => {
    if (event.key === pokeKey) emit('poke');
    else if (event.key === farewellKey && event.newValue !== null) emit('carried', undefined, JSON.parse(event.newValue));
  };
  // Where the database failed, this context coordinates with itself: the carrier's entries are not for it.
  if (carrier !== null) carrier.onmessage = (event) => database.failed || emit('carried', undefined, event.data);
  else if (storage !== null && globalObject.addEventListener) globalObject.addEventListener('storage', onStorage);

  function append(data) {
    inflight++;
    database.when(() => {
      if (database.db === null) {
        const key = ++alone;
        Promise.resolve().then(() => {
          emit('entry', key, data);
          settle();
        });
        return;
      }
      let transaction;
      try {
        transaction = database.db.transaction(['log', 'meta'], 'readwrite');
        const added = transaction.objectStore('log').add({ data });
        added.onsuccess = () => mark(added.result);
        trim(transaction);
        transaction.oncomplete = () => {
          const key = added.result;
          emit('entry', key, data);
          if (carrier !== null) carrier.postMessage(header.concat([key], data));
          else poke(key);
          settle();
        };
        transaction.onabort = () => {
          gap();
          settle();
        };
        if (transaction.commit) transaction.commit();
      } catch (e) {
        if (transaction && transaction.abort) {
          transaction.abort();
        } else {
          gap();
          settle();
        }
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
   * Runs a read-only transaction over the log, `collect(transaction)` its requests; `done()` once they are
   * done. It ends as soon as its reads are done, not once this thread has run their callbacks: a context
   * whose thread is in a long task would otherwise hold back every append of the origin (a read/write
   * transaction waits for the read ones made before it).
   */
  function reading(collect, done) {
    database.when(() => {
      if (database.db === null) return done(null);
      let transaction;
      let requests;
      try {
        transaction = database.db.transaction(['log', 'meta']);
        requests = collect(transaction);
        if (transaction.commit) transaction.commit();
      } catch (e) {
        return done(null);
      }
      transaction.oncomplete = () => done(requests);
      transaction.onabort = () => done(null);
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
      (requests) => {
        if (requests === null) return emit('read', 0);
        const [floor, keys, values] = requests;
        keys.result.forEach((key, k) => emit('entry', key, values.result[k].data));
        emit('read', floor.result ? floor.result.key : 0);
      },
    );
  }

  /**
   * Finds the last key of the log. Made before any append of this object (the edge starts a log before it
   * posts a Join), so every one of those comes after it. A read that fails is a `gap`: the node starts over.
   */
  function start() {
    reading(
      (transaction) => transaction.objectStore('log').openKeyCursor(null, 'prev'),
      (request) => {
        if (request !== null) emit('start', request.result ? request.result.key : 0);
        else if (database.failed) emit('start', alone);
        else gap();
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
    database.lost.delete(gap);
    if (carrier !== null) {
      carrier.onmessage = null;
      if (inflight === 0) carrier.close();
    } else if (storage !== null && globalObject.removeEventListener) {
      globalObject.removeEventListener('storage', onStorage);
    }
  }

  return self;
}
