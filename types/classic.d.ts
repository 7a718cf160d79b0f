// The classic script (dist/weblocks.polyfill.js), and the legacy build for engines without WebAssembly
// (dist/weblocks.legacy.js, the same API), install the polyfill where `navigator.locks` is missing and
// define one global, `weblocks`, holding the ponyfill's exports. In TypeScript code for a page that loads
// either with a <script> tag: `/// <reference types="weblocks/classic" />` (or "weblocks/legacy").
// The leases (`leases`, `createLeases`, `LockError`, `serverLeaseStore`) are there only once the add-on
// dist/weblocks.leases.js (or, after the legacy build, dist/weblocks.leases-legacy.js) is loaded too:
// optional.
declare global {
  var weblocks: typeof import('./index.js') & Partial<typeof import('./leases.js')>;
}
export {};
