// Nothing left behind, in Chromium: windows that end without a `pagehide` (their renderer crashed, CDP
// Page.crash) leave their liveness databases behind, and the next window of the origin collects them as
// it looks around (src/protocol/evidence.rs: every database a context makes is listed in the register
// before it exists; a new context reads the register and watches every entry). So the count of
// `weblocks-*` databases a newcomer sees does not grow with the number of windows that crashed. On a
// plain-http origin (no native API). Needs the build (`npm run build`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { call, crash, openTab, sleep, withOrigin as withOriginOf } from '../fixtures/xctx_harness.mjs';
import { shareServerAndChromium } from '../browser.mjs';

const shared = shareServerAndChromium();

/** The names of the origin's weblocks databases, as `tab` lists them. */
const weblocksDatabases = (tab) =>
  tab.evaluate(async () =>
    (await indexedDB.databases())
      .map((d) => d.name)
      .filter((name) => name.startsWith('weblocks-'))
      .sort(),
  );

/**
 * In a fresh origin: a window that stays, `crashes` windows that each load weblocks (a window opens its
 * liveness database as it loads), half of them holding a lock, then crash; then a newcomer. Returns the
 * databases the newcomer sees once nothing changes for a second (at most 10 s).
 */
async function afterCrashes(crashes) {
  return withOriginOf(shared.browser, async (context) => {
    const stays = await openTab(context, shared.server, 'stays');
    await call(stays, 'request', 's', 'held-by-stays');
    for (let k = 0; k < crashes; k++) {
      const doomed = await openTab(context, shared.server, `doomed${k}`);
      if (k % 2 === 0) await call(doomed, 'request', 'd', `held-${k}`);
      await sleep(100);
      await crash(doomed);
    }
    const newcomer = await openTab(context, shared.server, 'newcomer');
    await call(newcomer, 'request', 'n', 'held-by-stays', { ifAvailable: true });
    let seen = await weblocksDatabases(newcomer);
    for (let waited = 0, stable = 0; waited < 10_000 && stable < 1000; waited += 250) {
      await sleep(250);
      const now = await weblocksDatabases(newcomer);
      stable = JSON.stringify(now) === JSON.stringify(seen) ? stable + 250 : 0;
      seen = now;
    }
    return seen;
  });
}

test("Chromium: windows that crash leave nothing the next window does not collect: the count of weblocks' databases does not grow with them", async () => {
  const one = await afterCrashes(1);
  const six = await afterCrashes(6);
  console.log(`# after 1 crash: ${one.length} databases (${one.join(', ')}); after 6: ${six.length}`);
  assert.equal(six.length, one.length, `after 6 crashes: ${six.join(', ')}; after 1: ${one.join(', ')}`);
  // The transport's record, the register, and the two live windows' own: nothing of a crashed one.
  const liveness = six.filter((name) => /^weblocks-alive:.+:\d+$/.test(name));
  assert.equal(liveness.length, 2, `the live windows' databases only: ${six.join(', ')}`);
});
