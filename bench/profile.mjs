// CPU profile of one bench scenario in one variant (Chromium's profiler over CDP), to find where the
// time goes when a target is missed. Prints the functions with the most self time and writes the
// .cpuprofile (open it in Chromium's DevTools, Performance panel) to bench-results/.
//
//   node bench/profile.mjs --scenario=fanout --variant=ponyfill [--args='{"n":1000}'] [--interval=50]
//   node bench/profile.mjs --scenario=contention --tabs=4 --variant=polyfill   (scenario 7: profiles
//     the first of the contending tabs)
//   node bench/profile.mjs --scenario=pingpong --turns=3000 --variant=ponyfill   (two tabs pass one lock
//     back and forth, as scenario 6 without its referee: profiles the first tab)
//
// The ponyfill runs the unminified js/ and pkg/ glue, so its JS frames have names; wasm frames are
// `wasm-function[N]` (the release wasm has no name section).
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot, startServer } from '../tests/e2e/server.mjs';
import { launch } from './lib/chromium.mjs';
import { pingPong } from './lib/ping_pong.mjs';
import { openReady } from './lib/tabs.mjs';
import { variants } from './lib/variants.mjs';
import { fullSizes } from './lib/sizes.mjs';

function option(name, fallback) {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`));
  return arg === undefined ? fallback : arg.slice(name.length + 3);
}

/** The in-page scenario and its full-size arguments, by bench key. */
const inPageScenarios = {
  uncontended: ['uncontended', { n: fullSizes.uncontended, budgetMs: 30_000 }],
  ifavailable: ['ifAvailableMisses', { n: fullSizes.ifAvailable, budgetMs: 30_000 }],
  'drain-1name': ['drain', { n: fullSizes.drain, names: 1, measureMemory: false }],
  'drain-many': ['drain', { n: fullSizes.drain, names: fullSizes.drainNames, measureMemory: false }],
  fanout: ['sharedFanOut', { n: fullSizes.fanOut }],
  query: ['query', { held: fullSizes.queryHeld, pending: fullSizes.queryPending, warmup: fullSizes.queryWarmup, iterations: fullSizes.queryIterations, budgetMs: 30_000 }],
};

/** Scenario 7 for `tabs` tabs of the variant, for 2 s: profiles the first tab while all contend. */
function contention(tabCount) {
  return async (ctx, variant, first) => {
    const others = await Promise.all(Array.from({ length: tabCount - 1 }, () => openReady(ctx, variant)));
    const tabs = [first, ...others];
    const id = Math.random().toString(36).slice(2, 10);
    const startEpoch = (await first.evaluate(() => bench.cross.epochNow())) + 500;
    const args = { name: `bench-contend-${id}`, refereeName: `referee-${id}`, startEpoch, endEpoch: startEpoch + 2_000 };
    const runs = await Promise.all(tabs.map((tab, i) => tab.evaluate((a) => bench.cross.contend(a), { ...args, tab: i })));
    await Promise.all(others.map((tab) => tab.close()));
    return { perTab: runs.map((r) => r.ops) };
  };
}

/** Two tabs pass one lock back and forth (each callback requests the next turn), for `turns` turns each:
 *  profiles the first tab, where half the messages are its own (their echo) and half the other's. */
function pingPongScenario(turns) {
  return async (ctx, variant, first) => {
    const other = await openReady(ctx, variant);
    const name = `bench-pingpong-${Math.random().toString(36).slice(2, 10)}`;
    const logs = await Promise.all([first, other].map((tab) => tab.evaluate(pingPong, { name, turns })));
    await other.close();
    return { turns: logs.map((log) => log.filter(([kind]) => kind === 'start').length) };
  };
}

const key = option('scenario', 'fanout');
const variant = variants.find((v) => v.id === option('variant', 'ponyfill'));
if (key === 'contention') inPageScenarios.contention = [contention(Number(option('tabs', 4))), {}];
if (key === 'pingpong') inPageScenarios.pingpong = [pingPongScenario(Number(option('turns', 3000))), {}];
const [scenario, defaults] = inPageScenarios[key] ?? [];
if (!scenario || !variant) {
  console.error(`usage: --scenario=${Object.keys(inPageScenarios).join('|')} --variant=${variants.map((v) => v.id).join('|')}`);
  process.exit(2);
}
const args = { ...defaults, ...JSON.parse(option('args', '{}')) };

const server = await startServer();
const browser = await launch();
try {
  const ctx = { browser, port: server.port };
  const tab = await openReady(ctx, variant);
  const cdp = await tab.cdp();
  await cdp.send('Profiler.enable');
  await cdp.send('Profiler.setSamplingInterval', { interval: Number(option('interval', 50)) });
  await cdp.send('Profiler.start');
  const result =
    typeof scenario === 'function'
      ? await scenario(ctx, variant, tab)
      : await tab.evaluate(([s, a]) => bench.scenarios[s](a), [scenario, args]);
  const { profile } = await cdp.send('Profiler.stop');
  console.log(`${key} (${variant.id}):`, JSON.stringify(result));

  // Self time per function: samples landing in each node, times the sampling intervals.
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfMs = new Map();
  for (let i = 0; i < profile.samples.length; i++) {
    const node = byId.get(profile.samples[i]);
    const { functionName, url, lineNumber } = node.callFrame;
    const where = `${functionName || '(anonymous)'} ${url ? `${url.replace(/^https?:\/\/[^/]+/, '')}:${lineNumber + 1}` : ''}`.trim();
    selfMs.set(where, (selfMs.get(where) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000);
  }
  const total = [...selfMs.values()].reduce((a, b) => a + b, 0);
  console.log(`\nself time, top 20 of ${total.toFixed(0)} ms sampled:`);
  for (const [where, ms] of [...selfMs].sort((a, b) => b[1] - a[1]).slice(0, 20)) {
    console.log(`${ms.toFixed(1).padStart(9)} ms ${((100 * ms) / total).toFixed(1).padStart(5)}%  ${where}`);
  }
  const out = path.join(repoRoot, 'bench-results', `profile-${key}-${variant.id}-${Date.now()}.cpuprofile`);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, JSON.stringify(profile));
  console.log(`\nprofile: ${path.relative(process.cwd(), out)}`);
  await tab.close();
} finally {
  await browser.close();
  await server.close();
}
