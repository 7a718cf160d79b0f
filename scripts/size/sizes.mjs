// `npm run sizes`: the bytes a page loads for each way of using weblocks, raw and gzip -9, from the
// current build (pkg/, dist/: run `npm run build` first). Prints a Markdown table.
//   - ESM package, unbundled: every module `import 'weblocks'` pulls in (as published), plus the wasm;
//   - ESM package, bundled: the same modules as one minified bundle (esbuild --minify), plus the wasm;
//   - classic script: dist/weblocks.polyfill.js, one file with the wasm embedded;
//   - legacy build: dist/weblocks.legacy.js, the same with the wasm compiled to JavaScript.
// `--check`: exit 1 if the classic script is over its budget (CLASSIC_BUDGET_GZIP, gzip -9); the test
// command runs it after the build (scripts/test.sh).
// `--features`: also what each part of the wasm costs: builds the wasm once per cargo feature set (a few
// minutes) and prints, per feature, the bytes it adds to pkg/weblocks_bg.wasm.
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
export const CLASSIC_BUDGET_GZIP = 43_000;

// `gzip -9` itself where it is installed (its deflate differs a little from Node's zlib), else zlib level 9.
function gzipSize(data) {
  const gzip = spawnSync('gzip', ['-9c'], { input: data, maxBuffer: 64 << 20 });
  return gzip.status === 0 ? gzip.stdout.length : zlib.gzipSync(data, { level: 9 }).length;
}
const measure = (data) => ({ raw: data.length, gzip: gzipSize(data) });
const read = (file) => fs.readFileSync(path.join(root, file));

/** The JS modules `import 'weblocks'` loads in a browser (the package's default entry), in load order. */
async function esmModules() {
  const result = await esbuild.build({
    entryPoints: [path.join(root, 'js', 'index.js')],
    bundle: true,
    write: false,
    format: 'esm',
    metafile: true,
    logLevel: 'silent',
  });
  return Object.keys(result.metafile.inputs);
}

async function minifiedBundle() {
  const result = await esbuild.build({
    entryPoints: [path.join(root, 'js', 'index.js')],
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

/** Rows `{ what, raw, gzip }` of the three ways; each group ends with its total. */
export async function measureSizes() {
  for (const file of ['pkg/weblocks_bg.wasm', 'pkg/weblocks.js', 'dist/weblocks.polyfill.js', 'dist/weblocks.legacy.js']) {
    if (!fs.existsSync(path.join(root, file))) throw new Error(`${file} is missing: run \`npm run build\` first`);
  }
  const wasm = measure(read('pkg/weblocks_bg.wasm'));
  const modules = (await esmModules()).map((file) => ({ what: file, ...measure(read(file)) }));
  const sum = (rows) => rows.reduce((t, r) => ({ raw: t.raw + r.raw, gzip: t.gzip + r.gzip }), { raw: 0, gzip: 0 });
  const unbundled = [...modules, { what: 'pkg/weblocks_bg.wasm', ...wasm }];
  const bundled = [{ what: 'JS bundle', ...measure(await minifiedBundle()) }, { what: 'pkg/weblocks_bg.wasm', ...wasm }];
  const classic = measure(read('dist/weblocks.polyfill.js'));
  const legacy = measure(read('dist/weblocks.legacy.js'));
  return {
    groups: [
      { title: "ESM package, unbundled (the modules of `import 'weblocks'` as published)", rows: unbundled, total: sum(unbundled) },
      { title: 'ESM package, bundled and minified by the app (esbuild --minify)', rows: bundled, total: sum(bundled) },
      { title: 'Classic script dist/weblocks.polyfill.js (one file, wasm embedded)', rows: [{ what: 'dist/weblocks.polyfill.js', ...classic }], total: classic },
      { title: 'Legacy build dist/weblocks.legacy.js (one file, the core compiled to JavaScript)', rows: [{ what: 'dist/weblocks.legacy.js', ...legacy }], total: legacy },
    ],
    classic,
    wasm,
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
 * The wasm of each feature set: the base (the spec's lock manager alone in each context, the Engine edge,
 * the allocator and wasm-bindgen's runtime), the base plus one feature, and everything (what ships).
 * Each feature's cost is what it adds to the base; together they cost a little less than their sum
 * (code they share, e.g. the same collection types).
 */
export function measureFeatureCosts() {
  const sets = [
    { what: 'base: scheduler + Engine edge + runtime (no features)', features: [] },
    { what: '+ coordination (src/protocol, src/wasm/coordination.rs)', features: ['coordination'] },
    { what: '+ leases (src/lease, src/wasm/lease_operation.rs)', features: ['leases'] },
    { what: 'everything (the shipped wasm)', features: ['coordination', 'leases'] },
  ];
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'weblocks-features-'));
  try {
    const rows = sets.map(({ what, features }) => {
      console.error(`sizes: building the wasm with features [${features.join(', ')}]`);
      const dir = path.join(out, features.join('-') || 'base');
      bindgenAndOptimize(cargoBuildWasm({ features, log: false }), dir, { log: false });
      return { what, ...measure(fs.readFileSync(path.join(dir, 'weblocks_bg.wasm'))) };
    });
    const [base] = rows;
    return rows.map((row, i) =>
      i === 0 || i === rows.length - 1 ? row : { ...row, cost: { raw: row.raw - base.raw, gzip: row.gzip - base.gzip } },
    );
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

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const sizes = await measureSizes();
  console.log(toMarkdown(sizes));
  const over = sizes.classic.gzip > CLASSIC_BUDGET_GZIP;
  console.log(
    `\nclassic script: ${sizes.classic.gzip.toLocaleString('en-US')} B gzipped, budget ${CLASSIC_BUDGET_GZIP.toLocaleString('en-US')} B: ${over ? 'OVER' : 'within'}`,
  );
  if (process.argv.includes('--features')) console.log(`\n${featuresToMarkdown(measureFeatureCosts())}`);
  if (over && process.argv.includes('--check')) process.exit(1);
}
