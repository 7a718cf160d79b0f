// `npm run sizes`: the bytes a page loads for each way of using weblocks, raw and gzip -9, from the
// current build (pkg/, dist/: run `npm run build` first). Prints a Markdown table.
//   - ESM package, unbundled: every module `import 'weblocks'` pulls in (as published), plus its wasm;
//   - ESM package, bundled: the same modules as one minified bundle (esbuild --minify), plus its wasm;
//   - the same two for the leases' add-on, `import { leases } from 'weblocks/leases'`, and its own wasm;
//   - classic script: dist/weblocks.polyfill.js, one file with the wasm embedded;
//   - its leases' add-on: dist/weblocks.leases.js, one file with the leases' wasm embedded;
//   - legacy build: dist/weblocks.legacy.js, the classic script with the wasm compiled to JavaScript, and its
//     leases' add-on dist/weblocks.leases-legacy.js.
// `--check`: exit 1 if the classic script or its add-on is over its budget (BUDGETS, gzip -9), or if
// README.md's sizes table is more than 1 % off what the build gives; the test command runs it after the
// build (scripts/test.sh). `--write-readme`: write that table from the build.
// `--features`: also what each part of the wasm costs: builds the wasm once per cargo feature set (a few
// minutes) and prints, per feature, the bytes it adds.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { bindgenAndOptimize, cargoBuildWasm } from '../build.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The classic script's budget, gzip -9 (docs/SIZE.md). */
export const CLASSIC_BUDGET_GZIP = 52_000;
/** The budget of the classic script's leases' add-on, gzip -9 (docs/SIZE.md). */
export const LEASES_ADDON_BUDGET_GZIP = 14_000;
/** The classic files' budgets, which `--check` enforces. */
export const BUDGETS = [
  { file: 'dist/weblocks.polyfill.js', gzip: CLASSIC_BUDGET_GZIP },
  { file: 'dist/weblocks.leases.js', gzip: LEASES_ADDON_BUDGET_GZIP },
];

// `gzip -9` itself where it is installed (its deflate differs a little from Node's zlib), else zlib level 9.
function gzipSize(data) {
  const gzip = spawnSync('gzip', ['-9c'], { input: data, maxBuffer: 64 << 20 });
  return gzip.status === 0 ? gzip.stdout.length : zlib.gzipSync(data, { level: 9 }).length;
}
const measure = (data) => ({ raw: data.length, gzip: gzipSize(data) });
const read = (file) => fs.readFileSync(path.join(root, file));

/** The JS modules the ESM entry `entry` (js/index.js: `import 'weblocks'`) loads in a browser, in load order. */
async function esmModules(entry) {
  const result = await esbuild.build({
    entryPoints: [path.join(root, 'js', entry)],
    bundle: true,
    write: false,
    format: 'esm',
    metafile: true,
    logLevel: 'silent',
  });
  return Object.keys(result.metafile.inputs);
}

async function minifiedBundle(entry) {
  const result = await esbuild.build({
    entryPoints: [path.join(root, 'js', entry)],
    bundle: true,
    write: false,
    format: 'esm',
    minify: true,
    legalComments: 'none',
    target: 'es2017',
    logLevel: 'silent',
  });
  return Buffer.from(result.outputFiles[0].contents);
}

const sum = (rows) => rows.reduce((t, r) => ({ raw: t.raw + r.raw, gzip: t.gzip + r.gzip }), { raw: 0, gzip: 0 });

/** The unbundled and the bundled group of the ESM entry `entry`, whose wasm is `wasmFile`. */
async function esmGroups(entry, wasmFile, name) {
  const wasm = { what: wasmFile, ...measure(read(wasmFile)) };
  const unbundled = [...(await esmModules(entry)).map((file) => ({ what: file, ...measure(read(file)) })), wasm];
  const bundled = [{ what: 'JS bundle', ...measure(await minifiedBundle(entry)) }, wasm];
  return [
    { title: `ESM ${name}, unbundled (the modules as published, and the wasm)`, rows: unbundled, total: sum(unbundled) },
    { title: `ESM ${name}, bundled and minified by the app (esbuild --minify), and the wasm`, rows: bundled, total: sum(bundled) },
  ];
}

/** Rows `{ what, raw, gzip }` of each way; each group ends with its total. */
export async function measureSizes() {
  const files = ['pkg/weblocks_bg.wasm', 'pkg/weblocks.js', 'pkg/weblocks_leases_bg.wasm', 'pkg/weblocks_leases.js', ...BUDGETS.map((b) => b.file), 'dist/weblocks.legacy.js', 'dist/weblocks.leases-legacy.js'];
  for (const file of files) {
    if (!fs.existsSync(path.join(root, file))) throw new Error(`${file} is missing: run \`npm run build\` first`);
  }
  const single = (title, file) => {
    const size = measure(read(file));
    return { title, rows: [{ what: file, ...size }], total: size };
  };
  return {
    groups: [
      ...(await esmGroups('index.js', 'pkg/weblocks_bg.wasm', "package, `import 'weblocks'`")),
      ...(await esmGroups('leases_entry.js', 'pkg/weblocks_leases_bg.wasm', "leases' add-on, `import { leases } from 'weblocks/leases'`")),
      single('Classic script dist/weblocks.polyfill.js (one file, wasm embedded)', 'dist/weblocks.polyfill.js'),
      single("Classic leases' add-on dist/weblocks.leases.js (one file, the leases' wasm embedded)", 'dist/weblocks.leases.js'),
      single('Legacy build dist/weblocks.legacy.js (one file, the core compiled to JavaScript)', 'dist/weblocks.legacy.js'),
      single("Legacy leases' add-on dist/weblocks.leases-legacy.js (one file, the leases compiled to JavaScript)", 'dist/weblocks.leases-legacy.js'),
    ],
    budgets: BUDGETS.map(({ file, gzip }) => ({ file, budget: gzip, gzip: measure(read(file)).gzip })),
  };
}

export function toMarkdown({ groups }) {
  const n = (x) => x.toLocaleString('en-US');
  const lines = ['| what a page loads | bytes | gzip -9 |', '| --- | ---: | ---: |'];
  for (const { title, rows, total } of groups) {
    lines.push(`| **${title}** | **${n(total.raw)}** | **${n(total.gzip)}** |`);
    if (rows.length > 1) for (const row of rows) lines.push(`| &nbsp;&nbsp;${row.what} | ${n(row.raw)} | ${n(row.gzip)} |`);
  }
  return lines.join('\n');
}

/**
 * The wasm of each feature set, and what each feature adds to the set it builds on (`over`): none (nothing
 * exported, so nearly empty), the spec's lock manager alone in each context with the Engine edge (and the
 * allocator and wasm-bindgen's runtime), the coordination on top (the shipped lock engine,
 * pkg/weblocks_bg.wasm), the leases alone (the shipped leases' wasm, pkg/weblocks_leases_bg.wasm, with its
 * own allocator and runtime), and both in one wasm (what the lock engine would weigh with the leases in it).
 */
export function measureFeatureCosts() {
  const sets = [
    { what: 'no features: nothing exported (the allocator and the runtime come with the first feature)', features: [] },
    { what: '+ locks: scheduler, Engine edge, allocator, runtime (src/scheduler.rs, src/wasm/engine.rs)', features: ['locks'], over: 0 },
    { what: '+ coordination (src/protocol, src/wasm/coordination.rs): the lock engine, pkg/weblocks_bg.wasm', features: ['coordination'], over: 1 },
    { what: "leases alone, with the allocator and runtime (src/lease, src/wasm/lease_operation.rs): the leases' wasm, pkg/weblocks_leases_bg.wasm", features: ['leases'], over: 0 },
    { what: 'the lock engine with the leases in it (not shipped)', features: ['coordination', 'leases'], over: 2 },
  ];
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'weblocks-features-'));
  try {
    const rows = sets.map(({ what, features }) => {
      console.error(`sizes: building the wasm with features [${features.join(', ')}]`);
      const dir = path.join(out, features.join('-') || 'base');
      bindgenAndOptimize(cargoBuildWasm({ features, log: false }), dir, { log: false });
      return { what, ...measure(fs.readFileSync(path.join(dir, 'weblocks_bg.wasm'))) };
    });
    return rows.map((row, i) => {
      const { over } = sets[i];
      return over === undefined ? row : { ...row, cost: { raw: row.raw - rows[over].raw, gzip: row.gzip - rows[over].gzip } };
    });
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
}

export function featuresToMarkdown(rows) {
  const n = (x) => x.toLocaleString('en-US');
  const lines = ['| wasm built with | bytes | gzip -9 | its cost: bytes | gzip -9 |', '| --- | ---: | ---: | ---: | ---: |'];
  for (const { what, raw, gzip, cost } of rows) lines.push(`| ${what} | ${n(raw)} | ${n(gzip)} | ${cost ? n(cost.raw) : ''} | ${cost ? n(cost.gzip) : ''} |`);
  return lines.join('\n');
}

const README = path.join(root, 'README.md');
const README_BEGIN = '<!-- sizes: written by `node scripts/size/sizes.mjs --write-readme` from the build -->';
const README_END = '<!-- sizes end -->';

/** README.md's table of what a page loads, from `sizes` (measureSizes()), with the budgets. */
export function readmeTable({ groups }) {
  const n = (x) => x.toLocaleString('en-US');
  const budget = (file) => n(BUDGETS.find((b) => b.file === file).gzip);
  const [esm, esmBundled, , leasesBundled, classic, addon, legacy, legacyAddon] = groups;
  const split = ({ rows }, key) => rows.map((row) => n(row[key])).join(' + ');
  return [
    '| what a page loads | bytes | gzip -9 |',
    '| --- | ---: | ---: |',
    `| **classic script** \`dist/weblocks.polyfill.js\` (one file, wasm embedded; budget ${budget('dist/weblocks.polyfill.js')} B gzip -9) | ${n(classic.total.raw)} | ${n(classic.total.gzip)} |`,
    `| its leases' add-on \`dist/weblocks.leases.js\` (one file, the leases' wasm embedded; budget ${budget('dist/weblocks.leases.js')} B) | ${n(addon.total.raw)} | ${n(addon.total.gzip)} |`,
    `| ESM package, unbundled (\`import 'weblocks'\` as published) | ${n(esm.total.raw)} | ${n(esm.total.gzip)} |`,
    `| ESM package bundled and minified by the app (esbuild): JS + \`weblocks_bg.wasm\` | ${split(esmBundled, 'raw')} | ${split(esmBundled, 'gzip')} |`,
    `| the leases, \`import { leases } from 'weblocks/leases'\`, bundled (esbuild): JS + \`weblocks_leases_bg.wasm\` | ${split(leasesBundled, 'raw')} | ${split(leasesBundled, 'gzip')} |`,
    `| legacy build \`dist/weblocks.legacy.js\` (the core compiled to JavaScript, ES2015) | ${n(legacy.total.raw)} | ${n(legacy.total.gzip)} |`,
    `| its leases' add-on \`dist/weblocks.leases-legacy.js\` (the leases compiled to JavaScript) | ${n(legacyAddon.total.raw)} | ${n(legacyAddon.total.gzip)} |`,
  ].join('\n');
}

/** README.md's table as written, or null if its markers are missing. */
function readmeBlock(text) {
  const begin = text.indexOf(README_BEGIN);
  const end = text.indexOf(README_END);
  if (begin < 0 || end < begin) return null;
  return { begin: begin + README_BEGIN.length, end };
}

/**
 * Where README.md's figures differ from the build's by more than 1 % (a toolchain's few bytes either way do
 * not make them stale; a change of what ships does): a list of `[written, built]` pairs, empty if none.
 */
export function staleReadmeFigures(sizes, text = fs.readFileSync(README, 'utf8')) {
  const block = readmeBlock(text);
  if (!block) return [['the markers of the sizes table', 'missing']];
  const figures = (table) => [...table.matchAll(/\d{1,3}(?:,\d{3})+|\d+/g)].map((m) => Number(m[0].replace(/,/g, '')));
  const written = figures(text.slice(block.begin, block.end));
  const built = figures(readmeTable(sizes));
  if (written.length !== built.length) return [[`${written.length} figures`, `${built.length} figures`]];
  return written.map((w, i) => [w, built[i]]).filter(([w, b]) => Math.abs(w - b) > b / 100);
}

/** docs/SIZE.md's budgets as its first paragraph states them, checked against BUDGETS: a list of misses. */
export function staleSizeDocBudgets(text = fs.readFileSync(path.join(root, 'docs', 'SIZE.md'), 'utf8')) {
  const n = (x) => x.toLocaleString('en-US');
  const stated = [`**${n(CLASSIC_BUDGET_GZIP)} B gzip -9**`, `**${n(LEASES_ADDON_BUDGET_GZIP)} B**`];
  return stated.filter((figure) => !text.includes(figure)).map((figure) => [`docs/SIZE.md without ${figure}`, 'the budget']);
}

function writeReadme(sizes) {
  const text = fs.readFileSync(README, 'utf8');
  const block = readmeBlock(text);
  if (!block) throw new Error(`README.md lacks the markers ${README_BEGIN} … ${README_END}`);
  fs.writeFileSync(README, `${text.slice(0, block.begin)}\n${readmeTable(sizes)}\n${text.slice(block.end)}`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const sizes = await measureSizes();
  console.log(toMarkdown(sizes));
  const n = (x) => x.toLocaleString('en-US');
  console.log('');
  for (const { file, budget, gzip } of sizes.budgets) {
    console.log(`${file}: ${n(gzip)} B gzipped, budget ${n(budget)} B: ${gzip > budget ? 'OVER' : 'within'}`);
  }
  if (process.argv.includes('--features')) console.log(`\n${featuresToMarkdown(measureFeatureCosts())}`);
  if (process.argv.includes('--write-readme')) writeReadme(sizes);
  const stale = [...staleReadmeFigures(sizes), ...staleSizeDocBudgets()];
  for (const [written, built] of stale) console.log(`stale size figure: ${written} where the build gives ${built} (README.md's table: node scripts/size/sizes.mjs --write-readme)`);
  const over = sizes.budgets.some(({ gzip, budget }) => gzip > budget);
  if ((over || stale.length > 0) && process.argv.includes('--check')) process.exit(1);
}
