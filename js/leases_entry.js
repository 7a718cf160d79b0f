// weblocks/leases, the leases add-on of the ESM package (docs/LEASES.md): `leases`, the origin's leases in
// IndexedDB; `createLeases(store)`, the same API over another store; `serverLeaseStore`, the lease service's
// store; `LockError`. A module apart from `weblocks` so that apps that use no leases load neither their
// code nor their wasm (js/lease_wasm.js), which this entry loads on the first lease operation. Leases need
// no lock engine: this entry works with or without `weblocks`, or with a native `navigator.locks`.
import { createWasmLeases } from './leases.js';
import { leaseWasmReady } from './lease_wasm.js';

export { LockError, createLeases } from './leases.js';
export { serverLeaseStore } from './lease_server_store.js';
export const leases = createWasmLeases(leaseWasmReady);
