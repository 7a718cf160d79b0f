// weblocks, the ponyfill: `import { locks } from 'weblocks'` gives a LockManager that behaves like
// `navigator.locks` without touching any global. `install()` installs it as `navigator.locks` (and the
// globals `LockManager`, `Lock`) where the platform has none; it returns true if it installed.
import { createWasmLockApi } from './wasm_lock_api.js';
import { createWasmLeases } from './leases.js';

export const { locks, LockManager, Lock, clientId, ready, install } = createWasmLockApi();

// Leases (an extension, docs/LEASES.md): locks that outlive a page load, kept in IndexedDB.
export { LockError, createLeases } from './leases.js';
export const leases = createWasmLeases(() => ready);
// The same API over the lease service, between users: `createLeases(serverLeaseStore({ url, token }))`.
export { serverLeaseStore } from './lease_server_store.js';
