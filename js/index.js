// weblocks, the ponyfill: `import { locks } from 'weblocks'` gives a LockManager that behaves like
// `navigator.locks` without touching any global. `install()` installs it as `navigator.locks` (and the
// globals `LockManager`, `Lock`) where the platform has none; it returns true if it installed.
// Leases are an add-on with a module and a wasm of their own: `import { leases } from 'weblocks/leases'`
// (js/leases_entry.js).
import { createWasmLockApi } from './wasm_lock_api.js';

export const { locks, LockManager, Lock, clientId, ready, install, close } = createWasmLockApi();
