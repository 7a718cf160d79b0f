// The classic script (dist/weblocks.polyfill.js) installs the polyfill where `navigator.locks` is missing
// and defines one global, `weblocks`, holding the ponyfill's exports. In TypeScript code for a page that
// loads it with a <script> tag: `/// <reference types="weblocks/classic" />`.
declare global {
  var weblocks: typeof import('./index.js');
}
export {};
