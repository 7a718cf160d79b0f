// Browser test cases for the ponyfill built by `createLockApi` (js/lock_api.js), driven from tests/web.rs.
//
// One exported function per spec step or error case; tests/web.rs declares a #[wasm_bindgen_test] of the
// same (snake_case) name for each, so a failing case is named in the test output. Every case takes
// `env = { createLockApi, makeEngine }` (wasm-bindgen snippets cannot import each other, so Rust passes
// them in) and returns a promise that rejects with a message saying what differed from the spec.
//
// Every case builds its own API object, so its lock manager and client id are its own: cases cannot see
// each other's locks and never touch the browser's native `navigator.locks`.
//
// tests/old_engines/ runs most of them too, in old JavaScript engines, each in a fresh context whose
// one API is the classic script's polyfill; there DOMException may be missing (errors are then Errors of
// the same name: js/lock_api.js, domException) and so may AbortController.
//
// Spec references ("4.1 step 3.4") are to the W3C Web Locks draft, sections 2-4.

// How long a case waits before concluding that something did NOT happen (a grant, a settlement).
// Grants the ponyfill makes are delivered in the next task or two, far sooner than this.
const QUIET_MS = 40;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

// ---------------------------------------------------------------------------------------------------
// Helpers

function newApi(env, makeEngine = env.makeEngine) {
  return env.createLockApi(makeEngine);
}

/** JSON string syntax with every code unit outside printable ASCII escaped, lone surrogates included. */
function quote(s) {
  return `"${s.replace(/[^\x20-\x7e]|["\\]/g, (c) =>
    c === '"' || c === '\\' ? `\\${c}` : `\\u${(c.charCodeAt(0) + 0x10000).toString(16).slice(1)}`,
  )}"`;
}

function describe(v) {
  if (typeof v === 'symbol') return v.toString();
  if (typeof v === 'string') return quote(v);
  if (hasDOMException && v instanceof DOMException) return `DOMException ${v.name}: ${v.message}`;
  if (v instanceof Error) return `${v.name}: ${v.message}`;
  if (typeof v === 'function') return `function ${v.name}`;
  try {
    const json = JSON.stringify(v);
    if (json !== undefined) return json;
  } catch {
    // fall through
  }
  return String(v);
}

// Where DOMException is missing or cannot be constructed, the API rejects with Errors of the same name.
const hasDOMException = (() => {
  try {
    return new DOMException('', 'x').name === 'x';
  } catch (e) {
    return false;
  }
})();

/** True if `error` is the exception named `name`: a DOMException where the platform can make one. */
function isDomException(error, name) {
  return error instanceof (hasDOMException ? DOMException : Error) && error.name === name;
}

function fail(message) {
  throw new Error(message);
}

function check(condition, message) {
  if (!condition) fail(message);
}

function eq(actual, expected, what) {
  if (!Object.is(actual, expected)) fail(`${what}: expected ${describe(expected)}, got ${describe(actual)}`);
}

function jsonEq(actual, expected, what) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) fail(`${what}: expected ${e}, got ${a}`);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function deferred() {
  let resolve;
  let reject;
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A unique resource name, so a failing case leaves nothing behind that another could trip on. */
let nameCounter = 0;
function freshName(label) {
  nameCounter += 1;
  return `${label}#${nameCounter}`;
}

/** Calls `fn`, which must return a Promise rather than throw (WebIDL: promise-returning operations). */
function call(what, fn) {
  let result;
  try {
    result = fn();
  } catch (e) {
    fail(`${what} threw synchronously (${describe(e)}) instead of returning a rejected promise`);
  }
  check(result instanceof Promise, `${what} returned ${describe(result)}, not a Promise`);
  return result;
}

/** Settles `promise`: `{ ok: true, value }` or `{ ok: false, error }`. */
function outcome(promise) {
  return promise.then(
    (value) => ({ ok: true, value }),
    (error) => ({ ok: false, error }),
  );
}

/** 'pending', 'fulfilled' or 'rejected', as seen after every task queued so far has run. */
async function stateAfterQuiet(promise) {
  let state = 'pending';
  promise.then(
    () => {
      state = 'fulfilled';
    },
    () => {
      state = 'rejected';
    },
  );
  await sleep(QUIET_MS);
  return state;
}

async function rejectionOf(what, promise) {
  const r = await outcome(promise);
  if (r.ok) fail(`${what}: expected a rejection, got fulfilment with ${describe(r.value)}`);
  return r.error;
}

async function expectTypeError(what, fn) {
  const error = await rejectionOf(what, call(what, fn));
  check(error instanceof TypeError, `${what}: expected a TypeError rejection, got ${describe(error)}`);
}

async function expectDomException(what, name, fn) {
  const error = await rejectionOf(what, call(what, fn));
  check(
    isDomException(error, name),
    `${what}: expected a "${name}" DOMException rejection, got ${describe(error)}`,
  );
}

/**
 * Requests `name` and holds the lock until `release(value)` / `fail(error)` is called.
 * `granted` resolves with the Lock; `result` is the request's promise (its rejection is observed).
 */
function hold(locks, name, options = {}) {
  const release = deferred();
  const granted = deferred();
  let isGranted = false;
  const result = locks.request(name, options, (lock) => {
    isGranted = true;
    granted.resolve(lock);
    return release.promise;
  });
  result.catch(() => {});
  return {
    granted: granted.promise,
    isGranted: () => isGranted,
    release: release.resolve,
    fail: release.reject,
    result,
  };
}

/** A callback that records its call in `log` under `label` and returns `label`. */
function logging(log, label) {
  return (lock) => {
    log.push(label);
    return label;
  };
}

async function namesHeld(locks) {
  return (await locks.query()).held.map((info) => info.name);
}

async function namesPending(locks) {
  return (await locks.query()).pending.map((info) => info.name);
}

function countRequestsMatching(snapshot, name) {
  return snapshot.held.filter((i) => i.name === name).length + snapshot.pending.filter((i) => i.name === name).length;
}

/** A callback that must never run; `fn.calls` counts the calls that happened anyway. */
function neverCalled(label) {
  const fn = () => {
    fn.calls += 1;
    throw new Error(`${label}: the callback was called`);
  };
  fn.calls = 0;
  return fn;
}

function checkNotCalled(fn, what) {
  eq(fn.calls, 0, `calls of the callback of ${what}`);
}

/**
 * Runs one case (called by tests/web.rs): `caseFn(env)`, failing if it takes longer than `ms`, so that
 * a case that hangs fails under its own name instead of stalling the whole run.
 */
export function runCase(caseFn, env, ms) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no outcome after ${ms} ms (something never settled)`)), ms);
  });
  return Promise.race([caseFn(env), timeout]).finally(() => clearTimeout(timer));
}

// ---------------------------------------------------------------------------------------------------
// request(): grant, callback result, promise settlement (3.2.1, 4.1, 4.4, 2.4)

export async function request_with_name_and_callback_resolves_with_callback_value(env) {
  const { locks, Lock } = newApi(env);
  const name = freshName('two-args');
  let seen;
  const p = call('request(name, callback)', () =>
    locks.request(name, (lock) => {
      seen = lock;
      return 'value';
    }),
  );
  eq(await p, 'value', 'request(name, callback) result');
  check(seen instanceof Lock, `callback got ${describe(seen)}, not a Lock`);
  eq(seen.name, name, 'lock.name');
  eq(seen.mode, 'exclusive', 'lock.mode (default)');
}

export async function request_with_name_options_and_callback_resolves_with_callback_value(env) {
  const { locks, Lock } = newApi(env);
  const name = freshName('three-args');
  let seen;
  const p = call('request(name, options, callback)', () =>
    locks.request(name, { mode: 'shared' }, (lock) => {
      seen = lock;
      return 42;
    }),
  );
  eq(await p, 42, 'request(name, options, callback) result');
  check(seen instanceof Lock, `callback got ${describe(seen)}, not a Lock`);
  eq(seen.mode, 'shared', 'lock.mode');
}

export async function callback_async_value_resolves_the_request_promise(env) {
  const { locks } = newApi(env);
  const name = freshName('async-value');
  const gate = deferred();
  const p = locks.request(name, async () => {
    await gate.promise;
    return 'later';
  });
  eq(await stateAfterQuiet(p), 'pending', 'request promise while the callback promise is pending');
  gate.resolve();
  eq(await p, 'later', 'request promise value');
}

export async function callback_sync_throw_rejects_the_request_promise(env) {
  const { locks } = newApi(env);
  const error = new RangeError('thrown by the callback');
  const p = call('request', () =>
    locks.request(freshName('sync-throw'), () => {
      throw error;
    }),
  );
  eq(await rejectionOf('request with a throwing callback', p), error, 'rejection reason');
}

export async function callback_async_rejection_rejects_the_request_promise(env) {
  const { locks } = newApi(env);
  const reason = { why: 'async rejection' };
  const gate = deferred();
  const p = locks.request(freshName('async-reject'), async () => {
    await gate.promise;
    throw reason;
  });
  eq(await stateAfterQuiet(p), 'pending', 'request promise while the callback promise is pending');
  gate.resolve();
  eq(await rejectionOf('request with a rejecting callback', p), reason, 'rejection reason');
}

export async function callback_thenable_result_is_adopted(env) {
  const { locks } = newApi(env);
  const p = locks.request(freshName('thenable'), () => ({
    then(resolve) {
      resolve('from thenable');
    },
  }));
  eq(await p, 'from thenable', 'request promise value');
}

export async function lock_is_held_until_callback_promise_fulfils(env) {
  const { locks } = newApi(env);
  const name = freshName('held-until-fulfil');
  const first = hold(locks, name);
  await first.granted;
  let secondGranted = false;
  const second = locks.request(name, () => {
    secondGranted = true;
  });
  await sleep(QUIET_MS);
  check(!secondGranted, 'second request granted while the first callback promise was still pending');
  first.release('done');
  eq(await first.result, 'done', 'first request result');
  await second;
  check(secondGranted, 'second request never granted');
}

export async function lock_is_held_until_callback_promise_rejects(env) {
  const { locks } = newApi(env);
  const name = freshName('held-until-reject');
  const first = hold(locks, name);
  await first.granted;
  let secondGranted = false;
  const second = locks.request(name, () => {
    secondGranted = true;
  });
  await sleep(QUIET_MS);
  check(!secondGranted, 'second request granted while the first callback promise was still pending');
  const error = new Error('boom');
  first.fail(error);
  eq(await rejectionOf('first request', first.result), error, 'first request rejection');
  await second;
  check(secondGranted, 'second request never granted after the first callback rejected');
}

export async function lock_is_released_after_sync_throw(env) {
  const { locks } = newApi(env);
  const name = freshName('released-after-throw');
  const log = [];
  const first = locks.request(name, () => {
    log.push('first');
    throw new Error('sync');
  });
  const second = locks.request(name, logging(log, 'second'));
  await rejectionOf('first request', first);
  eq(await second, 'second', 'second request result');
  jsonEq(log, ['first', 'second'], 'callback order');
}

export async function request_promise_settles_after_the_lock_is_released(env) {
  const { locks } = newApi(env);
  const name = freshName('settles-after-release');
  await locks.request(name, () => 'v');
  // Spec 2.4: release the lock, then resolve the released promise. So by now the lock is free.
  const snapshot = await locks.query();
  eq(countRequestsMatching(snapshot, name), 0, 'entries for the name in query() after the promise settled');
  const free = await locks.request(name, { ifAvailable: true }, (lock) => lock !== null);
  eq(free, true, 'lock available to ifAvailable right after the request promise settled');
}

export async function callback_is_invoked_in_a_later_task(env) {
  const { locks } = newApi(env);
  const log = [];
  const p = locks.request(freshName('later-task'), () => {
    log.push('callback');
  });
  log.push('request returned');
  // A chain of 100 microtasks queued right after request(): a callback run from any microtask queued
  // by request() (or from the engine's sink, synchronously) would land inside or before it.
  let depth = 0;
  const chain = () => {
    depth += 1;
    if (depth < 100) return Promise.resolve().then(chain);
    log.push('microtasks done');
    return undefined;
  };
  Promise.resolve().then(chain);
  await p;
  jsonEq(log, ['request returned', 'microtasks done', 'callback'], 'order of events');
}

export async function callbacks_granted_together_each_run_after_the_previous_ones_microtasks(env) {
  const { locks } = newApi(env);
  const name = freshName('together');
  const log = [];
  // 40 shared requests granted at once: each callback task must start only once every promise job the
  // previous callback queued (a chain of 20) has run, as if each had a task of its own; a callback
  // that throws does not keep the next from running.
  const requests = [];
  for (let i = 0; i < 40; i++) {
    requests.push(
      locks.request(name, { mode: 'shared' }, () => {
        log.push(`callback ${i}`);
        let depth = 0;
        const chain = () => {
          if (++depth < 20) return Promise.resolve().then(chain);
          log.push(`microtasks of ${i} done`);
          return undefined;
        };
        Promise.resolve().then(chain);
        if (i % 7 === 3) throw new Error(`callback ${i} throws`);
      }).catch((e) => e.message),
    );
  }
  const results = await Promise.all(requests);
  await new Promise((resolve) => setTimeout(resolve, 0)); // the last callback's chain
  eq(results.filter((r) => typeof r === 'string').length, 6, 'callbacks that threw rejected their request');
  const expected = [];
  for (let i = 0; i < 40; i++) expected.push(`callback ${i}`, `microtasks of ${i} done`);
  jsonEq(log, expected, 'each callback after the previous one and its promise jobs');
}

export async function callback_this_is_undefined_and_gets_exactly_the_lock(env) {
  const { locks, Lock } = newApi(env);
  let thisValue = 'not called';
  let args;
  await locks.request(freshName('this'), function callback(...rest) {
    thisValue = this;
    args = rest;
  });
  eq(thisValue, undefined, 'this inside the callback');
  eq(args.length, 1, 'number of callback arguments');
  check(args[0] instanceof Lock, `callback argument ${describe(args[0])} is not a Lock`);
}

export async function lock_name_and_mode_getters(env) {
  const { locks, Lock } = newApi(env);
  const name = freshName('getters');
  const exclusive = await locks.request(name, (lock) => lock);
  const shared = await locks.request(name, { mode: 'shared' }, (lock) => lock);
  const explicit = await locks.request(name, { mode: 'exclusive' }, (lock) => lock);
  for (const [lock, mode] of [
    [exclusive, 'exclusive'],
    [shared, 'shared'],
    [explicit, 'exclusive'],
  ]) {
    check(lock instanceof Lock, `${describe(lock)} is not a Lock`);
    eq(Object.getPrototypeOf(lock), Lock.prototype, 'prototype of the lock');
    eq(lock.name, name, 'lock.name');
    eq(lock.mode, mode, 'lock.mode');
  }
  check(exclusive !== shared, 'two grants gave the same Lock object');
  // The getters keep answering after release (the Lock object outlives its lock).
  eq(exclusive.name, name, 'lock.name after release');
}

// ---------------------------------------------------------------------------------------------------
// Modes and scheduling (2.3, 2.5 "grantable", 4.4)

export async function exclusive_blocks_exclusive(env) {
  const { locks } = newApi(env);
  const name = freshName('x-x');
  const first = hold(locks, name);
  await first.granted;
  const second = hold(locks, name);
  await sleep(QUIET_MS);
  check(!second.isGranted(), 'exclusive granted while another exclusive was held');
  first.release();
  await second.granted;
  second.release();
  await second.result;
}

export async function exclusive_blocks_shared(env) {
  const { locks } = newApi(env);
  const name = freshName('x-s');
  const first = hold(locks, name);
  await first.granted;
  const second = hold(locks, name, { mode: 'shared' });
  await sleep(QUIET_MS);
  check(!second.isGranted(), 'shared granted while an exclusive was held');
  first.release();
  await second.granted;
  second.release();
}

export async function shared_locks_coexist(env) {
  const { locks } = newApi(env);
  const name = freshName('s-s');
  const holders = [1, 2, 3].map(() => hold(locks, name, { mode: 'shared' }));
  await Promise.all(holders.map((h) => h.granted));
  eq((await locks.query()).held.length, 3, 'shared locks held at once');
  holders.forEach((h) => h.release());
  await Promise.all(holders.map((h) => h.result));
}

export async function exclusive_waits_for_every_shared_holder(env) {
  const { locks } = newApi(env);
  const name = freshName('s-x');
  const a = hold(locks, name, { mode: 'shared' });
  const b = hold(locks, name, { mode: 'shared' });
  await Promise.all([a.granted, b.granted]);
  const writer = hold(locks, name);
  await sleep(QUIET_MS);
  check(!writer.isGranted(), 'exclusive granted beside two shared holders');
  a.release();
  await a.result;
  await sleep(QUIET_MS);
  check(!writer.isGranted(), 'exclusive granted while one shared holder remained');
  b.release();
  await writer.granted;
  writer.release();
}

export async function requests_for_one_name_are_granted_in_fifo_order(env) {
  const { locks } = newApi(env);
  const name = freshName('fifo');
  const log = [];
  const first = hold(locks, name);
  await first.granted;
  const waiting = ['a', 'b', 'c', 'd'].map((label) => locks.request(name, logging(log, label)));
  first.release();
  await Promise.all(waiting);
  jsonEq(log, ['a', 'b', 'c', 'd'], 'grant order');
}

export async function shared_request_does_not_overtake_a_queued_exclusive(env) {
  const { locks } = newApi(env);
  const name = freshName('no-overtake');
  const reader = hold(locks, name, { mode: 'shared' });
  await reader.granted;
  const writer = hold(locks, name);
  const lateReader = hold(locks, name, { mode: 'shared' });
  await sleep(QUIET_MS);
  check(!writer.isGranted(), 'exclusive granted beside a shared holder');
  check(!lateReader.isGranted(), 'shared request overtook the exclusive queued before it');
  reader.release();
  await writer.granted;
  await sleep(QUIET_MS);
  check(!lateReader.isGranted(), 'shared granted while the exclusive was held');
  writer.release();
  await lateReader.granted;
  lateReader.release();
}

export async function consecutive_shared_requests_are_granted_together(env) {
  const { locks } = newApi(env);
  const name = freshName('shared-batch');
  const writer = hold(locks, name);
  await writer.granted;
  const r1 = hold(locks, name, { mode: 'shared' });
  const r2 = hold(locks, name, { mode: 'shared' });
  const w2 = hold(locks, name);
  const r3 = hold(locks, name, { mode: 'shared' });
  writer.release();
  await Promise.all([r1.granted, r2.granted]);
  await sleep(QUIET_MS);
  check(!w2.isGranted(), 'exclusive granted beside shared holders');
  check(!r3.isGranted(), 'shared request queued behind an exclusive was granted early');
  r1.release();
  r2.release();
  await w2.granted;
  w2.release();
  await r3.granted;
  r3.release();
}

export async function different_names_are_independent(env) {
  const { locks } = newApi(env);
  const a = hold(locks, freshName('a'));
  await a.granted;
  const b = hold(locks, freshName('b'));
  await b.granted;
  const c = await locks.request(freshName('c'), { ifAvailable: true }, (lock) => lock !== null);
  eq(c, true, 'ifAvailable on a third name while two others are held');
  a.release();
  b.release();
}

// ---------------------------------------------------------------------------------------------------
// ifAvailable (4.1 step 3.5.1)

export async function if_available_is_granted_when_free(env) {
  const { locks, Lock } = newApi(env);
  const name = freshName('ifa-free');
  let seen = 'not called';
  const result = await locks.request(name, { ifAvailable: true }, (lock) => {
    seen = lock;
    return 'got it';
  });
  eq(result, 'got it', 'request result');
  check(seen instanceof Lock, `callback got ${describe(seen)}, not a Lock`);
  eq(seen.name, name, 'lock.name');
  eq(seen.mode, 'exclusive', 'lock.mode');
}

export async function if_available_calls_back_with_null_when_held(env) {
  const { locks } = newApi(env);
  const name = freshName('ifa-held');
  const holder = hold(locks, name);
  await holder.granted;
  let args;
  const result = await locks.request(name, { ifAvailable: true }, (...rest) => {
    args = rest;
    return 'no lock';
  });
  eq(result, 'no lock', 'request result');
  eq(args.length, 1, 'number of callback arguments');
  eq(args[0], null, 'callback argument');
  const snapshot = await locks.query();
  eq(snapshot.pending.length, 0, 'pending requests after the ifAvailable request was refused');
  eq(snapshot.held.length, 1, 'held locks (the holder is unaffected)');
  holder.release();
  await holder.result;
}

export async function if_available_calls_back_with_null_when_queue_not_empty(env) {
  const { locks } = newApi(env);
  const name = freshName('ifa-queue');
  const reader = hold(locks, name, { mode: 'shared' });
  await reader.granted;
  const writer = hold(locks, name);
  // A shared lock would be compatible with the shared holder, but the queue is not empty (2.5 step 7).
  const got = await locks.request(name, { mode: 'shared', ifAvailable: true }, (lock) => lock);
  eq(got, null, 'ifAvailable shared request with an exclusive request queued');
  reader.release();
  await writer.granted;
  writer.release();
}

export async function if_available_shared_is_granted_beside_shared(env) {
  const { locks } = newApi(env);
  const name = freshName('ifa-shared');
  const reader = hold(locks, name, { mode: 'shared' });
  await reader.granted;
  const got = await locks.request(name, { mode: 'shared', ifAvailable: true }, (lock) => lock && lock.mode);
  eq(got, 'shared', 'ifAvailable shared request beside a shared holder');
  reader.release();
}

export async function if_available_null_callback_runs_in_a_later_task(env) {
  const { locks } = newApi(env);
  const name = freshName('ifa-task');
  const holder = hold(locks, name);
  await holder.granted;
  const log = [];
  const p = locks.request(name, { ifAvailable: true }, (lock) => {
    log.push(lock === null ? 'callback(null)' : 'callback(lock)');
  });
  log.push('request returned');
  let depth = 0;
  const chain = () => {
    depth += 1;
    if (depth < 100) return Promise.resolve().then(chain);
    log.push('microtasks done');
    return undefined;
  };
  Promise.resolve().then(chain);
  await p;
  jsonEq(log, ['request returned', 'microtasks done', 'callback(null)'], 'order of events');
  holder.release();
}

export async function if_available_null_callback_throw_rejects(env) {
  const { locks } = newApi(env);
  const name = freshName('ifa-throw');
  const holder = hold(locks, name);
  await holder.granted;
  const error = new Error('no lock, so throw');
  const p = locks.request(name, { ifAvailable: true }, () => {
    throw error;
  });
  eq(await rejectionOf('ifAvailable request whose callback throws', p), error, 'rejection reason');
  holder.release();
}

// ---------------------------------------------------------------------------------------------------
// steal (4.1 step 3.4)

export async function steal_rejects_the_holder_with_abort_error_and_its_callback_keeps_running(env) {
  const { locks } = newApi(env);
  const name = freshName('steal-holder');
  const resume = deferred();
  let holderGranted;
  const granted = new Promise((resolve) => {
    holderGranted = resolve;
  });
  let continued = false;
  let lockAfterSteal;
  const holderResult = locks.request(name, async (lock) => {
    holderGranted();
    await resume.promise;
    continued = true;
    lockAfterSteal = [lock.name, lock.mode];
    return 'holder finished';
  });
  const holderOutcome = outcome(holderResult); // observed now: its rejection comes with the steal
  await granted;
  const thief = await locks.request(name, { steal: true }, (lock) => lock.name);
  eq(thief, name, 'thief callback result');
  const error = await rejectionOf("stolen holder's request promise", holderOutcome.then((r) => (r.ok ? r.value : Promise.reject(r.error))));
  check(
    isDomException(error, 'AbortError'),
    `stolen holder's promise rejected with ${describe(error)}, not an AbortError DOMException`,
  );
  check(!continued, 'holder callback finished before it was resumed');
  resume.resolve();
  await sleep(QUIET_MS);
  check(continued, 'holder callback did not keep running after the steal');
  jsonEq(lockAfterSteal, [name, 'exclusive'], 'holder lock getters after the steal');
}

export async function steal_releases_every_holder_of_the_name_only(env) {
  const { locks } = newApi(env);
  const name = freshName('steal-all');
  const other = freshName('steal-other');
  const r1 = hold(locks, name, { mode: 'shared' });
  const r2 = hold(locks, name, { mode: 'shared' });
  const bystander = hold(locks, other);
  await Promise.all([r1.granted, r2.granted, bystander.granted]);
  const thief = hold(locks, name, { steal: true });
  await thief.granted;
  for (const [label, h] of [
    ['first shared holder', r1],
    ['second shared holder', r2],
  ]) {
    const e = await rejectionOf(label, h.result);
    check(isDomException(e, 'AbortError'), `${label} rejected with ${describe(e)}`);
  }
  eq(await stateAfterQuiet(bystander.result), 'pending', 'holder of another name after the steal');
  const snapshot = await locks.query();
  jsonEq(
    snapshot.held.map((i) => [i.name, i.mode]),
    [
      [other, 'exclusive'],
      [name, 'exclusive'],
    ],
    'held locks after the steal',
  );
  thief.release();
  bystander.release();
  r1.release();
  r2.release();
}

export async function steal_is_granted_ahead_of_the_queue(env) {
  const { locks } = newApi(env);
  const name = freshName('steal-queue');
  const log = [];
  const holder = hold(locks, name);
  await holder.granted;
  const w1 = locks.request(name, logging(log, 'w1'));
  const w2 = locks.request(name, { mode: 'shared' }, logging(log, 'w2'));
  const thief = hold(locks, name, { steal: true });
  await thief.granted;
  log.push('thief');
  const snapshot = await locks.query();
  eq(snapshot.held.length, 1, 'held locks while the thief holds');
  eq(snapshot.pending.length, 2, 'pending requests while the thief holds');
  await sleep(QUIET_MS);
  jsonEq(log, ['thief'], 'grants while the thief holds');
  thief.release();
  await Promise.all([w1, w2]);
  jsonEq(log, ['thief', 'w1', 'w2'], 'grant order');
  holder.release();
}

export async function stolen_lock_finishing_later_does_not_release_the_thief(env) {
  const { locks } = newApi(env);
  const name = freshName('steal-late-release');
  const holder = hold(locks, name);
  await holder.granted;
  const waiter = hold(locks, name);
  const thief = hold(locks, name, { steal: true });
  await thief.granted;
  await rejectionOf('stolen holder', holder.result);
  holder.release('late');
  await sleep(QUIET_MS);
  check(!waiter.isGranted(), "the stolen lock's callback settling released the thief's lock");
  eq((await namesHeld(locks)).length, 1, 'held locks');
  thief.release();
  await waiter.granted;
  waiter.release();
  // The stolen request stays rejected with the AbortError; its callback's later value changes nothing.
  const e = await rejectionOf('stolen holder', holder.result);
  eq(e.name, 'AbortError', 'stolen holder rejection name');
}

export async function steal_of_a_free_name_is_granted(env) {
  const { locks } = newApi(env);
  const name = freshName('steal-free');
  const got = await locks.request(name, { steal: true }, (lock) => [lock.name, lock.mode]);
  jsonEq(got, [name, 'exclusive'], 'stealing lock');
}

// ---------------------------------------------------------------------------------------------------
// signal (3.2.1 step 9, 4.1 step 2, 4.3, 4.4 step 14.1)

export async function abort_before_grant_rejects_with_the_default_reason(env) {
  const { locks } = newApi(env);
  const name = freshName('abort-default');
  const holder = hold(locks, name);
  await holder.granted;
  const controller = new AbortController();
  const callback = neverCalled('aborted request');
  const p = locks.request(name, { signal: controller.signal }, callback);
  eq((await locks.query()).pending.length, 1, 'pending requests before the abort');
  controller.abort();
  const e = await rejectionOf('aborted request', p);
  eq(e, controller.signal.reason, 'rejection reason (the signal reason itself)');
  check(isDomException(e, 'AbortError'), `default reason is ${describe(e)}`);
  const snapshot = await locks.query();
  eq(snapshot.pending.length, 0, 'pending requests after the abort');
  holder.release();
  await holder.result;
  await sleep(QUIET_MS); // the aborted request's callback must not run now the lock is free
  checkNotCalled(callback, 'the aborted request');
  eq((await locks.query()).held.length, 0, 'held locks after the holder released');
}

export async function abort_before_grant_rejects_with_a_custom_reason(env) {
  const { locks } = newApi(env);
  const name = freshName('abort-custom');
  const holder = hold(locks, name);
  await holder.granted;
  const c1 = new AbortController();
  const c2 = new AbortController();
  const cb1 = neverCalled('request aborted with a string');
  const cb2 = neverCalled('request aborted with an object');
  const p1 = locks.request(name, { signal: c1.signal }, cb1);
  const p2 = locks.request(name, { signal: c2.signal }, cb2);
  const objectReason = { custom: true };
  c1.abort('custom reason');
  c2.abort(objectReason);
  eq(await rejectionOf('request aborted with a string', p1), 'custom reason', 'rejection reason');
  eq(await rejectionOf('request aborted with an object', p2), objectReason, 'rejection reason');
  eq((await locks.query()).pending.length, 0, 'pending requests after the aborts');
  holder.release();
  await sleep(QUIET_MS);
  checkNotCalled(cb1, 'the request aborted with a string');
  checkNotCalled(cb2, 'the request aborted with an object');
}

export async function abort_unblocks_requests_queued_behind(env) {
  const { locks } = newApi(env);
  const name = freshName('abort-unblocks');
  const reader = hold(locks, name, { mode: 'shared' });
  await reader.granted;
  const controller = new AbortController();
  const writerCallback = neverCalled('aborted writer');
  const writer = locks.request(name, { signal: controller.signal }, writerCallback);
  const lateReader = hold(locks, name, { mode: 'shared' });
  await sleep(QUIET_MS);
  check(!lateReader.isGranted(), 'shared request overtook the queued exclusive');
  controller.abort();
  await rejectionOf('aborted writer', writer);
  await lateReader.granted; // 4.3 step 7: processing the queue grants it beside the first reader
  lateReader.release();
  reader.release();
  await sleep(QUIET_MS);
  checkNotCalled(writerCallback, 'the aborted writer');
}

export async function already_aborted_signal_rejects_with_its_reason(env) {
  const { locks } = newApi(env);
  const name = freshName('pre-aborted');
  const custom = AbortSignal.abort('already');
  const callback = neverCalled('already aborted');
  eq(
    await rejectionOf('request with an aborted signal', call('request', () => locks.request(name, { signal: custom }, callback))),
    'already',
    'rejection reason',
  );
  const plain = AbortSignal.abort();
  const e = await rejectionOf('request with an aborted signal', locks.request(name, { signal: plain }, callback));
  eq(e, plain.reason, 'rejection reason (the signal reason itself)');
  const snapshot = await locks.query();
  eq(countRequestsMatching(snapshot, name), 0, 'entries for the name in query()');
  await sleep(QUIET_MS);
  checkNotCalled(callback, 'the requests with an aborted signal');
}

export async function abort_after_grant_is_ignored(env) {
  const { locks } = newApi(env);
  const name = freshName('abort-after-grant');
  const controller = new AbortController();
  const resume = deferred();
  const granted = deferred();
  const p = locks.request(name, { signal: controller.signal }, async () => {
    granted.resolve();
    await resume.promise;
    return 'kept';
  });
  await granted.promise;
  controller.abort('too late');
  eq(await stateAfterQuiet(p), 'pending', 'request promise after an abort during the callback');
  eq((await locks.query()).held.length, 1, 'held locks after the abort');
  resume.resolve();
  eq(await p, 'kept', 'request result');
}

export async function abort_between_grant_and_callback_releases_the_lock(env) {
  // 4.4 step 14.1: the grant happened but the callback task has not run; the signal is checked there.
  const { locks } = newApi(env);
  const name = freshName('abort-before-callback');
  const controller = new AbortController();
  const callback = neverCalled('aborted before its callback');
  const p = locks.request(name, { signal: controller.signal }, callback);
  controller.abort('before the callback');
  eq(await rejectionOf('aborted request', p), 'before the callback', 'rejection reason');
  await sleep(QUIET_MS);
  checkNotCalled(callback, 'the request aborted before its callback ran');
  const free = await locks.request(name, { ifAvailable: true }, (lock) => lock !== null);
  eq(free, true, 'lock available after the aborted request');
}

// ---------------------------------------------------------------------------------------------------
// NotSupportedError (3.2.1 steps 5-8)

export async function name_starting_with_hyphen_rejects_not_supported(env) {
  const { locks } = newApi(env);
  for (const name of ['-', '-x', '--']) {
    await expectDomException(`request(${describe(name)})`, 'NotSupportedError', () =>
      locks.request(name, neverCalled(name)),
    );
    await expectDomException(`request(${describe(name)}, {})`, 'NotSupportedError', () =>
      locks.request(name, {}, neverCalled(name)),
    );
  }
  // Step 5 tests the converted name.
  await expectDomException('request({toString: () => "-obj"})', 'NotSupportedError', () =>
    locks.request({ toString: () => '-obj' }, neverCalled('-obj')),
  );
  jsonEq(await locks.query(), { held: [], pending: [] }, 'query() after the rejected requests');
}

export async function names_with_a_hyphen_elsewhere_are_allowed(env) {
  const { locks } = newApi(env);
  for (const name of ['x-', 'a-b', ' -x', '\u2010x', '\u2212x']) {
    eq(await locks.request(name, (lock) => lock.name), name, `request(${describe(name)})`);
  }
}

export async function steal_with_if_available_rejects_not_supported(env) {
  const { locks } = newApi(env);
  await expectDomException('steal + ifAvailable', 'NotSupportedError', () =>
    locks.request(freshName('steal-ifa'), { steal: true, ifAvailable: true }, neverCalled('steal+ifAvailable')),
  );
}

export async function steal_with_shared_mode_rejects_not_supported(env) {
  const { locks } = newApi(env);
  await expectDomException('steal + shared', 'NotSupportedError', () =>
    locks.request(freshName('steal-shared'), { steal: true, mode: 'shared' }, neverCalled('steal+shared')),
  );
}

export async function signal_with_steal_rejects_not_supported(env) {
  const { locks } = newApi(env);
  const signal = new AbortController().signal;
  await expectDomException('signal + steal', 'NotSupportedError', () =>
    locks.request(freshName('signal-steal'), { signal, steal: true }, neverCalled('signal+steal')),
  );
}

export async function signal_with_if_available_rejects_not_supported(env) {
  const { locks } = newApi(env);
  const signal = new AbortController().signal;
  await expectDomException('signal + ifAvailable', 'NotSupportedError', () =>
    locks.request(freshName('signal-ifa'), { signal, ifAvailable: true }, neverCalled('signal+ifAvailable')),
  );
}

export async function not_supported_checks_come_before_the_aborted_signal(env) {
  // Steps 5-8 run before step 9, so an aborted signal's reason is not what they reject with.
  const { locks } = newApi(env);
  const signal = AbortSignal.abort('aborted');
  await expectDomException('"-x" with an aborted signal', 'NotSupportedError', () =>
    locks.request('-x', { signal }, neverCalled('-x')),
  );
  await expectDomException('steal with an aborted signal', 'NotSupportedError', () =>
    locks.request(freshName('s'), { signal, steal: true }, neverCalled('steal')),
  );
  await expectDomException('ifAvailable with an aborted signal', 'NotSupportedError', () =>
    locks.request(freshName('i'), { signal, ifAvailable: true }, neverCalled('ifAvailable')),
  );
}

export async function not_supported_checks_use_to_boolean_options(env) {
  const { locks } = newApi(env);
  await expectDomException('steal: 1, ifAvailable: "yes"', 'NotSupportedError', () =>
    locks.request(freshName('tb'), { steal: 1, ifAvailable: 'yes' }, neverCalled('truthy')),
  );
  // Falsy values are false: steal: 0 with ifAvailable is fine.
  const name = freshName('tb-ok');
  eq(await locks.request(name, { steal: 0, ifAvailable: 'yes', mode: 'shared' }, (l) => l && l.mode), 'shared', 'result');
  // ifAvailable: "yes" really is true: it gets null when the lock is held.
  const holder = hold(locks, name);
  await holder.granted;
  eq(await locks.request(name, { ifAvailable: 'yes' }, (l) => l), null, 'ifAvailable: "yes" when held');
  holder.release();
}

// ---------------------------------------------------------------------------------------------------
// TypeError: WebIDL conversions, all as rejections (3.2.1 IDL)

export async function symbol_name_rejects_type_error(env) {
  const { locks } = newApi(env);
  await expectTypeError('request(Symbol(), callback)', () => locks.request(Symbol('n'), neverCalled('symbol')));
  await expectTypeError('request(Symbol(), {}, callback)', () => locks.request(Symbol('n'), {}, neverCalled('symbol')));
}

export async function invalid_mode_rejects_type_error(env) {
  const { locks } = newApi(env);
  for (const mode of ['SHARED', 'Exclusive', 'read', '', null]) {
    await expectTypeError(`mode ${describe(mode)}`, () => locks.request(freshName('mode'), { mode }, neverCalled('bad mode')));
  }
  // The enum value is converted with ToString first.
  const got = await locks.request(freshName('mode-obj'), { mode: { toString: () => 'shared' } }, (l) => l.mode);
  eq(got, 'shared', 'mode given as an object whose toString is "shared"');
  const dflt = await locks.request(freshName('mode-undef'), { mode: undefined }, (l) => l.mode);
  eq(dflt, 'exclusive', 'mode: undefined');
}

export async function non_object_options_reject_type_error(env) {
  const { locks } = newApi(env);
  // A BigInt too, where the engine has them (Chrome 67, Safari 14).
  for (const options of [5, 'shared', true, Symbol('o'), ...(typeof BigInt === 'function' ? [BigInt(1)] : [])]) {
    await expectTypeError(`options ${describe(options)}`, () =>
      locks.request(freshName('opts'), options, neverCalled('bad options')),
    );
  }
}

export async function null_and_undefined_options_mean_defaults(env) {
  const { locks } = newApi(env);
  eq(await locks.request(freshName('null-opts'), null, (l) => l.mode), 'exclusive', 'options null');
  eq(await locks.request(freshName('undef-opts'), undefined, (l) => l.mode), 'exclusive', 'options undefined');
  eq(await locks.request(freshName('fn-opts'), () => {}, (l) => l.mode), 'exclusive', 'options a function');
}

export async function signal_that_is_not_an_abort_signal_rejects_type_error(env) {
  const { locks } = newApi(env);
  // Where the platform has no AbortController (nor AbortSignal), no value is a signal.
  const values = [{}, null, 'signal', { aborted: false }];
  if (typeof AbortController === 'function') values.push(new EventTarget(), new AbortController());
  for (const signal of values) {
    await expectTypeError(`signal ${describe(signal)}`, () =>
      locks.request(freshName('sig'), { signal }, neverCalled('bad signal')),
    );
  }
  eq(await locks.request(freshName('sig-undef'), { signal: undefined, steal: true }, () => 'ok'), 'ok', 'signal: undefined counts as absent');
}

export async function non_callable_callback_rejects_type_error(env) {
  // The name is held throughout, so a request that got past validation would wait in the queue rather
  // than fail later when its "callback" is called: the TypeError must come from request() itself.
  const { locks } = newApi(env);
  const name = freshName('cb');
  const holder = hold(locks, name);
  await holder.granted;
  for (const cb of [{}, null, undefined, 'callback', 5]) {
    for (const [label, makeRequest] of [
      [`request(name, ${describe(cb)})`, () => locks.request(name, cb)],
      [`request(name, {}, ${describe(cb)})`, () => locks.request(name, {}, cb)],
    ]) {
      const p = call(label, makeRequest);
      eq(await stateAfterQuiet(p), 'rejected', `${label} while the name is held`);
      await expectTypeError(label, () => p);
    }
  }
  const snapshot = await locks.query();
  eq(snapshot.pending.length, 0, 'requests queued by the rejected calls');
  eq(snapshot.held.length, 1, 'held locks');
  holder.release();
}

export async function too_few_arguments_reject_type_error(env) {
  const { locks } = newApi(env);
  await expectTypeError('request()', () => locks.request());
  await expectTypeError('request(name)', () => locks.request(freshName('one-arg')));
  await expectTypeError('request(name, options)', () => locks.request(freshName('two-arg'), { mode: 'shared' }));
}

export async function bad_this_rejects_type_error(env) {
  const { locks, LockManager } = newApi(env);
  const { request, query } = LockManager.prototype;
  for (const [label, thisValue] of [
    ['{}', {}],
    ['undefined', undefined],
    ['Object.create(LockManager.prototype)', Object.create(LockManager.prototype)],
  ]) {
    await expectTypeError(`request with this = ${label}`, () => request.call(thisValue, freshName('this'), neverCalled('bad this')));
    await expectTypeError(`query with this = ${label}`, () => query.call(thisValue));
  }
  // Detached from the object, called as a plain function.
  await expectTypeError('detached request()', () => {
    const detached = locks.request;
    return detached(freshName('detached'), neverCalled('detached'));
  });
}

export async function conversion_errors_come_before_not_supported_checks(env) {
  const { locks } = newApi(env);
  await expectTypeError('"-x" with a bad mode', () => locks.request('-x', { mode: 'bad' }, neverCalled('-x')));
  await expectTypeError('"-x" with a non-callable callback', () => locks.request('-x', {}, 'nope'));
  await expectTypeError('steal+ifAvailable with a non-AbortSignal signal', () =>
    locks.request(freshName('x'), { steal: true, ifAvailable: true, signal: {} }, neverCalled('x')),
  );
}

// ---------------------------------------------------------------------------------------------------
// Conversions: ToString of the name, the options dictionary (WebIDL)

export async function name_is_converted_with_to_string(env) {
  const { locks } = newApi(env);
  const cases = [
    [1.5, '1.5'],
    [-0, '0'],
    [1e21, '1e+21'],
    [true, 'true'],
    [null, 'null'],
    [undefined, 'undefined'],
    [{ toString: () => 'from toString' }, 'from toString'],
    [{ valueOf: () => 7, toString: undefined }, '7'],
    [['a', 'b'], 'a,b'],
  ];
  for (const [input, expected] of cases) {
    const holder = hold(locks, input);
    const lock = await holder.granted;
    eq(lock.name, expected, `lock.name for ${describe(input)}`);
    jsonEq(await namesHeld(locks), [expected], `query().held names for ${describe(input)}`);
    holder.release();
    await holder.result;
  }
}

export async function name_to_string_throwing_rejects_with_that_error(env) {
  const { locks } = newApi(env);
  const error = new SyntaxError('no string for you');
  const p = call('request', () =>
    locks.request(
      {
        toString() {
          throw error;
        },
      },
      neverCalled('throwing name'),
    ),
  );
  eq(await rejectionOf('request with a throwing toString', p), error, 'rejection reason');
}

export async function dom_string_names_round_trip_unchanged(env) {
  // WPT web-locks/resource-names: names are DOMStrings (not USVStrings), kept code unit for code unit.
  const { locks } = newApi(env);
  const names = ['', 'abc\x00def', '\uD800', '\uDC00', '\uDC00\uD800', '\uFFFF', '\u{1F512}', '%d800', '\uD800%0025%'];
  for (const name of names) {
    const holder = hold(locks, name);
    const lock = await holder.granted;
    eq(lock.name, name, 'lock.name');
    const held = await namesHeld(locks);
    eq(held.length, 1, 'held locks');
    eq(held[0], name, 'query().held[0].name');
    holder.release();
    await holder.result;
  }
}

export async function names_differing_only_in_lone_surrogates_are_distinct(env) {
  // '\uD800' as a USVString would become '\uFFFD' and block (or be blocked by) that name.
  const { locks } = newApi(env);
  const holder = hold(locks, '\uD800');
  await holder.granted;
  for (const other of ['\uFFFD', '\uDC00', '\uD801', '%d800', 'd800', '']) {
    eq(await locks.request(other, { ifAvailable: true }, (lock) => lock !== null), true, `ifAvailable ${describe(other)} while "\\uD800" is held`);
  }
  holder.release();
}

export async function options_members_are_read_in_lexicographic_order(env) {
  const { locks } = newApi(env);
  const log = [];
  const options = {
    get steal() {
      log.push('steal');
      return false;
    },
    get signal() {
      log.push('signal');
      return undefined;
    },
    get mode() {
      log.push('mode');
      return 'shared';
    },
    get ifAvailable() {
      log.push('ifAvailable');
      return false;
    },
  };
  const name = {
    toString() {
      log.push('name');
      return 'ordered';
    },
  };
  await locks.request(name, options, () => log.push('callback'));
  jsonEq(log, ['name', 'ifAvailable', 'mode', 'signal', 'steal', 'callback'], 'order of conversions');
}

export async function conversion_order_is_name_then_options_then_callback(env) {
  const { locks } = newApi(env);
  const log = [];
  const options = {
    get ifAvailable() {
      log.push('ifAvailable');
      return false;
    },
    get mode() {
      log.push('mode');
      return 'exclusive';
    },
    get signal() {
      log.push('signal');
      return undefined;
    },
    get steal() {
      log.push('steal');
      return false;
    },
  };
  const name = {
    toString() {
      log.push('name');
      return 'x';
    },
  };
  // The callback is checked last: every option was read before the TypeError.
  await expectTypeError('non-callable callback', () => locks.request(name, options, 'not callable'));
  jsonEq(log, ['name', 'ifAvailable', 'mode', 'signal', 'steal'], 'conversions before the callback check');
  // A name that fails to convert stops everything after it.
  log.length = 0;
  const nameError = new Error('name');
  const p = locks.request(
    {
      toString() {
        log.push('name');
        throw nameError;
      },
    },
    options,
    neverCalled('x'),
  );
  eq(await rejectionOf('throwing name', p), nameError, 'rejection reason');
  jsonEq(log, ['name'], 'conversions after a throwing name');
}

export async function option_conversion_errors_stop_at_the_failing_member(env) {
  const { locks } = newApi(env);
  const log = [];
  const getterError = new Error('mode getter');
  const throwing = {
    get ifAvailable() {
      log.push('ifAvailable');
      return false;
    },
    get mode() {
      log.push('mode');
      throw getterError;
    },
    get signal() {
      log.push('signal');
      return undefined;
    },
    get steal() {
      log.push('steal');
      return false;
    },
  };
  eq(
    await rejectionOf('throwing mode getter', call('request', () => locks.request(freshName('g'), throwing, neverCalled('g')))),
    getterError,
    'rejection reason',
  );
  jsonEq(log, ['ifAvailable', 'mode'], 'members read before the throwing getter stopped conversion');
  // An invalid enum value fails at the mode member too: signal and steal are never read.
  log.length = 0;
  const badMode = {
    get ifAvailable() {
      log.push('ifAvailable');
      return false;
    },
    get mode() {
      log.push('mode');
      return 'neither';
    },
    get signal() {
      log.push('signal');
      return undefined;
    },
    get steal() {
      log.push('steal');
      return false;
    },
  };
  await expectTypeError('invalid mode', () => locks.request(freshName('g'), badMode, neverCalled('g')));
  jsonEq(log, ['ifAvailable', 'mode'], 'members read before the invalid mode stopped conversion');
}

// ---------------------------------------------------------------------------------------------------
// query() (3.2.2, 4.5)

export async function query_reports_held_and_pending_with_name_mode_client_id(env) {
  const { locks, clientId } = newApi(env);
  const name = freshName('query');
  const holder = hold(locks, name);
  await holder.granted;
  const waiter = hold(locks, name, { mode: 'shared' });
  // Member order is left to query_dictionaries_are_plain_objects_with_members_in_lexicographic_order.
  const rows = (snapshot) => ({
    held: snapshot.held.map((i) => [i.name, i.mode, i.clientId]),
    pending: snapshot.pending.map((i) => [i.name, i.mode, i.clientId]),
  });
  const snapshot = await call('query()', () => locks.query());
  jsonEq(rows(snapshot), { held: [[name, 'exclusive', clientId]], pending: [[name, 'shared', clientId]] }, 'query() snapshot');
  holder.release();
  await waiter.granted;
  jsonEq(rows(await locks.query()), { held: [[name, 'shared', clientId]], pending: [] }, 'snapshot after the release');
  waiter.release();
  await waiter.result;
  jsonEq(rows(await locks.query()), { held: [], pending: [] }, 'snapshot when idle');
}

export async function query_dictionaries_are_plain_objects_with_members_in_lexicographic_order(env) {
  const { locks } = newApi(env);
  const name = freshName('query-shape');
  const holder = hold(locks, name);
  await holder.granted;
  const waiter = hold(locks, name);
  const snapshot = await locks.query();
  eq(Object.getPrototypeOf(snapshot), Object.prototype, 'prototype of the snapshot');
  jsonEq(Object.keys(snapshot), ['held', 'pending'], 'snapshot keys');
  check(Array.isArray(snapshot.held) && Array.isArray(snapshot.pending), 'held and pending are arrays');
  for (const info of [...snapshot.held, ...snapshot.pending]) {
    eq(Object.getPrototypeOf(info), Object.prototype, 'prototype of a LockInfo');
    jsonEq(Object.keys(info), ['clientId', 'mode', 'name'], 'LockInfo keys');
  }
  holder.release();
  await waiter.granted;
  waiter.release();
}

export async function query_lists_held_locks_in_grant_order(env) {
  const { locks } = newApi(env);
  const [a, b, c] = [freshName('a'), freshName('b'), freshName('c')];
  const hb = hold(locks, b);
  await hb.granted;
  const ha = hold(locks, a, { mode: 'shared' });
  await ha.granted;
  const hc = hold(locks, c);
  await hc.granted;
  const hb2 = hold(locks, a, { mode: 'shared' });
  await hb2.granted;
  jsonEq(
    (await locks.query()).held.map((i) => [i.name, i.mode]),
    [
      [b, 'exclusive'],
      [a, 'shared'],
      [c, 'exclusive'],
      [a, 'shared'],
    ],
    'held order',
  );
  hb.release();
  await hb.result;
  jsonEq(await namesHeld(locks), [a, c, a], 'held order after releasing the first');
  for (const h of [ha, hc, hb2]) h.release();
}

export async function query_lists_pending_requests_per_name_queue_in_fifo_order(env) {
  // 4.5 step 3: for each queue of the lock request queue map (in the map's order), each request in order.
  const { locks } = newApi(env);
  const [a, b] = [freshName('qa'), freshName('qb')];
  const ha = hold(locks, a);
  await ha.granted;
  const hb = hold(locks, b);
  await hb.granted;
  const waiters = [
    hold(locks, b, { mode: 'shared' }), // b1
    hold(locks, a), // a1
    hold(locks, b), // b2
    hold(locks, a, { mode: 'shared' }), // a2
  ];
  const snapshot = await locks.query();
  jsonEq(
    snapshot.pending.map((i) => [i.name, i.mode]),
    [
      [a, 'exclusive'],
      [a, 'shared'],
      [b, 'shared'],
      [b, 'exclusive'],
    ],
    'pending order',
  );
  ha.release();
  hb.release();
  for (const w of waiters) {
    await w.granted;
    w.release();
  }
}

export async function query_sees_a_request_made_just_before_it(env) {
  const { locks } = newApi(env);
  const name = freshName('query-now');
  const p = locks.request(name, () => 'done');
  const snapshot = await locks.query(); // queued after the request on the lock task queue
  jsonEq(snapshot.held.map((i) => i.name), [name], 'held names right after request()');
  await p;
}

export async function query_returns_a_fresh_snapshot_each_time(env) {
  const { locks } = newApi(env);
  const name = freshName('query-copy');
  const holder = hold(locks, name);
  await holder.granted;
  const first = await locks.query();
  first.held.pop();
  first.pending.push({ name: 'fake', mode: 'shared', clientId: 'x' });
  const second = await locks.query();
  check(first !== second && first.held !== second.held, 'query() returned the same object twice');
  jsonEq(second.held.map((i) => i.name), [name], 'held names after mutating an earlier snapshot');
  eq(second.pending.length, 0, 'pending length after mutating an earlier snapshot');
  holder.release();
}

export async function client_id_is_a_uuid_shared_by_all_entries_of_this_api(env) {
  const api = newApi(env);
  const { locks, clientId } = api;
  eq(typeof clientId, 'string', 'typeof api.clientId');
  check(UUID.test(clientId), `clientId ${describe(clientId)} is not a version 4 UUID`);
  const name = freshName('client');
  const h1 = hold(locks, name, { mode: 'shared' });
  const h2 = hold(locks, freshName('client2'));
  await Promise.all([h1.granted, h2.granted]);
  const w = hold(locks, name);
  const snapshot = await locks.query();
  const ids = [...snapshot.held, ...snapshot.pending].map((i) => i.clientId);
  eq(ids.length, 3, 'entries in the snapshot');
  for (const id of ids) eq(id, clientId, 'clientId of a snapshot entry');
  const otherApi = newApi(env);
  check(UUID.test(otherApi.clientId), `second clientId ${describe(otherApi.clientId)} is not a UUID`);
  check(otherApi.clientId !== clientId, 'two API objects got the same clientId');
  h1.release();
  h2.release();
  await w.granted;
  w.release();
}

// ---------------------------------------------------------------------------------------------------
// Interface objects (WebIDL shapes as a browser has them)

export async function lock_manager_constructor_throws_type_error(env) {
  const { locks, LockManager } = newApi(env);
  check(typeof LockManager === 'function', 'LockManager is not a function');
  for (const [label, make] of [
    ['new LockManager()', () => new LockManager()],
    ['LockManager()', () => LockManager()],
  ]) {
    let thrown;
    try {
      make();
    } catch (e) {
      thrown = e;
    }
    check(thrown instanceof TypeError, `${label} threw ${describe(thrown)}, not a TypeError`);
  }
  check(locks instanceof LockManager, 'locks is not an instance of LockManager');
  eq(Object.getPrototypeOf(locks), LockManager.prototype, 'prototype of locks');
}

export async function lock_constructor_throws_type_error(env) {
  const { Lock } = newApi(env);
  check(typeof Lock === 'function', 'Lock is not a function');
  for (const [label, make] of [
    ['new Lock()', () => new Lock()],
    ['Lock()', () => Lock()],
  ]) {
    let thrown;
    try {
      make();
    } catch (e) {
      thrown = e;
    }
    check(thrown instanceof TypeError, `${label} threw ${describe(thrown)}, not a TypeError`);
  }
}

function checkOperation(proto, key, length, what) {
  const d = Object.getOwnPropertyDescriptor(proto, key);
  check(d && typeof d.value === 'function', `${what}.${key} is not an own method`);
  jsonEq([d.writable, d.enumerable, d.configurable], [true, true, true], `${what}.${key} writable/enumerable/configurable`);
  eq(d.value.length, length, `${what}.${key}.length`);
  eq(d.value.name, key, `${what}.${key}.name`);
}

function checkInterfaceObject(ctor, name) {
  eq(ctor.name, name, `${name}.name`);
  eq(ctor.length, 0, `${name}.length`);
  const p = Object.getOwnPropertyDescriptor(ctor, 'prototype');
  jsonEq([p.writable, p.enumerable, p.configurable], [false, false, false], `${name}.prototype writable/enumerable/configurable`);
  const c = Object.getOwnPropertyDescriptor(ctor.prototype, 'constructor');
  eq(c.value, ctor, `${name}.prototype.constructor`);
  jsonEq([c.writable, c.enumerable, c.configurable], [true, false, true], `${name}.prototype.constructor writable/enumerable/configurable`);
}

export async function interface_objects_have_webidl_shapes(env) {
  const { LockManager, Lock } = newApi(env);
  checkInterfaceObject(LockManager, 'LockManager');
  checkInterfaceObject(Lock, 'Lock');
}

export async function request_and_query_have_webidl_lengths(env) {
  const { LockManager } = newApi(env);
  checkOperation(LockManager.prototype, 'request', 2, 'LockManager.prototype');
  checkOperation(LockManager.prototype, 'query', 0, 'LockManager.prototype');
}

export async function to_string_tags(env) {
  const { locks, LockManager, Lock } = newApi(env);
  const lock = await locks.request(freshName('tag'), (l) => l);
  for (const [obj, tag] of [
    [locks, 'LockManager'],
    [LockManager.prototype, 'LockManager'],
    [lock, 'Lock'],
    [Lock.prototype, 'Lock'],
  ]) {
    eq(Object.prototype.toString.call(obj), `[object ${tag}]`, `Object.prototype.toString of a ${tag}`);
  }
  for (const [proto, tag] of [
    [LockManager.prototype, 'LockManager'],
    [Lock.prototype, 'Lock'],
  ]) {
    const d = Object.getOwnPropertyDescriptor(proto, Symbol.toStringTag);
    check(d, `${tag}.prototype has no own Symbol.toStringTag`);
    jsonEq([d.value, d.writable, d.enumerable, d.configurable], [tag, false, false, true], `${tag}.prototype[Symbol.toStringTag]`);
  }
}

export async function lock_getters_are_accessors_on_the_prototype(env) {
  const { locks, Lock } = newApi(env);
  const lock = await locks.request(freshName('accessor'), (l) => l);
  for (const key of ['name', 'mode']) {
    const d = Object.getOwnPropertyDescriptor(Lock.prototype, key);
    check(d && typeof d.get === 'function', `Lock.prototype.${key} is not an accessor`);
    eq(d.set, undefined, `Lock.prototype.${key} setter`);
    jsonEq([d.enumerable, d.configurable], [true, true], `Lock.prototype.${key} enumerable/configurable`);
    eq(d.get.name, `get ${key}`, `Lock.prototype.${key} getter name`);
    eq(d.get.length, 0, `Lock.prototype.${key} getter length`);
    let thrown;
    try {
      d.get.call({});
    } catch (e) {
      thrown = e;
    }
    check(thrown instanceof TypeError, `Lock.prototype.${key} getter on a non-Lock threw ${describe(thrown)}`);
    // Read-only attribute: assignment is ignored (sloppy) or throws (strict, this module).
    let assignError;
    try {
      lock[key] = 'changed';
    } catch (e) {
      assignError = e;
    }
    check(assignError instanceof TypeError, `assigning lock.${key} in strict code did not throw a TypeError`);
    check(lock[key] !== 'changed', `lock.${key} could be assigned`);
  }
}

export async function prototypes_have_exactly_the_webidl_members(env) {
  const { LockManager, Lock } = newApi(env);
  const keys = (o) => Reflect.ownKeys(o).map((k) => (typeof k === 'symbol' ? k.toString() : k)).sort();
  jsonEq(keys(LockManager.prototype), ['Symbol(Symbol.toStringTag)', 'constructor', 'query', 'request'], 'LockManager.prototype own keys');
  jsonEq(keys(Lock.prototype), ['Symbol(Symbol.toStringTag)', 'constructor', 'mode', 'name'], 'Lock.prototype own keys');
}

export async function no_wasm_bindgen_members_are_visible(env) {
  const { locks, LockManager, Lock } = newApi(env);
  const lock = await locks.request(freshName('wbg'), (l) => l);
  for (const [label, obj] of [
    ['locks', locks],
    ['a Lock', lock],
    ['LockManager.prototype', LockManager.prototype],
    ['Lock.prototype', Lock.prototype],
  ]) {
    for (const key of ['free', '__wbg_ptr', '__destroy_into_raw']) {
      check(!(key in obj), `${label} exposes "${key}"`);
    }
  }
  jsonEq(Reflect.ownKeys(locks).map(String), [], 'own properties of locks');
  jsonEq(Reflect.ownKeys(lock).map(String), [], 'own properties of a Lock');
}

// ---------------------------------------------------------------------------------------------------
// The ponyfill's own contract: engine loading, client id, no globals

export async function calls_before_the_engine_is_ready_are_queued_in_order(env) {
  const gate = deferred();
  let factoryCalls = 0;
  const { locks } = newApi(env, (clientId, sink) => {
    factoryCalls += 1;
    return gate.promise.then(() => env.makeEngine(clientId, sink));
  });
  const log = [];
  const [a, b, c] = [freshName('early-a'), freshName('early-b'), freshName('early-c')];
  const first = hold(locks, a);
  const second = locks.request(a, { mode: 'shared' }, logging(log, 'second'));
  const snapshotPromise = locks.query();
  const onB = locks.request(b, { ifAvailable: true }, (lock) => {
    log.push(lock ? 'b granted' : 'b null');
  });
  const onA = locks.request(a, { ifAvailable: true }, (lock) => {
    log.push(lock ? 'a granted' : 'a null');
  });
  const controller = new AbortController();
  const abortedCallback = neverCalled('aborted before the engine loaded');
  const aborted = locks.request(c, { signal: controller.signal }, abortedCallback);
  controller.abort('early abort');
  // The abort is answered at once (4.3 "signal to abort the request" step 2), before the engine exists.
  eq(await rejectionOf('request aborted before the engine loaded', aborted), 'early abort', 'rejection reason');
  await sleep(QUIET_MS);
  check(!first.isGranted(), 'a request was granted before the engine loaded');
  eq(await stateAfterQuiet(snapshotPromise), 'pending', 'query() before the engine loaded');
  log.push('engine released');
  gate.resolve();
  await first.granted;
  const snapshot = await snapshotPromise;
  jsonEq(
    { held: snapshot.held.map((i) => i.name), pending: snapshot.pending.map((i) => [i.name, i.mode]) },
    { held: [a], pending: [[a, 'shared']] },
    'snapshot taken between the queued calls',
  );
  await Promise.all([onB, onA]);
  first.release();
  await second;
  jsonEq(log, ['engine released', 'b granted', 'a null', 'second'], 'order of outcomes');
  eq(factoryCalls, 1, 'engine factory calls');
  const finalSnapshot = await locks.query();
  eq(countRequestsMatching(finalSnapshot, c), 0, 'the request aborted early, in query()');
  checkNotCalled(abortedCallback, 'the request aborted before the engine loaded');
}

export async function errors_reject_without_waiting_for_the_engine(env) {
  // The factory never delivers: WebIDL errors and steps 5-9 still answer at once.
  const { locks } = newApi(env, () => new Promise(() => {}));
  await expectTypeError('Symbol name', () => locks.request(Symbol('s'), neverCalled('s')));
  await expectTypeError('bad mode', () => locks.request('x', { mode: 'bad' }, neverCalled('m')));
  await expectTypeError('no callback', () => locks.request('x'));
  await expectDomException('"-x"', 'NotSupportedError', () => locks.request('-x', neverCalled('-x')));
  await expectDomException('steal + ifAvailable', 'NotSupportedError', () =>
    locks.request('x', { steal: true, ifAvailable: true }, neverCalled('x')),
  );
  eq(
    await rejectionOf('aborted signal', locks.request('x', { signal: AbortSignal.abort('pre') }, neverCalled('x'))),
    'pre',
    'rejection reason',
  );
  const { request } = Object.getPrototypeOf(locks);
  await expectTypeError('bad this', () => request.call({}, 'x', neverCalled('x')));
}

export async function a_refusing_engine_rejects_every_request_and_query_with_an_operation_error(env) {
  const { locks } = newApi(env, env.makeRefusingEngine);
  const name = freshName('refused');
  const early = locks.request(name, neverCalled('request made before the engine loaded'));
  await expectDomException('request() made before the engine loaded', 'OperationError', () => early);
  await expectDomException('request()', 'OperationError', () => locks.request(name, neverCalled('request')));
  await expectDomException('request(ifAvailable)', 'OperationError', () =>
    locks.request(name, { ifAvailable: true }, neverCalled('ifAvailable')),
  );
  await expectDomException('request(steal)', 'OperationError', () => locks.request(name, { steal: true }, neverCalled('steal')));
  await expectDomException('query()', 'OperationError', () => locks.query());
  const error = await rejectionOf('request()', locks.request(name, neverCalled('last request')));
  check(/grants no lock/.test(error.message), `the rejection says why: ${describe(error)}`);
}

export async function engine_factory_gets_the_client_id_and_a_sink(env) {
  const calls = [];
  const api = newApi(env, (clientId, sink) => {
    calls.push([clientId, typeof sink]);
    return env.makeEngine(clientId, sink);
  });
  await api.locks.request(freshName('factory'), () => {});
  eq(calls.length, 1, 'engine factory calls');
  jsonEq(calls[0], [api.clientId, 'function'], 'engine factory arguments');
  const snapshotClient = await api.locks.request(freshName('factory2'), async () => (await api.locks.query()).held[0].clientId);
  eq(snapshotClient, api.clientId, 'clientId in query() equals api.clientId');
}

export async function create_lock_api_touches_no_global(env) {
  // Other cases have already run createLockApi in this page, so a global it defined would be here
  // before this case starts. Hence a fresh copy of js/lock_api.js, imported into a new iframe's realm.
  const url = performance
    .getEntriesByType('resource')
    .map((entry) => entry.name)
    .find((name) => /\/js\/lock_api\.js(?:[?#]|$)/.test(name));
  check(url !== undefined, 'js/lock_api.js is not among the resources this page loaded');
  const iframe = document.createElement('iframe');
  document.body.append(iframe);
  try {
    const realm = iframe.contentWindow;
    const before = Reflect.ownKeys(realm);
    const navigatorLocks = Object.getOwnPropertyDescriptor(realm.Navigator.prototype, 'locks');
    const nativeLocks = realm.navigator.locks;
    const globalLockManager = realm.LockManager;
    const globalLock = realm.Lock;
    const module = await realm.Function('url', 'return import(url)')(url);
    check(typeof module.createLockApi === 'function', `${url} has no createLockApi export in the iframe`);
    const api = module.createLockApi(env.makeEngine);
    eq(await api.locks.request(freshName('globals'), (lock) => lock.name.length > 0), true, 'request in the iframe');
    await api.locks.query();
    // Compared as sets: Firefox materialises lazily defined globals on first use, which reorders keys.
    const beforeSet = new Set(before);
    const after = Reflect.ownKeys(realm);
    const afterSet = new Set(after);
    jsonEq(after.filter((k) => !beforeSet.has(k)).map(String), [], 'globals added');
    jsonEq(before.filter((k) => !afterSet.has(k)).map(String), [], 'globals removed');
    eq(Object.getOwnPropertyDescriptor(realm.Navigator.prototype, 'locks')?.get, navigatorLocks?.get, 'Navigator.prototype.locks getter');
    eq(realm.navigator.locks, nativeLocks, 'navigator.locks');
    eq(realm.LockManager, globalLockManager, 'globalThis.LockManager');
    eq(realm.Lock, globalLock, 'globalThis.Lock');
    check(api.locks !== realm.navigator.locks, 'the ponyfill returned the native navigator.locks');
  } finally {
    iframe.remove();
  }
}
