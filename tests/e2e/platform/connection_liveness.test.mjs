// Assumption A5 of the coordination protocol (docs/PROTOCOL.md §2), checked in Chromium: an IndexedDB
// connection stays open for as long as its context lives, busy or frozen included, and the browser closes it
// when the context is gone. So an open at a newer version of a database that one context keeps open is
// `blocked` while that context lives, and gets `upgradeneeded` once it is gone: closed, navigated away,
// crashed, or (a worker) terminated. Pages on the plain-http origin; the watcher reports over fetch to the
// test server (fixtures/liveness_harness.mjs). The fixture does not load weblocks: this is about the browser.
// (Firefox: connection_liveness_firefox.test.mjs; WebKit: connection_liveness_webkit.test.mjs.)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { chromiumArgs, chromiumPath } from '../browser.mjs';
import { plainHttpHost } from '../../../bench/lib/variants.mjs';
import { aliveName, expectBlocked, expectGone, navigationOutcome, sleep, startLivenessServer } from '../fixtures/liveness_harness.mjs';

let server;
let browser;
let context;

before(async () => {
  server = await startLivenessServer();
  // With the back/forward cache that playwright turns off by default, as a user's Chromium has it.
  browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: [...chromiumArgs, `--host-resolver-rules=MAP ${plainHttpHost} 127.0.0.1`],
    ignoreDefaultArgs: ['--disable-back-forward-cache'],
  });
  context = await browser.newContext();
});

after(async () => {
  await browser?.close();
  await server?.close();
});

async function open() {
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(String(e)));
  await page.goto(server.page);
  return page;
}

/** An owner page of a fresh database and a watcher page whose open of it is blocked. */
async function ownerAndWatcher(label) {
  const name = aliveName(label);
  const owner = await open();
  await owner.evaluate((n) => window.liveness.own(n), name);
  const watcher = await open();
  return { name, owner, watcher };
}

test('Chromium: the open stays blocked while the owner idles, busy-loops for 3 s and is frozen; its crash brings upgradeneeded', async () => {
  const { name, owner, watcher } = await ownerAndWatcher('crash');
  const late = `${name}+late`;
  try {
    await owner.evaluate((n) => window.liveness.own(n), late);
    await expectBlocked(server, watcher, name, { holdMs: 1000 });
    await owner.evaluate(() => window.liveness.spinSoon(3000, 100));
    await sleep(500);
    // A second database, opened at version 2 while the owner spins: not granted (Firefox and WebKit do not
    // even report it blocked until the owner runs).
    await watcher.evaluate((n) => window.liveness.watch(n), late);
    await sleep(2900);
    assert.deepEqual(server.events(name), ['blocked'], 'blocked through a 3 s busy loop');
    const lateEvents = server.events(late);
    console.log(`# chromium: an open during the owner's busy loop: ${lateEvents.length ? lateEvents.join(', ') : 'no event'} while it spun`);
    assert.ok(lateEvents.length === 0 || (lateEvents.length === 1 && lateEvents[0] === 'blocked'), `an open during the loop is not granted: ${lateEvents}`);
    assert.ok(await owner.evaluate(() => window.liveness.spun > 0), 'the loop ran');
    const cdp = await context.newCDPSession(owner);
    await cdp.send('Page.setWebLifecycleState', { state: 'frozen' });
    await sleep(1500);
    assert.deepEqual(server.events(name), ['blocked'], 'blocked while frozen');
    assert.deepEqual(server.events(late), ['blocked'], 'the late open too, once the owner ran');
    const latency = await expectGone(server, name, () => {
      cdp.send('Page.crash').catch(() => {});
    });
    await server.until(late, 'success', 5000);
    console.log(`# chromium: crash of the frozen owner (Page.crash) -> upgradeneeded after ${latency} ms`);
    assert.deepEqual(watcher.errors, []);
  } finally {
    await owner.close().catch(() => {});
    await watcher.close();
  }
});

test('Chromium: closing the owner brings upgradeneeded', async () => {
  const { name, owner, watcher } = await ownerAndWatcher('close');
  try {
    await expectBlocked(server, watcher, name, { holdMs: 300 });
    const latency = await expectGone(server, name, () => owner.close());
    console.log(`# chromium: owner closed -> upgradeneeded after ${latency} ms`);
  } finally {
    await owner.close();
    await watcher.close();
  }
});

test('Chromium: the owner navigating away (same origin) brings upgradeneeded, whether or not it closes its connection on pagehide', async () => {
  for (const closeOnHide of [false, true]) {
    const name = aliveName(closeOnHide ? 'navigate-close' : 'navigate-keep');
    const owner = await open();
    const watcher = await open();
    let navigation;
    try {
      await owner.evaluate(([n, close]) => window.liveness.own(n, close), [name, closeOnHide]);
      await expectBlocked(server, watcher, name, { holdMs: 300 });
      const { persisted, latency } = await navigationOutcome(server, name, () => {
        navigation = owner.goto(server.page + '?next');
      });
      console.log(`# chromium: owner navigated away, ${closeOnHide ? 'closing' : 'keeping'} its connection on pagehide (persisted: ${persisted}) -> ${latency === null ? 'still blocked' : `upgradeneeded after ${latency} ms`}`);
      assert.notEqual(latency, null, 'upgradeneeded after the navigation');
    } finally {
      await navigation;
      await owner.close();
      await watcher.close();
    }
  }
});

test('Chromium: a dedicated worker as the owner keeps the open blocked while it runs; terminate() brings upgradeneeded', async () => {
  const name = aliveName('worker');
  const host = await open();
  const watcher = await open();
  try {
    const worker = await host.evaluate((n) => window.liveness.ownInWorker(n), name);
    await expectBlocked(server, watcher, name, { holdMs: 1000 });
    const latency = await expectGone(server, name, () => host.evaluate((i) => window.liveness.terminateWorker(i), worker));
    console.log(`# chromium: owner worker terminated -> upgradeneeded after ${latency} ms`);
    const second = aliveName('worker-page');
    await host.evaluate((n) => window.liveness.ownInWorker(n), second);
    await expectBlocked(server, watcher, second);
    const closed = await expectGone(server, second, () => host.close());
    console.log(`# chromium: the owner worker's page closed -> upgradeneeded after ${closed} ms`);
  } finally {
    await host.close();
    await watcher.close();
  }
});

test('Chromium: indexedDB.databases() lists the databases the live contexts keep open, and not a dead one once deleted', async () => {
  const [a, b] = [aliveName('list'), aliveName('list')];
  const first = await open();
  const second = await open();
  const joiner = await open();
  try {
    await first.evaluate((n) => window.liveness.own(n), a);
    await second.evaluate((n) => window.liveness.ownInWorker(n), b);
    const listed = await joiner.evaluate(() => window.liveness.databases());
    assert.ok(listed.includes(a) && listed.includes(b), `${a} and ${b} in ${listed.join(', ')}`);
    await expectBlocked(server, joiner, a);
    await expectGone(server, a, () => first.close());
    const listedLater = await joiner.evaluate(() => window.liveness.databases());
    assert.ok(!listedLater.includes(a) && listedLater.includes(b), `only ${b} of the two in ${listedLater.join(', ')}`);
  } finally {
    await first.close();
    await second.close();
    await joiner.close();
  }
});
