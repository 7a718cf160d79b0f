// Which transport a context uses (docs/PROTOCOL.md §2): the broadcast transport, the IndexedDB log carried
// by BroadcastChannel, or the log with pokes and polls only (no BroadcastChannel in this realm). Two
// steps:
//
// 1. The context's *preference*, from evidence a page script cannot alter in its realm: the text of an
//    error that the JavaScript engine itself throws. Reading a property of null throws a TypeError made by
//    the engine's own intrinsic, with its `message` an own data property written by the engine (no global,
//    no prototype, no getter of the page's is consulted), in words each engine has kept since it shipped:
//    V8 "Cannot read property(ies) …", SpiderMonkey "… is null", "null has no properties" or "can't access
//    property … of null" (the last where the minifier has made the read one of the literal null),
//    JavaScriptCore "null is not an object …". Only V8 in a browser (Blink) and SpiderMonkey (Gecko)
//    prefer the broadcast transport, where the test command checks that BroadcastChannel gives one order
//    (assumption A1). Anything unknown prefers the log.
// 2. The origin's *record* (`agreeOnTransport`): the first context to ask writes its preference in a
//    database of its own, in one read/write transaction; IndexedDB runs those one at a time, so every
//    later context reads the first one's choice. What a context uses by it, the recorded transport or a
//    refusal (`REFUSED_DISAGREES`), is decided by the wasm's `settleTransport`
//    (src/protocol/transport_record.rs, which the simulation runs too). So the contexts of an origin use
//    one transport and one wake mode, or the odd one decides nothing. Each context keeps its connection
//    to the record open and does not give it up on `versionchange` by itself: it forwards it to the core,
//    which gives it up only once the context holds no lock and is out of the protocol, and keeps the context
//    out until the record, read again behind the deletion, names the transport it uses
//    (src/protocol/evidence/sweep.rs). A page's deletion of the record then waits until no context of the
//    origin holds a lock, and a context that starts meanwhile waits behind it, so no context can record
//    another transport while one that uses the first runs.
//
// The record's database name, version, store and value never change (docs/PROTOCOL.md §9).

import { theGlobal } from './global_object.js';

/** The transports, as recorded. */
export const BROADCAST = 'broadcast';
export const LOG = 'log';
export const LOG_WITHOUT_CARRIER = 'log-bare';
/** No channel to the others and no IndexedDB, outside a browser (Node.js, Deno): the context locks alone. */
export const ALONE = 'alone';

/** Why a context refuses to decide, as src/wasm/refusal.rs numbers it (tests/static/boundary_codes.test.mjs). */
export const REFUSED_DISAGREES = 1;
export const REFUSED_UNREACHABLE = 2;

const DATABASE = 'weblocks-transport';
const STORE = 'transport';
const KEY = 'weblocks';
/**
 * The waits before each attempt after the first to open the record's database. The first is made within
 * the call, so that a page's own record comes before that of the frames and workers it makes later.
 */
const RETRY_BACKOFF_MS = [100, 400, 1600];

/** How long the record may take to open before the context says why it waits (REGISTER_WAIT_MS in Rust). */
const RECORD_WAIT_MS = 2000;
let warned = false;
function warnWaiting() {
  if (warned) return;
  warned = true;
  console.warn(
    'weblocks: its transport record (the IndexedDB database weblocks-transport) has not opened for 2 s: a page of ' +
      'this origin is deleting it (logout code that deletes every database?), and IndexedDB holds the deletion ' +
      "until every context that holds a weblocks lock has released it. This context's locks wait until then.",
  );
}

/** Reads property `x` of `value`: throws the engine's own TypeError when it is null. */
function readX(value) {
  return value.x;
}

/**
 * The JavaScript engine, told by the message of the TypeError it throws for a property read of null:
 * 'v8', 'spidermonkey', 'javascriptcore' or 'unknown'.
 */
export function engineFamily() {
  let message = '';
  try {
    readX(null);
  } catch (error) {
    message = String(error.message);
  }
  if (/^Cannot read propert/.test(message)) return 'v8';
  if (/ is null$|^null has no properties$|^can't access property .+ of null$/.test(message)) return 'spidermonkey';
  if (/^null is not an object/.test(message)) return 'javascriptcore';
  return 'unknown';
}

/** Node.js or Deno: a program, not a page; V8 there, and a BroadcastChannel that does not give one order. */
function serverRuntime(globalObject) {
  const { process, Deno } = globalObject;
  return Deno !== undefined || (typeof process === 'object' && process !== null && typeof Object(process.versions).node === 'string');
}

/**
 * Whether this is Blink or Gecko, the engines in which the test command checks what the protocol relies on
 * beyond the specifications: that BroadcastChannel delivers every message of an origin in one order to
 * every context (assumption A1, tests/e2e/total_order*.test.mjs; WebKit and Node.js do not give it). Servo
 * (SpiderMonkey too) is left out by its user agent string; a page that hides it there can only make this
 * context's preference differ from its workers', which the record turns into one transport or a refusal.
 */
export function oneOrderEngine(globalObject = theGlobal) {
  const family = engineFamily();
  if (family === 'v8') return !serverRuntime(globalObject);
  const { navigator } = globalObject;
  return family === 'spidermonkey' && !(typeof navigator === 'object' && navigator !== null && /Servo\//.test(navigator.userAgent));
}

/** This context's preference (step 1 above). */
export function preferredTransport(globalObject = theGlobal, oneOrder = oneOrderEngine(globalObject)) {
  if (typeof globalObject.BroadcastChannel !== 'function') return LOG_WITHOUT_CARRIER;
  return oneOrder ? BROADCAST : LOG;
}

/**
 * The transport this context uses: BROADCAST, LOG, LOG_WITHOUT_CARRIER or ALONE, or a refusal
 * (REFUSED_DISAGREES, REFUSED_UNREACHABLE), once the origin's record is read (or written: by the first
 * context to ask). Made before the context's first join, so no message of it goes out before it agrees.
 * `settle(preferred, recorded)` gives (or promises) what a context that prefers `preferred` uses where
 * `recorded` is recorded: a transport, or REFUSED_DISAGREES.
 *
 * The context then keeps the record's database open, and ignores `versionchange` on it: a deletion waits
 * for this connection. Where the browser closes it (site data cleared from its settings, the storage
 * process lost), the context writes the transport it uses again, or reads what a context that came
 * meanwhile wrote first: where it can no longer use its transport (or reach the record), `onChange(refusal)`,
 * and the context refuses from then on.
 */
export function agreeOnTransport(globalObject = theGlobal, preferred = preferredTransport(globalObject), onChange = () => {}, settle, sweep = {}) {
  const { indexedDB, document, WorkerGlobalScope } = globalObject;
  if (typeof indexedDB !== 'object' || indexedDB === null) {
    // No IndexedDB. In a window (its `document` cannot be deleted) or a worker, something took it away:
    // the context cannot learn its origin's transport, and refuses. Elsewhere (Node.js, Deno, a bare
    // script context) there is no origin of pages to share: the broadcast transport where the channel
    // gives one order, else the context locks alone.
    const inBrowser = !serverRuntime(globalObject) && (typeof document === 'object' || typeof WorkerGlobalScope === 'function');
    return Promise.resolve(inBrowser ? REFUSED_UNREACHABLE : preferred === BROADCAST ? BROADCAST : ALONE);
  }
  // The connection held, and the transport it was agreed for; `releasing`: how many times the core gave
  // the record up while it was being read (again), done once that read is settled. Each release is
  // answered once (`agreed`, or a refusal): the core lets the context back in on the last one's answer.
  let held = null;
  let releasing = 0;
  let answer = () => {};
  // A deletion (a page's logout code) waits for one of this context's connections to the record, from
  // its first moment open: the core decides when this context gives it up.
  const forward = (event) => {
    if (event.newVersion == null && sweep.onDeletion) sweep.onDeletion();
  };
  // Reads the record again for `count` releases, answering each.
  const again = (transport, count) =>
    agree(transport).then((settled) => {
      if (settled !== transport) onChange(typeof settled === 'number' ? settled : REFUSED_DISAGREES);
      else for (let k = 0; k < count; k++) answer();
    });
  const watch = (db, transport) => {
    if (releasing > 0) {
      const count = releasing;
      releasing = 0;
      db.close();
      return again(transport, count);
    }
    held = { db, transport };
    db.onclose = () => {
      held = null;
      again(transport, 0);
    };
  };
  /**
   * For a deletion, once the context is out of the protocol (src/protocol/evidence/sweep.rs): the record's
   * connection goes, and the record is asked again at once (behind the deletion, which this no longer
   * holds up): `agreed()` once it names the transport this context uses, else a refusal.
   */
  sweep.release = (agreed) => {
    answer = agreed;
    if (held === null) {
      releasing++; // being read: given up once settled
      return;
    }
    const { db, transport } = held;
    held = null;
    db.onclose = null;
    db.close();
    again(transport, 1);
  };
  // `first`: the agreement before the engine exists, whose wait only this file can tell (later ones are
  // told by the engine).
  const agree = (wanted, first = false) =>
    new Promise((resolve) => {
      let attempt = 0;
      const retry = () => {
        if (attempt === RETRY_BACKOFF_MS.length) resolve(REFUSED_UNREACHABLE);
        else setTimeout(readOrWrite, RETRY_BACKOFF_MS[attempt++]);
      };
      const readOrWrite = () => {
        let request;
        try {
          request = indexedDB.open(DATABASE, 1);
        } catch (error) {
          return retry();
        }
        // An open waits only behind a deletion of the record (a page's logout code), which waits for every
        // context that holds a lock: say so once, rather than wait silently (the one wait of a context
        // before its engine exists; then src/protocol/evidence/sweep.rs says it).
        const slow = first ? setTimeout(warnWaiting, RECORD_WAIT_MS) : 0;
        request.onupgradeneeded = () => request.result.createObjectStore(STORE);
        request.onerror = () => {
          clearTimeout(slow);
          retry();
        };
        request.onsuccess = () => {
          clearTimeout(slow);
          const db = request.result;
          // A deletion (or another version's upgrade, which no version makes) waits for this connection.
          db.onversionchange = forward;
          try {
            const transaction = db.transaction([STORE], 'readwrite');
            const store = transaction.objectStore(STORE);
            const read = store.get(KEY);
            read.onsuccess = () => {
              if (read.result === undefined) store.put(wanted, KEY);
            };
            transaction.oncomplete = () =>
              Promise.resolve(settle(wanted, read.result === undefined ? wanted : read.result)).then((settled) => {
                if (typeof settled === 'number') db.close();
                else watch(db, settled);
                resolve(settled);
              }, () => db.close()); // No wasm: no engine either, which the caller reports.
            transaction.onabort = () => {
              db.close();
              retry();
            };
          } catch (error) {
            db.close();
            retry();
          }
        };
      };
      readOrWrite();
    });
  return agree(preferred, true);
}
