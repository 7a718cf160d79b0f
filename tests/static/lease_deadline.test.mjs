// The page's lease deadline and retry decisions (js/lease_deadline.js), in Node: pure functions of the
// clock readings given, so late timers, a sleeping machine and clock jumps are readings, not waits.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  MARGIN_MIN_MS,
  REQUEST_TIMEOUT_MS,
  RETRY_MAX_MS,
  attemptTimeoutMs,
  deadlineFrom,
  elapsedMs,
  hasPassed,
  isTransient,
  marginFor,
  nextAttempt,
  reportedLeftMs,
  timeLeftMs,
} from '../../js/lease_deadline.js';

const T0 = 1_700_000_000_000;
const at = (mono, wall = T0 + mono) => ({ mono, wall });

test('the deadline is the reported time left minus the margin, from when the request was sent', () => {
  const sent = at(1000);
  // The service decided 300 ms after the send (its clock 5 s ahead of ours): 2000 ms left by its clock.
  const answer = { expiresAt: T0 + 5000 + 1300 + 2000, now: T0 + 5000 + 1300 };
  const left = reportedLeftMs(answer, sent);
  assert.equal(left, 2000, "the service's own clock, whatever its offset from ours");
  const deadline = deadlineFrom(sent, left, answer.expiresAt);
  assert.equal(marginFor(2000), MARGIN_MIN_MS + 2);
  assert.equal(timeLeftMs(deadline, sent), 2000 - marginFor(2000));
  // In real time the service expires the lease 300 ms + 2000 ms after the send; the page's deadline is
  // margin + 300 ms earlier.
  assert.equal(hasPassed(deadline, at(1000 + 2000 - marginFor(2000) - 1)), false);
  assert.equal(hasPassed(deadline, at(1000 + 2000 - marginFor(2000))), true);
  // A store without `now` (on this page's clock): the expiry read against the send's wall clock.
  assert.equal(reportedLeftMs({ expiresAt: T0 + 1000 + 700 }, sent), 700);
});

test('the margin: at least 250 ms, 1 ms more per second left, never more than all that is left', () => {
  assert.equal(marginFor(100), 100);
  assert.equal(marginFor(60_000), 310);
  assert.equal(marginFor(24 * 3600_000), 250 + 86_400);
  for (const left of [1, 10, 249, 250, 251, 1000, 2000, 300_000]) {
    const margin = marginFor(left);
    assert.ok(margin >= Math.min(left, MARGIN_MIN_MS) && margin <= left, `${left}: ${margin}`);
  }
});

test('a timer that fires late finds the deadline passed: the deadline is read from the clocks, not the timer', () => {
  const deadline = deadlineFrom(at(0), 4000, T0 + 4000);
  // A keep-alive tick due at 300 ms, run at 20 s (a throttled hidden tab, a busy main thread).
  assert.equal(hasPassed(deadline, at(20_000)), true);
  assert.ok(timeLeftMs(deadline, at(20_000)) < 0);
});

test('a sleeping machine: the monotonic clock stopped, the wall clock did not; the larger elapsed counts', () => {
  const deadline = deadlineFrom(at(0), 60_000, T0 + 60_000);
  // 10 s awake, then the lid closed for an hour: performance.now() says 10 s, Date.now() an hour.
  const woken = { mono: 10_000, wall: T0 + 10_000 + 3600_000 };
  assert.equal(elapsedMs(deadline, woken), 3610_000);
  assert.equal(hasPassed(deadline, woken), true);
  // An engine whose monotonic clock does count sleep: the same answer.
  assert.equal(hasPassed(deadline, at(3610_000)), true);
});

test('clock jumps: a wall clock set back changes nothing; one set forward brings the deadline early (fail safe)', () => {
  const deadline = deadlineFrom(at(0), 60_000, T0 + 60_000);
  // Set back an hour 5 s in: the wall-clock elapsed is negative, the monotonic one counts.
  const back = { mono: 5000, wall: T0 + 5000 - 3600_000 };
  assert.equal(elapsedMs(deadline, back), 5000);
  assert.equal(timeLeftMs(deadline, back), 60_000 - marginFor(60_000) - 5000);
  assert.equal(hasPassed(deadline, { mono: 60_000, wall: T0 - 3600_000 + 60_000 }), true, 'monotonic time still ends it');
  // Set forward a minute 5 s in: the lease counts as lost at once, before the service's expiry, never after.
  const forward = { mono: 5000, wall: T0 + 5000 + 60_000 };
  assert.equal(hasPassed(deadline, forward), true);
  // Both clocks stopped or back: never negative elapsed.
  assert.equal(elapsedMs(deadline, { mono: -5, wall: T0 - 5 }), 0);
});

test('over random sends, service delays and sleeps, the deadline never outlives the service’s expiry', () => {
  let seed = 7;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (let i = 0; i < 10_000; i++) {
    const sentReal = random() * 1e6; // real time of the send
    const serviceDelay = random() * 2000; // send → the service reads its clock
    const left = 1 + random() * 600_000;
    const serviceExpiryReal = sentReal + serviceDelay + left;
    const offset = (random() - 0.5) * 1e7; // service clock minus real
    const answer = { now: sentReal + serviceDelay + offset, expiresAt: sentReal + serviceDelay + offset + left };
    const sleptBefore = random() < 0.3 ? random() * 1e5 : 0; // monotonic time lost to sleep before the reading
    const sent = { mono: sentReal, wall: sentReal + 123 };
    const deadline = deadlineFrom(sent, reportedLeftMs(answer, sent), answer.expiresAt);
    // The real moment the page first considers the lease lost.
    const real = serviceExpiryReal - 1e-6;
    const now = { mono: real - sleptBefore, wall: real + 123 };
    assert.equal(hasPassed(deadline, now), true, `case ${i}: still live at the service's expiry`);
  }
});

test('only a store failure is worth another try', () => {
  assert.equal(isTransient('StorageError'), true);
  for (const code of ['Expired', 'TakenOver', 'Revoked', 'NotFound', 'Unauthorized', 'Forbidden', 'InvalidArgument', 'AlreadyLocked']) {
    assert.equal(isTransient(code), false, code);
  }
});

test('retries back off exponentially with jitter, each with a timeout under the time left, and stop when time runs out', () => {
  const delays = [1, 2, 3, 4, 5, 6, 7, 8].map((failures) => nextAttempt({ failures, leftMs: 1e9, random: 0.999999 }).delayMs);
  assert.deepEqual(delays.map(Math.round), [250, 500, 1000, 2000, 4000, 5000, 5000, 5000]);
  assert.equal(Math.round(nextAttempt({ failures: 1, leftMs: 1e9, random: 0 }).delayMs), 125, 'jitter: half the step at least');
  assert.equal(RETRY_MAX_MS, 5000);
  const next = nextAttempt({ failures: 2, leftMs: 3000, random: 0.5 });
  assert.equal(next.delayMs, 375);
  assert.equal(next.timeoutMs, (3000 - 375) / 2, 'half the time left after the wait');
  assert.ok(next.delayMs + next.timeoutMs < 3000, 'the try ends before the time left does');
  assert.equal(nextAttempt({ failures: 3, leftMs: 500, random: 0.999 }), null, 'a wait of ~1 s does not fit in 500 ms');
  assert.equal(nextAttempt({ failures: 1, leftMs: 0, random: 0 }), null);
  assert.equal(nextAttempt({ failures: 1, leftMs: -10, random: 0 }), null);
  assert.equal(attemptTimeoutMs(1e9), REQUEST_TIMEOUT_MS);
  assert.equal(attemptTimeoutMs(4000), 2000);
  assert.equal(attemptTimeoutMs(0.5), 1);
});
