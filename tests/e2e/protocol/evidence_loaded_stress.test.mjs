// A loaded machine takes no lock from a live holder, in Chromium, Firefox and WebKit: 4 windows of one origin
// run 100 read-modify-write cycles each on one IndexedDB counter under one exclusive lock (with an `await`
// inside, and an "inside" marker checked on entry and exit: fixtures/xctx_agent.js `cycles()`), while two
// busy-looping processes keep the machine's cores busy, so that the windows' message handlers run late.
// 0 overlaps and 0 lost updates are required. Needs the build (`npm run build`).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { call, expectEvent, runCycles } from '../fixtures/xctx_harness.mjs';
import { eachEngine, withWindows } from '../fixtures/evidence_engines.mjs';

const WINDOWS = 4;
const CYCLES = 100;

let loaders = [];

before(() => {
  loaders = [0, 1].map(() => spawn('sh', ['-c', 'while :; do :; done'], { stdio: 'ignore' }));
});

after(() => {
  for (const loader of loaders) loader.kill('SIGKILL');
});

let runs = 0;

eachEngine((engine, env) => {
  test(`${engine.name}: ${WINDOWS} windows x ${CYCLES} read-modify-write cycles on one name beside two busy-looping processes: 0 overlaps, 0 lost updates`, async () => {
    const name = `loaded-stress-${++runs}`;
    const labels = Array.from({ length: WINDOWS }, (_, i) => `t${i}`);
    await withWindows(env, labels, async (tabs) => {
      // Warm: each window has taken part in the protocol before the cycles start.
      for (const tab of tabs) {
        await call(tab, 'request', 'warm', `${name}-warm`);
        await expectEvent(tab, 'warm', 'granted');
        await call(tab, 'release', 'warm');
      }
      assert.ok(loaders.every((l) => l.exitCode === null && l.signalCode === null), 'the loaders run');
      const total = WINDOWS * CYCLES;
      const { overlaps, counter, elapsed } = await runCycles(tabs, { name, count: CYCLES, db: `loaded-${name}` });
      console.log(`# ${engine.name.toLowerCase()} loaded stress: ${total} cycles in ${elapsed} ms, ${overlaps.length} overlaps, ${total - counter} lost updates`);
      assert.deepEqual(overlaps, []);
      assert.equal(counter, total, `${total - counter} lost updates`);
    });
  });
});
