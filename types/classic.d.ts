// The classic script (dist/weblocks.polyfill.js), and the legacy build for engines without WebAssembly
// (dist/weblocks.legacy.js, the same API), install the polyfill where `navigator.locks` is missing and
// define one global, `weblocks`, holding the ponyfill's exports. In TypeScript code for a page that loads
// either with a <script> tag: `/// <reference types="weblocks/classic" />` (or "weblocks/legacy").
// `serverLeaseStore` is there only once the add-on dist/weblocks.lease-server.js is loaded too (after the
// classic script).
declare global {
  var weblocks: Omit<typeof import('./index.js'), 'serverLeaseStore'> & {
    serverLeaseStore?: typeof import('./index.js').serverLeaseStore;
  };
}
export {};
