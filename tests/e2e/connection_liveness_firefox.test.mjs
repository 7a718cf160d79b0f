// Assumption A5 of the coordination protocol (docs/PROTOCOL.md §2), checked in Firefox (Debian's firefox-esr
// through the bench's driver, bench/lib/firefox.mjs: puppeteer-core over WebDriver BiDi): an IndexedDB
// connection stays open for as long as its context lives, busy included, and the parent process closes it
// when the context is gone. So an open at a newer version of a database one window keeps open is `blocked`
// while that window lives, and gets `upgradeneeded` once it is gone: closed, navigated away, its content
// process killed (SIGKILL; found as the process that spends CPU while the owner busy-loops), or (a worker)
// terminated. The watcher reports over fetch to the test server (fixtures/liveness_harness.mjs), so what it
// sees does not depend on the driver. The kill needs the owner and the watcher in different content
// processes: Firefox gives a site up to `dom.ipc.processCount.webIsolated` of them (4) before windows share
// one, and this file keeps at most 3 windows of the origin open at a time; the check asserts the two differ.
// Driven through geckodriver (Marionette) instead, the session loses every window after such a kill ("no such
// window"), though the other windows' processes live on and their reports arrive: over BiDi they stay drivable.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch as launchFirefox } from '../../bench/lib/firefox.mjs';
import { aliveName, descendants, expectBlocked, expectGone, killBusyOwner, navigationOutcome, sleep, startLivenessServer } from './fixtures/liveness_harness.mjs';

let server;
let firefox;

before(async () => {
  server = await startLivenessServer();
  firefox = await launchFirefox();
});

after(async () => {
  await firefox?.close();
  await server?.close();
});

const contentProcesses = () => descendants().filter((p) => /-contentproc.* tab\s*$/.test(p.command));

/** Closes a window, or gives up after 5 s (one whose process was killed). */
const closeTab = (tab) => Promise.race([tab.close().catch(() => {}), sleep(5000)]);

test('Firefox: the open stays blocked while the owner idles; closing the owner window brings upgradeneeded', async () => {
  const name = aliveName('close');
  const owner = await firefox.newTab(server.page);
  const watcher = await firefox.newTab(server.page);
  try {
    await owner.evaluate((n) => window.liveness.own(n), name);
    await expectBlocked(server, watcher, name, { holdMs: 1000 });
    const latency = await expectGone(server, name, () => owner.close());
    console.log(`# firefox: owner window closed -> upgradeneeded after ${latency} ms`);
    assert.deepEqual(watcher.errors, []);
  } finally {
    await closeTab(owner);
    await closeTab(watcher);
  }
});

test('Firefox: the owner navigating away (same origin) brings upgradeneeded once it closes its connection on pagehide', async () => {
  for (const closeOnHide of [false, true]) {
    const name = aliveName(closeOnHide ? 'navigate-close' : 'navigate-keep');
    const owner = await firefox.newTab(server.page);
    const watcher = await firefox.newTab(server.page);
    try {
      await owner.evaluate(([n, close]) => window.liveness.own(n, close), [name, closeOnHide]);
      await expectBlocked(server, watcher, name, { holdMs: 300 });
      const { persisted, latency } = await navigationOutcome(server, name, () => owner.goto(server.page + '?next'), closeOnHide ? undefined : 2000);
      console.log(`# firefox: owner navigated away, ${closeOnHide ? 'closing' : 'keeping'} its connection on pagehide (persisted: ${persisted}) -> ${latency === null ? 'still blocked 2 s later' : `upgradeneeded after ${latency} ms`}`);
      if (closeOnHide) assert.notEqual(latency, null, 'upgradeneeded once the owner closed its connection');
    } finally {
      await closeTab(owner);
      await closeTab(watcher);
    }
  }
});

test('Firefox: a dedicated worker as the owner keeps the open blocked; terminate() brings upgradeneeded; indexedDB.databases() lists the live ones', async () => {
  const [name, kept] = [aliveName('worker'), aliveName('worker-kept')];
  const host = await firefox.newTab(server.page);
  const watcher = await firefox.newTab(server.page);
  try {
    const worker = await host.evaluate((n) => window.liveness.ownInWorker(n), name);
    await host.evaluate((n) => window.liveness.own(n), kept);
    const listed = await watcher.evaluate(() => window.liveness.databases());
    assert.ok(listed.includes(name) && listed.includes(kept), `${name} and ${kept} in ${listed.join(', ')}`);
    await expectBlocked(server, watcher, name, { holdMs: 1000 });
    const latency = await expectGone(server, name, () => host.evaluate((i) => window.liveness.terminateWorker(i), worker));
    console.log(`# firefox: owner worker terminated -> upgradeneeded after ${latency} ms`);
    const after = await watcher.evaluate(() => window.liveness.databases());
    assert.ok(!after.includes(name) && after.includes(kept), `only ${kept} of the two in ${after.join(', ')}`);
  } finally {
    await closeTab(host);
    await closeTab(watcher);
  }
});

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
