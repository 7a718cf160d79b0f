// `npm run build`: the two release wasm modules and their ESM glue in pkg/ (cargo, wasm-bindgen, npm's
// wasm-opt): the lock engine (pkg/weblocks.js, weblocks_bg.wasm) and the leases' (pkg/weblocks_leases.js,
// weblocks_leases_bg.wasm); then the classic-script polyfill dist/weblocks.polyfill.js (esbuild: one IIFE,
// the lock engine's wasm embedded, global `weblocks`), the legacy build, and the leases' add-on
// dist/weblocks.leases.js (the leases' wasm embedded, added to that global) with its legacy twin.
// `node scripts/build.mjs --bundle-only` skips the wasm build and rebundles the existing pkg/.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { embedCompressedWasm } from './size/embed_wasm.mjs';
import { hoistEmbeddedWasm, minifyAgain } from './size/classic_text.mjs';
import { BUILD_STD_ARGS, SIZE_RUSTFLAGS, WASM_OPT_PASSES } from './size/compiler_flags.mjs';
import { postMvpNeeds, withoutTargetFeatures } from './wasm_mvp.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bundleOnly = process.argv.includes('--bundle-only');
const classicOut = path.join(root, 'dist', 'weblocks.polyfill.js');
const legacyOut = path.join(root, 'dist', 'weblocks.legacy.js');
const classicLeasesOut = path.join(root, 'dist', 'weblocks.leases.js');
const legacyLeasesOut = path.join(root, 'dist', 'weblocks.leases-legacy.js');

/**
 * The two wasm modules the package ships, from the one crate with different cargo features (Cargo.toml):
 * the lock engine, which every build loads, and the leases', which only pages that use leases load (the
 * ESM entry `weblocks/leases`, the classic add-on). `name` is wasm-bindgen's output name in pkg/.
 */
export const WASM_MODULES = [
  { name: 'weblocks', features: ['coordination'] },
  { name: 'weblocks_leases', features: ['leases'] },
];

function fail(message) {
  console.error(`build: ${message}`);
  process.exit(1);
}

function run(command, args, env, log = true) {
  if (log) console.log(`build: ${command} ${args.join(' ')}`);
  const result = spawnSync(command, args, { cwd: root, env, stdio: 'inherit' });
  if (result.error) fail(`${command} could not start: ${result.error.message}`);
  if (result.status !== 0) fail(`${command} exited with status ${result.status}`);
}

// The release wasm is WebAssembly MVP, the support floor (Chrome 57, Firefox 52, Safari 11): std and the
// crate are compiled with `-Ctarget-cpu=mvp` (rustc 1.82+ enables reference types and multi-value for
// wasm32 by default, 1.87+ bulk memory and non-trapping float-to-int; without them wasm-bindgen also emits
// no externref glue), every wasm-opt run is told `--mvp-features` (else it may write sign-extension
// instructions, which the linked module's target features section allows), and the build fails if the
// wasm it ships needs anything newer (scripts/wasm_mvp.mjs). std must be rebuilt for that (`-Z build-std`,
// under RUSTC_BOOTSTRAP=1 for the pinned stable compiler), which needs the `rust-src` component
// (rust-toolchain.toml and scripts/setup.sh add it): without it (or with `WEBLOCKS_PLAIN_BUILD=1`) the
// plain stable build runs, whose precompiled std uses the target's default features, and the MVP check
// fails it loudly. It is also built for size, with the compilers' options of scripts/size/compiler_flags.mjs
// (docs/SIZE.md). Its own --target-dir keeps these flags from invalidating the caches of `cargo test`, for
// the host or for wasm. Then wasm-bindgen (the CLI pinned in Cargo.toml) and npm's wasm-opt (never Debian's
// binaryen 108).
export const SIZE_TARGET_DIR = path.join('target', 'size');

function hasRustSrc(env) {
  const list = spawnSync('rustup', ['component', 'list', '--installed'], { encoding: 'utf8', env });
  return list.status === 0 && /^rust-src\b/m.test(list.stdout);
}

/** `cargo build` of the release wasm; returns the path of the un-bindgen'd .wasm. */
export function cargoBuildWasm({ env, features = null, log = true } = {}) {
  env = env ?? toolEnv();
  const sizeBuild = !process.env.WEBLOCKS_PLAIN_BUILD && hasRustSrc(env);
  const args = ['build', '--release', '--target', 'wasm32-unknown-unknown', '--target-dir', SIZE_TARGET_DIR];
  if (features !== null) args.push('--no-default-features', '--features', features.join(','));
  let buildEnv = env;
  if (sizeBuild) {
    args.push(...BUILD_STD_ARGS);
    buildEnv = { ...env, RUSTC_BOOTSTRAP: '1', RUSTFLAGS: ['-Ctarget-cpu=mvp', ...SIZE_RUSTFLAGS].join(' ') };
  } else {
    console.log('build: rust-src missing (or WEBLOCKS_PLAIN_BUILD set): plain stable build, std not rebuilt for MVP');
    // Only the MVP flag: those of a previous size build must not leak in through the environment.
    buildEnv = { ...env, RUSTFLAGS: '-Ctarget-cpu=mvp' };
  }
  run('cargo', args, buildEnv, log);
  return path.join(root, SIZE_TARGET_DIR, 'wasm32-unknown-unknown', 'release', 'weblocks.wasm');
}

function toolEnv() {
  const bin = path.join(root, 'node_modules', '.bin');
  return { ...process.env, PATH: [bin, path.join(os.homedir(), '.cargo', 'bin'), process.env.PATH].join(path.delimiter) };
}

/**
 * wasm-bindgen --target web into `outDir` (`<name>.js` and `<name>_bg.wasm`), then wasm-opt -Oz on the wasm
 * in place.
 */
export function bindgenAndOptimize(wasm, outDir, { env, log = true, name = 'weblocks' } = {}) {
  env = env ?? toolEnv();
  const wasmOpt = spawnSync('wasm-opt', ['--version'], { encoding: 'utf8', env });
  if (wasmOpt.status !== 0) fail('node_modules/.bin/wasm-opt is missing or broken: run `npm install` (binaryen@132.0.0) first');
  if (log) console.log(`build: using ${wasmOpt.stdout.trim()}`);
  const linked = fs.readFileSync(wasm);
  const linkedNeeds = postMvpNeeds(linked);
  if (linkedNeeds.length > 0) {
    fail(`${path.relative(root, wasm)} needs more than WebAssembly MVP (is rust-src installed?):\n  ${linkedNeeds.join('\n  ')}`);
  }
  const input = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'weblocks-mvp-')), 'weblocks.wasm');
  fs.writeFileSync(input, withoutTargetFeatures(linked));
  // No .d.ts: the package's types are types/ (pkg/ ships only the glue and the wasm).
  run('wasm-bindgen', ['--target', 'web', '--no-typescript', '--out-dir', outDir, '--out-name', name, input], env, log);
  fs.rmSync(path.dirname(input), { recursive: true, force: true });
  const bg = path.join(outDir, `${name}_bg.wasm`);
  run('wasm-opt', ['--mvp-features', ...WASM_OPT_PASSES, bg, '-o', bg], env, log);
  const needs = postMvpNeeds(fs.readFileSync(bg));
  if (needs.length > 0) {
    fail(`${path.relative(root, bg)} needs more than WebAssembly MVP after wasm-opt:\n  ${needs.join('\n  ')}`);
  }
}

function buildWasm() {
  const env = toolEnv();
  // One after the other in one target dir: cargo rebuilds only this crate when the features change.
  for (const { name, features } of WASM_MODULES) {
    bindgenAndOptimize(cargoBuildWasm({ env, features }), path.join(root, 'pkg'), { env, name });
  }
}

/** What every classic file is: one minified IIFE, at the support floor's syntax (ES2017). */
const IIFE = {
  bundle: true,
  format: 'iife',
  platform: 'neutral',
  minify: true,
  legalComments: 'none',
  logLevel: 'warning',
  target: 'es2017', // every shipped JS file is ES2017 (tests/static/shipped_files.test.mjs)
};

/**
 * The esbuild options the classic script and the legacy build share. The entry (js/classic.js) makes the
 * global `weblocks` itself, so that a second load keeps the same object, with what add-ons put on it.
 */
const CLASSIC_OPTIONS = {
  ...IIFE,
  entryPoints: [path.join(root, 'js', 'classic.js')],
  mangleProps: /^[a-z][a-zA-Z0-9]*_$/, // properties named `word_` are internal (js/lock_api.js): one letter here
  // `process` reads as undefined: js/lock_api.js's Node-only paths (IN_NODE) fold away; a page's own
  // `process` shim is not Node either.
  define: { process: 'undefined' },
};

/** What the legacy files have instead of the classic ones': ES2015, and the wasm run as JavaScript. */
const LEGACY_OPTIONS = {
  target: 'es2015',
  inject: [path.join(root, 'js', 'legacy_webassembly.js'), path.join(root, 'js', 'legacy_text.js')],
};

/**
 * dist/weblocks.legacy.js: the classic script for engines without WebAssembly (or where a page's CSP
 * forbids compiling it), from the same sources: the wasm compiled to JavaScript by wasm2js
 * (scripts/size/embed_wasm.mjs) and run by js/legacy_webassembly.js, at ES2015 (async functions become
 * generators), with UTF-8 in JavaScript where the engine has no TextEncoder (js/legacy_text.js).
 */
async function bundleLegacy() {
  await esbuild.build({ ...CLASSIC_OPTIONS, ...LEGACY_OPTIONS, outfile: legacyOut, plugins: [embedCompressedWasm({ legacy: true })] });
  const text = fs.readFileSync(legacyOut, 'utf8');
  if (text.includes('import.meta')) fail('the legacy build still mentions import.meta');
}

async function bundleClassic() {
  await esbuild.build({
    ...CLASSIC_OPTIONS,
    outfile: classicOut,
    // The wasm embedded LZMA-compressed (scripts/size/embed_wasm.mjs).
    plugins: [embedCompressedWasm()],
  });
  await minifyClassic(classicOut);
}

/** A classic file as esbuild wrote it, minified again by terser, the wasm's text moved first (scripts/size/classic_text.mjs). */
async function minifyClassic(file) {
  const text = fs.readFileSync(file, 'utf8');
  if (text.includes('import.meta')) fail(`${path.relative(root, file)} still mentions import.meta`);
  fs.writeFileSync(file, hoistEmbeddedWasm(await minifyAgain(text)));
}

/**
 * dist/weblocks.leases.js: the leases' add-on of the classic script (js/classic_leases.js), with the
 * leases' wasm embedded as the classic script embeds its own (its own LZMA decoder too: the add-on does not
 * reach into the classic script's internals, so either file may be updated alone), decoded at the first
 * lease operation. The lease service's store is in it: a second add-on for it would save pages that use
 * only IndexedDB leases about 1 KB, for one more file to load in the right order.
 */
async function bundleClassicLeases() {
  const entry = { ...IIFE, entryPoints: [path.join(root, 'js', 'classic_leases.js')] };
  await esbuild.build({ ...entry, outfile: classicLeasesOut, plugins: [embedCompressedWasm({ lazy: true, engine: false })] });
  await minifyClassic(classicLeasesOut);
  // dist/weblocks.leases-legacy.js: the same add-on for the legacy build, the leases' wasm compiled to
  // JavaScript, where WebAssembly cannot run.
  await esbuild.build({ ...entry, ...LEGACY_OPTIONS, outfile: legacyLeasesOut, plugins: [embedCompressedWasm({ legacy: true, lazy: true, engine: false })] });
  if (fs.readFileSync(legacyLeasesOut, 'utf8').includes('import.meta')) fail('the legacy add-on still mentions import.meta');
}

function sizes(file) {
  const data = fs.readFileSync(path.join(root, file));
  const gzip = zlib.gzipSync(data, { level: 9 }).length;
  return `${file}: ${data.length} B (gzip -9: ${gzip} B)`;
}

const isMain = process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (isMain) {
  if (!bundleOnly) buildWasm();
  for (const { name } of WASM_MODULES) {
    if (!fs.existsSync(path.join(root, 'pkg', `${name}_bg.wasm`))) fail(`pkg/${name}_bg.wasm is missing: run the full build`);
  }
  await bundleClassic();
  await bundleLegacy();
  await bundleClassicLeases();
  const pkg = WASM_MODULES.flatMap(({ name }) => [`pkg/${name}_bg.wasm`, `pkg/${name}.js`]);
  for (const file of [...pkg, 'dist/weblocks.polyfill.js', 'dist/weblocks.legacy.js', 'dist/weblocks.leases.js', 'dist/weblocks.leases-legacy.js']) {
    console.log(`build: ${sizes(file)}`);
  }
}
