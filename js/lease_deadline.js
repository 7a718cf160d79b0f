// The page's own deadline for a lease, and when a failed lease request is tried again: pure functions of
// the clock readings and the randomness they are given (no timers, no I/O), unit-tested in
// tests/static/lease_deadline.test.mjs. js/leases.js (keepAlive, checkLock) and js/lease_server_store.js
// (a grant whose answer was lost) act on what they decide.
//
// Why a deadline holds: it is measured from when the request that reported the lease was SENT, which is
// before the store read its clock; so the time left the store reported (`expiresAt - now`, both on the
// store's clock) ends, in real time, no earlier than `sent + left`. The page's elapsed time is the larger
// of its monotonic clock's (`performance.now()`, which stops in most engines while the machine sleeps)
// and its wall clock's (`Date.now()`, which a sleeping machine's clock catches up on, but which may be
// set back or forward): neither clock stopping nor the wall clock going back makes the page's elapsed
// time smaller than the real one, and a wall clock set forward only makes the deadline come early (fail
// safe). The margin takes off what a timer that fires late, a clock that ticks slow and a coarsened
// `performance.now()` could still make the page believe past the store's expiry.

/** The least margin: a busy main thread (a long task) delays a timer's callback by up to a few hundred ms. */
export const MARGIN_MIN_MS = 250;
/** Plus 1 ms per second of time left: ten times a poor quartz clock's drift (100 ppm), and far above a
 *  coarsened `performance.now()` (100 ms with fingerprinting resistance) for leases of minutes. */
export const MARGIN_PER_MS_LEFT = 0.001;

/** The first retry of a failed request comes after about this long, doubling per failure... */
export const RETRY_FIRST_MS = 250;
/** ...up to this long between two tries. */
export const RETRY_MAX_MS = 5000;
/** The longest any one lease request may take before it counts as failed (and is aborted). */
export const REQUEST_TIMEOUT_MS = 10000;

/** A clock reading: `{ mono, wall }`, the monotonic and the wall-clock time, in ms. */
export function readClocks() {
  return { mono: typeof performance !== 'undefined' ? performance.now() : Date.now(), wall: Date.now() };
}

/** The margin taken off `leftMs` of time left (never more than all of it). */
export function marginFor(leftMs) {
  return Math.min(leftMs, MARGIN_MIN_MS + leftMs * MARGIN_PER_MS_LEFT);
}

/** The time the store said the lease has left in its answer: `expiresAt - now` by the store's clock,
 *  or, from a store that does not report `now`, by this page's wall clock when the request was sent. */
export function reportedLeftMs(answer, sent) {
  const storeNow = typeof answer.now === 'number' && Number.isFinite(answer.now) ? answer.now : sent.wall;
  return answer.expiresAt - storeNow;
}

/** The deadline of a lease whose store answered, to a request sent at `sent`, that it has `leftMs` left. */
export function deadlineFrom(sent, leftMs, expiresAt) {
  return { mono: sent.mono, wall: sent.wall, budgetMs: leftMs - marginFor(leftMs), expiresAt };
}

/** Elapsed time since `since`: the larger of the monotonic and the wall-clock elapsed (never below 0). */
export function elapsedMs(since, now) {
  return Math.max(now.mono - since.mono, now.wall - since.wall, 0);
}

/** How long the deadline has left at `now` (0 or less: it has passed). */
export function timeLeftMs(deadline, now) {
  return deadline.budgetMs - elapsedMs(deadline, now);
}

export function hasPassed(deadline, now) {
  return timeLeftMs(deadline, now) <= 0;
}

/** Whether a failed lease request may succeed if tried again: a store failure (the service unreachable, a
 *  request that timed out, a 5xx). Every other code is a definite answer (Expired, TakenOver, Revoked,
 *  NotFound, Unauthorized, InvalidArgument...). */
export function isTransient(code) {
  return code === 'StorageError';
}

/** The timeout of a request sent with `leftMs` left: half of it (so a hung request leaves time for
 *  another try), at most REQUEST_TIMEOUT_MS, at least 1 ms. */
export function attemptTimeoutMs(leftMs) {
  return Math.max(1, Math.min(REQUEST_TIMEOUT_MS, leftMs / 2));
}

/**
 * After `failures` failed tries in a row (1 after the first), with `leftMs` left and `random` in [0, 1):
 * `{ delayMs, timeoutMs }` of the next try (exponential backoff with jitter between half and all of the
 * step, so pages cut off together do not retry together), or null when the time left would be gone by
 * then (the caller gives up: the lease, or the grant, is lost).
 */
export function nextAttempt({ failures, leftMs, random }) {
  const step = Math.min(RETRY_FIRST_MS * 2 ** Math.max(0, failures - 1), RETRY_MAX_MS);
  const delayMs = step * (0.5 + random / 2);
  const leftThen = leftMs - delayMs;
  if (!(leftThen > 0)) return null;
  return { delayMs, timeoutMs: attemptTimeoutMs(leftThen) };
}
