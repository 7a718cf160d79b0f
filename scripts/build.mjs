// `npm run build`: the release wasm + ESM glue in pkg/ (wasm-pack, optimised by npm's wasm-opt), then the
// classic-script polyfill dist/weblocks.polyfill.js (esbuild: one IIFE, wasm embedded, global `weblocks`).
// `node scripts/build.mjs --bundle-only` skips wasm-pack and rebundles the existing pkg/.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { embedDeflatedWasm } from './embed_wasm_plugin.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bundleOnly = process.argv.includes('--bundle-only');
const classicOut = path.join(root, 'dist', 'weblocks.polyfill.js');

function fail(message) {
  console.error(`build: ${message}`);
  process.exit(1);
}

function run(command, args, env) {
  console.log(`build: ${command} ${args.join(' ')}`);
  const result = spawnSync(command, args, { cwd: root, env, stdio: 'inherit' });
  if (result.error) fail(`${command} could not start: ${result.error.message}`);
  if (result.status !== 0) fail(`${command} exited with status ${result.status}`);
}

function buildWasm() {
  // npm's binaryen must come first: wasm-pack runs the first wasm-opt on PATH, and Debian's binaryen
  // (108) writes wasm that does not load. With --mode no-install a missing wasm-opt is skipped
  // silently, so check for it here.
  const bin = path.join(root, 'node_modules', '.bin');
  const env = { ...process.env, PATH: [bin, path.join(os.homedir(), '.cargo', 'bin'), process.env.PATH].join(path.delimiter) };
  const wasmOpt = spawnSync(path.join(bin, 'wasm-opt'), ['--version'], { encoding: 'utf8' });
  if (wasmOpt.status !== 0) fail('node_modules/.bin/wasm-opt is missing or broken: run `npm install` (binaryen@132.0.0) first');
  console.log(`build: using ${wasmOpt.stdout.trim()}`);
  run('wasm-pack', ['build', '--release', '--target', 'web', '--mode', 'no-install', '--out-dir', 'pkg'], env);
}

async function bundleClassic() {
  await esbuild.build({
    entryPoints: [path.join(root, 'js', 'classic.js')],
    outfile: classicOut,
    bundle: true,
    format: 'iife',
    globalName: 'weblocks',
    platform: 'neutral',
    target: 'es2022', // private fields and `#x in obj` (Chrome 91, Firefox 90, Safari 15)
    minify: true,
    legalComments: 'none',
    plugins: [embedDeflatedWasm()], // the wasm embedded deflated (scripts/embed_wasm_plugin.mjs)
    // The glue's default wasm URL (import.meta.url) is never used here: classic.js passes the bytes.
    define: { 'import.meta.url': 'undefined' },
    logLevel: 'warning',
  });
  const text = fs.readFileSync(classicOut, 'utf8');
  if (text.includes('import.meta')) fail('the classic build still mentions import.meta');
}

function sizes(file) {
  const data = fs.readFileSync(path.join(root, file));
  const gzip = zlib.gzipSync(data, { level: 9 }).length;
  return `${file}: ${data.length} B (gzip -9: ${gzip} B)`;
}

if (!bundleOnly) buildWasm();
if (!fs.existsSync(path.join(root, 'pkg', 'weblocks_bg.wasm'))) fail('pkg/weblocks_bg.wasm is missing: run the full build');
await bundleClassic();
for (const file of ['pkg/weblocks_bg.wasm', 'pkg/weblocks.js', 'dist/weblocks.polyfill.js']) console.log(`build: ${sizes(file)}`);
