// The classic script (dist/weblocks.polyfill.js) installs the polyfill where `navigator.locks` is missing
// and defines one global, `weblocks`, holding the ponyfill's exports. In TypeScript code for a page that
// loads it with a <script> tag: `/// <reference types="weblocks/classic" />`. `serverLeaseStore` is there
// only once the add-on dist/weblocks.lease-server.js is loaded too (after the classic script).
declare global {
  var weblocks: Omit<typeof import('./index.js'), 'serverLeaseStore'> & {
    serverLeaseStore?: typeof import('./index.js').serverLeaseStore;
  };
}
export {};
