// Where the classic script's start-up goes (the bench's scenario 9), and two builds of it side by side, in
// one run: the load of bench/pages/startup.html with no library, with dist/weblocks.polyfill.js, and with
// the classic script given by --compare (another build, e.g. a clean clone's dist/weblocks.polyfill.js), alternated load by load with the
// bench's storage floor (bench/pages/storage_floor.html), all on the plain-http origin. Prints, per build,
// medians over the loads: the script's own load (its "usable" less the bare page's), its wasm compiled, the
// first grant, and weblocks' own start-up: the first grant less the storage floor less the script's own
// load (the "ms of weblocks' own start-up" row of `npm run bench`).
//
//   node bench/startup_anatomy.mjs [--browsers=chromium,firefox,webkit] [--loads=15] [--compare=FILE] [--out=FILE.json]
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot, startServer } from '../tests/e2e/server.mjs';
import { drivers } from './lib/bench.mjs';
import { plainHttpHost } from './lib/variants.mjs';
import { withTimeout } from './lib/tabs.mjs';

function option(name, fallback) {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`));
  return arg === undefined ? fallback : arg.slice(name.length + 3);
}
const browsers = option('browsers', 'chromium').split(',');
const loads = Number(option('loads', 15));
const compare = option('compare', null);
const out = option('out', null);

const median = (xs) => {
  const sorted = xs.filter(Number.isFinite).sort((a, b) => a - b);
  return sorted.length === 0 ? null : sorted.length % 2 ? sorted[sorted.length >> 1] : (sorted[sorted.length / 2 - 1] + sorted[sorted.length / 2]) / 2;
};

const builds = [{ id: 'this tree', script: '/dist/weblocks.polyfill.js' }];
const routes = {};
if (compare !== null) {
  // The server serves the tree only: the other build is copied into it (bench-results/ is git-ignored).
  fs.mkdirSync(path.join(repoRoot, 'bench-results'), { recursive: true });
  fs.copyFileSync(compare, path.join(repoRoot, 'bench-results', 'compare.polyfill.js'));
  routes['/compare/weblocks.polyfill.js'] = 'bench-results/compare.polyfill.js';
  builds.push({ id: `--compare ${compare}`, script: '/compare/weblocks.polyfill.js' });
}
const server = await startServer({ routes });
const page = (query) => `http://${plainHttpHost}:${server.port}/bench/pages/${query}`;

async function once(browser, url, evaluate) {
  const tab = await withTimeout(browser.newTab(url), 30_000, `open ${url}`);
  try {
    return await withTimeout(tab.evaluate(evaluate), 30_000, `load ${url}`);
  } finally {
    await tab.close();
  }
}

const results = {};
try {
  for (const name of browsers) {
    const browser = await (await drivers[name]()).launch();
    try {
      const samples = { bare: [], floor: [], ...Object.fromEntries(builds.map((b) => [b.id, []])) };
      for (let i = 0; i < loads; i++) {
        samples.bare.push(await once(browser, page('startup.html'), () => self.started));
        samples.floor.push(await once(browser, page('storage_floor.html'), () => self.floor.ready));
        for (const build of i % 2 ? [...builds].reverse() : builds) {
          samples[build.id].push(await once(browser, page(`startup.html?script=${encodeURIComponent(build.script)}`), () => self.started));
        }
      }
      const bareUsable = median(samples.bare.map((m) => m.usable));
      const floor = median(samples.floor.map((m) => m.firstGrantMs));
      const rows = builds.map(({ id }) => {
        const marks = samples[id];
        const usable = median(marks.map((m) => m.usable));
        const firstGrant = median(marks.map((m) => m.firstGrant));
        return {
          build: id,
          scriptLoadMs: usable - bareUsable,
          usableMs: usable,
          compiledMs: median(marks.map((m) => m.compiled)),
          firstGrantMs: firstGrant,
          ownStartupMs: firstGrant - floor - (usable - bareUsable),
          // The same per load, against the floor's and the bare page's medians: its spread.
          ownStartupPerLoad: marks.map((m) => m.firstGrant - floor - (m.usable - bareUsable)),
        };
      });
      results[name] = { bareUsableMs: bareUsable, storageFloorMs: floor, rows, samples };
      console.log(`\n${name}: ${loads} loads each; bare page usable at ${bareUsable.toFixed(1)} ms, storage floor ${floor.toFixed(1)} ms (medians)`);
      console.log('| build | script load | usable | wasm compiled | first grant | own start-up |');
      console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
      for (const r of rows) {
        const ms = (x) => (x === null ? '–' : x.toFixed(1));
        console.log(`| ${r.build} | ${ms(r.scriptLoadMs)} | ${ms(r.usableMs)} | ${ms(r.compiledMs)} | ${ms(r.firstGrantMs)} | ${ms(r.ownStartupMs)} |`);
      }
    } finally {
      await browser.close();
    }
  }
} finally {
  await server.close();
}
if (out !== null) fs.writeFileSync(out, JSON.stringify(results, null, 2));
