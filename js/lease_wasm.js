// The leases' wasm (pkg/weblocks_leases_bg.wasm: the lease decisions of src/lease/ and their edge,
// src/wasm/lease_operation.rs), a module apart from the lock engine's so that pages that use no leases do
// not load it. `leaseWasmReady()` initialises wasm-bindgen's glue once per realm, on the first lease
// operation (js/leases.js awaits it before opening its store), and resolves once the glue's exports
// (`leaseKey`, `decideLease`, `decideLeaseList`: js/lease_idb_store.js) can be called.
import init from '../pkg/weblocks_leases.js';

// What the glue's init is given: by default nothing, so it fetches the wasm next to the glue; an entry
// that has the wasm another way says so first (the classic add-on: its embedded bytes; Node: the file).
let loadSource = () => undefined;
let initialized = null;

/** `load()` returns what wasm-bindgen's init accepts (bytes, a promise of them, a URL, a Response). */
export function setLeaseWasmSource(load) {
  loadSource = load;
}

/**
 * Resolves once the leases' wasm is initialised; rejects, saying so, if it cannot load (a CSP without
 * 'wasm-unsafe-eval', a missing file), and then the next call tries again.
 */
export function leaseWasmReady() {
  if (initialized === null) {
    initialized = Promise.resolve()
      .then(() => {
        const source = loadSource();
        return init(source === undefined ? undefined : { module_or_path: source });
      })
      .catch((error) => {
        initialized = null;
        const reason = error instanceof Error ? error.message : String(error);
        throw new Error(`weblocks: the lease engine (WebAssembly) failed to load: ${reason}`, { cause: error });
      });
  }
  return initialized;
}
