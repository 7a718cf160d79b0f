// weblocks/polyfill in Node (the `node` export condition): polyfill.js with the wasm read from disk. It
// installs only where the runtime has a `navigator` without `locks` (Node 20 has no `navigator` at all).
import './wasm_source_node.js';
import './polyfill.js';
