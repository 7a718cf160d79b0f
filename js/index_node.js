// weblocks in Node (the package's `node` export condition, e.g. server-side rendering): index.js with
// the wasm read from disk (wasm_source_node.js must be evaluated before index.js: keep it first).
// Locks work within the process.
import './wasm_source_node.js';

export * from './index.js';
