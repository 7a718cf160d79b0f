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

const DATABASE = 'weblocks-log:';
const POKE = 'weblocks:poke:';
const KEEP_MS = 5 * 60_000;
const MARK_MS = 1_000;
const POLL_MS = 40;

/**
 * `openChannel(name)` for the Engine where the global has no BroadcastChannel but has IndexedDB;
 * `undefined` otherwise.
 */
export function makeLogChannelFactory(globalObject = globalThis) {
  if (typeof globalObject.BroadcastChannel === 'function' || typeof globalObject.indexedDB !== 'object' || globalObject.indexedDB === null) {
    return undefined;
  }
  const logs = new Map();
  return (name) => {
    let log = logs.get(name);
    if (log === undefined) {
      log = new Log(globalObject, name, () => logs.delete(name));
      logs.set(name, log);
    }
    return new LogChannel(log);
  };
}

/** One channel object: a reader of the log from the moment it was made, and a writer to it. */
class LogChannel {
  constructor(log) {
    this.log = log;
    this.onmessage = null;
    // The key of the last entry before this object existed; undefined until the log says, and entries
    // read meanwhile wait in `early`.
    this.from = undefined;
    this.early = [];
    this.referenced = true;
    this.closed = false;
    log.attach(this);
  }

  postMessage(data) {
    if (this.closed) throw new DOMException('The channel is closed.', 'InvalidStateError');
    this.log.append(this, data);
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    this.unref();
    this.log.detach(this);
  }

  /** The edge's "this context is busy": read the log every POLL_MS until `unref()`. */
  ref() {
    if (!this.referenced && !this.closed) {
      this.referenced = true;
      this.log.poll(1);
    }
  }

  unref() {
    if (this.referenced) {
      this.referenced = false;
      this.log.poll(-1);
    }
  }

  /** The log's entry `key`, posted by `sender`. */
  receive(key, sender, data) {
    if (this.from === undefined) this.early.push([key, sender, data]);
    else if (key > this.from && sender !== this) this.emit({ type: 'message', data });
  }

  started(from) {
    this.from = from;
    for (const [key, sender, data] of this.early.splice(0)) this.receive(key, sender, data);
  }

  emit(event) {
    if (this.closed) return;
    try {
      this.onmessage?.(event);
    } catch (error) {
      reportError(error);
    }
  }
}

function reportError(error) {
  if (typeof globalThis.reportError === 'function') globalThis.reportError(error);
  else setTimeout(() => { throw error; });
}

/** The log of one channel name, as this global sees it: one database connection, and its readers. */
class Log {
  constructor(globalObject, name, forget) {
    this.global = globalObject;
    this.name = name;
    this.forget = forget;
    this.readers = new Set();
    // Operations made before the database is open, in call order.
    this.waiting = [];
    this.db = null;
    this.failed = false;
    // Each entry a post of this global made, to the time it was made: where to trim (every MARK_MS).
    this.marks = [];
    // The key of the last entry read; undefined until the first reader starts.
    this.position = undefined;
    this.reading = false;
    this.again = false;
    this.polls = 0;
    // Which channel object of this global posted the entry of each key (so that it skips its own).
    this.senders = new Map();
    this.pollTimer = null;
    this.storage = localStorageOf(globalObject);
    this.onStorage = (event) => {
      if (event.key === null || event.key === POKE + name) this.read();
    };
    if (this.storage !== null) globalObject.addEventListener?.('storage', this.onStorage);
    this.open();
  }

  open() {
    let request;
    try {
      request = this.global.indexedDB.open(DATABASE + this.name, 1);
    } catch (error) {
      this.fail(error);
      return;
    }
    request.onupgradeneeded = () => {
      const db = request.result;
      db.createObjectStore('log', { autoIncrement: true });
      db.createObjectStore('meta');
    };
    request.onsuccess = () => {
      this.db = request.result;
      // Another context deletes or upgrades the database: this log ends here for every reader.
      this.db.onversionchange = () => {
        this.db.close();
        this.db = null;
        this.lost();
        this.position = 0;
        for (const reader of this.readers) reader.from = 0;
        this.open();
      };
      for (const operation of this.waiting.splice(0)) operation();
    };
    request.onerror = () => this.fail(request.error);
    request.onblocked = () => {};
  }

  /** The database cannot be used: from now on the channels of this global reach only each other. */
  fail(error) {
    if (this.failed) return;
    this.failed = true;
    this.position = 0;
    console.warn(
      `weblocks: IndexedDB is not usable here (${error?.name ?? error}), and this global has no BroadcastChannel; locks are coordinated within this context only.`,
    );
    for (const operation of this.waiting.splice(0)) operation();
  }

  /** Runs `operation` now if the database is open (or failed), else once it is, in call order. */
  whenOpen(operation) {
    if (this.db !== null || this.failed) operation();
    else this.waiting.push(operation);
  }

  attach(reader) {
    this.readers.add(reader);
    this.poll(1);
    this.whenOpen(() => this.start(reader));
  }

  detach(reader) {
    this.readers.delete(reader);
    if (this.readers.size > 0) return;
    this.global.removeEventListener?.('storage', this.onStorage);
    this.whenOpen(() => this.db?.close());
    this.forget();
  }

  /**
   * Finds the last key before `reader` existed. The transaction is made now, before any append this
   * global makes after it, so the reader gets everything posted from now on, its own channel's posts
   * excepted.
   */
  start(reader) {
    if (this.failed) {
      reader.started(this.position);
      return;
    }
    const request = this.db.transaction('log').objectStore('log').openKeyCursor(null, 'prev');
    request.onsuccess = () => {
      const last = request.result === null ? 0 : request.result.key;
      if (this.position === undefined) this.position = last;
      reader.started(last);
    };
    request.onerror = () => reader.started(this.position ?? 0);
  }

  append(sender, data) {
    this.whenOpen(() => {
      if (this.failed) {
        const key = ++this.position;
        Promise.resolve().then(() => this.dispatch(key, sender, data));
        return;
      }
      let transaction;
      try {
        transaction = this.db.transaction(['log', 'meta'], 'readwrite');
        const log = transaction.objectStore('log');
        const added = log.add({ data });
        added.onsuccess = () => {
          this.senders.set(added.result, sender);
          this.mark(added.result);
        };
        this.trim(transaction);
        transaction.oncomplete = () => {
          this.poke(added.result);
          this.read();
        };
        transaction.onabort = () => this.lost();
        transaction.commit?.();
      } catch {
        transaction?.abort?.();
        this.lost();
      }
    });
  }

  /** Remembers, once every MARK_MS, the key of a post of this global and when it was made. */
  mark(key) {
    const now = Date.now();
    const last = this.marks[this.marks.length - 1];
    if (last === undefined || now - last[0] >= MARK_MS) this.marks.push([now, key]);
  }

  /**
   * Deletes, within an append, the entries older than KEEP_MS, as far as this global's marks tell. The
   * floor that readers check for a gap (the last key deleted) is the greatest key of the `meta` store:
   * written blindly, so that trims of several contexts can only raise it.
   */
  trim(transaction) {
    const old = Date.now() - KEEP_MS;
    let upTo;
    while (this.marks.length > 0 && this.marks[0][0] < old) upTo = this.marks.shift()[1];
    if (upTo === undefined) return;
    transaction.objectStore('log').delete(IDBKeyRange.upperBound(upTo));
    const meta = transaction.objectStore('meta');
    meta.put(0, upTo);
    meta.delete(IDBKeyRange.upperBound(upTo, true));
  }

  /** Tells the other documents of the origin that the log has a new entry. */
  poke(key) {
    try {
      this.storage?.setItem(POKE + this.name, `${key} ${Math.random()}`);
    } catch {
      // Storage full or gone: the others still poll while busy.
    }
  }

  /** Reads what was appended since the last read, in key order, and hands it to the readers. */
  read() {
    if (this.db === null || this.position === undefined) return;
    if (this.reading) {
      this.again = true;
      return;
    }
    this.reading = true;
    let transaction;
    try {
      transaction = this.db.transaction(['log', 'meta']);
    } catch {
      this.reading = false;
      return;
    }
    const after = IDBKeyRange.lowerBound(this.position, true);
    const floor = transaction.objectStore('meta').openKeyCursor(null, 'prev');
    const keys = transaction.objectStore('log').getAllKeys(after);
    const values = transaction.objectStore('log').getAll(after);
    transaction.oncomplete = () => {
      this.reading = false;
      const trimmed = floor.result?.key ?? 0;
      if (trimmed > this.position) {
        this.lost();
        this.position = trimmed;
      }
      for (let k = 0; k < keys.result.length; k++) {
        const key = keys.result[k];
        if (key <= this.position) continue;
        this.position = key;
        this.dispatch(key, this.senders.get(key), values.result[k].data);
      }
      if (this.again) {
        this.again = false;
        this.read();
      }
    };
    transaction.onabort = () => {
      this.reading = false;
    };
  }

  dispatch(key, sender, data) {
    this.senders.delete(key);
    for (const reader of this.readers) reader.receive(key, sender, data);
  }

  /** Messages were lost for this global: every reader gets a `gap`. */
  lost() {
    for (const reader of this.readers) reader.emit({ type: 'gap' });
  }

  poll(change) {
    this.polls += change;
    if (this.polls > 0 && this.pollTimer === null) {
      this.pollTimer = setInterval(() => this.read(), POLL_MS);
    } else if (this.polls <= 0 && this.pollTimer !== null) {
      clearInterval(this.pollTimer);
      this.pollTimer = null;
    }
  }
}

function localStorageOf(globalObject) {
  try {
    const storage = globalObject.localStorage;
    storage.getItem(POKE);
    return storage;
  } catch {
    return null;
  }
}
