// Assumption A5 of the coordination protocol (docs/PROTOCOL.md §2), checked in Firefox (Debian's firefox-esr
// through the bench's driver, bench/lib/firefox.mjs: puppeteer-core over WebDriver BiDi): an IndexedDB
// connection stays open for as long as its context lives, busy included, and the parent process closes it
// when the context is gone. So an open at a newer version of a database one window keeps open is `blocked`
// while that window lives, and gets `upgradeneeded` once it is gone: closed, navigated away, its content
// process killed (SIGKILL; found as the process that spends CPU while the owner busy-loops), or (a worker)
// terminated. The watcher reports over fetch to the test server (fixtures/liveness_harness.mjs), so what it
// sees does not depend on the driver; the checks WebKit runs alike are in fixtures/liveness_window_checks.mjs.
// The kill needs the owner and the watcher in different content processes: Firefox gives each window of the
// origin one of its own here, and the check asserts that the two differ. (Driven through geckodriver instead,
// Marionette loses every window of the session after such a kill, "no such window", though the other windows'
// processes live on and their reports arrive; over BiDi they stay drivable, which the check asserts.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { contentProcesses, launch as launchFirefox } from '../../../bench/lib/firefox.mjs';
import { aliveName, killBusyOwner, startLivenessServer } from '../fixtures/liveness_harness.mjs';
import { closeTab, windowChecks } from '../fixtures/liveness_window_checks.mjs';
import { browserSession } from '../browser_session.mjs';

let server, firefox;
browserSession(launchFirefox, (session) => ({ server, browser: firefox } = session), startLivenessServer);

windowChecks('Firefox', () => ({ server, browser: firefox }));

test('Firefox: the open stays blocked while the owner busy-loops; SIGKILL of its content process brings upgradeneeded', async () => {
  const name = aliveName('kill');
  const owner = await firefox.newTab(server.page);
  const watcher = await firefox.newTab(server.page);
  try {
    const { latency, lateBlocked } = await killBusyOwner(server, { name, owner, watcher, processes: contentProcesses });
    console.log(`# firefox: an open during the owner's busy loop: ${lateBlocked ? 'blocked' : 'no event (blocked waits for the owner to run)'}`);
    console.log(`# firefox: SIGKILL of the busy owner's content process -> upgradeneeded after ${latency} ms`);
    assert.equal(await watcher.evaluate(() => document.readyState), 'complete', 'the watcher window still answers the driver');
  } finally {
    await closeTab(owner);
    await closeTab(watcher);
  }
});
