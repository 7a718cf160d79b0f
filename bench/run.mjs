// `npm run bench`: build the release package, then measure native navigator.locks, the weblocks polyfill
// and the weblocks ponyfill side by side in headless Chromium (and Firefox with --firefox, WebKit with
// --webkit), print a markdown table and write the figures to bench-results/ as JSON. See docs/BENCH.md.
//
//   node bench/run.mjs [--smoke] [--no-build] [--firefox | --webkit | --browsers=chromium,firefox,webkit]
//                      [--only=1,3,pingpong-two] [--repeat=N] [--out=FILE]
//   node bench/run.mjs --from=bench-results/FILE.json      (print the table of a saved run again)
//   node bench/run.mjs --baseline=../other-clone/dist/weblocks.polyfill.js   (that build as a 4th column)
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { repoRoot } from '../tests/e2e/server.mjs';
import { runBench, summariseRuns } from './lib/bench.mjs';
import { markdownTable } from './lib/report.mjs';
import { addBaseline, variants } from './lib/variants.mjs';

function option(name) {
  const arg = process.argv.find((a) => a === `--${name}` || a.startsWith(`--${name}=`));
  if (arg === undefined) return undefined;
  return arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : true;
}

const smoke = option('smoke') === true;
let browsers = option('browsers')?.split(',') ?? ['chromium'];
if (option('firefox') === true) browsers = ['chromium', 'firefox'];
if (option('webkit') === true) browsers = ['chromium', 'webkit'];
const only = option('only')?.split(',') ?? [];
const repeat = option('repeat') !== undefined ? Number(option('repeat')) : undefined;

/** The markdown tables of `results` (what runBench returns, or a saved JSON file). */
function printTables(results) {
  for (const [browserName, result] of Object.entries(results.browsers)) {
    const how = results.meta.smoke ? 'smoke sizes' : `median of ${results.meta.sizes.repeat} runs`;
    console.log(`\n## ${browserName} ${result.version}, ${results.meta.date.slice(0, 10)}, commit ${results.meta.commit} (${how})\n`);
    console.log(markdownTable(result.summaries, variants));
  }
  // Every lock a live tab lost (AbortError) in any cross-tab run, of any variant: must be 0.
  for (const [browserName, result] of Object.entries(results.browsers)) {
    const runs = Object.values(result.runs).flatMap((byVariant) => Object.values(byVariant).flat());
    const counted = runs.filter((r) => r.falseEvictions);
    const total = counted.reduce((sum, r) => sum + r.falseEvictions.count, 0);
    const first = counted.find((r) => r.falseEvictions.first)?.falseEvictions.first;
    console.log(`\n${browserName}: false evictions ${total} over ${counted.length} cross-tab runs${first ? ` (first: ${first})` : ''}.`);
  }
  const loads = (l) => l.map((x) => x.toFixed(1)).join(' ');
  console.log(
    `\nRatios are weblocks ÷ native (↑: higher is better, ↓: lower is better). Load average ${loads(results.meta.loadAverageAtStart)} at start, ${loads(results.meta.loadAverageAtEnd)} at end (${results.meta.cpus} CPUs).`,
  );
}

if (typeof option('baseline') === 'string') {
  const dir = path.join(repoRoot, 'bench-results', 'baseline');
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(option('baseline'), path.join(dir, 'weblocks.polyfill.js'));
  addBaseline();
}

if (typeof option('from') === 'string') {
  const saved = JSON.parse(fs.readFileSync(option('from'), 'utf8'));
  if (Object.values(saved.browsers).some((b) => Object.values(b.runs).some((r) => r.baseline))) addBaseline();
  for (const result of Object.values(saved.browsers)) result.summaries = summariseRuns(saved.meta.sizes, result.runs);
  printTables(saved);
  process.exit(0);
}

if (option('no-build') !== true) {
  const build = spawnSync('npm', ['run', 'build'], { cwd: repoRoot, stdio: 'inherit' });
  if (build.status !== 0) {
    console.error('bench: the build failed');
    process.exit(1);
  }
}

const started = performance.now();
const results = await runBench({ smoke, browsers, only, repeat, log: (line) => console.error(`bench: ${line}`) });
const minutes = ((performance.now() - started) / 60_000).toFixed(1);
printTables(results);
console.log(`${minutes} min.`);

const out = typeof option('out') === 'string' ? option('out') : path.join(repoRoot, 'bench-results', `${smoke ? 'smoke' : 'bench'}-${results.meta.date.replace(/[:.]/g, '-')}.json`);
fs.mkdirSync(path.dirname(out), { recursive: true });
fs.writeFileSync(out, JSON.stringify(results, null, 1));
console.log(`\nJSON: ${path.relative(process.cwd(), out)}`);
