// The three bundlers the package's tests build apps with (tests/e2e/package_bundlers*.test.mjs), run from
// this repository's node_modules (devDependencies) on a temporary app (package_install.mjs). Each is
// `(app, outDir, { entries, wasm, html })`: `entries`, the app's entry modules for esbuild (Vite builds
// from the app's index.html, webpack from src/main.js); `wasm`, the package's wasm files the app loads,
// which esbuild leaves as `new URL('….wasm', import.meta.url)`, so they are copied next to its bundle;
// `html`, the page that esbuild's and webpack's outputs get.
import fs from 'node:fs';
import path from 'node:path';
import * as esbuild from 'esbuild';
import { build as viteBuild } from 'vite';
import webpack from 'webpack';

export const bundlers = {
  async vite(app, outDir) {
    await viteBuild({
      root: app.dir,
      configFile: false,
      logLevel: 'warn',
      build: { outDir, emptyOutDir: true },
      worker: { format: 'es' }, // a module worker, as `new Worker(url, { type: 'module' })` asks
    });
  },

  async esbuild(app, outDir, { entries, wasm, html }) {
    await esbuild.build({
      absWorkingDir: app.dir,
      entryPoints: entries,
      bundle: true,
      format: 'esm',
      outdir: outDir,
      logLevel: 'warning',
    });
    for (const file of wasm) fs.copyFileSync(path.join(app.dir, 'node_modules', 'weblocks', 'pkg', file), path.join(outDir, file));
    fs.writeFileSync(path.join(outDir, 'index.html'), html);
  },

  async webpack(app, outDir, { html }) {
    const stats = await new Promise((resolve, reject) =>
      webpack(
        {
          mode: 'production',
          context: app.dir,
          entry: { main: './src/main.js' },
          output: { path: outDir, filename: '[name].js', clean: true },
          target: 'web',
          devtool: false,
          infrastructureLogging: { level: 'warn' },
        },
        (error, result) => (error ? reject(error) : resolve(result)),
      ),
    );
    if (stats.hasErrors()) throw new Error(stats.toString({ all: false, errors: true }));
    fs.writeFileSync(path.join(outDir, 'index.html'), html);
  },
};

/** The .wasm files under `dir`, relative paths. */
export function wasmFilesIn(dir) {
  return fs
    .readdirSync(dir, { recursive: true })
    .map(String)
    .filter((f) => f.endsWith('.wasm'));
}
