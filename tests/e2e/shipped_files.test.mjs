// Static checks of every file the package ships (the list `npm pack --dry-run` gives, from the current
// build: run `npm run build` first): each JS file parses as ES2017, the support floor of the main build
// (acorn, with `ecmaVersion: 2017`, which rejects every later syntax: `?.`, `??`, class fields, object
// spread, `\p{…}` and the other regular expression features of ES2018, optional catch bindings...).
//
// The one later syntax allowed is `import.meta` (ES2020), in ES modules only: the glue's default wasm URL
// and js/wasm_source_node.js (Node only) use it, and a bundler replaces it.
//
// Run: npm run build && node --test tests/e2e/shipped_files.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import * as acorn from 'acorn';
import { repoRoot } from './server.mjs';

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

test('the package ships the ESM entry, the glue, the wasm and the classic script', () => {
  for (const file of ['js/index.js', 'js/lock_api.js', 'pkg/weblocks.js', 'pkg/weblocks_bg.wasm', 'dist/weblocks.polyfill.js']) {
    assert.ok(files.includes(file), `${file} is not in the package (files: ${files.join(', ')})`);
  }
});

test('every shipped JS file parses as ES2017', () => {
  const js = files.filter((f) => f.endsWith('.js'));
  assert.ok(js.length >= 10, `only ${js.length} JS files shipped`);
  const errors = js.map((f) => [f, syntaxError(read(f), 2017)]).filter(([, e]) => e !== null);
  assert.deepEqual(errors, []);
});

test('the check rejects syntax newer than ES2017', () => {
  for (const sample of ['a?.b;', 'a ?? b;', 'class A { #x = 1; }', 'x = { ...y };', '/\\p{L}/u;', 'try {} catch {}', 'x = 1_000;']) {
    assert.notEqual(syntaxError(sample, 2017), null, sample);
    assert.equal(syntaxError(sample, 2022), null, sample);
  }
});
