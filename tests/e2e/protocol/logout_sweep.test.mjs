// Logout code works, in Chromium, Firefox and WebKit: a page that deletes every database of its origin
// (`indexedDB.databases()`, then `deleteDatabase` of each, awaited) completes once no context of the origin
// holds a lock (src/protocol/evidence/sweep.rs: a context that holds nothing leaves and gives its weblocks
// connections up; a holder keeps them, its connection being the evidence that it lives). Meanwhile locks go on
// working with exclusion in the sweeping tab, in another tab and in a newcomer, and no wait is silent: the
// holder says once what keeps the deletion waiting, and a context whose databases wait behind the deletion
// says so after 2 s. On the plain-http origin (no native API). Needs the build (`npm run build`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { call, expectEvent, expectNoEvent, fixtureUrl, sleep } from '../fixtures/xctx_harness.mjs';
import { eachEngine, withWindows } from '../fixtures/evidence_engines.mjs';

/** Keeps the page's `console.warn` lines in `window.warnings` (WebKit's console does not reach the driver). */
const keepWarnings = (tab) =>
  tab.evaluate(() => {
    window.warnings = [];
    const warn = console.warn.bind(console);
    console.warn = (...args) => {
      window.warnings.push(args.join(' '));
      warn(...args);
    };
  });
const warnings = (tab) => tab.evaluate(() => window.warnings);

/** Starts the common logout sweep in `tab`; `sweepState(tab)` tells how it goes. */
const startSweep = (tab) =>
  tab.evaluate(() => {
    const sweep = { started: performance.timeOrigin + performance.now(), blocked: 0, names: null, pending: [], done: null, error: null };
    window.sweep = sweep;
    (async () => {
      const databases = await indexedDB.databases();
      sweep.names = databases.map((d) => d.name);
      await Promise.all(
        databases.map(
          ({ name }) =>
            new Promise((resolve, reject) => {
              const request = indexedDB.deleteDatabase(name);
              sweep.pending.push(name);
              request.onsuccess = () => {
                sweep.pending.splice(sweep.pending.indexOf(name), 1);
                resolve();
              };
              request.onerror = () => reject(request.error);
              request.onblocked = () => sweep.blocked++;
            }),
        ),
      );
      sweep.done = performance.timeOrigin + performance.now();
    })().catch((error) => {
      sweep.error = String(error);
    });
  });
const sweepState = (tab) => tab.evaluate(() => window.sweep);

/** Waits (at most `ms`) for the sweep in `tab` to complete; returns its state. */
async function untilSwept(tab, ms) {
  for (let waited = 0; waited < ms; waited += 50) {
    const state = await sweepState(tab);
    if (state.done !== null || state.error !== null) return state;
    await sleep(50);
  }
  return sweepState(tab);
}

/** A window whose engine may not load yet (its transport record waits behind a deletion): only its agent. */
async function openNewcomer(env, label) {
  const tab = await env.browser.newTab(fixtureUrl(env.origin, label));
  for (let k = 0; k < 200 && !(await tab.evaluate(() => window.agent !== undefined)); k++) await sleep(25);
  await keepWarnings(tab);
  return Object.assign(tab, { label });
}

const at = (events, ev) => events.find((e) => e.ev === ev);
let runs = 0;

eachEngine((engine, env) => {
  const lower = engine.name.toLowerCase();

  test(`${engine.name}: with no lock held, a sweep of every database completes, and locks then work with exclusion in that tab, another and a newcomer`, async () => {
    const name = `sweep-idle-${++runs}`;
    await withWindows(env, ['sweeper', 'other'], async ([sweeper, other]) => {
      for (const tab of [sweeper, other]) {
        await keepWarnings(tab);
        await call(tab, 'request', 'warm', `${name}-warm`);
        await expectEvent(tab, 'warm', 'granted');
        await call(tab, 'release', 'warm');
        await expectEvent(tab, 'warm', 'resolved');
      }
      await startSweep(sweeper);
      const swept = await untilSwept(sweeper, 15_000);
      assert.equal(swept.error, null, swept.error);
      assert.notEqual(swept.done, null, `the sweep did not complete in 15 s (blocked ${swept.blocked} times; waiting for ${swept.pending})`);
      const weblocksNames = swept.names.filter((n) => n.startsWith('weblocks-'));
      assert.ok(weblocksNames.length >= 2, `it deleted weblocks' databases: ${swept.names}`);
      // Exclusion after it: the sweeper holds, the other tab and a newcomer wait, then each in turn.
      await call(sweeper, 'request', 'a', name);
      await expectEvent(sweeper, 'a', 'granted', 5000);
      await call(other, 'request', 'b', name);
      const newcomer = await openNewcomer(env, 'newcomer');
      const asked = Date.now();
      await call(newcomer, 'request', 'first', `${name}-fresh`);
      const first = await expectEvent(newcomer, 'first', 'granted', 10_000);
      await call(newcomer, 'request', 'c', name);
      await expectNoEvent(other, 'b', 'granted');
      await expectNoEvent(newcomer, 'c', 'granted');
      await call(sweeper, 'release', 'a');
      await expectEvent(other, 'b', 'granted', 5000);
      await expectNoEvent(newcomer, 'c', 'granted');
      await call(other, 'release', 'b');
      await expectEvent(newcomer, 'c', 'granted', 5000);
      await call(newcomer, 'release', 'c');
      await call(newcomer, 'release', 'first');
      console.log(
        `# ${lower}: sweep with no lock held: ${(swept.done - swept.started).toFixed(0)} ms (${weblocksNames.length} weblocks databases, ` +
          `blocked ${swept.blocked}); a newcomer's first lock ${(first.t - asked).toFixed(0)} ms after it asked`,
      );
      for (const tab of [sweeper, other, newcomer]) {
        const said = (await warnings(tab)).filter((w) => w.startsWith('weblocks:'));
        assert.deepEqual(said, [], `${tab.label} said nothing: no wait`);
      }
      await newcomer.close();
    });
  });

  for (const where of ['another tab', 'the sweeping tab']) {
    test(`${engine.name}: with a lock held in ${where}, the sweep completes once it is released; exclusion holds meanwhile, and no wait is silent`, async () => {
      const name = `sweep-held-${++runs}`;
      await withWindows(env, ['sweeper', 'other'], async ([sweeper, other]) => {
        for (const tab of [sweeper, other]) await keepWarnings(tab);
        const holder = where === 'another tab' ? other : sweeper;
        const bystander = holder === other ? sweeper : other;
        await call(bystander, 'request', 'warm', `${name}-warm`);
        await expectEvent(bystander, 'warm', 'granted');
        await call(bystander, 'release', 'warm');
        await call(holder, 'request', 'h', name);
        await expectEvent(holder, 'h', 'granted');
        await startSweep(sweeper);
        await sleep(1500);
        const waiting = await sweepState(sweeper);
        assert.equal(waiting.done, null, 'the deletion waits for the holder');
        // The holder says what keeps it waiting, once.
        const said = (await warnings(holder)).filter((w) => w.includes('deleting weblocks'));
        assert.equal(said.length, 1, `the holder said it once: ${await warnings(holder)}`);
        assert.ok(said[0].includes(name), `it names the lock: ${said[0]}`);
        // The bystander and a newcomer ask for the held lock and for another: neither is granted the held
        // one; what waits behind the deletion says so after 2 s.
        await call(bystander, 'request', 'x', name);
        const newcomer = await openNewcomer(env, 'newcomer');
        const asked = Date.now();
        await call(newcomer, 'request', 'first', `${name}-fresh`);
        await call(newcomer, 'request', 'x', name);
        await sleep(2600);
        for (const tab of [bystander, newcomer]) {
          const events = await call(tab, 'events', 'x');
          assert.equal(at(events, 'granted'), undefined, `${tab.label} was granted the held lock`);
        }
        const newcomerSaid = (await warnings(newcomer)).filter((w) => w.startsWith('weblocks:'));
        assert.equal(newcomerSaid.length, 1, `the newcomer said why it waits: ${newcomerSaid}`);
        const bystanderSaid = (await warnings(bystander)).filter((w) => w.startsWith('weblocks:'));
        assert.equal(bystanderSaid.length, 1, `the bystander said why it waits: ${bystanderSaid}`);
        // The holder's lock works as ever; it releases, and the sweep completes.
        const holderEvents = await call(holder, 'events', 'h');
        assert.equal(at(holderEvents, 'rejected'), undefined, 'the holder kept its lock');
        const released = Date.now();
        await call(holder, 'release', 'h');
        const swept = await untilSwept(sweeper, 15_000);
        assert.equal(swept.error, null, swept.error);
        assert.notEqual(swept.done, null, `the sweep completed after the release (blocked ${swept.blocked} times; waiting for ${swept.pending})`);
        const first = await expectEvent(newcomer, 'first', 'granted', 10_000);
        const winner = await Promise.race(
          [bystander, newcomer].map((tab) => expectEvent(tab, 'x', 'granted', 10_000).then((e) => ({ tab, e }))),
        );
        const loser = winner.tab === bystander ? newcomer : bystander;
        await expectNoEvent(loser, 'x', 'granted');
        await call(winner.tab, 'release', 'x');
        await expectEvent(loser, 'x', 'granted', 5000);
        await call(loser, 'release', 'x');
        await call(newcomer, 'release', 'first');
        console.log(
          `# ${lower}: a lock held in ${where}: the sweep completed ${(swept.done - released).toFixed(0)} ms after the release ` +
            `(${(swept.done - swept.started).toFixed(0)} ms in all, blocked ${swept.blocked}); the newcomer's first lock ` +
            `${(first.t - asked).toFixed(0)} ms after it asked, ${(first.t - released).toFixed(0)} ms after the release`,
        );
        await newcomer.close();
      });
    });
  }

  test(`${engine.name}: close() resolves once this context holds nothing and has closed its databases; a sweep after it completes, and requests after it work`, async () => {
    const name = `sweep-close-${++runs}`;
    await withWindows(env, ['page'], async ([page]) => {
      await keepWarnings(page);
      await call(page, 'request', 'h', name);
      await expectEvent(page, 'h', 'granted');
      await page.evaluate(() => {
        window.closing = { done: null };
        import('/js/index.js').then(({ close }) => close()).then(() => {
          window.closing.done = performance.timeOrigin + performance.now();
        });
      });
      await sleep(500);
      assert.equal((await page.evaluate(() => window.closing)).done, null, 'close() waits for the held lock');
      const released = Date.now();
      await call(page, 'release', 'h');
      for (let k = 0; k < 100 && (await page.evaluate(() => window.closing)).done === null; k++) await sleep(50);
      const closed = (await page.evaluate(() => window.closing)).done;
      assert.notEqual(closed, null, 'close() resolved after the release');
      await startSweep(page);
      const swept = await untilSwept(page, 15_000);
      assert.notEqual(swept.done, null, `the sweep after close() completed (blocked ${swept.blocked}, waiting for ${swept.pending}; warnings ${await page.evaluate(() => window.warnings)})`);
      await call(page, 'request', 'again', name);
      const again = await expectEvent(page, 'again', 'granted', 10_000);
      await call(page, 'release', 'again');
      console.log(
        `# ${lower}: close() resolved ${(closed - released).toFixed(0)} ms after the release; the sweep after it took ` +
          `${(swept.done - swept.started).toFixed(0)} ms (blocked ${swept.blocked}); a request after it granted in ${(again.t - swept.done).toFixed(0)} ms`,
      );
    });
  });
});
