// Leases in WebKit (Debian's WebKitGTK through bench/lib/webkit.mjs, on the plain-http origin): two windows race
// leases.tryLock on one (type, id), with BroadcastChannel and without it (Safari before 15.4): exactly one
// winner each round. Needs the build.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch as launchWebKit } from '../../../bench/lib/webkit.mjs';
import { makeAgreeAnew } from '../fixtures/xctx_harness.mjs';
import { race } from '../fixtures/leases_race_run.mjs';
import { browserSession } from '../browser_session.mjs';

let server, webkit, plain;
browserSession(launchWebKit, (session) => ({ server, browser: webkit, plain } = session));

let runs = 0;

/** The two ways a WebKit origin coordinates: the log carried by BroadcastChannel, and the log alone. */
const TRANSPORTS = [
  { label: 'with BroadcastChannel', broadcastChannel: 'function' },
  { label: 'without BroadcastChannel', broadcastChannel: 'undefined' },
];

// Forgets the origin's transport record when the contexts to come differ in having BroadcastChannel.
const agreeAnew = makeAgreeAnew(() => webkit.newTab(`${plain.url}tests/e2e/fixtures/xctx_classic_page.html`));

for (const { label, broadcastChannel } of TRANSPORTS) {
  test(`WebKit ${label}: two windows race leases.tryLock on one (type, id) 100 times: exactly one winner each round`, async () => {
    const suffix = broadcastChannel === 'undefined' ? '?broadcastchannel=none' : '';
    const tabs = [];
    try {
      await agreeAnew(broadcastChannel === 'function');
      for (let i = 0; i < 2; i++) {
        const tab = await webkit.newTab(`${plain.url}tests/e2e/fixtures/leases.html${suffix}`);
        assert.equal(await tab.evaluate(() => window.fixtureReady), true);
        tabs.push(tab);
      }
      const rounds = 100;
      const run = ++runs;
      const { ms, wins, doubleWins, noWinner } = await race(tabs, { rounds, makeLeases: '() => weblocks.leases', channel: `race-${run}`, type: `race-${run}` });
      console.log(`# webkit ${label} leases race: ${rounds} rounds in ${ms} ms, wins per window ${wins.join('/')}`);
      assert.deepEqual(doubleWins, []);
      assert.deepEqual(noWinner, []);
      assert.ok(wins.every((w) => w > 0), `wins per window: ${wins}`);
    } finally {
      for (const tab of tabs) await tab.close();
    }
  });
}
