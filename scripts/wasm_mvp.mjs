// The check that a wasm module needs nothing newer than WebAssembly MVP, the support floor of the main build
// (Chrome 57, Firefox 52, Safari 11): scripts/build.mjs fails if the wasm it ships does, and
// tests/static/shipped_files.test.mjs checks the shipped files again.
//  - binaryen validates the module against the MVP feature set (`wasm-opt --mvp-features`): no reference
//    types (externref), multi-value, bulk memory, sign extension, non-trapping float-to-int, mutable
//    globals imported or exported, SIMD...;
//  - and no function that JS calls or that calls JS (an import or an export) takes or returns an i64:
//    engines before the JS BigInt integration (Chrome 85, Firefox 78, Safari 14.1) throw a TypeError at
//    such a call, which a feature set does not capture (i64 itself is MVP).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readNames, readUleb, sections } from './size/wasm_names.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TYPE_SECTION = 1;
const FUNCTION_SECTION = 3;
const I64 = 0x7e;

/** Each function type of `wasm` as `{ params, results }` (arrays of value type bytes). */
function functionTypes(wasm) {
  const section = sections(wasm).find((s) => s.id === TYPE_SECTION);
  if (section === undefined) return [];
  let [count, at] = readUleb(wasm, section.start);
  const types = [];
  for (; count > 0; count--) {
    if (wasm[at++] !== 0x60) throw new Error('wasm_mvp: a type that is not a function type');
    const vector = () => {
      const [n, start] = readUleb(wasm, at);
      at = start + n;
      return [...wasm.subarray(start, at)];
    };
    const params = vector();
    types.push({ params, results: vector() });
  }
  return types;
}

/** The type index of every function of `wasm`, imported ones first (the function index space). */
function functionTypeIndices(wasm, imports) {
  const indices = imports.filter((i) => i.descriptor[0] === 0).map((i) => readUleb(i.descriptor, 1)[0]);
  const section = sections(wasm).find((s) => s.id === FUNCTION_SECTION);
  if (section !== undefined) {
    let [count, at] = readUleb(wasm, section.start);
    for (let index; count > 0; count--) {
      [index, at] = readUleb(wasm, at);
      indices.push(index);
    }
  }
  return indices;
}

/** The imports and exports of `wasm` whose function type has an i64, as `import x.y` / `export z`. */
export function i64AtTheBoundary(wasm) {
  const types = functionTypes(wasm);
  const { imports, exports } = readNames(wasm);
  const typeIndices = functionTypeIndices(wasm, imports);
  const hasI64 = (typeIndex) => [...types[typeIndex].params, ...types[typeIndex].results].includes(I64);
  const found = [];
  for (const i of imports) {
    if (i.descriptor[0] === 0 && hasI64(readUleb(i.descriptor, 1)[0])) found.push(`import ${i.module}.${i.name}`);
  }
  for (const e of exports) {
    if (e.descriptor[0] === 0 && hasI64(typeIndices[readUleb(e.descriptor, 1)[0]])) found.push(`export ${e.name}`);
  }
  return found;
}

/** What makes `wasm` (bytes) more than MVP, as readable lines; empty if nothing. */
export function postMvpNeeds(wasm) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'weblocks-mvp-'));
  try {
    const file = path.join(dir, 'check.wasm');
    // Without the target features section: binaryen allows what it lists, whatever the command line says.
    fs.writeFileSync(file, withoutTargetFeatures(wasm));
    const wasmOpt = path.join(root, 'node_modules', '.bin', 'wasm-opt');
    const result = spawnSync(wasmOpt, ['--mvp-features', file, '-o', path.join(dir, 'out.wasm')], { encoding: 'utf8' });
    if (result.error) throw new Error(`wasm-opt could not start (run \`npm install\`): ${result.error.message}`);
    const needs = [];
    if (result.status !== 0) {
      const errors = result.stderr.split('\n').filter((line) => /validator error|Fatal/.test(line));
      needs.push(...new Set(errors.map((line) => line.replace(/ in function \d+/, ''))));
    }
    needs.push(...i64AtTheBoundary(wasm).map((what) => `${what} has an i64 (needs the JS BigInt integration)`));
    return needs;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * `wasm` without its `target_features` custom section. The linker writes there every feature any object
 * file was compiled with, including those of a precompiled std that the LTO build does not use, and
 * wasm-bindgen emits externref glue when it lists reference types (and binaryen validates against it):
 * once `postMvpNeeds` found nothing newer than MVP in the code, the section only misleads.
 */
export function withoutTargetFeatures(wasm) {
  const parts = [wasm.subarray(0, 8)];
  for (const { id, offset, start, end } of sections(wasm)) {
    const [nameLength, nameStart] = readUleb(wasm, start);
    const isTargetFeatures = id === 0 && Buffer.from(wasm.subarray(nameStart, nameStart + nameLength)).toString() === 'target_features';
    if (!isTargetFeatures) parts.push(wasm.subarray(offset, end));
  }
  return Buffer.concat(parts);
}
