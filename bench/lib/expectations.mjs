// What the bench and its smoke test expect of weblocks today. Cross-tab rows are measured and shown
// either way; this only decides whether their safety failures count as failures of the smoke test.

/**
 * Whether weblocks coordinates across contexts (issue 3: the BroadcastChannel/localStorage edge, in main
 * since e2d02d8). While false, its cross-tab rows (scenarios 6, 7, 8) are labelled as expected to fail
 * and tests/e2e/bench_smoke.test.mjs marks their checks TODO instead of failing.
 */
export const weblocksCoordinatesAcrossTabs = true;
