// Assumption A5 of the coordination protocol (docs/PROTOCOL.md §2), checked in WebKit (Debian's WebKitGTK,
// MiniBrowser under Xvfb through bench/lib/webkit.mjs, where each window has a WebKitWebProcess of its own):
// an IndexedDB connection stays open for as long as its context lives, busy included, and the storage process
// closes it when the context is gone. So an open at a newer version of a database one window keeps open is
// `blocked` while that window lives, and gets `upgradeneeded` once it is gone: closed, navigated away, its
// WebKitWebProcess killed (SIGKILL; found as the process that spends CPU while the owner busy-loops), or (a
// worker) terminated. The watcher reports over fetch to the test server (fixtures/liveness_harness.mjs).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch as launchWebKit } from '../../bench/lib/webkit.mjs';
import { GONE_WITHIN_MS, aliveName, descendants, expectBlocked, expectGone, killBusyOwner, navigationOutcome, startLivenessServer } from './fixtures/liveness_harness.mjs';

let server;
let webkit;

before(async () => {
  server = await startLivenessServer();
  webkit = await launchWebKit();
});

after(async () => {
  await webkit?.close();
  await server?.close();
});

const webProcesses = () => descendants().filter((p) => /WebKitWebProcess/.test(p.command));

/** An owner window of a fresh database and a watcher window, which will open it at version 2. */
async function ownerAndWatcher(label) {
  const name = aliveName(label);
  const owner = await webkit.newTab(server.page);
  await owner.evaluate((n) => window.liveness.own(n), name);
  const watcher = await webkit.newTab(server.page);
  return { name, owner, watcher };
}

test('WebKit: the open stays blocked while the owner idles; closing the owner window brings upgradeneeded', async () => {
  const { name, owner, watcher } = await ownerAndWatcher('close');
  try {
    await expectBlocked(server, watcher, name, { holdMs: 1000 });
    const latency = await expectGone(server, name, () => owner.close());
    console.log(`# webkit: owner window closed -> upgradeneeded after ${latency} ms`);
  } finally {
    await owner.close();
    await watcher.close();
  }
});

test('WebKit: the owner navigating away (same origin) brings upgradeneeded once it closes its connection on pagehide', async () => {
  // WebKit keeps a page that navigated away in its back/forward cache with its connections open, so that page
  // still holds the open back; a context must close its connection when it enters that cache.
  for (const closeOnHide of [false, true]) {
    const name = aliveName(closeOnHide ? 'navigate-close' : 'navigate-keep');
    const owner = await webkit.newTab(server.page);
    const watcher = await webkit.newTab(server.page);
    try {
      await owner.evaluate(([n, close]) => window.liveness.own(n, close), [name, closeOnHide]);
      await expectBlocked(server, watcher, name, { holdMs: 300 });
      const { persisted, latency } = await navigationOutcome(server, name, () => owner.goto(server.page + '?next'), closeOnHide ? GONE_WITHIN_MS : 2000);
      console.log(`# webkit: owner navigated away, ${closeOnHide ? 'closing' : 'keeping'} its connection on pagehide (persisted: ${persisted}) -> ${latency === null ? 'still blocked 2 s later' : `upgradeneeded after ${latency} ms`}`);
      if (closeOnHide) assert.notEqual(latency, null, 'upgradeneeded once the owner closed its connection');
    } finally {
      await owner.close();
      await watcher.close();
    }
  }
});

test('WebKit: a dedicated worker as the owner keeps the open blocked; terminate() brings upgradeneeded; indexedDB.databases() lists the live ones', async () => {
  const [name, kept] = [aliveName('worker'), aliveName('worker-kept')];
  const host = await webkit.newTab(server.page);
  const watcher = await webkit.newTab(server.page);
  try {
    const worker = await host.evaluate((n) => window.liveness.ownInWorker(n), name);
    await host.evaluate((n) => window.liveness.own(n), kept);
    const listed = await watcher.evaluate(() => window.liveness.databases());
    assert.ok(listed.includes(name) && listed.includes(kept), `${name} and ${kept} in ${listed.join(', ')}`);
    await expectBlocked(server, watcher, name, { holdMs: 1000 });
    const latency = await expectGone(server, name, () => host.evaluate((i) => window.liveness.terminateWorker(i), worker));
    console.log(`# webkit: owner worker terminated -> upgradeneeded after ${latency} ms`);
    const after = await watcher.evaluate(() => window.liveness.databases());
    assert.ok(!after.includes(name) && after.includes(kept), `only ${kept} of the two in ${after.join(', ')}`);
  } finally {
    await host.close();
    await watcher.close();
  }
});

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
