// esbuild plugin for the classic build (scripts/build.mjs): `import wasmBytes from '../pkg/x.wasm'` gives
// a promise of the wasm's WebAssembly.Module, embedded DEFLATE-compressed (a zlib stream, by Zopfli) and
// base64-encoded, and inflated and compiled when the script runs (js/embedded_wasm.js): by the engine
// itself, off the main thread, where it has DecompressionStream; by js/inflate.js (~1 KB gzipped) where not.
//
// Why DEFLATE: what counts is the gzipped script, and compressed bytes in base64 gzip back to about their
// own size (+0.5%), so the embedded wasm costs what its compressor makes of it. LZMA made it 8% smaller
// (30.4 against 33.0 KB on the 76 KB wasm), but only a decoder in JS reads it, on the main thread, in the
// engines' baseline tiers: 12-45 ms at a page's first lock, most of weblocks' own start-up. Every engine
// with DecompressionStream inflates DEFLATE natively in well under a millisecond. Plain base64 of the wasm
// (esbuild's 'binary' loader) would need no decoding at all but gzips poorly (+13 KB on the 81 KB wasm).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { renameGlue, renameWasm, shortNames } from './wasm_names.mjs';
import { trimGlue } from './trim_glue.mjs';
import { inflate } from '../../js/inflate.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

// Zopfli's iterations: 15 (its default) and 1,000 differ by a few bytes on this wasm; 100 takes 2 s.
const ZOPFLI_ITERATIONS = 100;

/**
 * `bytes` as a zlib stream (RFC 1950) written by Zopfli (Debian's zopfli, which scripts/setup.sh installs),
 * checked to inflate back to `bytes` with both inflaters a page may use: zlib's (as DecompressionStream's
 * 'deflate' format is) and js/inflate.js.
 */
export function embeddedStream(bytes) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'weblocks-zopfli-'));
  try {
    const input = path.join(dir, 'in.wasm');
    writeFileSync(input, bytes);
    const result = spawnSync('zopfli', ['--zlib', `--i${ZOPFLI_ITERATIONS}`, '-c', input], { maxBuffer: 256 << 20 });
    if (result.error || result.status !== 0) {
      throw new Error(`zopfli failed (install zopfli): ${result.error?.message ?? result.stderr.toString()}`);
    }
    const stream = result.stdout;
    if (!zlib.inflateSync(stream).equals(bytes) || !Buffer.from(inflate(stream, bytes.length)).equals(bytes)) {
      throw new Error('embed_wasm: the zlib stream does not inflate to the wasm');
    }
    return stream;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The module that replaces the wasm file: its default export is a promise of the wasm's Module
 * (wasm-bindgen's trimmed init awaits it, scripts/size/trim_glue.mjs), which rejects, and so fails the
 * engine's load and not the script, if inflating or compiling fails. The inflating and compiling start as
 * the script runs: natively they take no time of the main thread, and are done while the storage requests
 * a context starts as it is made (js/wasm_lock_api.js) are under way.
 * With `lazy`, the default export is instead a function that starts them and returns that promise: the
 * leases' add-on compiles its wasm only at the first lease operation, not while the page starts.
 */
function decodingModule(bytes, { lazy = false } = {}) {
  const packed = embeddedStream(bytes).toString('base64');
  return `import { compileEmbeddedWasm } from './js/embedded_wasm.js';
export default ${lazy ? '() => ' : ''}compileEmbeddedWasm(atob(${JSON.stringify(packed)}), ${bytes.length});
`;
}

// The feature set of the release wasm: WebAssembly MVP (scripts/build.mjs builds and checks it), so that
// wasm-opt writes nothing an engine of the support floor cannot read.
const WASM_FEATURES = ['--mvp-features'];

/**
 * `wasm` without the code that only its dropped exports reached (LZMA 30,902 -> 30,716 B at fbda228: Engine's
 * clientId, close and shared, which js/ never calls; engine_free and __wbindgen_free, which the trimmed glue
 * no longer calls; two globals nothing reads). wasm-opt removes what nothing reaches and writes the rest as
 * build.mjs's -Oz did: with the stack IR optimizations of its shrink level, without which it would write every function with more locals. If the
 * result is not smaller (another wasm-opt, other flags in build.mjs), the wasm is kept as it was.
 */
function withoutUnreachableCode(wasm) {
  const wasmOpt = path.join(root, 'node_modules', '.bin', 'wasm-opt');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'weblocks-embed-'));
  try {
    const input = path.join(dir, 'in.wasm');
    const output = path.join(dir, 'out.wasm');
    writeFileSync(input, wasm);
    const passes = ['--remove-unused-module-elements', '--shrink-level=2', '--optimize-level=2', '--generate-stack-ir', '--optimize-stack-ir'];
    const result = spawnSync(wasmOpt, [...WASM_FEATURES, ...passes, '--strip-producers', '--strip-target-features', input, '-o', output]);
    if (result.error || result.status !== 0) {
      throw new Error(`wasm-opt failed (run \`npm install\`): ${result.error?.message ?? result.stderr.toString()}`);
    }
    const out = readFileSync(output);
    if (out.length < wasm.length) return out;
    console.warn(`embed_wasm: wasm-opt made the classic wasm no smaller (${wasm.length} -> ${out.length} B); kept as it was`);
    return wasm;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The legacy build's module for the wasm: `wasm` compiled to JavaScript by binaryen's wasm2js, as a module
 * whose default export is wasm2js's `asmFunc(imports)`, which returns the exports (js/legacy_webassembly.js
 * instantiates it); with `lazy`, a function that returns it, as decodingModule's. wasm2js writes an ES module that imports the wasm's import module and calls
 * `asmFunc` itself: both ends are cut, and a module of another shape fails the build.
 */
function wasm2jsModule(wasm, { lazy = false } = {}) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'weblocks-wasm2js-'));
  try {
    const input = path.join(dir, 'in.wasm');
    const output = path.join(dir, 'out.js');
    writeFileSync(input, wasm);
    const wasm2js = path.join(root, 'node_modules', '.bin', 'wasm2js');
    const result = spawnSync(wasm2js, ['--mvp-features', '-Oz', input, '-o', output]);
    if (result.error || result.status !== 0) {
      throw new Error(`wasm2js failed (run \`npm install\`): ${result.error?.message ?? result.stderr.toString()}`);
    }
    const text = readFileSync(output, 'utf8');
    const opening = /^import \* as \S+ from '[^']*';\n/.exec(text);
    const ending = text.indexOf('\nvar retasmFunc = asmFunc(');
    if (opening === null || ending < 0 || !/\nfunction asmFunc\(imports\) \{\n/.test(text)) {
      throw new Error('embed_wasm: wasm2js wrote a module of another shape (one import, asmFunc, retasmFunc)');
    }
    return `${text.slice(opening[0].length, ending)}\nexport default ${lazy ? '() => asmFunc' : 'asmFunc'};\n`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The wasm, and wasm-bindgen's glue next to it (`x.js` beside `x_bg.wasm`), with short import and export
 * names (scripts/size/wasm_names.mjs): both are loaded through this plugin, so they always agree. The glue
 * is also cut to what the classic build runs (scripts/size/trim_glue.mjs), and the wasm keeps only the
 * exports that glue uses (`wasm.<name>`), and the code they reach (withoutUnreachableCode).
 * With `legacy`, the wasm is embedded compiled to JavaScript (wasm2jsModule) instead of compressed; with
 * `lazy`, decoded only when asked (decodingModule). `engine: false` for the leases' glue, which has no
 * Engine class (trimGlue).
 */
export function embedCompressedWasm({ legacy = false, lazy = false, engine = true } = {}) {
  // Both hooks need the wasm's names and the trimmed glue: read and made once per wasm and build.
  const loaded = new Map();
  const load = (wasmPath) => {
    if (!loaded.has(wasmPath)) {
      loaded.set(
        wasmPath,
        (async () => {
          const wasm = await fs.readFile(wasmPath);
          const names = shortNames(wasm);
          const glue = renameGlue(trimGlue(await fs.readFile(wasmPath.replace(/_bg\.wasm$/, '.js'), 'utf8'), { legacy, engine }), names);
          return { wasm, names, glue };
        })(),
      );
    }
    return loaded.get(wasmPath);
  };
  return {
    name: 'embed-compressed-wasm',
    setup(build) {
      build.onLoad({ filter: /\.wasm$/ }, async (args) => {
        const { wasm, names, glue } = await load(args.path);
        const used = (name) => new RegExp(`\\bwasm\\.${names.exports.get(name)}\\b`).test(glue);
        const embedded = withoutUnreachableCode(renameWasm(wasm, names, used));
        return { contents: legacy ? wasm2jsModule(embedded, { lazy }) : decodingModule(embedded, { lazy }), loader: 'js', resolveDir: root };
      });
      build.onLoad({ filter: /[\\/]pkg[\\/][^\\/]+\.js$/ }, async (args) => {
        const { glue } = await load(args.path.replace(/\.js$/, '_bg.wasm'));
        return { contents: glue, loader: 'js' };
      });
    },
  };
}
