// Scenarios measured in one tab (docs/BENCH.md's numbering): 1 uncontended, 2 ifAvailable misses, 3 queue
// drain, 4 shared fan-out, 5 query, 9 load, 10 idle. Each `run` opens a fresh tab of the variant, calls
// the in-page half (bench/pages/scenarios.js) and returns its numbers; the caller bounds it in time.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { repoRoot } from '../../tests/e2e/server.mjs';
import { CLASSIC_BUDGET_GZIP } from '../../scripts/size/sizes.mjs';
import { openReady, sleep, withTab, withTabs, withTimeout } from './tabs.mjs';
import { urlFor } from './variants.mjs';

/** Run in-page scenario `scenario` with `args` in a fresh tab. */
function inPage(scenario, args) {
  return (ctx, variant, timeoutMs) =>
    withTab(ctx, variant, timeoutMs, (tab) => tab.evaluate(([s, a]) => bench.scenarios[s](a), [scenario, args]));
}

export function singleContextScenarios(sizes) {
  const drains = [
    { key: 'drain-1name', title: `${sizes.drain.toLocaleString('en')} requests queued on one name`, n: sizes.drain, names: 1 },
    {
      key: 'drain-many',
      title: `${sizes.drain.toLocaleString('en')} requests over ${sizes.drainNames.toLocaleString('en')} names`,
      n: sizes.drain,
      names: sizes.drainNames,
    },
    ...sizes.growth.map((n) => ({ key: `drain-1name-${n}`, title: `${n.toLocaleString('en')} requests on one name`, n, names: 1 })),
  ];
  return [
    {
      number: '1',
      key: 'uncontended',
      title: `uncontended request/release, sequential (N = ${sizes.uncontended.toLocaleString('en')})`,
      run: inPage('uncontended', { n: sizes.uncontended, budgetMs: sizes.loopBudgetMs }),
      metrics: [{ label: 'cycles/s', better: 'higher', pick: (r) => r.opsPerSec, target: { ratio: 5 } }],
      checks: [{ label: 'loop cut short by the time bound', pick: (r) => (r.complete ? 0 : 1) }],
    },
    {
      number: '2',
      key: 'ifavailable',
      title: `ifAvailable misses while held (N = ${sizes.ifAvailable.toLocaleString('en')})`,
      run: inPage('ifAvailableMisses', { n: sizes.ifAvailable, budgetMs: sizes.loopBudgetMs }),
      metrics: [{ label: 'misses/s', better: 'higher', pick: (r) => r.opsPerSec, target: { ratio: 5 } }],
      checks: [{ label: 'granted although held', pick: (r) => r.wronglyGranted }],
    },
    ...drains.map((d) => ({
      number: '3',
      key: d.key,
      title: `queue drain: ${d.title}`,
      run: inPage('drain', { n: d.n, names: d.names, measureMemory: true }),
      metrics: [
        { label: 'requests/s', better: 'higher', pick: (r) => r.requestsPerSec, target: { ratio: 5 } },
        { label: 'µs/request', better: 'lower', pick: (r) => r.usPerRequest },
        ...(d.names === 1
          ? [
              {
                label: 'heap bytes/pending request',
                better: 'lower',
                pick: (r) => r.memory?.bytesPerRequest,
                invalid: (r) => (r.memory?.bytesPerRequest < 0 ? 'heap shrank (GC noise)' : null),
                digits: 0,
              },
            ]
          : []),
      ],
    })),
    {
      number: '4',
      key: 'fanout',
      title: `shared fan-out: ${sizes.fanOut.toLocaleString('en')} shared holders, then an exclusive waiter`,
      run: inPage('sharedFanOut', { n: sizes.fanOut }),
      metrics: [
        { label: 'fan-outs/s (all shared granted, released, exclusive granted)', better: 'higher', pick: (r) => 1000 / r.totalMs, target: { ratio: 5 } },
        { label: 'shared grants/s', better: 'higher', pick: (r) => r.sharedGrantsPerSec },
        { label: 'ms from release to exclusive grant', better: 'lower', pick: (r) => r.releaseToExclusiveMs },
      ],
    },
    {
      number: '5',
      key: 'query',
      title: `query() with ${sizes.queryHeld.toLocaleString('en')} held and ${sizes.queryPending.toLocaleString('en')} pending`,
      run: inPage('query', {
        held: sizes.queryHeld,
        pending: sizes.queryPending,
        warmup: sizes.queryWarmup,
        iterations: sizes.queryIterations,
        budgetMs: sizes.loopBudgetMs,
      }),
      metrics: [
        { label: `queries/s after ${sizes.queryWarmup} warm-up queries`, better: 'higher', pick: (r) => r.queriesPerSec, target: { ratio: 5 } },
        { label: `queries/s of the first ${sizes.queryWarmup} (cold)`, better: 'higher', pick: (r) => r.coldQueriesPerSec },
      ],
      checks: [
        { label: 'loop cut short by the time bound', pick: (r) => (r.complete ? 0 : 1) },
        {
          label: 'snapshot sizes wrong',
          pick: (r) => (r.seen.held === sizes.queryHeld && r.seen.pending === sizes.queryPending ? 0 : 1),
        },
      ],
    },
  ];
}

/** Raw and gzip -9 bytes of the library files a page loaded (everything but the bench harness). */
function libraryBytes(resources) {
  let raw = 0;
  let gzip = 0;
  const files = [];
  for (const pathname of new Set(resources)) {
    if (pathname.startsWith('/bench/')) continue;
    const data = fs.readFileSync(path.join(repoRoot, pathname));
    raw += data.length;
    gzip += zlib.gzipSync(data, { level: 9 }).length;
    files.push(pathname);
  }
  return { raw, gzip, files };
}

/**
 * One load of bench/pages/storage_floor.html in a fresh tab on `variant`'s origin: the storage and messaging
 * steps a lone weblocks context waits for before its first grant, with no library. Returns { firstGrantMs }.
 */
async function loadStorageFloor(ctx, variant) {
  const timeoutMs = 30_000;
  const tab = await withTimeout(ctx.browser.newTab(urlFor(variant, ctx.port, 'bench/pages/storage_floor.html')), timeoutMs, 'storage floor: open');
  try {
    const steps = await withTimeout(tab.evaluate(() => self.floor.ready), timeoutMs, 'storage floor: steps');
    if (steps.secureContext !== variant.secure) throw new Error(`storage floor page: secure context ${steps.secureContext}, expected ${variant.secure}`);
    return steps;
  } finally {
    await tab.close();
  }
}

export function loadScenario(sizes) {
  return {
    number: '9',
    key: 'load',
    title: `load: navigation to first usable navigator.locks and to first grant (median of ${sizes.loads} loads, alone, then beside an idle tab)`,
    async run(ctx, variant) {
      const loadAll = async () => {
        const loads = [];
        for (let i = 0; i < sizes.loads; i++) {
          const tab = await openReady(ctx, variant);
          loads.push(tab.ready);
          await tab.close();
        }
        return loads;
      };
      const loads = await loadAll();
      // The same beside a tab of the origin that took its first lock (openReady) and then idles.
      const idle = await openReady(ctx, variant);
      let besideLoads;
      try {
        besideLoads = await loadAll();
      } finally {
        await idle.close();
      }
      // The floor on the variant's origin (bench/pages/storage_floor.html): its storage steps, bare.
      const floors = [];
      for (let i = 0; i < sizes.loads; i++) floors.push(await loadStorageFloor(ctx, variant));
      const median = (of, key) => medianOf(of.map((l) => l[key]));
      return {
        usableMs: median(loads, 'usableMs'),
        firstGrantMs: median(loads, 'firstGrantMs'),
        besideFirstGrantMs: median(besideLoads, 'firstGrantMs'),
        storageFloorMs: median(floors, 'firstGrantMs'),
        floors,
        bytes: libraryBytes(loads[0].resources),
        loads,
        besideLoads,
      };
    },
    metrics: [
      { label: 'ms to usable API', better: 'lower', pick: (r) => r.usableMs },
      { label: 'ms to first grant', better: 'lower', pick: (r) => r.firstGrantMs },
      { label: 'ms to first grant, beside an idle tab of the origin', better: 'lower', pick: (r) => r.besideFirstGrantMs },
      {
        label: 'ms to the storage floor: the storage steps of a lone context, bare (no library)',
        better: 'lower',
        pick: (r) => r.storageFloorMs,
        noRatio: true,
      },
      {
        // What no design that grants on the storage's evidence, shipped as one script, avoids is left out:
        // the floor, and the script's own load (its "usable" less native's, which loads no script).
        label: "ms of weblocks' own start-up: first grant − storage floor − the script's own load (usable − native's usable)",
        better: 'lower',
        pick: (r) => r.firstGrantMs - r.storageFloorMs - r.usableMs,
        plusNative: (r) => r.usableMs,
        notFor: ['native'],
        noRatio: true,
        target: { atMost: 10 },
      },
      { label: 'library bytes loaded (raw)', better: 'lower', pick: (r) => r.bytes.raw, digits: 0, noRatio: true },
      {
        label: 'library bytes loaded (gzip -9)',
        better: 'lower',
        pick: (r) => r.bytes.gzip,
        digits: 0,
        noRatio: true,
        target: { atMost: CLASSIC_BUDGET_GZIP, unit: ' B (classic build)', variants: ['polyfill'] }, // the budget the test command enforces
      },
    ],
  };
}

const activityKinds = ['timersScheduled', 'timersFired', 'messagesPosted', 'storageWrites'];
const activityTotal = (counts) => activityKinds.reduce((sum, kind) => sum + counts[kind], 0);

export function idleScenario(sizes) {
  return {
    number: '10',
    key: 'idle',
    title: `idle: timers, messages, storage writes over ${sizes.idleMs / 1000} s with nothing held or pending`,
    async run(ctx, variant, timeoutMs) {
      // Always a fresh tab, instrumented: "after load" means right after the page loaded.
      return withTabs(ctx, variant, 1, timeoutMs, async ([tab]) => {
        const quietFor = async () => {
          await tab.evaluate(() => bench.resetCounts());
          await sleep(sizes.idleMs);
          return tab.evaluate(() => bench.counts());
        };
        const instrumented = await tab.evaluate(() => bench.instrumented);
        const afterLoad = await quietFor();
        await tab.evaluate(() => bench.resetCounts());
        const burstResult = await tab.evaluate((n) => bench.scenarios.burst({ n }), sizes.burst);
        const duringBurst = await tab.evaluate(() => bench.counts());
        const afterBurst = await quietFor();
        return { instrumented, afterLoad, burstResult, duringBurst, afterBurst };
      }, { query: '?instrument' });
    },
    metrics: [
      { label: 'activity after load (timers + messages + writes)', better: 'lower', pick: (r) => activityTotal(r.afterLoad), digits: 0, noRatio: true },
      { label: 'activity after a burst', better: 'lower', pick: (r) => activityTotal(r.afterBurst), digits: 0, noRatio: true },
      { label: 'messages posted during the burst (instrumentation works)', better: 'lower', pick: (r) => r.duringBurst.messagesPosted, digits: 0, noRatio: true },
    ],
    checks: [
      { label: 'page not instrumented', pick: (r) => (r.instrumented ? 0 : 1) },
      { label: 'idle activity after load', pick: (r) => activityTotal(r.afterLoad) },
      { label: 'idle activity after a burst', pick: (r) => activityTotal(r.afterBurst) },
      { label: 'locks left after the burst', pick: (r) => r.burstResult.left },
    ],
  };
}

export function medianOf(values) {
  const sorted = values.filter((v) => typeof v === 'number' && Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}
