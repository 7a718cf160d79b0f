// The package as a user gets it: `npm pack` of this repository (so only what package.json's `files`
// lists, resolved through its `exports`), installed from the tarball (a copy, not a link) into a fresh
// app directory outside the repository. Used by tests/e2e/package_*.test.mjs; needs `npm run build`.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from './server.mjs';

export const fixturesRoot = path.join(repoRoot, 'tests', 'fixtures', 'apps');

const built = ['pkg/weblocks.js', 'pkg/weblocks_bg.wasm', 'dist/weblocks.polyfill.js'];

function npm(args, cwd) {
  return execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** `npm pack` the repository into `dir`; returns the tarball's path. */
export function packTarball(dir) {
  for (const file of built) {
    if (!fs.existsSync(path.join(repoRoot, file))) throw new Error(`${file} is missing: run \`npm run build\` first`);
  }
  const [{ filename }] = JSON.parse(npm(['pack', '--json', '--ignore-scripts', '--pack-destination', dir], repoRoot));
  return path.join(dir, filename);
}

/**
 * Make a temporary app directory: copy the fixture `tests/fixtures/apps/<fixture>` into it (and
 * `tests/fixtures/apps/shared/` into its `shared/`), pack the
 * repository and `npm install` the tarball there (offline: the package has no dependencies).
 * Returns `{ dir, tarball, remove }`.
 */
export function makeApp(fixture) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `weblocks-${fixture}-`));
  const remove = () => fs.rmSync(dir, { recursive: true, force: true });
  try {
    fs.cpSync(path.join(fixturesRoot, fixture), dir, { recursive: true });
    fs.cpSync(path.join(fixturesRoot, 'shared'), path.join(dir, 'shared'), { recursive: true });
    const tarball = packTarball(dir);
    npm(['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', '--no-package-lock', tarball], dir);
    const installed = path.join(dir, 'node_modules', 'weblocks');
    if (fs.lstatSync(installed).isSymbolicLink()) throw new Error('weblocks was linked, not installed from the tarball');
    return { dir, tarball, remove };
  } catch (e) {
    remove();
    throw e;
  }
}
