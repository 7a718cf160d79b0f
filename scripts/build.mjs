// `npm run build`: the release wasm + ESM glue in pkg/ (cargo, wasm-bindgen, npm's wasm-opt), then the
// classic-script polyfill dist/weblocks.polyfill.js (esbuild: one IIFE, wasm embedded, global `weblocks`)
// and its add-on dist/weblocks.lease-server.js (the lease service's store, added to that global).
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
import { iifeExports } from './size/iife_exports.mjs';
import { postMvpNeeds, withoutTargetFeatures } from './wasm_mvp.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bundleOnly = process.argv.includes('--bundle-only');
const classicOut = path.join(root, 'dist', 'weblocks.polyfill.js');
const legacyOut = path.join(root, 'dist', 'weblocks.legacy.js');
const classicLeaseServerOut = path.join(root, 'dist', 'weblocks.lease-server.js');

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
// wasm it ships needs anything newer (scripts/wasm_mvp.mjs). It is also built for size (the classic script
// under 40 KB gzipped):
//  - std itself is rebuilt with `-Z build-std` and its `optimize_for_size` feature, and panics abort at once
//    (`-Cpanic=immediate-abort`: no panic message formatting, no unwinding tables), Debug formatting and
//    panic locations are compiled out (`-Zfmt-debug=none`, `-Zlocation-detail=none`). These are unstable
//    flags of the pinned stable toolchain, enabled for this one build with RUSTC_BOOTSTRAP=1; they change
//    no behaviour of the library (nothing it does reads a Debug string or a panic message), only bytes.
//    It needs the `rust-src` component (rust-toolchain.toml and scripts/setup.sh add it): std must be
//    rebuilt for MVP, so without it (or with `WEBLOCKS_PLAIN_BUILD=1`) the plain stable build runs, whose
//    precompiled std uses the target's default features, and the MVP check fails it loudly.
//  - Its own --target-dir, so these flags never invalidate the caches of `cargo test` / `wasm-pack test`.
//  - wasm-bindgen (the CLI pinned in Cargo.toml), then npm's wasm-opt -Oz (never Debian's binaryen 108).
export const SIZE_TARGET_DIR = path.join('target', 'size');
// `--inline-threshold=0` (opt-level z: 5): LLVM inlines less, -0.14 KB LZMA (see the wasm-opt inlining below).
export const SIZE_RUSTFLAGS = [
  '-Ctarget-cpu=mvp',
  '-Zunstable-options',
  '-Cpanic=immediate-abort',
  '-Zfmt-debug=none',
  '-Zlocation-detail=none',
  '-Cllvm-args=--inline-threshold=0',
  '-Zshare-generics=n',
];

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
    args.push('-Z', 'build-std=std,panic_abort', '-Z', 'build-std-features=optimize_for_size');
    buildEnv = { ...env, RUSTC_BOOTSTRAP: '1', RUSTFLAGS: SIZE_RUSTFLAGS.join(' ') };
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

/** wasm-bindgen --target web into `outDir`, then wasm-opt -Oz on the wasm in place. */
export function bindgenAndOptimize(wasm, outDir, { env, log = true } = {}) {
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
  run('wasm-bindgen', ['--target', 'web', '--no-typescript', '--out-dir', outDir, input], env, log);
  fs.rmSync(path.dirname(input), { recursive: true, force: true });
  const bg = path.join(outDir, 'weblocks_bg.wasm');
  // --converge repeats -Oz until it gains nothing (-0.4 KB gzipped, +4 s); the producers and target
  // features sections are read by no browser. --low-memory-unused lets constant offsets fold into loads
  // and stores (-0.4 KB gzipped): it assumes nothing lives below address 1024, true of Rust's wasm, whose
  // 1 MB stack comes first and grows down towards 0 (a program that got that deep would be broken anyway).
  // Inlining: a function with one caller is inlined only up to 20 bytes (-Oz: any size), a function of up
  // to 4 bytes always (-Oz: 2). Measured: the wasm comes out 2.7 KB larger but compresses better (-2.0 KB
  // with LZMA, -2.6 KB gzipped), presumably because a function left whole keeps the shapes it shares with
  // similar code, where inlined into its caller it is optimized into something unique.
  const inlining = ['--one-caller-inline-max-function-size=20', '--always-inline-max-function-size=4'];
  // Functions sorted by their (Rust) names first: the copies of one generic and the functions of one
  // module end up side by side, where LZMA finds their likeness (-0.17 KB LZMA; the name section is
  // dropped from the output as before).
  const order = ['--reorder-functions-by-name'];
  // Control flow flattened and rebuilt by the Relooper (`--flatten --rereloop`), once before the main
  // -Oz and once after (then -Oz twice): the code comes out in more regular shapes, which compress
  // better (-0.26 KB LZMA at fbda228; +15 s of build). Other pass lists tried gained less or nothing:
  // these passes once or three times, -O3 first, other inlining limits with them, --coalesce-locals-learning,
  // --merge-similar-functions, --gufa, -O4, --monomorphize, --local-cse.
  const reloop = ['--flatten', '--rereloop'];
  const passes = [
    '--mvp-features',
    ...['-Oz', ...reloop],
    ...order,
    '-Oz',
    '--converge',
    ...inlining,
    '--low-memory-unused',
    '--strip-producers',
    '--strip-target-features',
    ...[...reloop, '-Oz', '-Oz'],
  ];
  run('wasm-opt', [...passes, bg, '-o', bg], env, log);
  const needs = postMvpNeeds(fs.readFileSync(bg));
  if (needs.length > 0) {
    fail(`${path.relative(root, bg)} needs more than WebAssembly MVP after wasm-opt:\n  ${needs.join('\n  ')}`);
  }
}

function buildWasm() {
  const env = toolEnv();
  bindgenAndOptimize(cargoBuildWasm({ env }), path.join(root, 'pkg'), { env });
}

/** What every classic file is: one minified IIFE, at the support floor's syntax (ES2017). */
const IIFE = {
  bundle: true,
  format: 'iife',
  platform: 'neutral',
  minify: true,
  legalComments: 'none',
  logLevel: 'warning',
  target: 'es2017', // every shipped JS file is ES2017 (tests/e2e/shipped_files.test.mjs)
};

/** The esbuild options the classic script and the legacy build share: global `weblocks`. */
const CLASSIC_OPTIONS = {
  ...IIFE,
  entryPoints: [path.join(root, 'js', 'classic.js')],
  globalName: 'weblocks',
  mangleProps: /^[a-z][a-zA-Z0-9]*_$/, // properties named `word_` are internal (js/lock_api.js): one letter here
  // `process` reads as undefined: js/lock_api.js's Node-only paths (IN_NODE) fold away; a page's own
  // `process` shim is not Node either.
  define: { process: 'undefined' },
};

/**
 * dist/weblocks.legacy.js: the classic script for engines without WebAssembly (or where a page's CSP
 * forbids compiling it), from the same sources: the wasm compiled to JavaScript by wasm2js
 * (scripts/size/embed_wasm.mjs) and run by js/legacy_webassembly.js, at ES2015 (async functions become
 * generators), with UTF-8 in JavaScript where the engine has no TextEncoder (js/legacy_text.js).
 */
async function bundleLegacy() {
  await esbuild.build({
    ...CLASSIC_OPTIONS,
    outfile: legacyOut,
    target: 'es2015',
    inject: [path.join(root, 'js', 'legacy_webassembly.js'), path.join(root, 'js', 'legacy_text.js')],
    plugins: [embedCompressedWasm({ legacy: true })],
  });
  const text = fs.readFileSync(legacyOut, 'utf8');
  if (text.includes('import.meta')) fail('the legacy build still mentions import.meta');
}

async function bundleClassic() {
  await esbuild.build({
    ...CLASSIC_OPTIONS,
    outfile: classicOut,
    // The wasm embedded LZMA-compressed (scripts/size/embed_wasm.mjs); the global made by shorter code
    // than esbuild's (scripts/size/iife_exports.mjs).
    plugins: [embedCompressedWasm(), iifeExports()],
  });
  const text = fs.readFileSync(classicOut, 'utf8');
  if (text.includes('import.meta')) fail('the classic build still mentions import.meta');
  // Minified again by terser, the wasm's text moved first (scripts/size/classic_text.mjs).
  fs.writeFileSync(classicOut, hoistEmbeddedWasm(await minifyAgain(text)));
}

/** The classic add-on with the lease service's store (js/classic_lease_server.js). */
/** dist/weblocks.lease-server.js: the add-on that gives the classic script's global `serverLeaseStore`. */
async function bundleClassicLeaseServer() {
  await esbuild.build({
    ...IIFE,
    entryPoints: [path.join(root, 'js', 'classic_lease_server.js')],
    outfile: classicLeaseServerOut,
  });
}

function sizes(file) {
  const data = fs.readFileSync(path.join(root, file));
  const gzip = zlib.gzipSync(data, { level: 9 }).length;
  return `${file}: ${data.length} B (gzip -9: ${gzip} B)`;
}

const isMain = process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (isMain) {
  if (!bundleOnly) buildWasm();
  if (!fs.existsSync(path.join(root, 'pkg', 'weblocks_bg.wasm'))) fail('pkg/weblocks_bg.wasm is missing: run the full build');
  await bundleClassic();
  await bundleLegacy();
  await bundleClassicLeaseServer();
  for (const file of ['pkg/weblocks_bg.wasm', 'pkg/weblocks.js', 'dist/weblocks.polyfill.js', 'dist/weblocks.legacy.js', 'dist/weblocks.lease-server.js']) {
    console.log(`build: ${sizes(file)}`);
  }
}
