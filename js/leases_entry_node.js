// weblocks/leases in Node (the `node` export condition, e.g. server-side rendering): leases_entry.js with
// the leases' wasm read from disk, as Node cannot fetch a file: URL. `serverLeaseStore` works; the IndexedDB
// leases reject with a LockError `StorageError` (Node has no IndexedDB).
import { readFile } from 'node:fs/promises';
import { setLeaseWasmSource } from './lease_wasm.js';

export * from './leases_entry.js';

setLeaseWasmSource(() => readFile(new URL('../pkg/weblocks_leases_bg.wasm', import.meta.url)));
