// A channel shaped like BroadcastChannel (postMessage, onmessage, close) over a log in IndexedDB, for
// the globals that have no BroadcastChannel: Safari before 15.4, where the native API is missing too
// (docs/PROTOCOL.md §12).
//
// Why a log, and not messages in localStorage `storage` events: the protocol needs one order of
// messages that every context sees, its own included (assumption A1). Storage events cannot give it:
// the writer gets no event for its own write, and a document in the writer's process may see a write
// before the browser has put it among other processes' writes. IndexedDB can: read/write transactions
// on one object store run one at a time, in the order the database schedules them, for every
// connection of the origin, and an autoIncrement key grows in that order. So a post appends the
// message in a read/write transaction, the key is the message's place in the one order, and every
// channel object reads the log in key order, skipping only what it posted itself (as a
// BroadcastChannel object does). `storage` events only say "read the log now" (a poke, written once the
// append has committed); workers have no localStorage and get no pokes, so a busy context (between the
// edge's `ref()` and `unref()`) also reads every POLL_MS.
//
// The log is trimmed of entries older than KEEP_MS. A reader that fell behind the trim (a page
// suspended that long) gets an event of type `gap` instead of the lost messages, and so does every
// reader of a context whose append failed: its node steps out and rejoins (`Node::missed_messages`).
// Where the database cannot be opened (private modes of some browsers), the context's channels only
// reach each other: it coordinates with itself, and says so once in the console.
//
// Written as closures rather than classes: their variables minify to one letter (the classic script's
// size, issue 4); for the same reason the readers' internal properties are named `word_` (the classic
// build renames such properties to one letter: scripts/build.mjs, `mangleProps`).

import { domException, theGlobal } from './lock_api.js';

const DATABASE = 'weblocks-log:';
const POKE = 'weblocks:poke:';
const KEEP_MS = 5 * 60000;
const MARK_MS = 1000;
const POLL_MS = 40;

/**
 * `openChannel(name)` for the Engine where the global has no BroadcastChannel but has IndexedDB;
 * `undefined` otherwise.
 */
export function makeLogChannelFactory(globalObject = theGlobal) {
  const { indexedDB } = globalObject;
  if (typeof globalObject.BroadcastChannel === 'function' || typeof indexedDB !== 'object' || indexedDB === null) {
    return undefined;
  }
  const logs = new Map();
  return (name) => {
    if (!logs.has(name)) logs.set(name, openLog(globalObject, name, () => logs.delete(name)));
    return logs.get(name)();
  };
}

/** The log of one channel name, as this global sees it; returns `channel()`, which makes a channel object. */
function openLog(globalObject, name, forget) {
  const pokeKey = POKE + name;
  const readers = new Set();
  // Operations made before the database is open, in call order.
  const waiting = [];
  // Which channel object of this global posted the entry of each key (so that it skips its own).
  const senders = new Map();
  // A post of this global every MARK_MS, with its key: where to trim.
  const marks = [];
  let db = null;
  let failed = false;
  // The key of the last entry read; undefined until the first reader starts.
  let position;
  let reading = false;
  let again = false;
  let polls = 0;
  let pollTimer = null;
  let storage = null;
  try {
    storage = globalObject.localStorage;
    storage.getItem(pokeKey);
  } catch (e) {
    storage = null;
  }
  const onStorage = (event) => {
    if (event.key === null || event.key === pokeKey) read();
  };
  if (storage !== null) if (globalObject.addEventListener != null) globalObject.addEventListener('storage', onStorage);
  open();

  function open() {
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
      db = request.result;
      // Another context deletes or upgrades the database: this log ends here for every reader.
      db.onversionchange = () => {
        db.close();
        db = null;
        lost();
        position = 0;
        for (const reader of readers) reader.from_ = 0;
        open();
      };
      for (const operation of waiting.splice(0)) operation();
    };
    request.onerror = () => fail(request.error);
  }

  /** The database cannot be used: from now on the channels of this global reach only each other. */
  function fail(error) {
    if (failed) return;
    failed = true;
    position = 0;
    console.warn(
      `weblocks: IndexedDB is not usable here (${error != null && error.name != null ? error.name : error}), and this global has no BroadcastChannel; locks are coordinated within this context only.`,
    );
    for (const operation of waiting.splice(0)) operation();
  }

  /** Runs `operation` now if the database is open (or failed), else once it is, in call order. */
  function whenOpen(operation) {
    if (db !== null || failed) operation();
    else waiting.push(operation);
  }

  /**
   * Finds the last key before `reader` existed. The transaction is made now, before any append this
   * global makes after it, so the reader gets everything posted from now on, its own posts excepted.
   */
  function start(reader) {
    if (failed) {
      reader.started_(position);
      return;
    }
    const transaction = db.transaction('log');
    const request = transaction.objectStore('log').openKeyCursor(null, 'prev');
    if (transaction.commit != null) transaction.commit();
    request.onsuccess = () => {
      const last = request.result === null ? 0 : request.result.key;
      if (position === undefined) position = last;
      reader.started_(last);
    };
    request.onerror = () => reader.started_(position != null ? position : 0);
  }

  function append(sender, data) {
    whenOpen(() => {
      if (failed) {
        const key = ++position;
        Promise.resolve().then(() => dispatch(key, sender, data));
        return;
      }
      let transaction;
      try {
        transaction = db.transaction(['log', 'meta'], 'readwrite');
        const added = transaction.objectStore('log').add({ data });
        added.onsuccess = () => {
          senders.set(added.result, sender);
          mark(added.result);
        };
        trim(transaction);
        transaction.oncomplete = () => {
          poke(added.result);
          read();
        };
        transaction.onabort = lost;
        if (transaction.commit != null) transaction.commit();
      } catch (e) {
        if (transaction != null && transaction.abort != null) transaction.abort();
        lost();
      }
    });
  }

  /** Remembers, once every MARK_MS, the key of a post of this global and when it was made. */
  function mark(key) {
    const now = Date.now();
    if (marks.length === 0 || now - marks[marks.length - 1][0] >= MARK_MS) marks.push([now, key]);
  }

  /**
   * Deletes, within an append, the entries older than KEEP_MS, as far as this global's marks tell. The
   * floor that readers check for a gap (the last key deleted) is the greatest key of the `meta` store:
   * written blindly, so that trims of several contexts can only raise it.
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
      if (storage != null) storage.setItem(pokeKey, `${key} ${Math.random()}`);
    } catch (e) {
      // Storage full or gone: the others still poll while busy.
    }
  }

  /** Reads what was appended since the last read, in key order, and hands it to the readers. */
  function read() {
    if (db === null || position === undefined) return;
    if (reading) {
      again = true;
      return;
    }
    reading = true;
    let transaction;
    try {
      transaction = db.transaction(['log', 'meta']);
    } catch (e) {
      reading = false;
      return;
    }
    const after = IDBKeyRange.lowerBound(position, true);
    const floor = transaction.objectStore('meta').openKeyCursor(null, 'prev');
    const keys = transaction.objectStore('log').getAllKeys(after);
    const values = transaction.objectStore('log').getAll(after);
    // Ends the transaction as soon as its reads are done, not once this thread has run their callbacks:
    // a context whose main thread is in a long task would otherwise hold back every append of the
    // origin (a read/write transaction waits for the read ones made before it).
    if (transaction.commit != null) transaction.commit();
    transaction.oncomplete = () => {
      reading = false;
      const found = floor.result;
      const trimmed = found != null && found.key != null ? found.key : 0;
      if (trimmed > position) {
        lost();
        position = trimmed;
      }
      keys.result.forEach((key, k) => {
        if (key > position) {
          position = key;
          dispatch(key, senders.get(key), values.result[k].data);
        }
      });
      if (again) {
        again = false;
        read();
      }
    };
    transaction.onabort = () => {
      reading = false;
    };
  }

  function dispatch(key, sender, data) {
    senders.delete(key);
    for (const reader of readers) reader.receive_(key, sender, data);
  }

  /** Messages were lost for this global: every reader gets a `gap`. */
  function lost() {
    for (const reader of readers) reader.emit_({ type: 'gap' });
  }

  function poll(change) {
    polls += change;
    if (polls > 0 && pollTimer === null) {
      pollTimer = setInterval(read, POLL_MS);
    } else if (polls <= 0 && pollTimer !== null) {
      clearInterval(pollTimer);
      pollTimer = null;
    }
  }

  /** A channel object: a reader of the log from the moment it was made, and a writer to it. */
  return function channel() {
    let closed = false;
    let referenced = true;
    // Entries read before the log said where this reader starts (`reader.from_`).
    const early = [];
    const self = {
      onmessage: null,
      postMessage(data) {
        if (closed) throw domException('The channel is closed.', 'InvalidStateError');
        append(reader, data);
      },
      close() {
        if (closed) return;
        self.unref();
        closed = true;
        readers.delete(reader);
        if (readers.size > 0) return;
        if (globalObject.removeEventListener != null) globalObject.removeEventListener('storage', onStorage);
        whenOpen(() => {
          if (db != null) db.close();
        });
        forget();
      },
      /** The edge's "this context is busy": read the log every POLL_MS until `unref()`. */
      ref() {
        if (!referenced && !closed) {
          referenced = true;
          poll(1);
        }
      },
      unref() {
        if (referenced) {
          referenced = false;
          poll(-1);
        }
      },
    };
    const reader = {
      from_: undefined,
      receive_(key, sender, data) {
        if (reader.from_ === undefined) early.push([key, sender, data]);
        else if (key > reader.from_ && sender !== reader) reader.emit_({ type: 'message', data });
      },
      started_(from) {
        reader.from_ = from;
        for (const entry of early.splice(0)) reader.receive_(...entry);
      },
      emit_(event) {
        if (closed) return;
        try {
          if (self.onmessage != null) self.onmessage(event);
        } catch (error) {
          setTimeout(() => {
            throw error;
          });
        }
      },
    };
    readers.add(reader);
    poll(1);
    whenOpen(() => start(reader));
    return self;
  };
}
