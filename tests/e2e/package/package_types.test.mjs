// TypeScript declarations (types/*.d.ts) as a consumer meets them: the packed package installed from its
// tarball, `tsc --noEmit` over sample code (tests/fixtures/apps/types) that imports 'weblocks' and
// 'weblocks/leases' by name,
// through package.json's `exports` `types` conditions:
// - src/: code written for the native API, the extensions, 'weblocks/polyfill', the classic script's global
//   (and the legacy build's),
//   with lib "dom", under moduleResolution nodenext and bundler;
// - worker/: a module worker with lib "webworker" (no "dom");
// - the declared exports of each entry are exactly the runtime's (a file generated from the module's real
//   export names);
// - errors/: each file holds one deliberate type error and must fail with the code its first line names.
//
// Run: npm run build && node --test tests/e2e/package/package_types.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../server.mjs';
import { makeApp } from '../package_install.mjs';

const tsc = path.join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc');

let app;

before(() => {
  assert.ok(fs.existsSync(tsc), 'typescript is missing: run `npm ci`');
  app = makeApp('types');
});

after(() => app?.remove());

/** Run tsc on a project file of the app; resolves with `{ code, errors: ['file(line,col): TSnnnn', ...], output }`. */
function runTsc(project) {
  return new Promise((resolve) => {
    execFile(process.execPath, [tsc, '-p', project, '--pretty', 'false'], { cwd: app.dir, timeout: 60_000 }, (error, stdout, stderr) => {
      const output = stdout + stderr;
      const errors = [...output.matchAll(/^(\S+)\((\d+),(\d+)\): error (TS\d+)/gm)].map((m) => `${m[1]}(${m[2]},${m[3]}): ${m[4]}`);
      resolve({ code: error ? (error.code ?? error.signal) : 0, errors, output });
    });
  });
}

for (const project of ['tsconfig.json', 'tsconfig.bundler.json', 'tsconfig.worker.json']) {
  test(`tsc --noEmit -p ${project}: the samples type-check`, { timeout: 60_000 }, async () => {
    const result = await runTsc(project);
    assert.equal(result.code, 0, result.output);
    assert.deepEqual(result.errors, []);
  });
}

for (const [specifier, file] of [
  ['weblocks', 'exact.ts'],
  ['weblocks/leases', 'exact_leases.ts'],
]) {
  test(`the declared exports of '${specifier}' are exactly its runtime exports`, { timeout: 60_000 }, async () => {
    const names = JSON.parse(
      execFileSync(process.execPath, ['--input-type=module', '-e', `console.log(JSON.stringify(Object.keys(await import('${specifier}'))))`], {
        cwd: app.dir,
        encoding: 'utf8',
      }),
    );
    assert.ok(names.length >= 4, `runtime exports: ${names}`);
    // An object literal typed Record<declared names, true>: a runtime name that is not declared is an
    // excess property (TS2353), a declared name missing at runtime a missing property (TS2741/TS2739).
    const source = path.join(app.dir, 'exports', file);
    fs.mkdirSync(path.dirname(source), { recursive: true });
    fs.writeFileSync(
      source,
      `import * as module from '${specifier}';\n` +
        `export const exact: Record<keyof typeof module, true> = { ${names.map((n) => `${n}: true`).join(', ')} };\n`,
    );
    const project = `tsconfig.exports.${path.basename(file, '.ts')}.json`;
    fs.writeFileSync(path.join(app.dir, project), JSON.stringify({ extends: './tsconfig.base.json', files: [`exports/${file}`] }));
    const result = await runTsc(project);
    assert.equal(result.code, 0, `declared and runtime exports differ (runtime: ${names.join(', ')}):\n${result.output}`);
  });
}

const errorFiles = fs.readdirSync(path.join(repoRoot, 'tests', 'fixtures', 'apps', 'types', 'errors')).filter((f) => f.endsWith('.ts'));

test('the negative samples exist', () => {
  assert.ok(errorFiles.length >= 5, `${errorFiles}`);
});

for (const name of errorFiles) {
  test(`tsc rejects errors/${name}`, { timeout: 60_000 }, async () => {
    const source = fs.readFileSync(path.join(app.dir, 'errors', name), 'utf8');
    const expected = /^\/\/ expect: (TS\d+)/.exec(source)?.[1];
    assert.ok(expected, `errors/${name} must start with "// expect: TSnnnn"`);
    const project = `tsconfig.error.${path.basename(name, '.ts')}.json`;
    fs.writeFileSync(path.join(app.dir, project), JSON.stringify({ extends: './tsconfig.base.json', files: [`errors/${name}`] }));
    const result = await runTsc(project);
    assert.notEqual(result.code, 0, `tsc accepted errors/${name}:\n${result.output}`);
    assert.deepEqual(
      result.errors.map((e) => e.replace(/^.*: /, '')),
      [expected],
      `errors/${name}: expected exactly one ${expected}:\n${result.output}`,
    );
    assert.ok(result.errors[0].startsWith(`errors/${name}(`), result.output);
  });
}
