// The bench itself: serve the repository, launch each browser, run every scenario for every variant
// (native, weblocks polyfill, weblocks ponyfill) with the variants interleaved, and summarise.
// Used by bench/run.mjs (`npm run bench`) and tests/e2e/package/bench_smoke.test.mjs.
import os from 'node:os';
import { execFileSync } from 'node:child_process';
import { repoRoot, startServer } from '../../tests/e2e/server.mjs';
import { perTabControl, variants } from './variants.mjs';
import { fullSizes, smokeSizes } from './sizes.mjs';
import { idleScenario, loadScenario, singleContextScenarios } from './single_context.mjs';
import { crossTabScenarios } from './cross_tab.mjs';
import { summarise, summariseScenario } from './report.mjs';
import { grantReports } from './grant_reports.mjs';
import { BenchTimeout, closeKeptTabs, withTimeout } from './tabs.mjs';

export const drivers = {
  chromium: () => import('./chromium.mjs'),
  firefox: () => import('./firefox.mjs'),
  webkit: () => import('./webkit.mjs'),
};

export function allScenarios(sizes) {
  return [...singleContextScenarios(sizes), ...crossTabScenarios(sizes), loadScenario(sizes), idleScenario(sizes)];
}

/** `only` ("1,3,drain-many"): scenario numbers or keys to run; everything when empty. */
function selected(scenario, only) {
  return only.length === 0 || only.includes(scenario.number) || only.includes(scenario.key);
}

/** Derived row of scenario 3: cost per request at the largest size over the smallest (one name). */
function growthSummary(sizes, runsByKey) {
  const [small, large] = [sizes.growth[0], sizes.growth[sizes.growth.length - 1]];
  const pick = (r) => r.usPerRequest;
  const scenario = {
    number: '3',
    key: 'growth',
    title: `queue drain growth: µs/request at ${large.toLocaleString('en')} ÷ at ${small.toLocaleString('en')} (one name)`,
    metrics: [{ label: 'ratio', better: 'lower', pick: (r) => r.ratio, target: { atMost: 2, unit: '' }, noRatio: true, digits: 2 }],
  };
  const runsByVariant = {};
  for (const variant of variants) {
    const a = summarise(runsByKey[`drain-1name-${small}`]?.[variant.id] ?? [], pick).value;
    const b = summarise(runsByKey[`drain-1name-${large}`]?.[variant.id] ?? [], pick).value;
    runsByVariant[variant.id] = [a && b ? { ratio: b / a } : { error: 'a drain size did not run' }];
  }
  return summariseScenario(scenario, runsByVariant, variants);
}

/**
 * The summaries (table rows) of `runsByKey` ({ [scenario key]: { [variant]: runs } }), for the scenarios
 * that ran, with the growth row of scenario 3 when both of its sizes ran. Also used to re-read saved JSON.
 */
export function summariseRuns(sizes, runsByKey) {
  const summaries = allScenarios(sizes)
    .filter((s) => runsByKey[s.key])
    .map((s) => summariseScenario(s, runsByKey[s.key], variants));
  if (runsByKey[`drain-1name-${sizes.growth[0]}`] && runsByKey[`drain-1name-${sizes.growth.at(-1)}`]) {
    const at = summaries.findLastIndex((s) => s.number === '3');
    summaries.splice(at + 1, 0, growthSummary(sizes, runsByKey));
  }
  return summaries;
}

function gitCommit() {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: repoRoot, encoding: 'utf8' }).trim();
  } catch {
    return null;
  }
}

/**
 * Run the bench. Options: `smoke` (tiny sizes), `browsers` (['chromium'], 'firefox'), `only` (scenario
 * numbers or keys), `repeat` (overrides the sizes'), `log` (progress lines), `control` (keys of
 * cross-tab scenarios to run once more on the per-tab control, see variants.mjs).
 * Returns { meta, browsers: { [name]: { version, summaries, runs, controlRuns } } }.
 */
export async function runBench({ smoke = false, browsers = ['chromium'], only = [], repeat, log = () => {}, control = [] } = {}) {
  const sizes = { ...(smoke ? smokeSizes : fullSizes) };
  if (repeat !== undefined) sizes.repeat = repeat;
  const scenarios = allScenarios(sizes).filter((s) => selected(s, only));
  const reports = grantReports();
  const server = await startServer({ handle: reports.handle });
  const results = {
    meta: {
      date: new Date().toISOString(),
      smoke,
      commit: gitCommit(),
      node: process.version,
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model,
      loadAverageAtStart: os.loadavg(),
      sizes,
    },
    browsers: {},
  };
  try {
    for (const browserName of browsers) {
      const driver = await drivers[browserName]();
      const browser = await driver.launch();
      const ctx = { browser, port: server.port, reuseTabs: smoke, reports };
      const runsByKey = {};
      const controlRuns = {};
      try {
        for (const scenario of scenarios) {
          const runsByVariant = Object.fromEntries(variants.map((v) => [v.id, []]));
          runsByKey[scenario.key] = runsByVariant;
          if (scenario.requires && !browser[scenario.requires]) {
            for (const v of variants) runsByVariant[v.id].push({ skipped: `not drivable in ${browserName}` });
            continue;
          }
          if (scenario.crossTab) await closeKeptTabs(ctx); // cross-tab scenarios start with their own tabs only
          const timeoutMs = sizes.timeoutMs[scenario.key] ?? sizes.timeoutMs.default;
          const repeats = scenario.key === 'load' || scenario.key === 'idle' ? 1 : (scenario.repeat ?? sizes.repeat);
          const timedOut = new Set(); // variants not run again after a timeout: the time bound holds overall
          for (let rep = 0; rep < repeats; rep++) {
            for (const variant of variants) {
              if (timedOut.has(variant.id)) continue;
              const started = performance.now();
              let run;
              try {
                run = await withTimeout(scenario.run(ctx, variant, timeoutMs), timeoutMs + 15_000, `${scenario.key} ${variant.id}`);
              } catch (e) {
                run = { error: e.message.split('\n')[0] };
                if (e instanceof BenchTimeout) timedOut.add(variant.id);
              }
              runsByVariant[variant.id].push(run);
              const seconds = ((performance.now() - started) / 1000).toFixed(1);
              log(`${browserName} ${scenario.number} ${scenario.key} ${variant.id} #${rep + 1}: ${run.error ? `ERROR ${run.error}` : 'ok'} (${seconds} s)`);
            }
          }
        }
        await closeKeptTabs(ctx);
        for (const scenario of allScenarios(sizes).filter((s) => s.crossTab && control.includes(s.key))) {
          const timeoutMs = sizes.timeoutMs[scenario.key] ?? sizes.timeoutMs.default;
          let run;
          try {
            run = await withTimeout(scenario.run(ctx, perTabControl, timeoutMs), timeoutMs + 15_000, `${scenario.key} control`);
          } catch (e) {
            run = { error: e.message.split('\n')[0] };
          }
          controlRuns[scenario.key] = run;
          log(`${browserName} ${scenario.number} ${scenario.key} control: ${run.error ? `ERROR ${run.error}` : 'ok'}`);
        }
      } finally {
        await browser.close();
      }
      results.browsers[browserName] = { version: browser.version, summaries: summariseRuns(sizes, runsByKey), runs: runsByKey, controlRuns };
    }
  } finally {
    await server.close();
  }
  results.meta.loadAverageAtEnd = os.loadavg();
  return results;
}
