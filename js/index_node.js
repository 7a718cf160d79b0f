// weblocks in Node (the package's `node` export condition, e.g. server-side rendering): index.js with
// the wasm read from disk (wasm_source_node.js must be evaluated before index.js: keep it first).
// Locks work within the process; leases reject with a LockError `StorageError` (Node has no IndexedDB).
import './wasm_source_node.js';

export * from './index.js';
