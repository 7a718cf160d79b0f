// Scenario sizes and time bounds: the full bench (docs/BENCH.md's sizes) and the smoke run (tiny sizes, every
// scenario once, for tests/e2e/package/bench_smoke.test.mjs).

export const fullSizes = {
  repeat: 3, // each scenario, variants interleaved; the table shows medians
  loopBudgetMs: 30_000, // scenarios 1, 2, 5 stop their loop after this (reported as incomplete)
  uncontended: 5_000,
  ifAvailable: 5_000,
  drain: 10_000,
  drainNames: 1_000,
  growth: [1_000, 100_000],
  fanOut: 1_000,
  queryHeld: 1_000,
  queryPending: 1_000,
  queryWarmup: 50,
  queryIterations: 200,
  loads: 10,
  idleMs: 10_000,
  burst: 200,
  turns: 200,
  pendingVisibleMs: 2_000,
  contentionTabs: [4, 8],
  contentionStartMs: 500, // the tabs start together this long after the harness asks them
  contentionMs: 3_000,
  floorMs: 1_500, // each transport's token ring after a contention run (scenario 7's reference rows)
  settleMs: 300,
  recoveryTimeoutMs: 5_000,
  busyProcesses: 3, // the loaded recovery rows (scenario 8): processes spinning beside the browser
  loadedRepeat: 10, // and their runs per variant, for a p95 that is not just the slowest of three
  timeoutMs: { default: 60_000, 'drain-1name-100000': 240_000, idle: 90_000, load: 120_000 },
};

export const smokeSizes = {
  repeat: 1,
  loopBudgetMs: 5_000,
  uncontended: 30,
  ifAvailable: 30,
  drain: 50,
  drainNames: 5,
  growth: [20, 200],
  // Each timed stretch must span several ticks of Chromium's 100 µs clock, or it may read 0 and its rate
  // Infinity (no number: the smoke test fails). 20 shared grants and 3 queries took 0.1-0.2 ms.
  fanOut: 200,
  queryHeld: 10,
  queryPending: 10,
  queryWarmup: 1,
  queryIterations: 30,
  loads: 1,
  idleMs: 1_000,
  burst: 20,
  turns: 20,
  pendingVisibleMs: 300,
  contentionTabs: [2, 3], // fewer tabs than the full 4 and 8: opening tabs dominates the smoke run's time
  contentionStartMs: 200,
  contentionMs: 300,
  floorMs: 200,
  settleMs: 100,
  recoveryTimeoutMs: 3_000,
  busyProcesses: 1,
  loadedRepeat: 1,
  timeoutMs: { default: 20_000 },
};
