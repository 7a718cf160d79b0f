// `node scripts/size/wasm_functions.mjs [N]`: where the release wasm's bytes are. Takes the linked wasm of
// the last `npm run build` (target/size/…/weblocks.wasm), runs wasm-bindgen (keeping the names) and
// wasm-opt with the build's passes plus `-g`, and prints the code bytes per source module and the N largest
// functions (default 40), by their Rust names. The shipped wasm is this one without its name section (the
// classic script's also without the exports its glue does not use).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { withoutTargetFeatures } from '../wasm_mvp.mjs';
import { WASM_OPT_PASSES } from './compiler_flags.mjs';
import { readUleb, sections } from './wasm_names.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const CODE_SECTION = 10;

function run(command, args) {
  const result = spawnSync(command, args, { encoding: 'utf8' });
  if (result.error || result.status !== 0) throw new Error(`${command} failed: ${result.error?.message ?? result.stderr}`);
}

/** The optimized wasm with its name section, as bytes. */
function namedWasm() {
  const linked = path.join(root, 'target', 'size', 'wasm32-unknown-unknown', 'release', 'weblocks.wasm');
  if (!fs.existsSync(linked)) throw new Error(`${path.relative(root, linked)} is missing: run \`npm run build\` first`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'weblocks-functions-'));
  try {
    const input = path.join(dir, 'weblocks.wasm');
    fs.writeFileSync(input, withoutTargetFeatures(fs.readFileSync(linked)));
    run('wasm-bindgen', ['--target', 'web', '--no-typescript', '--keep-debug', '--out-dir', dir, input]);
    const output = path.join(dir, 'named.wasm');
    const wasmOpt = path.join(root, 'node_modules', '.bin', 'wasm-opt');
    run(wasmOpt, ['-g', '--mvp-features', ...WASM_OPT_PASSES, path.join(dir, 'weblocks_bg.wasm'), '-o', output]);
    return fs.readFileSync(output);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Function index -> name, from the name section. */
function functionNames(wasm) {
  const names = new Map();
  for (const { id, start, end } of sections(wasm)) {
    const [length, at] = readUleb(wasm, start);
    if (id !== 0 || Buffer.from(wasm.subarray(at, at + length)).toString() !== 'name') continue;
    for (let p = at + length; p < end; ) {
      const kind = wasm[p];
      const [size, body] = readUleb(wasm, p + 1);
      if (kind === 1) {
        let [count, q] = readUleb(wasm, body);
        for (; count > 0; count--) {
          let index;
          [index, q] = readUleb(wasm, q);
          const [nameLength, nameStart] = readUleb(wasm, q);
          names.set(index, Buffer.from(wasm.subarray(nameStart, nameStart + nameLength)).toString());
          q = nameStart + nameLength;
        }
      }
      p = body + size;
    }
  }
  return names;
}

/** The number of imported functions (the code section's first function comes after them). */
function importedFunctions(wasm) {
  const section = sections(wasm).find((s) => s.id === 2);
  if (section === undefined) return 0;
  let [count, at] = readUleb(wasm, section.start);
  let functions = 0;
  const skipName = () => {
    const [length, start] = readUleb(wasm, at);
    at = start + length;
  };
  const skipLimits = () => {
    const flags = wasm[at++];
    at = readUleb(wasm, at)[1];
    if (flags & 1) at = readUleb(wasm, at)[1];
  };
  for (; count > 0; count--) {
    skipName();
    skipName();
    const kind = wasm[at++];
    if (kind === 0) {
      functions++;
      at = readUleb(wasm, at)[1];
    } else if (kind === 1) {
      at++;
      skipLimits();
    } else if (kind === 2) {
      skipLimits();
    } else {
      at += 2;
    }
  }
  return functions;
}

/** `{ name, size }` of every function, and the module it belongs to (its path without the last part). */
export function functionSizes(wasm) {
  const names = functionNames(wasm);
  const first = importedFunctions(wasm);
  const code = sections(wasm).find((s) => s.id === CODE_SECTION);
  let [count, at] = readUleb(wasm, code.start);
  const rows = [];
  for (let i = 0; i < count; i++) {
    const [size, body] = readUleb(wasm, at);
    const name = (names.get(first + i) ?? `function ${first + i}`).replace(/\[[0-9a-f]{16}\]/g, '');
    const path = /^<*([a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)+)/.exec(name);
    rows.push({ name, size, module: path ? path[1].split('::').slice(0, 3).join('::') : '(exports, runtime)' });
    at = body + size;
  }
  return rows;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const top = Number(process.argv[2] ?? 40);
  const rows = functionSizes(namedWasm());
  const total = rows.reduce((sum, r) => sum + r.size, 0);
  console.log(`${rows.length} functions, ${total} B of code\n\nby module:`);
  const modules = new Map();
  for (const { module, size } of rows) modules.set(module, (modules.get(module) ?? 0) + size);
  for (const [module, size] of [...modules].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(`${String(size).padStart(7)}  ${module}`);
  console.log(`\nthe ${top} largest functions:`);
  for (const { name, size } of rows.sort((a, b) => b.size - a.size).slice(0, top)) console.log(`${String(size).padStart(7)}  ${name.slice(0, 150)}`);
}
