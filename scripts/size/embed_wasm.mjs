// esbuild plugin for the classic build (scripts/build.mjs): `import wasmBytes from '../pkg/x.wasm'` gives
// a promise of the wasm's bytes, embedded LZMA-compressed and base64-encoded, and decoded when the script
// runs by js/lzma_decoder.js (~1 KB gzipped). Decoding runs once, in the engines' baseline tiers: a large
// part of a page's wait for its first lock, so it runs after the storage requests, and in steps between
// the page's own tasks (decodingModule).
//
// Why LZMA: what counts is the gzipped script, and compressed bytes in base64 gzip back to about their own
// size (+0.5%), so the embedded wasm costs what its compressor makes of it. LZMA (xz's, tuned below) makes
// it 12% smaller than Zopfli's DEFLATE (-6.8 KB on the 135 KB wasm), and its decoder is no bigger than the
// inflater it replaces (tiny-inflate, which browsers without DecompressionStream needed anyway). Plain
// base64 of the wasm (esbuild's 'binary' loader) gzips poorly: +19 KB.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { renameGlue, renameWasm, shortNames } from './wasm_names.mjs';
import { trimGlue } from './trim_glue.mjs';
import { lzmaDecode } from '../../js/lzma_decoder.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

// LZMA's literal context, literal position and position bits: lc=3, lp=0, pb=0 is the smallest of all
// (lc, lp, pb) on this wasm (pb=0: wasm code has no 2- or 4-byte alignment).
const LC = 3;
const LP = 0;
const PB = 0;
/**
 * The bytes decoded in one task at load: 1–5 ms of the decoder in the engines' baseline tiers (the whole
 * wasm takes 12–45 ms), short enough for the storage events between steps to be handled soon.
 */
const DECODE_STEP = 8192;
// The encoder's own settings, which the decoder never needs: the match finder and the match length it
// settles for. The best pair shifts with every change of the wasm (bt3 with 128 beat xz's preset, bt4 with
// 273, by 26 B at 2ea5de3), so each build tries these and keeps the smallest stream (xz takes 0.1 s each).
const MATCH_FINDERS = ['bt3', 'bt4'];
const NICE_LENGTHS = [64, 96, 128, 160, 192, 273];

function xz(bytes, mf, nice) {
  const args = ['--format=raw', `--lzma1=preset=9e,lc=${LC},lp=${LP},pb=${PB},mf=${mf},nice=${nice}`, '--stdout'];
  const result = spawnSync('xz', args, { input: bytes, maxBuffer: 256 << 20 });
  if (result.error || result.status !== 0) {
    throw new Error(`xz failed (install xz-utils): ${result.error?.message ?? result.stderr.toString()}`);
  }
  return result.stdout;
}

/** The smallest raw LZMA1 stream of `bytes` that xz (Debian's xz-utils, which scripts/setup.sh installs) makes. */
export function lzmaCompress(bytes) {
  let best = null;
  for (const mf of MATCH_FINDERS) {
    for (const nice of NICE_LENGTHS) {
      const stream = xz(bytes, mf, nice);
      if (best === null || stream.length < best.length) best = stream;
    }
  }
  return best;
}

/**
 * `bytes` LZMA-compressed (lzmaCompress) without the end the decoder never reads (-9 B at fbda228): xz ends a
 * raw stream with an end marker and the range coder's flush, but the decoder stops at the known size, and
 * where it reads past the end of its input it reads 0 (js/lzma_decoder.js). Cut as far as the stream still
 * decodes to `bytes`, checked here with the decoder itself.
 */
export function embeddedStream(bytes) {
  const stream = lzmaCompress(bytes);
  const decodes = (end) => {
    try {
      return Buffer.from(lzmaDecode(stream.subarray(0, end), bytes.length, LC, LP, PB)).equals(bytes);
    } catch {
      return false;
    }
  };
  let end = stream.length;
  if (!decodes(end)) throw new Error('embed_wasm: the LZMA stream does not decode to the wasm');
  while (end > 0 && decodes(end - 1)) end--;
  return stream.subarray(0, end);
}

/**
 * The module that replaces the wasm file: its default export is a promise of the bytes (wasm-bindgen's
 * init awaits it), which rejects, and so fails the engine's load and not the script, if decoding throws.
 * The bytes are decoded (base64, then LZMA) once the script has run, so that the storage requests a context
 * starts as it is made (js/wasm_lock_api.js) are under way while the decoder runs; and in steps of
 * `DECODE_STEP` bytes, one per task (a MessageChannel message, which no engine delays as it does nested
 * timers; a timer where a page took MessageChannel away): the page's own scripts and tasks, and the storage
 * events of the context's start, run in between instead of waiting for the whole decoding
 * (tests/e2e/facade/decode_steps.test.mjs).
 * With `lazy`, the default export is instead a function that starts the decoding and returns that promise:
 * the leases' add-on decodes its wasm only at the first lease operation, not while the page starts.
 */
function decodingModule(bytes, { lazy = false } = {}) {
  const packed = embeddedStream(bytes).toString('base64');
  return `import { lzmaDecoder } from './js/lzma_decoder.js';
export default ${lazy ? '() => ' : ''}Promise.resolve().then(() => {
  const text = atob(${JSON.stringify(packed)});
  const packed = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) packed[i] = text.charCodeAt(i);
  const step = lzmaDecoder(packed, ${bytes.length}, ${LC}, ${LP}, ${PB});
  return new Promise((resolve, reject) => {
    const channel = typeof MessageChannel === 'function' ? new MessageChannel() : null;
    const next = () => {
      try {
        const out = step(${DECODE_STEP});
        if (out !== undefined) {
          if (channel !== null) channel.port1.close();
          resolve(out);
        } else if (channel !== null) channel.port2.postMessage(0);
        else setTimeout(next);
      } catch (error) {
        reject(error);
      }
    };
    if (channel !== null) channel.port1.onmessage = next;
    next();
  });
});
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
