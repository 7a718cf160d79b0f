// The Web Locks API as scripts see it: the `LockManager` and `Lock` interfaces, WebIDL conversions,
// promises, tasks and abort signals, on top of an Engine (the wasm lock manager; contract in
// docs/ARCHITECTURE.md). Spec references ("4.1 step 3") are to the W3C Web Locks draft.
//
// This module is self-contained on purpose (no imports): the Rust browser tests load this very file as
// a wasm-bindgen snippet. So it reads the platform's globals by name (`DOMException`, `crypto`), never
// through a global object: `installLockApi` is given the one to install into (the other modules take
// theirs from js/global_object.js). It touches no global until `installLockApi` is called.
//
// Properties named `word_` (of the records, the engine link and the converted options) are internal: the
// classic build renames them to one letter (scripts/build.mjs, `mangleProps`), which it cannot do to other
// names.

// Sink kinds, as src/wasm/sink.rs numbers them (tests/static/boundary_codes.test.mjs checks both agree).
const EFFECT_GRANTED = 1;
const EFFECT_NOT_AVAILABLE = 2;
const EFFECT_STOLEN = 3;
const EFFECT_SNAPSHOT = 4;
const EFFECT_REFUSED = 5;

// Where a request stands.
const WAITING_FOR_ENGINE = 0; // converted and validated, queued until the engine has loaded
const PENDING = 1; // in the engine's queue
const GRANTED = 2; // held; the callback task is queued
const NOT_AVAILABLE = 3; // ifAvailable miss; the callback task (with null) is queued
const CALLED = 4; // the callback ran; waiting for its promise to settle
const FINISHED = 5; // nothing more to do (aborted before the grant, released, or released unused)

// Node's own paths are taken only where `process` says Node: the task port's (one listener per message,
// ports that must not keep the process alive). The classic build, which runs only in browsers and workers,
// defines `process` as undefined (scripts/build.mjs), so there they fold away.
const IN_NODE = typeof process === 'object' && process !== null && typeof process.versions === 'object' && process.versions !== null && typeof process.versions.node === 'string';

// Intrinsics captured at load, so scripts that later patch `Promise` or `EventTarget` cannot derail us.
const NativePromise = Promise;
const promiseResolve = Promise.resolve.bind(Promise);
const promiseReject = Promise.reject.bind(Promise);
const promiseThen = Promise.prototype.then;
const getOwnDescriptor = Object.getOwnPropertyDescriptor;
const defineProperty = Object.defineProperty;
const isPrototypeOf = Object.prototype.isPrototypeOf;
const NativeDOMException = typeof DOMException === 'function' ? DOMException : undefined;
// AbortSignal (Chrome 66, Firefox 57, Safari 11.1) may be missing in the engines of the support floor:
// there no value is an AbortSignal, so a `signal` member fails its conversion with a TypeError, like any
// other value that is not a signal, and nothing else reads it. Its event methods are EventTarget's,
// read through its prototype. `reason` is younger (Chrome 98, Safari 15.4, Node 17.2).
const signalPrototype = typeof AbortSignal === 'function' ? AbortSignal.prototype : {};
/** The getter of `object`'s own accessor `name`, or undefined. */
const getterOf = (object, name) => (getOwnDescriptor(object, name) || {}).get;
const signalAborted = getterOf(signalPrototype, 'aborted');
const signalReason = getterOf(signalPrototype, 'reason');
const { addEventListener, removeEventListener } = signalPrototype;

/**
 * A DOMException `name`; where DOMException is missing or cannot be constructed (Node before 17, old
 * engines), an Error of that `name`, so that code testing `error.name` works everywhere.
 */
export function domException(message, name) {
  if (NativeDOMException !== undefined) {
    try {
      return new NativeDOMException(message, name);
    } catch (e) {
      // Not constructible: below.
    }
  }
  const e = new Error(message);
  e.name = name;
  return e;
}

function illegalInvocation() {
  return new TypeError('Illegal invocation');
}

/** True if `value` is a real AbortSignal (a brand check through the native getter, not `instanceof`; on
 *  anything else, primitives included, the getter throws). */
function isAbortSignal(value) {
  if (signalAborted === undefined) return false;
  try {
    signalAborted.call(value);
    return true;
  } catch (e) {
    return false;
  }
}

/** The signal's abort reason; `AbortError` where the platform predates `reason`. */
function abortReason(signal) {
  const reason = signalReason !== undefined ? signalReason.call(signal) : undefined;
  return reason !== undefined ? reason : domException('The operation was aborted.', 'AbortError');
}

// Names. A DOMString may hold lone surrogates, which the engine's Rust strings cannot: such a name goes
// to the engine escaped ('%' and each lone surrogate as '%xxxx') behind a leading '-', a prefix that
// request() never lets through (step 5), so escaped names cannot collide with real ones.
const isWellFormed = String.prototype.isWellFormed;
// In a /u pattern the string is read as code points: a surrogate pair is one code point above U+FFFF, so the
// surrogate range matches only unpaired surrogates.
const LONE_SURROGATE = /[\ud800-\udfff]/u;
const ESCAPED_IN_ENGINE_NAME = /%|[\ud800-\udfff]/gu;
const ESCAPE_SEQUENCE = /%([0-9a-f]{4})/g;

function escapeCodeUnit(c) {
  return `%${(c.charCodeAt(0) + 0x10000).toString(16).slice(1)}`;
}

function unescapeCodeUnit(_, hex) {
  return String.fromCharCode(parseInt(hex, 16));
}

/** The name as the engine sees it: unchanged unless it holds lone surrogates. */
function toEngineName(name) {
  if (isWellFormed !== undefined ? isWellFormed.call(name) : !LONE_SURROGATE.test(name)) return name;
  return `-${name.replace(ESCAPED_IN_ENGINE_NAME, escapeCodeUnit)}`;
}

/** Undo `toEngineName`. */
function fromEngineName(name) {
  return name.charCodeAt(0) === 0x2d ? name.slice(1).replace(ESCAPE_SEQUENCE, unescapeCodeUnit) : name;
}

/** The `LockInfo` dictionaries of `count` entries of a snapshot in transfer form, from `numbers[at]`. */
function lockInfos(strings, numbers, at, count) {
  const infos = new Array(count);
  for (let i = 0; i < count; i++, at += 2) {
    const packed = numbers[at + 1];
    // WebIDL dictionaries convert to objects with their members in lexicographic order.
    infos[i] = {
      clientId: strings[numbers[at]],
      mode: packed & 1 ? 'exclusive' : 'shared',
      name: fromEngineName(strings[packed >>> 1]),
    };
  }
  return infos;
}

/** A `LockManagerSnapshot` from the engine's transfer form `[text, numbers]` (src/wasm/snapshot_transfer.rs):
 *  the text holds each distinct client id and name once; numbers are [held count, pending count, string
 *  count, (client index, name index * 2 + exclusive) per entry, then each string's length]. */
function decodeSnapshot([text, numbers]) {
  const held = numbers[0];
  const pending = numbers[1];
  const count = numbers[2];
  const strings = new Array(count);
  for (let i = 0, pos = 0, at = 3 + 2 * (held + pending); i < count; i++) {
    const end = pos + numbers[at + i];
    strings[i] = text.slice(pos, end);
    pos = end;
  }
  return {
    held: lockInfos(strings, numbers, 3, held),
    pending: lockInfos(strings, numbers, 3 + 2 * held, pending),
  };
}

// `new Promise(captureResolvers)` without a closure per promise.
let capturedResolve;
let capturedReject;
function captureResolvers(resolve, reject) {
  capturedResolve = resolve;
  capturedReject = reject;
}

// ---------------------------------------------------------------------------------------------------
// Tasks. Lock callbacks run in a new task (spec 4.1 step 3.5.1, 4.4 step 14), never in a microtask.
// The records wait in a FIFO array; one MessageChannel shared by every API object carries them, up to
// TASKS_PER_MESSAGE per message: its port has that many `message` listeners, each running the next
// record. Between two listeners of an event the browser performs a microtask checkpoint (HTML, "clean up
// after running script": the JS stack is empty between listener calls), so each callback, and every
// promise job it queues, runs exactly as in a task of its own; the only difference is that no task of
// another source runs in between, an order the event loop leaves to the browser anyway. A message costs
// ~15 µs in Chromium, a listener call ~1 µs: a burst of grants (a shared fan-out, a queue drain) runs
// several times faster. Node's EventTarget runs no microtasks between listeners, so there (and with the
// setTimeout fallback) each record gets a message of its own.

const TASKS_PER_MESSAGE = IN_NODE ? 1 : 16;
let taskPort = null;
const taskQueue = [];
let taskHead = 0;
let messagePending = false;

function runQueuedTask() {
  if (taskHead === taskQueue.length) return;
  const record = taskQueue[taskHead];
  taskQueue[taskHead++] = undefined;
  if (taskHead === taskQueue.length) {
    taskQueue.length = 0;
    taskHead = 0;
  }
  record.runTask_();
}

/** The last listener of a message (a listener of its own, so that it runs even if a task threw). */
function endOfMessage() {
  messagePending = false;
  if (taskQueue.length > 0) postTaskMessage();
  else if (IN_NODE && taskPort.unref != null) taskPort.unref(); // an idle port must not keep the process alive
}

function postTaskMessage() {
  messagePending = true;
  taskPort.postMessage(undefined);
}

// A grant decided in an event of another context's making (a channel message, a timer) rather than in a
// call of this context's own: its callback task may run at the end of the current task, as a microtask
// after the event's handler, instead of a message later (a cross-tab handoff is then one task hop
// shorter). Only the first record of an empty queue: the next ones keep their tasks, so each still runs
// after the microtasks of the one before. Calls into the engine set `inEngineCall`: what they decide
// (this context's own request granted at once, a release handing over locally) keeps a task of its own,
// as the spec's steps say.
let inEngineCall = false;
const settled = promiseResolve();

/** The microtask of such a record: it runs as a message's listener does, and ends as a message does. */
function runSoon() {
  try {
    runQueuedTask();
  } finally {
    endOfMessage();
  }
}

function queueTask(record) {
  if (taskPort === null) {
    if (typeof MessageChannel === 'function') {
      const channel = new MessageChannel();
      // Distinct functions: adding the same listener twice would add it once.
      for (let i = 0; i < TASKS_PER_MESSAGE; i++) channel.port1.addEventListener('message', () => runQueuedTask());
      channel.port1.addEventListener('message', endOfMessage);
      channel.port1.start();
      taskPort = channel.port2;
      if (IN_NODE) {
        if (taskPort.unref != null) taskPort.unref();
        if (channel.port1.unref != null) channel.port1.unref();
      }
    } else {
      taskPort = {
        postMessage: () =>
          setTimeout(() => {
            runQueuedTask();
            endOfMessage();
          }, 0),
      };
    }
  }
  if (IN_NODE && taskQueue.length === 0 && taskPort.ref != null) taskPort.ref();
  taskQueue.push(record);
  if (messagePending) return;
  if (!inEngineCall && taskQueue.length === 1) {
    messagePending = true;
    promiseThen.call(settled, runSoon);
  } else {
    postTaskMessage();
  }
}

// ---------------------------------------------------------------------------------------------------
// Interface objects as WebIDL makes them: a function that throws when called or constructed, a
// non-writable `prototype`, enumerable operations and accessors, and `Symbol.toStringTag`.

function defineInterface(interfaceObject, prototype, name) {
  defineProperty(interfaceObject, 'name', { value: name }); // survives minifiers that rename functions
  // A function's own `prototype` is already neither enumerable nor configurable: only its value and writability change.
  defineProperty(interfaceObject, 'prototype', { value: prototype, writable: false });
  delete prototype.constructor; // re-added below, after the members, in the order browsers list them
  for (const key of Object.getOwnPropertyNames(prototype)) defineProperty(prototype, key, { enumerable: true });
  // New properties: what the descriptors leave out is false (here: not enumerable, and the tag not writable).
  defineProperty(prototype, 'constructor', { value: interfaceObject, writable: true, configurable: true });
  defineProperty(prototype, Symbol.toStringTag, { value: name, configurable: true });
}

/** A function that throws as WebIDL interface objects without a constructor do. */
function illegalConstructor(name) {
  return function () {
    throw new TypeError(new.target === undefined ? 'Illegal constructor' : `Failed to construct '${name}': Illegal constructor`);
  };
}

// Error messages carry the prefix Chromium gives them, so they read the same as the native ones.
const REQUEST_FAILED = "Failed to execute 'request' on 'LockManager': ";

function requestTypeError(message) {
  return new TypeError(REQUEST_FAILED + message);
}

function requestNotSupported(message) {
  return domException(REQUEST_FAILED + message, 'NotSupportedError');
}

/** WebIDL ToString for DOMString arguments; a Symbol throws (as `${}` would) with a readable message. */
function toDOMString(value, context) {
  if (typeof value === 'symbol') throw requestTypeError(`${context}Cannot convert a Symbol value to a string`);
  return typeof value === 'string' ? value : `${value}`;
}

/**
 * Whether `document` is fully active (HTML): the active document of its browsing context and, in a
 * frame, the frame element's document fully active too. A document whose frame was removed has no
 * browsing context (`defaultView` is null); one its frame navigated away from is no longer its window's
 * `document`. Above a cross-origin frame (`frameElement` is null) nothing can be seen: true.
 */
function isFullyActive(document) {
  for (let doc = document; ; ) {
    const view = doc.defaultView;
    if (view == null || view.document !== doc) return false;
    const frame = view.frameElement;
    if (frame == null) return true;
    doc = frame.ownerDocument;
  }
}

/** Why a held lock was taken away (the engine's payload of sink kind 3): the AbortError's message. */
const LOSS_MESSAGES = {
  stolen: "Lock broken by another request with the 'steal' option.",
  evicted: "Lock lost: the origin's other contexts found this one gone, as the browser closed its IndexedDB connections (its storage process ended, site data was cleared, or iOS suspended the tab).",
  reset: 'Lock lost: this context was cut off from the others of the origin, which went on without it.',
  retired: 'Lock lost: a newer version of weblocks runs in this origin; reload this page to use it.',
  hidden: 'Lock released: the page entered the back/forward cache.',
};

/** Spec 3.2.1 step 3 and 3.2.2 step 2: the error of a call to `operation` from `document` (null outside a
 *  window) while it is not fully active; else null. */
function inactiveError(document, operation) {
  return document != null && !isFullyActive(document)
    ? domException(`Failed to execute '${operation}' on 'LockManager': The document is not active.`, 'InvalidStateError')
    : null;
}

// ---------------------------------------------------------------------------------------------------
// request()'s arguments.

/**
 * The LockOptions dictionary (WebIDL) made from `options` (undefined or null: every member's default),
 * its members read in lexicographic order and converted. A plain object with every member set, as the
 * engine's `request` reads it (`RequestOptions` in src/wasm/request_options.rs).
 */
function lockOptions(options) {
  const converted = { ifAvailable: false, mode: 'exclusive', signal: null, steal: false };
  if (options === undefined || options === null) return converted;
  if (typeof options !== 'object' && typeof options !== 'function') {
    throw requestTypeError("The provided value is not of type 'LockOptions'.");
  }
  let value = options.ifAvailable;
  if (value !== undefined) converted.ifAvailable = !!value;
  value = options.mode;
  if (value !== undefined) {
    const mode = toDOMString(value, "Failed to read the 'mode' property from 'LockOptions': ");
    if (mode !== 'exclusive' && mode !== 'shared') {
      throw requestTypeError(
        `Failed to read the 'mode' property from 'LockOptions': The provided value '${mode}' is not a valid enum value of type LockMode.`,
      );
    }
    converted.mode = mode;
  }
  value = options.signal;
  if (value !== undefined) {
    if (!isAbortSignal(value)) {
      throw requestTypeError("Failed to read the 'signal' property from 'LockOptions': Failed to convert value to 'AbortSignal'.");
    }
    converted.signal = value;
  }
  value = options.steal;
  if (value !== undefined) converted.steal = !!value;
  return converted;
}

/** request() (spec 3.2.1) steps 5 to 8: the NotSupportedError of a name, or of options that cannot go together. */
function checkRequest(name, { ifAvailable, mode, signal, steal }) {
  if (name.charCodeAt(0) === 0x2d) {
    throw requestNotSupported("Names cannot start with '-'.");
  }
  if (steal && ifAvailable) {
    throw requestNotSupported("The 'steal' and 'ifAvailable' options cannot be used together.");
  }
  if (steal && mode !== 'exclusive') {
    throw requestNotSupported("The 'steal' option may only be used with 'exclusive' locks.");
  }
  if (signal !== null && (steal || ifAvailable)) {
    throw requestNotSupported(`The 'signal' and '${steal ? 'steal' : 'ifAvailable'}' options cannot be used together.`);
  }
}

// ---------------------------------------------------------------------------------------------------
// The records of the calls, and the engine that decides them.

/**
 * One API's `Lock` interface: its interface object, and `newLock(record)`, which makes a Lock of the
 * granted request `record`. The Lock objects' internal slots, and their brand check, are a map of their
 * own: each Lock made here maps to the record of its request (its `name_` and `options_.mode`); anything
 * else, primitives included, and the Locks of other APIs, map to nothing.
 */
function lockInterface() {
  const Lock = illegalConstructor('Lock');
  const lockRecords = new WeakMap();

  class LockObject {
    constructor(record) {
      lockRecords.set(this, record);
    }
    get name() {
      const record = lockRecords.get(this);
      if (record === undefined) throw illegalInvocation();
      return record.name_;
    }
    get mode() {
      const record = lockRecords.get(this);
      if (record === undefined) throw illegalInvocation();
      return record.options_.mode;
    }
  }
  defineInterface(Lock, LockObject.prototype, 'Lock');

  return { Lock, newLock: (record) => new LockObject(record) };
}

/** `engine`'s `method`, called with `inEngineCall` set (see `queueTask`). */
function callEngine(engine, method, ...args) {
  inEngineCall = true;
  try {
    return method.apply(engine, args);
  } finally {
    inEngineCall = false;
  }
}

/**
 * A request and the parts of it that live in JS: callback, promise, signal (spec 2.5), from its call
 * through the engine's decision to its release. `options`: from `lockOptions`.
 */
class LockRequestRecord {
  constructor(link, id, name, options, callback, resolve, reject) {
    this.link_ = link;
    this.id_ = id;
    this.name_ = name;
    this.options_ = options;
    this.callback_ = callback;
    this.signal_ = options.signal;
    this.resolve_ = resolve;
    this.reject_ = reject;
    this.state_ = WAITING_FOR_ENGINE;
    this.stolen_ = false;
  }

  send_() {
    const { engine_: engine, requests_: requests } = this.link_;
    this.state_ = PENDING;
    requests.set(this.id_, this);
    callEngine(engine, engine.request, this.id_, toEngineName(this.name_), this.options_);
  }

  /** The signal's abort event: "signal to abort the request" (spec 4.3). */
  handleEvent() {
    const state = this.state_;
    if (state === WAITING_FOR_ENGINE) {
      this.state_ = FINISHED;
    } else if (state === PENDING) {
      const engine = this.link_.engine_;
      if (callEngine(engine, engine.abort, this.id_)) {
        this.state_ = FINISHED;
        this.link_.requests_.delete(this.id_);
      }
      // else the grant is on its way: the callback task will see the aborted signal and release.
    } else if (state !== GRANTED) {
      return;
    }
    this.reject_(abortReason(this.signal_));
  }

  runTask_() {
    const callback = this.callback_;
    this.callback_ = null;
    if (this.state_ === NOT_AVAILABLE) {
      // Spec 4.1 step 3.5.1: invoke the callback with null; resolve the promise with its result.
      this.state_ = FINISHED;
      let result;
      try {
        result = promiseResolve(callback(null));
      } catch (e) {
        result = promiseReject(e);
      }
      this.resolve_(result);
      return;
    }
    // Spec 4.4 step 14.
    const signal = this.signal_;
    if (signal !== null) {
      if (signalAborted.call(signal)) {
        this.finish_();
        return;
      }
      removeEventListener.call(signal, 'abort', this);
      this.signal_ = null;
    }
    this.state_ = CALLED;
    let waiting;
    try {
      waiting = promiseResolve(callback(this.link_.newLock_(this)));
    } catch (e) {
      waiting = promiseReject(e);
    }
    // Spec 2.4: when the waiting promise settles, release the lock, then settle the released promise.
    promiseThen.call(
      waiting,
      (value) => {
        this.finish_();
        this.resolve_(value);
      },
      (error) => {
        this.finish_();
        this.reject_(error);
      },
    );
  }

  /** Release the lock (spec 4.2) unless it was stolen, and forget the request. */
  finish_() {
    this.state_ = FINISHED;
    if (!this.stolen_) {
      const { engine_: engine, requests_: requests } = this.link_;
      requests.delete(this.id_);
      callEngine(engine, engine.release, this.id_);
    }
  }
}

/** A query() call, from the call to the task that resolves its promise with the engine's snapshot. */
class QueryRecord {
  constructor(link, id, resolve, reject) {
    this.link_ = link;
    this.id_ = id;
    this.resolve_ = resolve;
    this.reject_ = reject;
    this.snapshot_ = null;
  }
  send_() {
    const { engine_: engine, queries_: queries } = this.link_;
    queries.set(this.id_, this);
    callEngine(engine, engine.query, this.id_);
  }
  /** Spec 3.2.2 / 4.5: the snapshot is taken on the lock task queue and the promise resolved from a
   *  task, as a browser does; never synchronously inside query() (a loop of `await query()` would
   *  otherwise never yield to tasks, starving this context's message handlers). */
  runTask_() {
    this.resolve_(this.snapshot_);
  }
}

/**
 * What one API knows of its engine: the engine once it has loaded, and until then the records made
 * meanwhile (its backlog, replayed in call order) or, if it failed, the error every call gets; and the
 * records the engine knows by id, which its decisions (`sink_`) reach. `newLock(record)` makes the
 * API's Lock objects.
 */
class EngineLink {
  constructor(newLock) {
    this.newLock_ = newLock;
    this.engine_ = null;
    this.loadError_ = null;
    this.backlog_ = []; // records made before the engine was ready, in call order
    this.nextId_ = 1;
    this.requests_ = new Map(); // id -> LockRequestRecord, until the engine no longer knows it
    this.queries_ = new Map(); // id -> QueryRecord
  }

  /** Send `record` to the engine now, or queue it until the engine is ready. */
  submit_(record) {
    if (this.engine_ !== null) {
      record.send_();
    } else {
      this.backlog_.push(record);
    }
  }

  /** The engine's decision of kind `kind` about the request or query `id`. */
  sink_(kind, id, payload) {
    if (kind === EFFECT_REFUSED) {
      this.refuse_(id, domException(payload[1], payload[0]));
      return;
    }
    if (kind === EFFECT_SNAPSHOT) {
      const query = this.queries_.get(id);
      if (query !== undefined) {
        this.queries_.delete(id);
        query.snapshot_ = decodeSnapshot(payload);
        queueTask(query);
      }
      return;
    }
    const requests = this.requests_;
    const record = requests.get(id);
    if (record === undefined) return;
    if (kind === EFFECT_GRANTED) {
      record.state_ = GRANTED;
      queueTask(record);
    } else if (kind === EFFECT_NOT_AVAILABLE) {
      record.state_ = NOT_AVAILABLE;
      requests.delete(id);
      queueTask(record);
    } else if (kind === EFFECT_STOLEN) {
      record.stolen_ = true;
      requests.delete(id);
      record.reject_(domException(LOSS_MESSAGES[payload] || LOSS_MESSAGES.stolen, 'AbortError'));
    }
  }

  /**
   * The engine refuses to decide (it cannot be sure it shares its origin's lock manager): reject request
   * or query `id`, or with `id` 0 every one not granted, with `error`. Granted ones were told their loss.
   */
  refuse_(id, error) {
    for (const records of [this.requests_, this.queries_]) {
      records.forEach((record, key) => {
        if ((id !== 0 && key !== id) || record.state_ === GRANTED || record.state_ === CALLED) return;
        records.delete(key);
        record.state_ = FINISHED;
        record.reject_(error);
      });
    }
  }

  /** The engine has loaded: send it the backlog. */
  loaded_(engine) {
    this.engine_ = engine;
    const queued = this.backlog_;
    this.backlog_ = null;
    for (const record of queued) {
      if (record.state_ === FINISHED) continue; // aborted while waiting for the engine
      try {
        record.send_();
      } catch (e) {
        record.reject_(e);
      }
    }
  }

  /** The engine failed to load: reject the backlog, and every later call, with an error saying so. */
  failed_(error) {
    const reason = error instanceof Error ? error.message : String(error);
    const loadError = new Error(`weblocks: the lock engine (WebAssembly) failed to load, so no lock can be granted: ${reason}`, {
      cause: error,
    });
    this.loadError_ = loadError;
    const queued = this.backlog_;
    this.backlog_ = null;
    for (const record of queued) {
      if (record.state_ !== FINISHED) record.reject_(loadError);
    }
    throw loadError;
  }
}

/**
 * Make `link`'s engine with `makeEngine(clientId, sink)`, which returns it or a promise of it. Returns
 * the promise that settles when it has loaded.
 */
function loadEngine(link, makeEngine, clientId) {
  let ready;
  try {
    const made = makeEngine(clientId, (kind, id, payload) => link.sink_(kind, id, payload));
    if (made !== null && typeof made === 'object' && typeof made.then === 'function') {
      ready = promiseThen.call(
        promiseResolve(made),
        (engine) => link.loaded_(engine),
        (error) => link.failed_(error),
      );
    } else {
      link.loaded_(made);
      ready = promiseResolve();
    }
  } catch (e) {
    ready = promiseResolve().then(() => link.failed_(e));
  }
  promiseThen.call(ready, undefined, () => {}); // failures surface on the calls; `ready` is optional
  return ready;
}

// ---------------------------------------------------------------------------------------------------
// The LockManager interface.

/**
 * One API's `LockManager` interface and its one object, `locks`, whose calls `link`'s engine decides.
 * `document`: as for `createLockApi`.
 */
function lockManagerInterface(link, document) {
  const LockManager = illegalConstructor('LockManager');

  // The brand check of both operations: this API has one LockManager object, `locks`.
  class LockManagerObject {
    query() {
      try {
        if (this !== locks) {
          throw new TypeError("Failed to execute 'query' on 'LockManager': Illegal invocation");
        }
        const error = inactiveError(document, 'query');
        if (error !== null) throw error;
        if (link.loadError_ !== null) throw link.loadError_;
        const promise = new NativePromise(captureResolvers);
        link.submit_(new QueryRecord(link, link.nextId_++, capturedResolve, capturedReject));
        return promise;
      } catch (e) {
        return promiseReject(e);
      }
    }

    // WebIDL overloads: request(name, callback) and request(name, options, callback).
    request(name, options, callback) {
      try {
        if (this !== locks) throw requestTypeError('Illegal invocation');
        const argc = arguments.length;
        if (argc < 2) throw requestTypeError(`2 arguments required, but only ${argc} present.`);
        name = toDOMString(name, '');
        if (argc === 2) {
          callback = options;
          options = undefined;
        }
        const converted = lockOptions(options);
        if (typeof callback !== 'function') {
          throw requestTypeError(`parameter ${argc === 2 ? 2 : 3} is not of type 'Function'.`);
        }
        // Step 3 (after the WebIDL conversions, before every other step).
        const error = inactiveError(document, 'request');
        if (error !== null) throw error;
        checkRequest(name, converted);
        // Step 9.
        const signal = converted.signal;
        if (signal !== null && signalAborted.call(signal)) return promiseReject(abortReason(signal));
        if (link.loadError_ !== null) throw link.loadError_;

        const promise = new NativePromise(captureResolvers);
        const record = new LockRequestRecord(link, link.nextId_++, name, converted, callback, capturedResolve, capturedReject);
        if (signal !== null) addEventListener.call(signal, 'abort', record);
        link.submit_(record);
        return promise;
      } catch (e) {
        return promiseReject(e);
      }
    }
  }
  defineProperty(LockManagerObject.prototype.request, 'length', { value: 2 });
  defineInterface(LockManager, LockManagerObject.prototype, 'LockManager');

  const locks = new LockManagerObject();
  return { LockManager, locks };
}

/**
 * Create one context's Web Locks API. `makeEngine(clientId, sink)` returns an Engine or a promise of
 * one; calls made before it is ready are queued and replayed in order. `document`: the context's
 * Document, where it is a window (request() and query() reject with an InvalidStateError while it is not
 * fully active). Touches no global.
 * Returns `{ locks, LockManager, Lock, clientId, ready }`; `ready` settles when the engine has loaded.
 */
export function createLockApi(makeEngine, document) {
  const clientId = newClientId();
  const { Lock, newLock } = lockInterface();
  const link = new EngineLink(newLock);
  const { LockManager, locks } = lockManagerInterface(link, document);
  const ready = loadEngine(link, makeEngine, clientId);
  return { locks, LockManager, Lock, clientId, ready };
}

/**
 * Install `api` (from `createLockApi`) as `globalObject`'s `navigator.locks` and its global `LockManager`
 * and `Lock`, only where `navigator.locks` is missing. Returns true if it installed.
 */
export function installLockApi(api, globalObject) {
  const navigator = globalObject.navigator;
  if (navigator === undefined || navigator === null || navigator.locks) return false;
  const { locks } = api;
  const prototype = Object.getPrototypeOf(navigator);
  const target = prototype !== null ? prototype : navigator; // Navigator.prototype or WorkerNavigator.prototype
  // Its brand check: a Navigator of this global's realm. Not only `navigator` itself: Firefox gives a
  // window whose frame was removed a new navigator object.
  const accessors = {
    get locks() {
      if (this !== navigator && !isPrototypeOf.call(target, this)) throw illegalInvocation();
      return locks;
    },
  };
  defineProperty(target, 'locks', {
    get: getOwnDescriptor(accessors, 'locks').get,
    set: undefined,
    enumerable: true,
    configurable: true,
  });
  for (const name of ['LockManager', 'Lock']) {
    defineProperty(globalObject, name, { value: api[name], writable: true, enumerable: false, configurable: true });
  }
  return true;
}

/**
 * A random UUID v4 string. Uses `crypto.getRandomValues`, which (unlike `randomUUID`) plain http has; where
 * there is no global crypto (Node before 17), Math.random: a client id only needs to be unique.
 */
export function newClientId() {
  const bytes = new Uint8Array(16);
  if (typeof crypto !== 'undefined' && crypto != null && typeof crypto.getRandomValues === 'function') {
    crypto.getRandomValues(bytes);
  } else {
    for (let i = 0; i < 16; i++) bytes[i] = (Math.random() * 256) | 0;
  }
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  let hex = '';
  for (let i = 0; i < 16; i++) {
    hex += (bytes[i] + 0x100).toString(16).slice(1);
    if (i === 3 || i === 5 || i === 7 || i === 9) hex += '-';
  }
  return hex;
}
