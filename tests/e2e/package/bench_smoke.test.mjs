// Smoke run of the benchmark suite (bench/, `npm run bench`): every scenario at tiny sizes in headless
// Chromium, for native navigator.locks, the weblocks polyfill and the weblocks ponyfill. It asserts only
// that each scenario ran and produced numbers, plus the safety checks (nothing granted twice, zero
// idle activity, ...), so the bench cannot rot. Never pass/fail on speed.
//
// The cross-tab checks (scenarios 6, 7, 8) are also run on a per-tab control (a lock manager confined
// to its tab), which they must catch, so they are known not to be blind.
//
// Run: npm run build && node --test tests/e2e/package/bench_smoke.test.mjs   (or: npm run bench:smoke)
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../server.mjs';
import { runBench } from '../../../bench/lib/bench.mjs';
import { markdownTable } from '../../../bench/lib/report.mjs';
import { variants } from '../../../bench/lib/variants.mjs';

const expectedScenarios = ['1', '2', '3', '4', '5', '6', '7', '8', '9', '10'];
const controlScenarios = ['contention-2', 'recovery-close'];

let result;

before(
  async () => {
    for (const file of ['dist/weblocks.polyfill.js', 'pkg/weblocks_bg.wasm']) {
      assert.ok(fs.existsSync(path.join(repoRoot, file)), `${file} is missing: run \`npm run build\` first`);
    }
    const lines = [];
    const results = await runBench({ smoke: true, log: (line) => lines.push(line), control: controlScenarios });
    result = results.browsers.chromium;
    result.log = lines;
    console.log(markdownTable(result.summaries, variants));
  },
  { timeout: 150_000 },
);

test('every scenario ran', () => {
  const numbers = new Set(result.summaries.map((s) => s.number));
  assert.deepEqual(expectedScenarios.filter((n) => !numbers.has(n)), []);
  assert.ok(result.summaries.some((s) => s.key === 'growth'), 'the drain growth row is derived');
});

/** Every metric of `summary` has a finite number for `variantId`; every safety check is 0. */
function assertNumbersAndSafety(summary, variantId) {
  for (const metric of summary.metrics) {
    if (metric.notFor.includes(variantId)) continue;
    const cell = metric.cells[variantId];
    // At smoke sizes (50 requests), a garbage collection can free more than the requests take.
    const gcNoise = /GC noise/.test(cell.error ?? '');
    assert.ok(Number.isFinite(cell.value) || gcNoise, `${summary.key} ${variantId}: "${metric.label}" has no number (${cell.error ?? 'no run'})`);
  }
  for (const check of summary.checks) {
    assert.equal(check.cells[variantId].worst, 0, `${summary.key} ${variantId}: safety check "${check.label}"`);
  }
}

for (const variant of variants) {
  test(`${variant.id}: the single-context scenarios (1-5, 9, 10) produce numbers and pass their safety checks`, () => {
    for (const summary of result.summaries.filter((s) => !s.crossTab)) assertNumbersAndSafety(summary, variant.id);
  });

  test(`${variant.id}: the cross-tab scenarios (6-8) ran without error`, () => {
    const runs = result.runs;
    for (const summary of result.summaries.filter((s) => s.crossTab)) {
      for (const run of runs[summary.key][variant.id]) assert.equal(run.error, undefined, `${summary.key} ${variant.id}`);
    }
  });

  test(`${variant.id}: the cross-tab scenarios (6-8) produce numbers and pass their safety checks`, () => {
    for (const summary of result.summaries.filter((s) => s.crossTab)) assertNumbersAndSafety(summary, variant.id);
  });
}

test('idle instrumentation sees the library: weblocks posts task messages during a burst, native none', () => {
  const idle = result.runs.idle;
  assert.equal(idle.native[0].duringBurst.messagesPosted, 0);
  for (const id of ['polyfill', 'ponyfill']) assert.ok(idle[id][0].duringBurst.messagesPosted > 0, id);
});

test('the cross-tab checks catch a lock confined to its tab (the per-tab control)', () => {
  const contention = result.controlRuns['contention-2'];
  assert.equal(contention.error, undefined);
  assert.ok(contention.referee.overlaps > 0, 'overlapping critical sections seen');
  assert.ok(contention.referee.lostUpdates > 0, 'lost updates seen');
  const recovery = result.controlRuns['recovery-close'];
  assert.equal(recovery.error, undefined);
  assert.equal(recovery.grantedWhileHeld, true, 'the waiter was granted while the holder lived');
});

test('the markdown table has a row per metric and check, with ratios to native', () => {
  const table = markdownTable(result.summaries, variants);
  const rows = table.split('\n').length - 2;
  const expected = result.summaries.reduce((n, s) => n + s.metrics.length + s.checks.length, 0);
  assert.equal(rows, expected);
  assert.match(table, /\(\d+(\.\d+)?×\)/);
});
