// The I/O of the evidence of life and death (docs/PROTOCOL.md §7, "evidence"). What the evidence decides
// (when to open this context's database, when to enter it in the register, what to watch, when to try
// again, what to collect, when to give up) is the Rust core's (src/protocol/evidence.rs), which runs in
// the simulation too; this object only makes the IndexedDB calls it asks for and forwards their events.
//
// The databases: each context's own, `<prefix><client id>:<key>`, open at version 1 while it lives; an
// open at version 2 by another context waits until no connection at version 1 is left, which the
// storage backend allows only once the owner is gone (assumption A5). The register, the database
// `<prefix>` with one store `alive`, whose keys are the members' database names (and, behind a `~`, the
// names of databases opened ahead, before their context asked for them: older versions' census skips
// them). No connection gives itself up on `versionchange`: a deletion or another version's open waits for
// it. A deletion's (`newVersion` null, a page's logout code) on a connection at version 1 is forwarded
// (DELETION_WAITS): the core decides when this context gives its connections up (`release`: the
// transport record's and the log's go by the `onRelease` hook, whose answer comes back as `agreed()`).
//
// The edge (src/wasm/evidence.rs) calls `open`, `close`, `delete`, `write`, `read` and `list` with the handles and
// transactions the core numbers; each answers with events `{ type, key, data }` in a microtask of its
// own, never within the call (`key`: the handle, or the transaction). `prepare` makes, while the wasm
// loads, the operations the core takes as made before it existed (`Evidence::prepared`): this context's
// database opened ahead as handle 2 (`ahead` is its key), the register as handle 1; their events wait
// for `listen`. `end` closes everything where no engine comes.

import { theGlobal } from './global_object.js';

/** The events' types, as src/wasm/evidence.rs numbers them (tests/static/boundary_codes.test.mjs). */
const UPGRADING = 1;
const OPENED = 2;
const OPEN_FAILED = 3;
const CLOSED = 4;
const HIDDEN = 5;
const WRITTEN = 6;
const LISTED = 7;
const MISSING = 8;
const PAGE_HIDDEN = 9;
const PAGE_SHOWN = 10;
const DELETION_WAITS = 11;
const RECORD_AGREED = 12;
const DATABASES = 13;
/** The kinds of the register's entries. */
const MEMBER = 1;
const AHEAD = 2;

/**
 * The liveness storage object of a global, or undefined where it has no IndexedDB. `scope` (tests) keeps
 * the databases of the contexts that coordinate on a scoped channel apart: `weblocks-alive:<scope>:…`.
 */
export function makeLivenessStorage(globalObject = theGlobal, scope) {
  const { indexedDB } = globalObject;
  if (typeof indexedDB !== 'object' || indexedDB === null) return undefined;
  const prefix = scope === undefined ? 'weblocks-alive:' : 'weblocks-alive:' + scope + ':';
  const nameOf = (client, key) => (client === undefined ? prefix : prefix + client + ':' + key);
  const entryName = (kind, client, key) => (kind === AHEAD ? '~' : '') + nameOf(client, key);
  // `number`, then the client id and key of a liveness database's name without its prefix, onto `data`.
  const pushName = (data, number, rest) => {
    const parts = rest.split(':');
    const key = Number(parts[1]);
    if (parts.length === 2 && key > 0 && Number.isSafeInteger(key)) data.push(number, parts[0], key);
  };
  // Events wait for `listen`; each then comes in a microtask of its own.
  let handler = null;
  const early = [];
  const emit = (type, key, data) =>
    Promise.resolve().then(() => {
      const event = { type, key, data };
      if (handler === null) early.push(event);
      else handler(event);
    });
  // The connections by handle: `{ db, hides, waiting }`, `db` null while it opens (`waiting`: the
  // transactions asked for meanwhile).
  const connections = new Map();
  let hidden = false;
  // The client id `prepare` was given.
  let client;
  const open = (handle, client, key, version, hides) => {
    const connection = { db: null, hides, waiting: [] };
    const ready = () => connection.waiting.splice(0).forEach((run) => run());
    let request;
    try {
      request = indexedDB.open(nameOf(client, key), version);
    } catch (e) {
      return emit(OPEN_FAILED, handle);
    }
    connections.set(handle, connection);
    request.onupgradeneeded = (event) => {
      if (client === undefined) request.result.createObjectStore('alive');
      if (version === 1) return;
      // A watch of a database that does not exist (its owner deleted it, or has not made it yet) makes
      // none: a watcher that ended before deleting it would leave it behind.
      if (event.oldVersion !== 0) return emit(UPGRADING, handle);
      emit(MISSING, handle);
      request.transaction.abort();
    };
    request.onsuccess = () => {
      const db = request.result;
      if (connections.get(handle) !== connection) return db.close();
      if (hides && hidden) {
        db.close();
        connections.delete(handle);
        return emit(HIDDEN, handle);
      }
      connection.db = db;
      // A watch's connection (version 2) closes at once, and its own deletion of the database it
      // watched is no page's.
      db.onversionchange = (event) => {
        if (version === 1 && event.newVersion == null) emit(DELETION_WAITS, handle);
      };
      db.onclose = () => {
        if (connections.get(handle) === connection) {
          connections.delete(handle);
          emit(CLOSED, handle);
        }
      };
      emit(OPENED, handle);
      ready();
    };
    request.onerror = () => {
      if (connections.get(handle) === connection) {
        connections.delete(handle);
        emit(OPEN_FAILED, handle);
      }
      ready();
    };
  };
  // Closing a connection still being opened fails the transactions that wait for it.
  const close = (handle) => {
    const connection = connections.get(handle);
    connections.delete(handle);
    if (connection === undefined) return;
    if (connection.db !== null) connection.db.close();
    else connection.waiting.splice(0).forEach((run) => run());
  };
  // Runs `operation(store)` in a transaction on the register's connection `handle` once it is open;
  // `done(ok)` once it ends. One that cannot be made fails, and its connection is told closed.
  const transaction = (handle, mode, operation, done) => {
    const connection = connections.get(handle);
    if (connection === undefined) return done(false);
    if (connection.db === null) return connection.waiting.push(() => transaction(handle, mode, operation, done));
    try {
      const t = connection.db.transaction(['alive'], mode);
      operation(t.objectStore('alive'));
      t.oncomplete = () => done(true);
      t.onabort = () => done(false);
    } catch (e) {
      done(false);
      close(handle);
      emit(CLOSED, handle);
    }
  };
  // A page entering the back/forward cache says so, then closes the connections opened with `hides`,
  // from a listener of its own: it runs before any script of ours (the participant's `pagehide` comes
  // after these events), and even where the participant's listener is cut short.
  if (typeof globalObject.addEventListener === 'function') {
    globalObject.addEventListener(
      'pagehide',
      (event) => {
        if (!event.persisted) return;
        hidden = true;
        emit(PAGE_HIDDEN, 0);
        for (const [handle, connection] of connections) {
          if (connection.hides && connection.db !== null) {
            close(handle);
            emit(HIDDEN, handle);
          }
        }
      },
      true,
    );
    globalObject.addEventListener('pageshow', (event) => {
      hidden = false;
      if (event.persisted) emit(PAGE_SHOWN, 0);
    });
  }
  // The promises of `whenReleased`, settled at the next `release`.
  let released = [];
  const self = {
    ahead: 0,
    /** Gives up the transport record's and the log's connections, and asks the record again (set by the caller). */
    onRelease: () => self.agreed(),
    /** The core gave this context's connections up for a deletion (`StorageOp::ReleaseRecord`). */
    release() {
      self.onRelease();
      for (const resolve of released.splice(0)) resolve();
    },
    /** A deletion of another weblocks database (the record's, the log's) waits for this context. */
    deletionWaits: () => emit(DELETION_WAITS, 0),
    /** The record, asked again after `release`, names the transport this context uses. */
    agreed: () => emit(RECORD_AGREED, 0),
    /**
     * The extension `close()`: this context gives its weblocks connections up as for a deletion (once it
     * holds no lock), resolving then.
     */
    whenReleased() {
      const promise = new Promise((resolve) => released.push(resolve));
      self.deletionWaits();
      return promise;
    },
    listen(listener) {
      handler = listener;
      for (const event of early.splice(0)) Promise.resolve().then(() => handler(event));
    },
    /**
     * While the wasm loads: with `openAhead`, this context's database as handle 2; the register as
     * handle 1, and there (with `openAhead`) the entry of the database opened ahead, as transaction 1.
     */
    prepare(clientId, openAhead) {
      client = clientId;
      if (openAhead) {
        self.ahead = 1 + Math.floor(Math.random() * 2 ** 52);
        open(2, clientId, self.ahead, 1, false);
      }
      open(1, undefined, 0, 1, false);
      if (openAhead) self.write(1, 1, 0, '', 0, AHEAD, clientId, self.ahead);
    },
    /** No engine comes: everything goes, the database opened ahead and its entry with it. */
    end() {
      const ahead = self.ahead;
      for (const handle of [...connections.keys()]) if (handle !== 1) close(handle);
      if (ahead === 0) return close(1);
      self.delete(client, ahead);
      transaction(1, 'readwrite', (store) => store.delete(entryName(AHEAD, client, ahead)), () => close(1));
    },
    open,
    close,
    delete(client, key) {
      try {
        indexedDB.deleteDatabase(nameOf(client, key));
      } catch (e) {
        // Left for another context's watch to collect.
      }
    },
    write(handle, tx, removeKind, removeClient, removeKey, putKind, putClient, putKey) {
      transaction(
        handle,
        'readwrite',
        (store) => {
          if (removeKind !== 0) store.delete(entryName(removeKind, removeClient, removeKey));
          if (putKind !== 0) store.put(1, entryName(putKind, putClient, putKey));
        },
        (ok) => emit(WRITTEN, tx, ok),
      );
    },
    read(handle, tx) {
      const names = [];
      transaction(
        handle,
        'readonly',
        (store) => {
          // A cursor rather than `getAllKeys()`, which engines before IndexedDB 2.0 lack.
          const request = store.openCursor();
          request.onsuccess = () => {
            const cursor = request.result;
            if (cursor) {
              names.push(cursor.key);
              cursor.continue();
            }
          };
        },
        (ok) => {
          if (!ok) return emit(LISTED, tx, null);
          const data = [];
          for (const name of names) {
            const kind = typeof name !== 'string' ? 0 : name.startsWith(prefix) ? MEMBER : name.startsWith('~' + prefix) ? AHEAD : 0;
            if (kind !== 0) pushName(data, kind, name.slice(prefix.length + kind - 1));
          }
          emit(LISTED, tx, data);
        },
      );
    },
    /** The origin's liveness databases with their versions (`indexedDB.databases()`, where there is one). */
    list() {
      const answer = (data) => emit(DATABASES, 0, data);
      let listing;
      try {
        listing = indexedDB.databases();
      } catch (e) {
        return answer(null);
      }
      // A listing that rejects, or answers what does not read as one, answers null: never nothing.
      Promise.resolve(listing)
        .then((all) => {
          const data = [];
          for (const { name, version } of all) if (typeof name === 'string' && name.startsWith(prefix)) pushName(data, version, name.slice(prefix.length));
          answer(data);
        })
        .catch(() => answer(null));
    },
  };
  return self;
}
