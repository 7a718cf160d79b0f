// esbuild plugin for the classic build (scripts/build.mjs): `import wasmBytes from '../pkg/x.wasm'` gives
// a promise of the wasm's bytes, embedded DEFLATE-compressed and base64-encoded, and inflated when the
// script runs (natively, or by tiny-inflate, ~1.5 KB gzipped, in older browsers). Plain base64 of the
// wasm (esbuild's 'binary' loader) is a third bigger and gzips poorly (+19 KB gzipped for a 135 KB wasm);
// base64 of deflated bytes costs ~1% over the gzipped wasm itself, and the raw file (file://, servers
// without gzip) is about half the size.
import fs from 'node:fs/promises';
import path from 'node:path';
import zopfli from '@gfx/zopfli';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The module that replaces the wasm file: its default export is a promise of the bytes (wasm-bindgen's
 * init awaits it). The browser's DecompressionStream('deflate-raw') inflates them where it exists
 * (Chrome 103, Firefox 113, Safari 16.4); older browsers use tiny-inflate, synchronously (~10 ms).
 */
async function inflatingModule(bytes) {
  // Zopfli writes plain DEFLATE that any inflater reads, ~5% smaller than zlib -9 (-3.7 KB on a 160 KB wasm).
  const packed = Buffer.from(await zopfli.deflateAsync(bytes, { numiterations: 15 })).toString('base64');
  return `import tinyInflate from 'tiny-inflate';
const text = atob(${JSON.stringify(packed)});
const packed = new Uint8Array(text.length);
for (let i = 0; i < text.length; i++) packed[i] = text.charCodeAt(i);
function inflateInJs() {
  return tinyInflate(packed, new Uint8Array(${bytes.length}));
}
function inflate() {
  let stream;
  try {
    stream = new Blob([packed]).stream().pipeThrough(new DecompressionStream('deflate-raw'));
  } catch {
    return Promise.resolve(inflateInJs()); // no DecompressionStream, or no 'deflate-raw'
  }
  return new Response(stream).arrayBuffer().then((buffer) => new Uint8Array(buffer), inflateInJs);
}
export default inflate();
`;
}

export function embedDeflatedWasm() {
  return {
    name: 'embed-deflated-wasm',
    setup(build) {
      build.onLoad({ filter: /\.wasm$/ }, async (args) => ({
        contents: await inflatingModule(await fs.readFile(args.path)),
        loader: 'js',
        resolveDir: root, // tiny-inflate: a devDependency, bundled into the script
      }));
    },
  };
}
