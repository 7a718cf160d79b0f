// Server-side rendering: the packed package, installed from its tarball, imported by bare name in Node.
// Node resolves the `node` export condition (js/index_node.js: the wasm read with node:fs), import does
// not throw, locks work within the process; `weblocks/leases` resolves to its own `node` entry
// (js/leases_entry_node.js), whose IndexedDB leases reject with a LockError saying IndexedDB is missing (its
// wasm loaded from disk); `weblocks/polyfill` installs nothing where there is no `navigator`, and the
// process exits by itself afterwards.
//
// Run: npm run build && node --test tests/e2e/package/package_ssr.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fixturesRoot, makeApp } from '../package_install.mjs';

const { expectedReport } = await import(path.join(fixturesRoot, 'shared', 'lock_checks.js'));

let app;

before(() => {
  app = makeApp('ssr');
});

after(() => app?.remove());

/** Run `node script` in the app directory; resolves with its stdout, rejects on failure or timeout. */
function runNode(script, timeout = 15_000) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [script], { cwd: app.dir, timeout }, (error, stdout, stderr) => {
      if (error) reject(new Error(`node ${script} failed (${error.signal ?? error.code}): ${stderr}`));
      else resolve(stdout);
    });
  });
}

test('SSR: import in Node, locks work within the process, the process exits by itself', { timeout: 30_000 }, async () => {
  const started = Date.now();
  const report = JSON.parse(await runNode(path.join(app.dir, 'ssr_checks.mjs')));
  const elapsed = Date.now() - started;

  assert.equal(report.resolved, 'js/index_node.js', 'Node takes the `node` export condition');
  assert.deepEqual(report.exports, ['Lock', 'LockManager', 'clientId', 'close', 'install', 'locks', 'ready']);
  assert.equal(report.leasesResolved, 'js/leases_entry_node.js');
  assert.deepEqual(report.leasesExports, ['LockError', 'createLeases', 'leases', 'serverLeaseStore']);
  // Exclusive (FIFO, ifAvailable), shared, query, steal and abort within the process.
  assert.deepEqual(report.exercise, expectedReport);

  assert.match(report.leases, /^true StorageError .*IndexedDB/, 'leases reject with a LockError: Node has no IndexedDB');
  assert.equal(report.navigatorAfterPolyfill, typeof navigator === 'undefined' ? 'none' : 'object');
  assert.equal(report.installed, true, 'install() into a navigator-like object');
  assert.equal(report.installedSame, true);
  assert.equal(report.installedTwice, false, 'install() leaves an existing navigator.locks alone');
  // The script itself takes well under a second; a handle left open (a port, a timer) would hold the
  // process until the 15 s timeout, and execFile would then fail.
  assert.ok(elapsed < 10_000, `the process took ${elapsed} ms to exit`);
});
