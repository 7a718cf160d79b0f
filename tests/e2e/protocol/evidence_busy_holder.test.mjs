// A busy holder keeps its lock, in Chromium, Firefox and WebKit: a window whose lock callback runs a 5-second
// synchronous loop, while a window of the same origin waits for that lock, is a live context, and the native
// API never takes a lock from a live holder. So nobody else may be granted the lock before the loop ends and
// the callback releases it, the holder's request must resolve (no AbortError), and the waiter is granted once
// it is released. Checked by the windows' own clocks (performance.timeOrigin + now(), one machine), and the
// waiter's grant is also looked for at the end of the loop from outside. Needs the build (`npm run build`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { call, expectEvent, sleep, untilPending } from '../fixtures/xctx_harness.mjs';
import { eachEngine, withWindows } from '../fixtures/evidence_engines.mjs';

const BUSY_MS = 5000;
// Two processes' clocks, both read from the machine's one wall clock: a few ms of skew at most.
const CLOCK_SKEW_MS = 2;

let runs = 0;

eachEngine((engine, env) => {
  test(`${engine.name}: a holder in a ${BUSY_MS / 1000} s busy loop inside its callback keeps its lock while another window waits; the waiter is granted after the release`, async () => {
    const name = `busy-holder-${++runs}`;
    await withWindows(env, ['holder', 'waiter'], async ([holder, waiter]) => {
      await call(holder, 'request', 'h', name);
      await expectEvent(holder, 'h', 'granted');
      await call(waiter, 'request', 'w', name);
      await untilPending(waiter, name, 1);
      await call(holder, 'busy', 'h', BUSY_MS); // the loop starts 100 ms later
      // From outside: half a second before the loop ends, the waiter has not been granted (WebKit's driver
      // runs one command at a time, and may answer this only once the holder's window is done).
      await sleep(100 + BUSY_MS - 500);
      const early = (await call(waiter, 'events', 'w')).find((e) => e.ev === 'granted');
      const waiterGranted = await expectEvent(waiter, 'w', 'granted', 10000);
      await expectEvent(holder, 'h', 'callback-done');
      await sleep(200); // the holder's request settles
      const holderEvents = await call(holder, 'events', 'h');
      const [busyStart, busyEnd, done, resolved, rejected] = ['busy-start', 'busy-end', 'callback-done', 'resolved', 'rejected'].map((ev) =>
        holderEvents.find((e) => e.ev === ev),
      );
      console.log(
        `# ${engine.name.toLowerCase()}: busy loop ${(busyEnd.t - busyStart.t).toFixed(0)} ms; the waiter granted ` +
          `${(waiterGranted.t - busyEnd.t).toFixed(0)} ms after its end${rejected ? `; the holder got ${rejected.error}: ${rejected.message}` : ''}`,
      );
      assert.equal(rejected, undefined, `the busy holder lost its lock: ${rejected?.error}: ${rejected?.message}`);
      assert.equal(early, undefined, `the waiter was granted ${early && (early.t - busyStart.t).toFixed(0)} ms into the holder's loop`);
      assert.ok(waiterGranted.t >= busyEnd.t, `the waiter was granted ${(waiterGranted.t - busyStart.t).toFixed(0)} ms into the holder's loop`);
      assert.ok(resolved, "the holder's request resolved");
      assert.ok(busyEnd.t - busyStart.t >= BUSY_MS, 'the loop ran its course');
      assert.ok(waiterGranted.t >= done.t - CLOCK_SKEW_MS, `the waiter was granted ${(done.t - waiterGranted.t).toFixed(0)} ms before the holder's callback ended`);
      await call(waiter, 'release', 'w');
      await expectEvent(waiter, 'w', 'resolved');
    });
  });
});
