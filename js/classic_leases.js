// Entry of the classic add-on dist/weblocks.leases.js, and of its legacy twin dist/weblocks.leases-legacy.js
// (scripts/build.mjs): leases for a page or worker that loaded the classic script dist/weblocks.polyfill.js
// (or the legacy build) first. It adds the exports of `weblocks/leases` to that script's `weblocks` global:
// `leases` (IndexedDB), `createLeases`, `LockError` and `serverLeaseStore` (the lease service's store). The
// leases' wasm is embedded, and decoded and compiled only at the first lease operation, so that loading the
// add-on costs the page's first lock nothing.
import { LockError, createLeases, createWasmLeases } from './leases.js';
import { serverLeaseStore } from './lease_server_store.js';
import { leaseWasmReady, setLeaseWasmSource } from './lease_wasm.js';
import { theGlobal } from './global_object.js';
import decodeWasm from '../pkg/weblocks_leases_bg.wasm';

const api = theGlobal.weblocks;
if (typeof api !== 'object' || api === null || typeof api.LockManager !== 'function') {
  throw new Error('weblocks.leases.js needs the classic script weblocks.polyfill.js (or weblocks.legacy.js): load that first');
}
// Loaded a second time, the first add-on's objects stay, so that `instanceof LockError` holds.
if (api.leases === undefined) {
  setLeaseWasmSource(decodeWasm);
  Object.assign(api, { leases: createWasmLeases(leaseWasmReady), LockError, createLeases, serverLeaseStore });
}
