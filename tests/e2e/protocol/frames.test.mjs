// Frames, in every browser the bench drives (bench/lib/chromium.mjs, firefox.mjs and webkit.mjs): a
// driver's `newTab(url)` gives `{ evaluate(fn, arg), close() }`, and the tests use nothing else. Pages are on a plain-http origin (`weblocks.test`, which the drivers map
// to this machine), where no frame has the native API, and load the classic script (npm run build first).
// - A same-origin about:blank or srcdoc iframe made by a script never runs the script; the page reaching it
//   (`contentWindow`, `contentDocument`) installs an API of the frame's own there, as the native API exists
//   in every frame: its own client id and interface objects, one lock manager with the page.
// - A document that is no longer fully active (its iframe removed) gets an InvalidStateError from request()
//   and query(), after the WebIDL conversions and before every other check (spec step 3), and its
//   `navigator.locks` still reads (Firefox gives such a window a new navigator object).
// - Several same-page iframes requesting one name while the page holds it: every context's query() lists
//   each request once.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot, startServer } from '../server.mjs';
import { plainHttpHost } from '../../../bench/lib/variants.mjs';

const drivers = ['chromium', 'firefox', 'webkit'];

let server;
before(async () => {
  assert.ok(fs.existsSync(path.join(repoRoot, 'dist', 'weblocks.polyfill.js')), 'run `npm run build` first');
  server = await startServer();
});
after(async () => {
  await server?.close();
});

const page = () => `http://${plainHttpHost}:${server.port}/tests/e2e/fixtures/build_smoke.html`;

/** A tab of `browser` on the smoke page with the classic script loaded; closed after `body`. */
async function withPage(browser, body) {
  const tab = await browser.newTab(page());
  try {
    await tab.evaluate(() => buildSmoke.loadScript('/dist/weblocks.polyfill.js'));
    return await body(tab);
  } finally {
    await tab.close();
  }
}

for (const driverName of drivers) describe(driverName, () => {
  let browser;
  before(async () => {
    const driver = await import(`../../../bench/lib/${driverName}.mjs`);
    browser = await driver.launch();
  });
  after(async () => {
    await browser?.close();
  });

  test(`${driverName}: script-made about:blank and srcdoc iframes get an API of their own when the page reaches them`, { timeout: 60_000 }, async () => {
    const report = await withPage(browser, (tab) =>
      tab.evaluate(async () => {
        const holding = new Promise((granted) => {
          navigator.locks.request('page holds', () => {
            granted();
            return new Promise((release) => (self.releasePage = release));
          });
        });
        await holding;
        const blank = document.createElement('iframe');
        document.body.append(blank);
        const srcdoc = document.createElement('iframe');
        srcdoc.srcdoc = '<p>no script here</p>';
        const loaded = new Promise((resolve) => (srcdoc.onload = resolve));
        document.body.append(srcdoc);
        await loaded;
        const viaDocument = document.createElement('iframe');
        document.body.append(viaDocument);
        const check = async (view) => {
          const locks = view.navigator.locks;
          const own = await locks.request('frame', (lock) => [lock instanceof view.Lock, lock.name]);
          const { held } = await locks.query();
          const inFrame = await locks.request('in frame', async () => (await locks.query()).held.find((h) => h.name === 'in frame'));
          return {
            installed: typeof locks === 'object' && locks instanceof view.LockManager,
            tag: Object.prototype.toString.call(locks),
            ownInterfaces: view.LockManager !== self.LockManager && view.Lock !== self.Lock,
            own,
            missesThePagesLock: await locks.request('page holds', { ifAvailable: true }, (lock) => lock),
            seesThePageHold: held.some((h) => h.name === 'page holds' && h.clientId === weblocks.clientId),
            ownClientId: typeof inFrame.clientId === 'string' && inFrame.clientId !== weblocks.clientId,
          };
        };
        const result = {
          blank: await check(blank.contentWindow),
          srcdoc: await check(srcdoc.contentWindow),
          viaDocument: await check(viaDocument.contentDocument.defaultView),
        };
        self.releasePage();
        return result;
      }),
    );
    const expected = {
      installed: true,
      tag: '[object LockManager]',
      ownInterfaces: true,
      own: [true, 'frame'],
      missesThePagesLock: null,
      seesThePageHold: true,
      ownClientId: true,
    };
    assert.deepEqual(report, { blank: expected, srcdoc: expected, viaDocument: expected });
  });

  test(`${driverName}: a removed iframe's request() and query() reject with InvalidStateError (spec step 3), as the native API's`, { timeout: 60_000 }, async () => {
    // In the page: remove `frame`, then call its API; each outcome is a rejection's name, 'fulfilled', or
    // 'never settled' (Firefox runs no promise job of a removed frame's realm, the native API's included).
    const detachAndCall = async (frameSrc) => {
      const frame = document.createElement('iframe');
      if (frameSrc !== null) {
        frame.src = frameSrc;
        const loaded = new Promise((resolve) => (frame.onload = resolve));
        document.body.append(frame);
        await loaded;
      } else {
        document.body.append(frame);
      }
      const view = frame.contentWindow;
      const locks = view.navigator.locks;
      frame.remove();
      const outcome = (promise) =>
        Promise.race([promise.then(() => 'fulfilled', (e) => e.name), new Promise((resolve) => setTimeout(() => resolve('never settled'), 500))]);
      let called = false;
      const callback = () => {
        called = true;
      };
      let navigatorLocks;
      try {
        navigatorLocks = typeof view.navigator.locks;
      } catch (e) {
        navigatorLocks = `${e.name}: ${e.message}`;
      }
      const result = {
        request: await outcome(locks.request('gone', callback)),
        notSupportedName: await outcome(locks.request('-gone', callback)),
        query: await outcome(locks.query()),
        badArguments: await outcome(locks.request('gone')),
        navigatorLocks,
      };
      await new Promise((resolve) => setTimeout(resolve, 50));
      result.called = called;
      return result;
    };
    // The native API, on a secure origin (127.0.0.1) of the same browser.
    const nativeTab = await browser.newTab(`http://127.0.0.1:${server.port}/tests/e2e/fixtures/build_smoke.html`);
    let native;
    try {
      native = await nativeTab.evaluate((source) => (0, eval)(`(${source})`)('/tests/e2e/fixtures/frame_native.html'), `${detachAndCall}`);
    } finally {
      await nativeTab.close();
    }
    const report = await withPage(browser, (tab) =>
      tab.evaluate(async (source) => {
        const detachAndCall = (0, eval)(`(${source})`);
        const own = await detachAndCall('/tests/e2e/fixtures/frame_child.html');
        const installed = await detachAndCall(null);
        const { held, pending } = await navigator.locks.query();
        return { own, installed, reachedTheManager: [...held, ...pending].filter((l) => l.name.endsWith('gone')).length };
      }, `${detachAndCall}`),
    );
    // The frame that loaded weblocks itself: its promises are of its realm, as the native API's.
    assert.deepEqual(report.own, { ...native, navigatorLocks: 'object' });
    if (native.request !== 'never settled') {
      assert.deepEqual(native, { request: 'InvalidStateError', notSupportedName: 'InvalidStateError', query: 'InvalidStateError', badArguments: 'TypeError', navigatorLocks: 'object', called: false });
    }
    // The frame the page installed into: its API is of the page's realm, whose promises settle everywhere.
    assert.deepEqual(report.installed, {
      request: 'InvalidStateError',
      notSupportedName: 'InvalidStateError',
      query: 'InvalidStateError',
      badArguments: 'TypeError',
      navigatorLocks: 'object',
      called: false,
    });
    assert.equal(report.reachedTheManager, 0);
  });

  test(`${driverName}: same-page iframes requesting one name: every context's query() lists each request once`, { timeout: 60_000 }, async () => {
    const report = await withPage(browser, (tab) =>
      tab.evaluate(async () => {
        const name = 'one name';
        await new Promise((granted) => {
          navigator.locks.request(name, () => {
            granted();
            return new Promise((release) => (self.releasePage = release));
          });
        });
        const frames = [];
        for (let i = 0; i < 3; i++) {
          const frame = document.createElement('iframe');
          frame.src = `/tests/e2e/fixtures/frame_child.html?request=${encodeURIComponent(name)}`;
          const loaded = new Promise((resolve) => (frame.onload = resolve));
          document.body.append(frame);
          await loaded;
          frames.push(frame.contentWindow);
        }
        const contexts = [self, ...frames];
        const expected = frames.map((view) => view.weblocks.clientId).sort();
        const pendingIn = async (view) =>
          (await view.navigator.locks.query()).pending
            .filter((p) => p.name === name)
            .map((p) => p.clientId)
            .sort();
        // Each context sees the others' requests once its replica has them: wait for that (2 s at most),
        // then every snapshot taken must list each request exactly once.
        const deadline = Date.now() + 2000;
        let views;
        do {
          await new Promise((resolve) => setTimeout(resolve, 50));
          views = await Promise.all(contexts.map(pendingIn));
        } while (Date.now() < deadline && views.some((v) => v.length < expected.length));
        const later = [];
        for (let i = 0; i < 5; i++) {
          await new Promise((resolve) => setTimeout(resolve, 20));
          later.push(...(await Promise.all(contexts.map(pendingIn))));
        }
        self.releasePage();
        return { expected, views: [...views, ...later].map((v) => (JSON.stringify(v) === JSON.stringify(expected) ? 'each once' : v)) };
      }),
    );
    assert.equal(report.expected.length, 3);
    assert.deepEqual(report.views, report.views.map(() => 'each once'));
  });
});
