// A holder whose content process is killed is gone, and its waiter is granted, in Chromium, Firefox and WebKit:
// the holder window's process (Chromium's renderer, Firefox's content process, WebKit's WebKitWebProcess;
// found as the one that spends CPU while that window busy-loops, before it takes part) gets SIGKILL while
// it holds a lock another window of the origin waits for. Nothing of the holder runs after that: no
// pagehide, no goodbye. The waiter reports its grant to the test server over fetch (WebKitWebDriver ends
// the session when one of its pages crashes), and the time from the kill to the grant is printed. The bound
// asserted is a generous liveness bound, not a speed target (those are the bench's).
// Needs the build (`npm run build`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GONE_WITHIN_MS, sleep, spinningProcess, startLivenessServer } from '../fixtures/liveness_harness.mjs';
import { isAlive } from '../../../bench/lib/processes.mjs';
import { call, expectEvent, untilPending, untilSnapshot } from '../fixtures/xctx_harness.mjs';
import { eachEngine, withWindows } from '../fixtures/evidence_engines.mjs';

/** Starts a synchronous loop of `ms` in `tab` 100 ms later (so that the driver's call returns first). */
const spin = (tab, ms) =>
  tab.evaluate((m) => {
    setTimeout(() => {
      const end = Date.now() + m;
      while (Date.now() < end);
    }, 100);
    return true;
  }, ms);

let runs = 0;

eachEngine(
  (engine, env) => {
    test(`${engine.name}: a holder window whose content process is killed (SIGKILL): the waiter in another window is granted`, async () => {
      const name = `killed-${++runs}`;
      await withWindows(env, ['holder', 'waiter'], async ([holder, waiter]) => {
        // Which process runs which window, found before either takes part in the protocol, once the windows'
        // loading is over (it spends CPU too).
        await sleep(1000);
        const holderPid = await spinningProcess(holder, engine.contentProcesses, 900, spin);
        const waiterPid = await spinningProcess(waiter, engine.contentProcesses, 900, spin);
        assert.notEqual(holderPid, waiterPid, 'the holder and the waiter run in different processes');
        await sleep(700); // both loops are over
        await call(holder, 'request', 'h', name);
        await expectEvent(holder, 'h', 'granted');
        await call(waiter, 'request', 'w', name);
        await untilPending(waiter, name, 1);
        await waiter.evaluate((n) => {
          window.agent.waitFor('w', 'granted', 20000).then((granted) =>
            fetch('/liveness/report', { method: 'POST', body: JSON.stringify({ name: n, type: granted ? 'granted' : 'not granted', at: granted ? granted.t : Date.now() }) }),
          );
          return true;
        }, name);
        await sleep(300); // the origin settles, as a user's holder would have held for a while
        const killedAt = Date.now();
        process.kill(holderPid, 'SIGKILL');
        const granted = await env.server.until(name, 'granted', 2 * GONE_WITHIN_MS);
        const latency = granted.at - killedAt;
        console.log(`# ${engine.name.toLowerCase()}: SIGKILL of the holder's content process -> waiter granted after ${latency.toFixed(0)} ms`);
        assert.ok(latency < GONE_WITHIN_MS, `granted ${latency} ms after the kill`);
        assert.ok(!isAlive(holderPid), "the holder's process is gone");
        assert.ok(isAlive(waiterPid), "the waiter's process lives on");
        holder.closed = true; // nothing to close: its process is gone
        if (engine.name === 'WebKit') {
          // WebKitWebDriver deleted the session with the crash: the waiter cannot be driven any more.
          waiter.closed = true;
          return;
        }
        const snapshot = await untilSnapshot(waiter, (s) => s.held.some((l) => l.name === name), `${name} held`);
        assert.deepEqual(snapshot.held.filter((l) => l.name === name).map((l) => l.clientId), [waiter.clientId], 'the killed window holds nothing any more');
        await call(waiter, 'release', 'w');
        await expectEvent(waiter, 'w', 'resolved');
      });
    });
  },
  { makeServer: startLivenessServer },
);
