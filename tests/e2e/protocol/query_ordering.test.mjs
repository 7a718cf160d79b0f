// query() lists every held lock and every pending request once, in the order the Web Locks tests of the
// web-platform-tests (web-locks/query-ordering) check, in the engines where weblocks coordinates over the
// IndexedDB log or over BroadcastChannel: WebKit (the log, carried by BroadcastChannel or alone) and Firefox
// (BroadcastChannel, or the log where it is deleted). The classic script on a plain-http origin, where there is
// no native navigator.locks. The cases run one after the other in one page, their locks kept as in that test
// file, alone and beside another window of the origin that takes part in the protocol (its messages then go
// through the transport, not decided alone). And that file's steps with three frames (`frameOrderingSteps`), in
// Chromium, Firefox and WebKit, with frames that load weblocks and frames the page installs into: every
// context's query() lists the page's hold and the frames' requests once each, in request order. Needs the
// build (`npm run build`).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from '../server.mjs';
import { launch as launchWebKit } from '../../../bench/lib/webkit.mjs';
import { launch as launchFirefox } from '../../../bench/lib/firefox.mjs';
import { launch as launchChromium } from '../../../bench/lib/chromium.mjs';
import { plainHttpHost } from '../../../bench/lib/variants.mjs';
import { fixtureUrl, forgetTransport } from '../fixtures/xctx_harness.mjs';

let server;
let plain;

before(async () => {
  server = await startServer();
  plain = { url: `http://${plainHttpHost}:${server.port}/` };
});

after(async () => {
  await server?.close();
});

/** The query-ordering cases, in the page; each result lists indexes into its own three names. */
async function orderingCases() {
  const hold = (name, options) => {
    let release;
    const held = new Promise((resolve) => {
      release = resolve;
    });
    return new Promise((resolve) => {
      navigator.locks
        .request(name, options || {}, () => {
          resolve(release);
          return held;
        })
        .catch(() => {});
    });
  };
  let n = 0;
  const names = () => [1, 2, 3].map(() => `query-ordering-${++n}-${Math.random()}`);
  const of = (infos, ours) => infos.map((l) => ours.indexOf(l.name)).filter((i) => i >= 0);
  const results = {};
  {
    // Requests appear in the state in queue-map order, each once.
    const ours = names();
    await Promise.all(ours.map((name) => hold(name)));
    for (const k of [2, 1, 0, 0]) navigator.locks.request(ours[k], { mode: 'shared' }, () => {});
    results.pending = of((await navigator.locks.query()).pending, ours);
  }
  {
    // Held locks appear in the order they were granted.
    const ours = names();
    const [release1, release2, release3] = await Promise.all(ours.map((name) => hold(name)));
    const requests = ours.map((name) => hold(name));
    await navigator.locks.request(`query-ordering-${++n}`, () => {});
    release2();
    release3();
    release1();
    await Promise.all(requests);
    results.granted = of((await navigator.locks.query()).held, ours);
  }
  {
    // Held locks appear in the order they were granted, including when stolen.
    const ours = names();
    await Promise.all(ours.map((name) => hold(name)));
    await Promise.all([2, 0, 1].map((k) => hold(ours[k], { steal: true })));
    results.stolen = of((await navigator.locks.query()).held, ours);
  }
  return results;
}

const EXPECTED = { pending: [0, 0, 1, 2], granted: [1, 2, 0], stolen: [2, 0, 1] };

const BROWSERS = [
  { name: 'WebKit', launch: launchWebKit },
  { name: 'Firefox', launch: launchFirefox },
];

for (const { name, launch } of BROWSERS) {
  test(`${name}: query() lists every pending request once and held locks in grant order (web-platform-tests query-ordering)`, async () => {
    const browser = await launch();
    try {
      for (const transport of [{}, { transport: 'log' }]) {
        // The origin's transport is recorded by its first context: forget the last case's record, whose
        // contexts differed in having BroadcastChannel (they would refuse beside it).
        await forgetTransport(() => browser.newTab(`${plain.url}tests/e2e/fixtures/xctx_classic_page.html`));
        for (const company of [false, true]) {
          const query = { api: 'classic', ...transport };
          const tabs = [];
          try {
            if (company) {
              const other = await browser.newTab(fixtureUrl(plain, 'other', query));
              tabs.push(other);
              await other.evaluate(() => window.agentReady);
              await other.evaluate(() => navigator.locks.request('query-ordering-company', () => new Promise(() => {})) && null);
              await other.evaluate(() => navigator.locks.query().then(() => null));
            }
            const tab = await browser.newTab(fixtureUrl(plain, 'page', query));
            tabs.push(tab);
            await tab.evaluate(() => window.agentReady);
            const results = await tab.evaluate(orderingCases);
            assert.deepEqual(results, EXPECTED, `${JSON.stringify(transport)}, another window: ${company}`);
          } finally {
            for (const tab of tabs) await tab.close();
          }
        }
      }
    } finally {
      await browser.close();
    }
  });
}

/**
 * The steps of the web-platform-tests' query-ordering file with frames, in the page: three same-origin frames
 * (fixtures/frame_helper.html, driven through fixtures/frame_helper_parent.js; loading weblocks themselves with
 * `own`, else installed into by the page) each learn their client id in turn (request the name, query() in the
 * callback, answer, release); the page takes the name, asks frames 1, 2 and 3 to request it, in that order,
 * without waiting for those grants; frame 3 requests and releases a second name as a checkpoint; then the page
 * and each frame call query(). Returns, for each, the frames (1, 2, 3; 0 for the page) of the name's held locks
 * and pending requests.
 */
async function frameOrderingSteps(own) {
  const iframe = () => frameHelper.open(own);
  const post = frameHelper.post;
  const name = `query-ordering-frames-${Math.random()}`;
  const frames = [await iframe(), await iframe(), await iframe()];
  const ids = [];
  for (const frame of frames) ids.push((await post(frame, { op: 'clientId', name })).clientId);
  let release;
  await new Promise((granted) =>
    navigator.locks.request(name, () => {
      granted();
      return new Promise((resolve) => (release = resolve));
    }),
  );
  for (const frame of frames) post(frame, { op: 'request', name });
  const { lockId } = await post(frames[2], { op: 'request', name: `${name}-checkpoint` });
  await post(frames[2], { op: 'release', lockId });
  const who = (l) => ids.indexOf(l.clientId) + 1;
  const of = (state) => ({ held: state.held.filter((l) => l.name === name).map(who), pending: state.pending.filter((l) => l.name === name).map(who) });
  const views = [of(await navigator.locks.query())];
  for (const frame of frames) views.push(of(await frame.contentWindow.navigator.locks.query()));
  release();
  for (const frame of frames) frame.remove();
  return { distinctIds: new Set(ids).size, views };
}

for (const { name, launch } of [{ name: 'Chromium', launch: launchChromium }, ...BROWSERS]) {
  test(`${name}: query() lists each frame's request once, in request order (web-platform-tests query-ordering, with frames)`, async () => {
    const browser = await launch();
    try {
      await forgetTransport(() => browser.newTab(`${plain.url}tests/e2e/fixtures/xctx_classic_page.html`));
      const tab = await browser.newTab(`${plain.url}tests/e2e/fixtures/build_smoke.html`);
      try {
        await tab.evaluate(() => buildSmoke.loadScript('/dist/weblocks.polyfill.js'));
        await tab.evaluate(() => buildSmoke.loadScript('/tests/e2e/fixtures/frame_helper_parent.js'));
        for (const own of [false, true]) {
          const { distinctIds, views } = await tab.evaluate(frameOrderingSteps, own);
          console.log(`# ${name}, ${own ? 'frames that load weblocks' : 'frames installed into'}: ${JSON.stringify(views[0])}`);
          assert.equal(distinctIds, 3);
          // The page's own view, then each frame's: the page holds, frames 1, 2, 3 wait, each once.
          for (const view of views) assert.deepEqual(view, { held: [0], pending: [1, 2, 3] }, `${own ? 'own' : 'installed'}: ${JSON.stringify(views)}`);
        }
      } finally {
        await tab.close();
      }
    } finally {
      await browser.close();
    }
  });
}

