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
// - A frame whose element is removed leaves the origin's protocol at once: the lock it holds goes to the next
//   request, its pending requests are dropped, and one removed as its lock is granted passes it on; with
//   frames that load weblocks themselves and frames the page installed into, each time reported
//   (REMOVED_FRAMES_REPEAT=n runs each case n times, REMOVED_FRAMES_ONLY='installed holds' one case).
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

  test(`${driverName}: a removed frame leaves at once: its held lock goes on, its pending request is dropped, and one removed as it is granted passes it on`, { timeout: 120_000 }, async () => {
    // Three frames of `src` request one name in turn; `removedFrames` removes one as `scenario` says and returns
    // the ms from the removal until the next frame is granted ('never' after 8 s), and what the page's query()
    // still lists of the name afterwards.
    const removedFrames = async (src, scenario) => {
      const name = `removed ${scenario} ${Math.random()}`;
      const frames = [];
      for (let i = 0; i < 3; i++) {
        const frame = document.createElement('iframe');
        frame.src = src;
        const loaded = new Promise((resolve) => (frame.onload = resolve));
        document.body.append(frame);
        await loaded;
        frames.push(frame);
      }
      // Reaching the windows installs an API of each frame's own where the frame did not load weblocks.
      const views = frames.map((frame) => frame.contentWindow);
      const releases = [];
      const grants = [];
      const ask = (k) =>
        (grants[k] = new Promise((granted) => {
          views[k].navigator.locks
            .request(name, () => {
              granted(performance.now());
              return new Promise((release) => (releases[k] = release));
            })
            .catch(() => {});
        }));
      const within = (promise, ms) => Promise.race([promise, new Promise((resolve) => setTimeout(() => resolve(null), ms))]);
      const listed = async () => {
        const { held, pending } = await navigator.locks.query();
        return [...held, ...pending].filter((l) => l.name === name).map((l) => l.clientId);
      };
      await ask(0);
      ask(1);
      ask(2);
      for (const end = Date.now() + 3000; Date.now() < end && (await listed()).length < 3; ) await new Promise((resolve) => setTimeout(resolve, 20));
      const before = (await listed()).length;
      let removedAt;
      let next;
      if (scenario === 'holds') {
        frames[0].remove();
        removedAt = performance.now();
        next = grants[1];
      } else if (scenario === 'waits') {
        frames[1].remove();
        removedAt = performance.now();
        releases[0]();
        next = grants[2];
      } else {
        // Removed as its lock is granted: frame 1 releases, and frame 2 is removed in the same task.
        releases[0]();
        frames[1].remove();
        removedAt = performance.now();
        next = grants[2];
      }
      const granted = await within(next, 8000);
      const ms = granted === null ? 'never' : Math.max(0, Math.round(granted - removedAt));
      // The page's replica may lag the grant it saw (a frame's callback runs in the page's realm): let it settle.
      const expected = scenario === 'holds' ? 2 : 1;
      for (const end = Date.now() + 1000; Date.now() < end && (await listed()).length !== expected; ) await new Promise((resolve) => setTimeout(resolve, 20));
      const after = await listed();
      for (const release of releases) if (release) release();
      for (const frame of frames) frame.remove();
      return { before, ms, leftover: after.length };
    };
    const report = await withPage(browser, (tab) =>
      tab.evaluate(async ([source, repeat, only]) => {
        self.REPEAT = repeat;
        self.ONLY = only;
        const run = (0, eval)(`(${source})`);
        const result = {};
        for (const [kind, src] of [['own', '/tests/e2e/fixtures/frame_child.html'], ['installed', '/tests/e2e/fixtures/frame_native.html']]) {
          for (const scenario of ['holds', 'waits', 'granted']) {
            if (self.ONLY && self.ONLY !== `${kind} ${scenario}`) continue;
            for (let i = 0; i < (self.REPEAT || 1); i++) result[`${kind} ${scenario} ${i}`] = await run(src, scenario);
          }
        }
        return result;
      }, [`${removedFrames}`, Number(process.env.REMOVED_FRAMES_REPEAT || 1), process.env.REMOVED_FRAMES_ONLY]),
    );
    console.log(`# ${driverName}: ms from a frame's removal to the next frame's grant: ${Object.entries(report).map(([k, r]) => `${k} ${r.ms}`).join(', ')}`);
    for (const [k, r] of Object.entries(report)) if (r.ms === 'never' || r.leftover !== (k.includes(' holds') ? 2 : 1)) console.log(`# ${driverName}: ${k}: ${JSON.stringify(r)}`);
    for (const [key, r] of Object.entries(report)) {
      assert.equal(r.before, 3, `${key}: the three requests were listed`);
      assert.notEqual(r.ms, 'never', `${key}: the next frame is granted`);
      // What is left of the name is the live frames' own: the next one's hold, and the third's request
      // where the first frame was the one removed.
      assert.equal(r.leftover, key.includes(' holds') ? 2 : 1, `${key}: nothing of the removed frame is listed`);
    }
  });

  test(`${driverName}: the web-platform-tests' removed-frame steps (frames that request from their own message handlers): the next frame is granted`, { timeout: 120_000 }, async () => {
    const steps = async (own, scenario) => {
      const iframe = () => frameHelper.open(own);
      const post = frameHelper.post;
      const within = (promise, ms) => Promise.race([promise, new Promise((resolve) => setTimeout(() => resolve('never'), ms))]);
      const name = `wpt removed ${scenario} ${Math.random()}`;
      const frames = [await iframe(), await iframe(), await iframe()];
      const { lockId } = await post(frames[0], { op: 'request', name });
      let next;
      let start;
      if (scenario === 'pending') {
        // Frames 2 and 3 wait; frame 2 is removed, frame 1 releases: frame 3 is granted.
        post(frames[1], { op: 'request', name });
        next = post(frames[2], { op: 'request', name });
        frames[1].remove();
        start = performance.now();
        await post(frames[0], { op: 'release', lockId });
      } else {
        // Frame 2 waits; frame 1 releases and frame 2 is removed as its grant comes: the page is granted.
        post(frames[1], { op: 'request', name });
        await new Promise((resolve) => setTimeout(resolve, 100));
        const released = post(frames[0], { op: 'release', lockId });
        frames[1].remove();
        start = performance.now();
        await released;
        next = navigator.locks.request(name, () => {});
      }
      const outcome = await within(next, 8000);
      for (const frame of frames) frame.remove();
      return outcome === 'never' ? 'never' : Math.round(performance.now() - start);
    };
    const report = await withPage(browser, async (tab) => {
      await tab.evaluate(() => buildSmoke.loadScript('/tests/e2e/fixtures/frame_helper_parent.js'));
      return tab.evaluate(async (source) => {
        const run = (0, eval)(`(${source})`);
        const result = {};
        for (const own of [false, true]) for (const scenario of ['pending', 'granted']) result[`${own ? 'own' : 'installed'} ${scenario}`] = await run(own, scenario);
        return result;
      }, `${steps}`);
    });
    console.log(`# ${driverName}: the web-platform-tests' removed-frame steps, ms to the next grant: ${JSON.stringify(report)}`);
    for (const [key, ms] of Object.entries(report)) assert.notEqual(ms, 'never', key);
  });
});

