// Evidence of life and death (docs/PROTOCOL.md §7, "evidence"): what lets the protocol remove a member
// only once it is gone, and lets a joiner know whether any member lives, without reading silence.
//
// Each context that takes part in the protocol keeps a database of its own open, `<prefix><client id>:<key>`
// at version 1, under a key it never used before, and ignores `versionchange` on it. Another context that
// wants to know when it is gone opens that database at version 2: IndexedDB keeps that open pending while
// any connection at version 1 is open, and completes it (`upgradeneeded`, or `success` where another
// watcher already upgraded it) once none is left. The storage backend runs outside the page and closes a
// context's connections when the context ends: closed, navigated away, its process crashed or killed, a
// worker terminated; never while it lives, however busy, throttled or frozen (assumption A5, checked by
// tests/e2e/connection_liveness*.test.mjs in each engine). So a completed open is evidence; an open that
// fails is none (it is tried again later). The watcher deletes the database once it has its evidence.
//
// A joiner reads the origin's register of these databases to learn which contexts may be members, and
// watches each. The register is a database of its own, `<prefix>` with one store `alive` whose keys are the
// names: a context adds its name, in a read/write transaction, once its database is open and before it says
// it joins, and takes it out when it closes it; a watcher takes out the name of one it found gone. Its
// transactions run one at a time (A1′), so a joiner that reads it after its `Join` came back sees every
// member that joined before it. Each context keeps the register open and does not give it up on
// `versionchange`, so a page that deletes it (logout code clearing every database) waits until the
// origin's contexts are gone, and a joiner that starts meanwhile waits behind that deletion: the register
// is never read empty while a member lives. (`indexedDB.databases()` would list the names too, but a page
// script can delete it from its realm, and engines before Chrome 71, Firefox 126 and Safari 14 lack it.)
//
// The edge talks to one object per context: `prepare(clientId, openOwn)` as soon as it exists (the
// work that needs no engine, done while the engine loads), `listen(handler)` once, then `open(clientId)`,
// `close()`, `census()`, `watch(clientId, key)`. Events `{ type, key, data }` reach the handler, each in a task or
// microtask of its own, never within the call that caused it: `alive` (this context's database is open;
// `key` its key), `lost` (the browser closed it), `known` (`data`: client id and key of each database
// listed), `dead` (`data`: the client id and key of a database that lost its last connection), `fail` (this
// context's database cannot be opened: the context refuses requests).

import { theGlobal } from './global_object.js';

/** The waits before each attempt to open this context's database (the first at once); then it fails. */
const OPEN_BACKOFF_MS = [0, 100, 400, 1600];
/** The wait before a watch whose open failed is made again. */
const WATCH_RETRY_MS = 1000;

/**
 * The evidence object of a global, or undefined where it cannot give evidence. `scope` (tests) keeps the
 * databases of the contexts that coordinate on a scoped channel apart: `weblocks-alive:<scope>:…`.
 */
export function makeEvidence(globalObject = theGlobal, scope) {
  const { indexedDB } = globalObject;
  if (typeof indexedDB !== 'object' || indexedDB === null) return undefined;
  const prefix = scope === undefined ? 'weblocks-alive:' : 'weblocks-alive:' + scope + ':';
  let handler = () => {};
  // This context's open database (`{ db, name }`), and whether the page is in the back/forward cache.
  let own = null;
  let hidden = false;
  // The databases this context watches, and those it found without a connection.
  const watching = new Set();
  const dead = new Set();
  const emit = (type, key, data) => handler({ type, key, data });
  // The register, opened once and kept open: `openRegister(then)` calls `then(db)` once it is open, or
  // `then(null)` where it cannot be opened; the calls made while it opens wait for that one open.
  let registerDb = null;
  let registerWaiting = null;
  const openRegister = (then) => {
    if (registerDb !== null) return then(registerDb);
    if (registerWaiting !== null) return registerWaiting.push(then);
    const waiting = (registerWaiting = [then]);
    const opened = (db) => {
      registerWaiting = null;
      for (const next of waiting) next(db);
    };
    let request;
    try {
      request = indexedDB.open(prefix, 1);
    } catch (e) {
      return opened(null);
    }
    request.onupgradeneeded = () => request.result.createObjectStore('alive');
    request.onerror = () => opened(null);
    request.onsuccess = () => {
      const db = request.result;
      // A deletion (or another version's upgrade, which no version makes) waits for this connection, so
      // no joiner reads a register emptied under a live member. Closed by the browser: opened again at
      // the next use.
      db.onversionchange = () => {};
      db.onclose = () => {
        if (registerDb === db) registerDb = null;
      };
      registerDb = db;
      opened(db);
    };
  };
  // `register(mode, operation, done)` runs `operation(store)` in a transaction of that mode on the register,
  // then `done(ok)`; it fails (`done(false)`) where the register cannot be opened.
  const register = (mode, operation, done = () => {}) =>
    openRegister((db) => {
      if (db === null) return done(false);
      try {
        const transaction = db.transaction(['alive'], mode);
        operation(transaction.objectStore('alive'));
        transaction.oncomplete = () => done(true);
        transaction.onabort = () => done(false);
      } catch (e) {
        if (registerDb === db) registerDb = null;
        done(false);
      }
    });
  const remove = (name) => {
    register('readwrite', (store) => store.delete(name));
    try {
      indexedDB.deleteDatabase(name);
    } catch (e) {
      // Left for a later census to collect.
    }
  };
  // This context's database opened ahead of the participant's `open` (`prepare`), not yet in the register:
  // nobody watches it, so it keeps nobody waiting.
  let spare = null;
  // Bumped by `close`: a database still being opened or entered then is dropped once it is.
  let generation = 0;
  const drop = (db, name) => {
    db.close();
    remove(name);
  };
  const closeOwn = () => {
    for (const opened of [own, spare]) {
      if (opened !== null) drop(opened.db, opened.name);
    }
    own = spare = null;
  };
  // The client id this context opens its databases under, while a database is being opened (else null),
  // and whether the participant asked for it (`open`): only then does it go in the register.
  let ownClient = null;
  let opening = null;
  let wanted = false;
  // Whether an open completed while the page was in the back/forward cache, and must be made again.
  let reopen = false;
  // In the register before the context says it joins (the participant posts its Join on `alive`).
  const enter = ({ db, name, key }, attempt, mine) =>
    register(
      'readwrite',
      (store) => store.put(1, name),
      (ok) => {
        if (mine !== generation) return drop(db, name);
        if (!ok) {
          drop(db, name);
          return again(attempt, mine);
        }
        opening = null;
        own = { db, name };
        emit('alive', key);
      },
    );
  const again = (attempt, mine) => {
    if (attempt < OPEN_BACKOFF_MS.length - 1) {
      setTimeout(() => mine === generation && openNew(ownClient, attempt + 1), OPEN_BACKOFF_MS[attempt + 1]);
    } else {
      opening = null;
      // Before the participant asked, its own `open` tries again.
      if (wanted) emit('fail');
    }
  };
  const openNew = (clientId, attempt) => {
    const mine = generation;
    ownClient = opening = clientId;
    const key = 1 + Math.floor(Math.random() * 2 ** 52);
    const name = prefix + clientId + ':' + key;
    let request;
    try {
      request = indexedDB.open(name, 1);
    } catch (e) {
      return again(attempt, mine);
    }
    // The register opens alongside.
    openRegister(() => {});
    request.onerror = () => again(attempt, mine);
    request.onsuccess = () => {
      const db = request.result;
      if (mine !== generation) return drop(db, name);
      if (hidden) {
        // Opened while the page went into the back/forward cache: one made when it is shown again.
        drop(db, name);
        reopen = true;
        return;
      }
      const opened = { db, name, key };
      // Another context's open at version 2 waits for this connection: that is what it is for.
      db.onversionchange = () => {};
      db.onclose = () => {
        if (spare === opened) spare = null;
        if (own !== null && own.db === db) {
          own = null;
          emit('lost');
        }
      };
      if (wanted) return enter(opened, attempt, mine);
      opening = null;
      spare = opened;
    };
  };
  const open = (clientId) => {
    wanted = true;
    if (spare !== null) {
      const opened = spare;
      spare = null;
      enter(opened, 0, generation);
    } else if (opening === null) {
      openNew(clientId, 0);
    }
  };
  const watch = (clientId, key) => {
    const name = prefix + clientId + ':' + key;
    if (dead.has(name)) return Promise.resolve().then(() => emit('dead', 0, [clientId, key]));
    if (watching.has(name)) return;
    watching.add(name);
    let upgraded = false;
    const gone = () => {
      watching.delete(name);
      dead.add(name);
      remove(name);
      emit('dead', 0, [clientId, key]);
    };
    const retry = () => {
      watching.delete(name);
      setTimeout(() => watch(clientId, key), WATCH_RETRY_MS);
    };
    let request;
    try {
      request = indexedDB.open(name, 2);
    } catch (e) {
      return retry();
    }
    // An upgrade starts only once no connection at version 1 is left: the evidence, told at once (the
    // upgrade itself is of no use). A success without one: another watcher upgraded it before.
    request.onupgradeneeded = () => {
      upgraded = true;
      gone();
    };
    request.onsuccess = () => {
      request.result.close();
      if (!upgraded) gone();
    };
    request.onerror = () => upgraded || retry();
  };
  // A page entering the back/forward cache closes its database from a listener of its own, which runs
  // even where the participant's `pagehide` is cut short; shown again, it opens a new one if an open
  // completed while it was hidden. Unless its participant stays a member there (`keepOnHide()`, the
  // participant's `BackForwardCache::Stay`): then its database stays open, so that the browser evicts the
  // page when another context watches it (the participant itself closes it when it leaves, idle).
  let keepOnHide = false;
  if (typeof globalObject.addEventListener === 'function') {
    globalObject.addEventListener(
      'pagehide',
      (event) => {
        if (event.persisted && keepOnHide) return;
        if (event.persisted) {
          hidden = true;
          // Closed, but not taken out of the register: WebKitGTK leaves a transaction that a page begins in
          // the `pagehide` that enters the cache unfinished, even once the page is back, and every later one
          // on the register waits behind it (a joiner's census, for good). A watcher that finds the database
          // without a connection takes its name out and deletes it.
          for (const opened of [own, spare]) if (opened !== null) opened.db.close();
          try {
            // Never in the register, nor watched: nobody else would delete it.
            if (spare !== null) indexedDB.deleteDatabase(spare.name);
          } catch (e) {
            // Left behind.
          }
          own = spare = null;
        } else if (spare !== null) {
          // Going for good without having joined: its database, which no one watches, goes with it.
          drop(spare.db, spare.name);
          spare = null;
        }
      },
      true,
    );
    globalObject.addEventListener('pageshow', () => {
      hidden = false;
      if (reopen) {
        reopen = false;
        openNew(ownClient, 0);
      }
    });
  }
  // Reads the register, watches each database it lists but this context's own, and calls `done(data)`
  // with their client ids and keys one after the other; nothing where it cannot be read (the
  // participant asks again later).
  const readRegister = (done) => {
    let names;
    register(
      'readonly',
      (store) => {
        // A cursor rather than `getAllKeys()`, which engines before IndexedDB 2.0 lack.
        names = [];
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
        if (!ok || !Array.isArray(names)) return;
        const data = [];
        for (const name of names) {
          const parts = typeof name === 'string' && name.startsWith(prefix) ? name.slice(prefix.length).split(':') : [];
          const key = Number(parts[1]);
          if (parts.length === 2 && key > 0 && Number.isSafeInteger(key)) {
            data.push(parts[0], key);
            if (parts[0] !== ownClient) watch(parts[0], key);
          }
        }
        done(data);
      },
    );
  };
  return {
    listen(listener) {
      handler = listener;
    },
    /**
     * Ahead of `open`, while the engine loads: with `openOwn`, opens this context's database (outside
     * the register until `open`, and deleted on `pagehide` if it never got there: only a window has that
     * event); then opens the register, and watches every database it lists, so that a joiner's census
     * finds the contexts that are gone already known.
     */
    prepare(clientId, openOwn) {
      if (openOwn && opening === null && spare === null && own === null) openNew(clientId, 0);
      readRegister(() => {});
    },
    open: (clientId) => open(clientId),
    close() {
      generation++;
      wanted = false;
      opening = null;
      closeOwn();
    },
    census: () => readRegister((data) => emit('known', 0, data)),
    keepOnHide() {
      keepOnHide = true;
    },
    watch,
  };
}
