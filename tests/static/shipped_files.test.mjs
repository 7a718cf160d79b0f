// Static checks of every file the package ships (the list `npm pack --dry-run` gives, from the current
// build: run `npm run build` first): each JS file parses as ES2017, the support floor of the main build, and
// the legacy build as ES2015, its own
// (acorn, with `ecmaVersion: 2017`, which rejects every later syntax: `?.`, `??`, class fields, object
// spread, `\p{…}` and the other regular expression features of ES2018, optional catch bindings...), and
// each wasm, the package's and the one the classic script embeds, is WebAssembly MVP
// (scripts/wasm_mvp.mjs: binaryen's validation against the MVP feature set, no i64 between JS and wasm).
//
// The one later syntax allowed is `import.meta` (ES2020), in ES modules only: the glue's default wasm URL
// and js/wasm_source_node.js (Node only) use it, and a bundler replaces it.
//
// Run: npm run build && node --test tests/static/shipped_files.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import * as acorn from 'acorn';
import { repoRoot } from '../e2e/server.mjs';
import { postMvpNeeds } from '../../scripts/wasm_mvp.mjs';

/** The files `npm pack` would put in the package, relative to the repository. */
function shippedFiles() {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: repoRoot, encoding: 'utf8' });
  return JSON.parse(out)[0].files.map((f) => f.path);
}

/** The syntax error acorn finds in `text` (an ES module if it imports or exports) at `ecmaVersion`, or null. */
export function syntaxError(text, ecmaVersion) {
  const isModule = /^\s*(import|export)\b/m.test(text);
  const source = isModule ? text.replace(/\bimport\.meta\b/g, 'import_meta') : text;
  try {
    acorn.parse(source, { ecmaVersion, sourceType: isModule ? 'module' : 'script' });
    return null;
  } catch (e) {
    const line = source.split('\n')[e.loc.line - 1];
    return `${e.message}: ${line.slice(Math.max(0, e.loc.column - 40), e.loc.column + 40)}`;
  }
}

const files = shippedFiles();
const read = (file) => fs.readFileSync(path.join(repoRoot, file), 'utf8');

test("the package ships the ESM entries, the glues, the wasm modules, the classic script and its leases' add-on", () => {
  const expected = [
    'js/index.js',
    'js/lock_api.js',
    'js/leases_entry.js',
    'pkg/weblocks.js',
    'pkg/weblocks_bg.wasm',
    'pkg/weblocks_leases.js',
    'pkg/weblocks_leases_bg.wasm',
    'dist/weblocks.polyfill.js',
    'dist/weblocks.legacy.js',
    'dist/weblocks.leases.js',
    'dist/weblocks.leases-legacy.js',
  ];
  for (const file of expected) {
    assert.ok(files.includes(file), `${file} is not in the package (files: ${files.join(', ')})`);
  }
});

test('every shipped JS file parses as ES2017', () => {
  const js = files.filter((f) => f.endsWith('.js'));
  assert.ok(js.length >= 10, `only ${js.length} JS files shipped`);
  const errors = js.map((f) => [f, syntaxError(read(f), 2017)]).filter(([, e]) => e !== null);
  assert.deepEqual(errors, []);
});

test("the legacy build and its leases' add-on parse as ES2015", () => {
  assert.equal(syntaxError(read('dist/weblocks.legacy.js'), 2015), null);
  assert.equal(syntaxError(read('dist/weblocks.leases-legacy.js'), 2015), null);
});

test('the check rejects syntax newer than ES2017', () => {
  for (const sample of ['a?.b;', 'a ?? b;', 'class A { #x = 1; }', 'x = { ...y };', '/\\p{L}/u;', 'try {} catch {}', 'x = 1_000;']) {
    assert.notEqual(syntaxError(sample, 2017), null, sample);
    assert.equal(syntaxError(sample, 2022), null, sample);
  }
  assert.notEqual(syntaxError('async function f() {}', 2015), null);
  assert.notEqual(syntaxError('x = 2 ** 3;', 2015), null);
});

/**
 * The wasm the classic script `text` embeds, as the script hands it to WebAssembly: the script runs in a
 * bare context (no DecompressionStream, so js/inflate.js inflates) whose `WebAssembly.compile` keeps the
 * bytes (and never settles). With `addOn`, `text` is
 * the leases' add-on: it runs on a stand-in for the classic script's global, and a first lease operation
 * makes it inflate its wasm.
 */
export function embeddedWasm(text, { addOn = false } = {}) {
  return new Promise((resolve, reject) => {
    const WebAssembly = { compile: (bytes) => (resolve(Buffer.from(bytes)), new Promise(() => {})) };
    const context = vm.createContext({ atob, TextEncoder, TextDecoder, console, WebAssembly, setTimeout });
    if (addOn) context.weblocks = { LockManager: function LockManager() {} };
    vm.runInContext(text, context);
    if (addOn) vm.runInContext('weblocks.leases.list()', context);
    setTimeout(() => reject(new Error('the classic script never instantiated its wasm')), 10_000).unref();
  });
}

test('the shipped wasm modules and the wasm the classic files embed are WebAssembly MVP', async () => {
  const wasmFiles = files.filter((f) => f.endsWith('.wasm'));
  assert.deepEqual(wasmFiles, ['pkg/weblocks_bg.wasm', 'pkg/weblocks_leases_bg.wasm']);
  for (const file of wasmFiles) assert.deepEqual(postMvpNeeds(fs.readFileSync(path.join(repoRoot, file))), [], file);
  const embedded = await embeddedWasm(read('dist/weblocks.polyfill.js'));
  assert.ok(embedded.length > 50_000, `the embedded wasm is ${embedded.length} B`);
  assert.deepEqual(postMvpNeeds(embedded), []);
  const embeddedLeases = await embeddedWasm(read('dist/weblocks.leases.js'), { addOn: true });
  assert.ok(embeddedLeases.length > 5_000, `the add-on's embedded wasm is ${embeddedLeases.length} B`);
  assert.deepEqual(postMvpNeeds(embeddedLeases), []);
});

// What only the lease code has: an error code of the lease decisions (src/lease/error.rs, also in
// js/leases.js's LOCK_ERROR_CODES), the lease exports of the wasm edge (src/wasm/lease_operation.rs), and
// the leases' JS (its LockError and its IndexedDB database's name).
const LEASE_CODE = ['AlreadyLocked', 'decideLease', 'leaseKey', 'LockError', 'weblocks-leases'];
const leaseCodeIn = (bytes) => LEASE_CODE.filter((text) => Buffer.from(bytes).includes(text));

test('the lock-only builds carry no lease code; the leases\' wasm and add-on do', async () => {
  const lockOnly = {
    'pkg/weblocks_bg.wasm': fs.readFileSync(path.join(repoRoot, 'pkg/weblocks_bg.wasm')),
    'pkg/weblocks.js': read('pkg/weblocks.js'),
    'dist/weblocks.polyfill.js': read('dist/weblocks.polyfill.js'),
    'the wasm dist/weblocks.polyfill.js embeds': await embeddedWasm(read('dist/weblocks.polyfill.js')),
    'dist/weblocks.legacy.js': read('dist/weblocks.legacy.js'),
  };
  for (const [what, bytes] of Object.entries(lockOnly)) assert.deepEqual(leaseCodeIn(bytes), [], what);
  // The check sees lease code where there is some.
  assert.deepEqual(leaseCodeIn(fs.readFileSync(path.join(repoRoot, 'pkg/weblocks_leases_bg.wasm'))), ['AlreadyLocked', 'decideLease', 'leaseKey', 'LockError']);
  assert.ok(leaseCodeIn(read('dist/weblocks.leases.js')).includes('LockError'));
  assert.ok(leaseCodeIn(read('dist/weblocks.leases-legacy.js')).includes('LockError'));
  assert.ok(leaseCodeIn(await embeddedWasm(read('dist/weblocks.leases.js'), { addOn: true })).includes('AlreadyLocked'));
});

test('the MVP check rejects post-MVP instructions and i64 between JS and wasm', () => {
  const header = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
  const section = (id, bytes) => [id, bytes.length, ...bytes];
  const module = (type, body) =>
    Buffer.from([
      ...header,
      ...section(1, [1, 0x60, ...type]), // one function type
      ...section(3, [1, 0]), // one function, of that type
      ...section(7, [1, 1, 0x66, 0, 0]), // exported as "f"
      ...section(10, [1, body.length, ...body]), // its body
    ]);
  // (param i32) (result i32): local.get 0, end; then with i32.extend8_s (sign extension) before the end.
  assert.deepEqual(postMvpNeeds(module([1, 0x7f, 1, 0x7f], [0, 0x20, 0, 0x0b])), []);
  assert.notDeepEqual(postMvpNeeds(module([1, 0x7f, 1, 0x7f], [0, 0x20, 0, 0xc0, 0x0b])), []);
  // (param i64), exported: callable from JS only with the BigInt integration.
  assert.deepEqual(postMvpNeeds(module([1, 0x7e, 0], [0, 0x0b])), ['export f has an i64 (needs the JS BigInt integration)']);
});
