// One lock manager per origin whatever a page does to its own realm (docs/PROTOCOL.md §2), and IndexedDB
// failures that fail closed (§12), in Chromium, Firefox and WebKit on the plain-http origin (no native
// navigator.locks). The fixture (fixtures/agreement.html) runs what a page does first, then the classic
// script, then an agent in the page, in an about:blank iframe (weblocks installs into it) and in a dedicated
// worker (which loads the classic script itself and keeps its own realm untouched).
//
// - A page that deletes (Chromium) or defines (WebKit) `Intl.v8BreakIterator`, or defines an
//   `Error.prototype.stack` accessor (WebKit), before loading weblocks: its three contexts exclude one
//   another both ways (ifAvailable probes), and in Chromium weblocks causes no deprecation report.
// - A page whose IndexedDB transactions throw from the start, or that has no IndexedDB at all (storage
//   blocked), beside a page that works: it rejects every request with an OperationError and never holds
//   (no timeout stands in for the evidence it cannot give); the other locks on.
// - Two pages on the log (WebKit; Chromium and Firefox with BroadcastChannel deleted in the windows): one's
//   transactions start throwing while it holds a lock; it loses the lock with an AbortError, then refuses
//   with an OperationError, with no error on the page (no recursion, no trap), and the other gets the lock.
// - Two pages on the log, and the log's database deleted from one of them while the other holds a lock: the
//   deletion waits while they live; the holder keeps its lock, and the log goes on.
// - Logout code in a page that holds a lock deletes every database of the origin: weblocks' transport record
//   and register are kept (their deletions wait) while the page's contexts live, and a page opened meanwhile
//   (in Chromium and Firefox one without BroadcastChannel, which prefers another transport) is neither
//   granted nor refused until the holder's page closes; then it records its own transport and is granted.
// - Beside a page on the recorded broadcast transport (Chromium), a page without BroadcastChannel refuses,
//   leaving no liveness database behind (its context opens one while its wasm loads) and none in the
//   register.
//
// Each browser keeps one profile across the file; every test starts with the origin's transport record
// deleted, as on a new origin. Needs the build (`npm run build`).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from '../server.mjs';
import { launch as launchChromium } from '../../../bench/lib/chromium.mjs';
import { launch as launchFirefox } from '../../../bench/lib/firefox.mjs';
import { launch as launchWebKit } from '../../../bench/lib/webkit.mjs';
import { plainHttpHost } from '../../../bench/lib/variants.mjs';
import { forgetTransport } from '../fixtures/xctx_harness.mjs';

const CONTEXTS = ['page', 'frame', 'worker'];

let server;
let origin;
let runs = 0;

before(async () => {
  server = await startServer();
  origin = `http://${plainHttpHost}:${server.port}/`;
});

after(async () => {
  await server?.close();
});

/** `body(browser)` with `launch()`'s browser, closed afterwards. */
async function withBrowser(launch, body) {
  const browser = await launch();
  try {
    await body(browser);
  } finally {
    await browser.close();
  }
}

/** A window on the fixture with `query`, once its three contexts exist; closed after `body(tab)`. */
async function withPages(browser, queries, body) {
  const tabs = [];
  try {
    for (const query of queries) {
      const tab = await browser.newTab(`${origin}tests/e2e/fixtures/agreement.html?${new URLSearchParams(query)}`);
      tabs.push(tab);
      const ready = await tab.evaluate(() => window.contextsReady);
      assert.deepEqual(ready, { frameHasLocks: true }, 'weblocks installed into the about:blank iframe');
    }
    await body(tabs);
    for (const tab of tabs) assert.deepEqual(await tab.evaluate(() => window.pageErrors), [], 'errors on the page');
  } finally {
    for (const tab of tabs) await tab.close();
  }
}

/** Deletes the origin's transport record from a blank page of the origin: as on a new origin. */
const forgetTransportOf = (browser) => forgetTransport(() => browser.newTab(`${origin}tests/e2e/fixtures/xctx_classic_page.html`));

/** `store[method](...args)` in a read-only transaction on `database` (version 1), in the page `tab`. */
const readStore = (tab, database, store, method, ...args) =>
  tab.evaluate(
    ([database, store, method, args]) =>
      new Promise((resolve, reject) => {
        const open = indexedDB.open(database, 1);
        open.onerror = () => reject(open.error);
        open.onsuccess = () => {
          const read = open.result.transaction([store]).objectStore(store)[method](...args);
          read.onsuccess = () => {
            open.result.close();
            resolve(read.result);
          };
        };
      }),
    [database, store, method, args],
  );

/**
 * The origin's transport as the record holds it, read in the page `tab`: what the shipped classic script
 * chose (the engine check runs there as the minifier left it, not as js/transport_choice.js reads).
 */
const recordOf = (tab) => readStore(tab, 'weblocks-transport', 'transport', 'get', 'weblocks');

/**
 * The liveness databases of the origin, read in the page `tab`: the names the register lists, and those
 * `indexedDB.databases()` lists (Chromium), each sorted.
 */
async function livenessOf(tab) {
  const register = await readStore(tab, 'weblocks-alive:', 'alive', 'getAllKeys');
  const databases = await tab.evaluate(async () => (await indexedDB.databases()).map((d) => d.name));
  return {
    register: register.slice().sort(),
    databases: databases.filter((n) => n.startsWith('weblocks-alive:') && n !== 'weblocks-alive:').sort(),
  };
}

const run = (tab, where, op, name) => tab.evaluate(([w, o, n]) => window.run(w, o, n), [where, op, name]);

/** Polls `check()` until it returns true, for up to `ms`. */
async function eventually(check, what, ms = 10_000) {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) assert.fail(`not within ${ms} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Resolves to `promise`'s value, or to `'pending'` if it has not settled within `ms`. */
const settledWithin = (promise, ms) => Promise.race([promise, new Promise((resolve) => setTimeout(() => resolve('pending'), ms))]);

/** Every ordered pair of the page's contexts: one holds, the other's ifAvailable probe finds it taken, then free. */
async function checkOneManager(tab) {
  for (const holder of CONTEXTS) {
    for (const prober of CONTEXTS) {
      if (prober === holder) continue;
      const name = `one-${++runs}`;
      assert.equal(await run(tab, holder, 'hold', name), 'held', `${holder} holds ${name}`);
      assert.equal(await run(tab, prober, 'probe', name), 'taken', `${prober} sees ${name} held by ${holder}`);
      assert.equal(await run(tab, holder, 'release', name), true);
      await eventually(async () => (await run(tab, prober, 'probe', name)) === 'free', `${prober} sees ${name} free`);
    }
  }
}

/** What js/transport_choice.js tells of the engine, in the page `tab`. */
const engineOf = (tab) =>
  tab.evaluate(async () => {
    const { engineFamily, oneOrderEngine, preferredTransport } = await import('/js/transport_choice.js');
    return { family: engineFamily(), oneOrder: oneOrderEngine(), preferred: preferredTransport() };
  });

const TAMPERED = [
  { browser: 'Chromium', launch: launchChromium, tamper: 'delete', what: 'deletes Intl.v8BreakIterator', engine: { family: 'v8', oneOrder: true, preferred: 'broadcast' } },
  { browser: 'Chromium', launch: launchChromium, tamper: 'none', what: 'leaves its realm alone', engine: { family: 'v8', oneOrder: true, preferred: 'broadcast' } },
  { browser: 'WebKit', launch: launchWebKit, tamper: 'define', what: 'defines Intl.v8BreakIterator', engine: { family: 'javascriptcore', oneOrder: false, preferred: 'log' } },
  { browser: 'WebKit', launch: launchWebKit, tamper: 'stack', what: 'defines an Error.prototype.stack accessor', engine: { family: 'javascriptcore', oneOrder: false, preferred: 'log' } },
];

for (const { browser: label, launch, tamper, what, engine } of TAMPERED) {
  test(`${label}: a page that ${what} before loading weblocks, its about:blank iframe and its dedicated worker share one lock manager`, async () => {
    await withBrowser(launch, async (browser) => {
      await forgetTransportOf(browser);
      await withPages(browser, [{ tamper }], async ([tab]) => {
        assert.deepEqual(await engineOf(tab), engine, 'the engine, told whatever the page did');
        await checkOneManager(tab);
        assert.equal(await recordOf(tab), engine.preferred, "the transport the classic script recorded");
        // Reading what tells the engine emits no deprecation report (Chromium reports them; WebKit has no
        // ReportingObserver for them).
        assert.deepEqual(await tab.evaluate(() => window.takeDeprecations()), [], 'deprecation reports');
      });
    });
  });
}

const BROWSERS = [
  { label: 'Chromium', launch: launchChromium, family: 'v8', recorded: 'broadcast' },
  { label: 'Firefox', launch: launchFirefox, family: 'spidermonkey', recorded: 'broadcast' },
  { label: 'WebKit', launch: launchWebKit, family: 'javascriptcore', recorded: 'log' },
];

const BROKEN_STORAGE = [
  { idb: 'throw', what: 'whose IndexedDB transactions throw' },
  { idb: 'none', what: 'without IndexedDB (storage blocked)' },
];

for (const { label, launch, family, recorded } of BROWSERS) {
  for (const { idb, what } of BROKEN_STORAGE) {
    test(`${label}: a page ${what} rejects every request with an OperationError beside a page that locks on`, async () => {
      await withBrowser(launch, async (browser) => {
        await forgetTransportOf(browser);
        await withPages(browser, [{}, { idb }], async ([good, broken]) => {
          assert.equal((await engineOf(good)).family, family, 'the engine');
          const name = `broken-${++runs}`;
          assert.equal(await run(good, 'page', 'hold', name), 'held');
          assert.equal(await recordOf(good), recorded, 'the transport the classic script recorded');
          assert.equal(await run(broken, 'page', 'hold', name), 'OperationError', 'the broken page refuses to hold');
          assert.equal(await run(broken, 'page', 'probe', name), 'OperationError', 'and to probe');
          // Its worker and iframe have their own IndexedDB: they share the origin's manager.
          assert.equal(await run(broken, 'worker', 'probe', name), 'taken');
          assert.equal(await run(good, 'page', 'release', name), true);
          await eventually(async () => (await run(broken, 'frame', 'probe', name)) === 'free', 'the frame sees the lock free');
          assert.equal(await run(broken, 'page', 'hold', name), 'OperationError', 'still refusing once the lock is free');
        });
      });
    });
  }

  // Where BroadcastChannel gives one order, the windows delete it: the origin's record is then the log
  // without a carrier, which their workers adopt.
  const onLog = label === 'WebKit' ? {} : { bc: 'none' };

  test(`${label}: on the log, a page whose transactions start throwing while it holds a lock loses it, then refuses; the other page gets the lock`, async () => {
    await withBrowser(launch, async (browser) => {
      await forgetTransportOf(browser);
      await withPages(browser, [onLog, onLog], async ([good, broken]) => {
        const name = `breaks-${++runs}`;
        assert.equal(await run(broken, 'page', 'hold', name), 'held');
        assert.equal(await run(good, 'page', 'probe', name), 'taken');
        await broken.evaluate(() => window.breakIndexedDB());
        // The good page waits for the lock. The broken page keeps it while it lives and sends nothing (as
        // natively: no one is evicted on silence); its next request's append throws, and it steps out.
        const granted = run(good, 'page', 'hold', name);
        run(broken, 'page', 'probe', `${name}-other`).catch(() => {});
        await eventually(async () => (await run(broken, 'page', 'lost')).length === 1, 'the broken page learns it lost its lock');
        assert.deepEqual(await run(broken, 'page', 'lost'), [`${name}: AbortError`]);
        assert.equal(await granted, 'held', 'the good page is granted the lock');
        await eventually(async () => (await run(broken, 'page', 'probe', `${name}-after`)) === 'OperationError', 'the broken page refuses');
        assert.equal(await run(good, 'worker', 'probe', name), 'taken', 'the good page holds it for its worker too');
        assert.equal(await run(good, 'page', 'release', name), true);
      });
    });
  });

  test(`${label}: on the log, the log's database deleted from one page while the other holds a lock: the deletion waits for the holder, which keeps its lock, and completes once it releases; the log goes on anew`, async () => {
    await withBrowser(launch, async (browser) => {
      await forgetTransportOf(browser);
      await withPages(browser, [onLog, onLog], async ([a, b]) => {
        const name = `deleted-${++runs}`;
        assert.equal(await run(a, 'page', 'probe', `${name}-joined`), 'free');
        assert.equal(await run(b, 'page', 'hold', name), 'held');
        await a.evaluate(() => {
          window.logDeletion = 'pending';
          const request = indexedDB.deleteDatabase('weblocks-log:weblocks');
          request.onblocked = () => (window.logDeletion = 'blocked');
          request.onsuccess = () => (window.logDeletion = 'deleted');
          request.onerror = () => (window.logDeletion = String(request.error));
        });
        // Every connection is told at once (`versionchange`): the page that holds nothing gives its
        // connections up, the holder keeps its own, and its lock. (Chromium and WebKit then fire
        // `blocked`; Firefox leaves the request pending.)
        await new Promise((resolve) => setTimeout(resolve, 1000));
        assert.match(await a.evaluate(() => window.logDeletion), /^(blocked|pending)$/, 'the deletion waits');
        const probed = run(a, 'page', 'probe', name);
        assert.equal(await settledWithin(probed, 1000), 'pending', "the other page's request waits behind the deletion");
        assert.deepEqual(await run(b, 'page', 'lost'), [], 'the holder kept its lock');
        assert.match(await a.evaluate(() => window.logDeletion), /^(blocked|pending)$/, 'the deletion waits while the holder holds');
        assert.equal(await run(b, 'page', 'release', name), true);
        await eventually(async () => (await a.evaluate(() => window.logDeletion)) === 'deleted', 'the deletion completes once nothing is held');
        assert.equal(await settledWithin(probed, 10_000), 'free', 'the waiting request is answered on the log made anew');
        assert.equal(await run(a, 'page', 'hold', name), 'held');
        assert.equal(await run(b, 'page', 'probe', name), 'taken', 'both pages are on the new log');
        assert.equal(await run(b, 'worker', 'probe', name), 'taken');
        assert.equal(await run(a, 'page', 'release', name), true);
      });
    });
  });
}

test('Chromium: beside a page on the recorded broadcast transport, a page without BroadcastChannel (nor in its worker) refuses, leaving no liveness database behind', async () => {
  await withBrowser(launchChromium, async (browser) => {
    await forgetTransportOf(browser);
    await withPages(browser, [{}], async ([holder]) => {
      const name = `refuses-${++runs}`;
      // Every context of the holder's page joins first, so that their databases are all in `before`.
      for (const where of CONTEXTS) assert.equal(await run(holder, where, 'probe', `${name}-joined`), 'free');
      assert.equal(await run(holder, 'page', 'hold', name), 'held');
      const before = await livenessOf(holder);
      await withPages(browser, [{ bc: 'none' }], async ([newcomer]) => {
        assert.equal(await run(newcomer, 'page', 'hold', name), 'OperationError', 'the newcomer on another transport refuses');
        assert.equal(await run(newcomer, 'worker', 'probe', name), 'OperationError', 'and so does its worker (no BroadcastChannel either)');
        assert.deepEqual(await run(holder, 'page', 'lost'), [], 'the holder kept its lock');
        // The page's context opened its liveness database while its wasm loaded; refusing, it deleted it,
        // and never entered the register; nor did its worker's. (Some of `before` may go meanwhile: the
        // page that deleted the record dropped its own on closing.)
        const own = `weblocks-alive:${await newcomer.evaluate(() => window.weblocks.clientId)}:`;
        const within = (names, of) => names.every((n) => of.includes(n));
        let now;
        await eventually(
          async () => {
            now = await livenessOf(holder);
            return within(now.register, before.register) && within(now.databases, before.databases);
          },
          'the refusing contexts left no liveness database',
        ).catch((error) => assert.fail(`${error.message}: before ${JSON.stringify(before)}, now ${JSON.stringify(now)}`));
        assert.ok(before.databases.concat(now.databases).every((n) => !n.startsWith(own)), "the refusing page's own never listed");
      });
      assert.equal(await run(holder, 'page', 'release', name), true);
    });
  });
});

for (const { label, launch, recorded } of BROWSERS) {
  // Where BroadcastChannel gives one order, the newcomer's window deletes it: it prefers another transport
  // than the one recorded, the case where a second lock manager could start.
  const newcomerQuery = label === 'WebKit' ? {} : { bc: 'none' };
  const newcomerRecords = label === 'WebKit' ? recorded : 'log-bare';

  test(`${label}: logout code deletes every database while a page holds a lock: weblocks' own wait for the holder alone, and a page opened meanwhile on another transport is granted, on its own, once the holder is gone, or refuses where the holder's worker recorded its transport first`, async () => {
    await withBrowser(launch, async (browser) => {
      await forgetTransportOf(browser);
      const name = `logout-${++runs}`;
      const holder = await browser.newTab(`${origin}tests/e2e/fixtures/agreement.html`);
      let closed = false;
      try {
        await holder.evaluate(() => window.contextsReady);
        // Every context of the holder's page joins first, so that each has weblocks' databases open.
        for (const where of CONTEXTS) assert.equal(await run(holder, where, 'probe', `${name}-joined`), 'free');
        assert.equal(await run(holder, 'page', 'hold', name), 'held');
        assert.equal(await recordOf(holder), recorded);
        // What logout code does: delete every database of the origin, without waiting for any.
        await holder.evaluate(async () => {
          window.deletions = {};
          for (const { name } of await indexedDB.databases()) {
            window.deletions[name] = 'pending';
            const request = indexedDB.deleteDatabase(name);
            request.onblocked = () => (window.deletions[name] = 'blocked');
            request.onsuccess = () => (window.deletions[name] = 'deleted');
          }
        });
        await withPages(browser, [newcomerQuery], async ([newcomer]) => {
          const granted = run(newcomer, 'page', 'hold', name);
          assert.equal(await settledWithin(granted, 2000), 'pending', 'the newcomer is neither granted nor refused while the holder lives');
          const deletions = await holder.evaluate(() => window.deletions);
          for (const kept of ['weblocks-transport', 'weblocks-alive:', ...(recorded === 'log' ? ['weblocks-log:weblocks'] : [])]) {
            assert.notEqual(deletions[kept], 'deleted', `${kept} is kept while the holder lives: ${JSON.stringify(deletions)}`);
          }
          assert.deepEqual(await run(holder, 'page', 'lost'), [], 'the holder kept its lock');
          // Its worker held nothing, and gave its connections up for the deletion: its next request
          // waits behind it.
          const workerProbe = run(holder, 'worker', 'probe', name);
          assert.equal(await settledWithin(workerProbe, 1000), 'pending', "the holder's worker's request waits behind the deletion");
          // The holder's page goes: its connections close, the deletions complete, and the newcomer's
          // contexts start on the origin anew.
          await holder.close();
          closed = true;
          // The holder's worker asked the record again behind the deletion, before the newcomer did: where
          // the browser still runs that read as the page goes (Chromium may), the worker records its own
          // transport first, and the newcomer, on another, refuses. Either way one transport runs.
          const outcome = await settledWithin(granted, 10_000);
          const record = await recordOf(newcomer);
          if (outcome === 'OperationError' && record === recorded) return;
          assert.equal(outcome, 'held', `the newcomer is granted once the holder is gone (record ${record})`);
          assert.equal(record, newcomerRecords, 'the newcomer recorded its own transport');
          assert.equal(await run(newcomer, 'worker', 'probe', name), 'taken', "the newcomer's worker shares its manager");
          assert.equal(await run(newcomer, 'page', 'release', name), true);
        });
      } finally {
        if (!closed) await holder.close();
      }
    });
  });
}
