// Assumption A5 of the coordination protocol (docs/PROTOCOL.md §2), checked in WebKit (Debian's WebKitGTK,
// MiniBrowser under Xvfb through bench/lib/webkit.mjs, where each window has a WebKitWebProcess of its own):
// an IndexedDB connection stays open for as long as its context lives, busy included, and the storage process
// closes it when the context is gone. So an open at a newer version of a database one window keeps open is
// `blocked` while that window lives, and gets `upgradeneeded` once it is gone: closed, its WebKitWebProcess
// killed (SIGKILL; found as the process that spends CPU while the owner busy-loops), navigated away (once it
// closes its connection on pagehide: a page kept in the back/forward cache keeps its connections open), or (a
// worker) terminated. The watcher reports over fetch to the test server (fixtures/liveness_harness.mjs); the
// checks Firefox runs alike are in fixtures/liveness_window_checks.mjs.
import { test, before, after } from 'node:test';
import { launch as launchWebKit, webProcesses } from '../../../bench/lib/webkit.mjs';
import { aliveName, killBusyOwner, startLivenessServer } from '../fixtures/liveness_harness.mjs';
import { windowChecks } from '../fixtures/liveness_window_checks.mjs';
import { browserSession } from '../browser_session.mjs';

let server, webkit;
browserSession(launchWebKit, (session) => ({ server, browser: webkit } = session), startLivenessServer);

windowChecks('WebKit', () => ({ server, browser: webkit }));

test('WebKit: the open stays blocked while the owner busy-loops; SIGKILL of its WebKitWebProcess brings upgradeneeded', async () => {
  // WebKitWebDriver deletes the session when one of its pages crashes ("session deleted because of page crash
  // or hang"), so this check runs last, sends nothing to the driver after the kill, and leaves the windows to
  // the browser's close in after(). The watcher's report comes over fetch, so it does not need the driver.
  const name = aliveName('kill');
  const owner = await webkit.newTab(server.page);
  const watcher = await webkit.newTab(server.page);
  const { latency, lateBlocked } = await killBusyOwner(server, { name, owner, watcher, processes: webProcesses });
  console.log(`# webkit: an open during the owner's busy loop: ${lateBlocked ? 'blocked' : 'no event (blocked waits for the owner to run)'}`);
  console.log(`# webkit: SIGKILL of the busy owner's WebKitWebProcess -> upgradeneeded after ${latency} ms`);
});
