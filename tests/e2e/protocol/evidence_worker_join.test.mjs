// A joiner learns whether any member lives before it starts a history, in Chromium, Firefox and WebKit: a
// dedicated worker that makes its first request (and so joins the origin's lock manager) while its page is
// in a 300 ms long task inside the callback of a lock the page holds must not take that lock from the page.
// The page gets no AbortError and keeps the lock; the worker is granted only once the page releases it.
// The worker loads the ponyfill first and takes part only from its request, which the page posts to it from
// inside the long task. Needs the build (`npm run build`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { call, child, expectEvent, sleep } from '../fixtures/xctx_harness.mjs';
import { eachEngine, withWindows } from '../fixtures/evidence_engines.mjs';

const LONG_TASK_MS = 300;
// Two processes' clocks, both read from the machine's one wall clock: a few ms of skew at most.
const CLOCK_SKEW_MS = 2;

let runs = 0;

eachEngine((engine, env) => {
  test(`${engine.name}: a dedicated worker that joins while its page is in a ${LONG_TASK_MS} ms long task inside a held lock's callback does not reset the page; it is granted after the release`, async () => {
    const name = `worker-join-${++runs}`;
    await withWindows(env, ['page'], async ([page]) => {
      await call(page, 'request', 'h', name);
      await expectEvent(page, 'h', 'granted');
      const worker = child(page, 'worker', await page.evaluate(() => window.spawnWorker('worker')));
      assert.deepEqual(await call(worker, 'events'), [], 'the worker has not taken part in the protocol yet');
      // The long task posts the worker its first request as it begins.
      const onStart = `() => window.evalIn('worker', "(n) => self.agent.request('w', n)", ${JSON.stringify(name)})`;
      await call(page, 'busy', 'h', LONG_TASK_MS, { release: false, onStart });
      await expectEvent(page, 'h', 'busy-end', 5000);
      await sleep(1000); // the worker's join has long been decided
      const held = await call(page, 'events', 'h');
      const rejected = held.find((e) => e.ev === 'rejected');
      const early = (await call(worker, 'events', 'w')).find((e) => e.ev === 'granted');
      const sinceLongTask = (e) => `${(e.t - held.find((h) => h.ev === 'busy-start').t).toFixed(0)} ms after the long task began`;
      assert.equal(rejected, undefined, `the page lost its lock (${rejected && sinceLongTask(rejected)}): ${rejected?.error}: ${rejected?.message}`);
      assert.equal(early, undefined, `the worker was granted while the page held the lock, ${early && sinceLongTask(early)}`);
      await call(page, 'release', 'h');
      const granted = await expectEvent(worker, 'w', 'granted', 5000);
      await expectEvent(page, 'h', 'resolved');
      const pageEvents = await call(page, 'events', 'h');
      const [busyStart, busyEnd, released] = ['busy-start', 'busy-end', 'release'].map((ev) => pageEvents.find((e) => e.ev === ev));
      const requested = (await call(worker, 'events', 'w')).find((e) => e.ev === 'requested');
      console.log(
        `# ${engine.name.toLowerCase()}: the worker requested ${(requested.t - busyStart.t).toFixed(0)} ms into the page's ` +
          `${(busyEnd.t - busyStart.t).toFixed(0)} ms long task; granted ${(granted.t - released.t).toFixed(0)} ms after the page's release`,
      );
      assert.ok(requested.t >= busyStart.t - CLOCK_SKEW_MS && requested.t <= busyEnd.t, 'the worker joined during the long task');
      assert.ok(granted.t >= released.t - CLOCK_SKEW_MS, 'the worker was granted only after the release');
      await call(worker, 'release', 'w');
      await expectEvent(worker, 'w', 'resolved');
    });
  });
});
