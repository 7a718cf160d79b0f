// The classic script's text once esbuild has written it (scripts/build.mjs): minified a second time by
// terser, then the embedded wasm's base64 moved to the top. Each pass checks the shape it expects and
// throws on another, so a build of another shape fails instead of shipping half-done.
import { minify } from 'terser';

/**
 * terser over esbuild's minified output, at the classic script's syntax level (ES2017). Its mangler names
 * the variables of each scope by how often they occur, and its compressor joins and folds what esbuild
 * leaves; the two minifiers together beat either alone. Options beyond the defaults: several passes, and
 * no comma sequences (the same statements gzip better unjoined). `pure_getters: false`: a property read
 * is never taken as free of effects (a getter may throw, as `localStorage` does where storage is
 * disabled). Top-level names are kept, though there are none: the entries make their globals themselves.
 */
export async function minifyAgain(text) {
  const result = await minify(text, {
    ecma: 2017,
    module: false,
    toplevel: false,
    compress: { ecma: 2017, passes: 3, sequences: false, pure_getters: false },
    mangle: true,
    format: { ecma: 2017, comments: false },
  });
  return result.code.endsWith('\n') ? result.code : `${result.code}\n`;
}

// The name of the embedded wasm's text once hoisted; `$` + a word neither minifier makes.
const HOISTED_WASM = '$wasm';

/**
 * A classic file with the embedded wasm's base64 text moved to the top of the IIFE, `var $wasm="…"`,
 * ahead of all code. The bundlers leave it where its module falls (after their runtime helpers and the
 * LZMA decoder), and there the 40 KB of base64 splits the JS in two: deflate's 32 KB window cannot reach
 * from the code after it back to the code before it. First, the JS stays whole: better than the bundler's
 * layout for GNU gzip and Node's zlib alike (at the end of the file, GNU gzip does a little better and zlib
 * worse).
 */
export function hoistEmbeddedWasm(text) {
  const prologue = /^(?:\(\(\)=>\{|!function\(\)\{|\(function\(\)\{)/.exec(text);
  const blobs = [...text.matchAll(/atob\(("[A-Za-z0-9+/=]{1000,}")\)/g)];
  if (prologue === null || blobs.length !== 1 || text.includes(HOISTED_WASM)) {
    throw new Error('classic_text: a classic build is not shaped as expected (IIFE, one atob of the embedded wasm): cannot hoist the wasm');
  }
  const [blob] = blobs;
  const rest = text.slice(0, blob.index) + `atob(${HOISTED_WASM})` + text.slice(blob.index + blob[0].length);
  return `${prologue[0]}var ${HOISTED_WASM}=${blob[1]};${rest.slice(prologue[0].length)}`;
}
