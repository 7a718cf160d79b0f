// Entry of the classic add-on dist/weblocks.lease-server.js (scripts/build.mjs): adds `serverLeaseStore`,
// the lease service's store, to the `weblocks` global of dist/weblocks.polyfill.js, which must be loaded
// first. It is a file of its own so that pages that do not use the service do not pay for it: the classic
// script keeps its size budget.
import { serverLeaseStore } from './lease_server_store.js';

const api = globalThis.weblocks;
if (typeof api !== 'object' || api === null || typeof api.createLeases !== 'function') {
  throw new Error('weblocks.lease-server.js needs weblocks.polyfill.js: load that first');
}
api.serverLeaseStore = serverLeaseStore;
