// Entry of the classic-script build (dist/weblocks.polyfill.js, bundled by scripts/build.mjs): the wasm
// is embedded, so the one file works from any path, file://, windows and every kind of worker. It
// installs the polyfill where `navigator.locks` is missing, and defines one global, `weblocks`, holding the
// ponyfill's exports (`locks`, `LockManager`, `Lock`, `clientId`, `ready`, `install`, `close`). Leases are an add-on,
// dist/weblocks.leases.js (js/classic_leases.js), which adds its exports to that same object.
import { createWasmLockApi } from './wasm_lock_api.js';
import { theGlobal } from './global_object.js';
import { installIntoFrames } from './frames.js';
import wasmBytes from '../pkg/weblocks_bg.wasm';

// Loaded a second time in the same context, it reuses the first instance: one lock manager per context.
// The global stays the very same object, so what an add-on put on it stays too.
const previous = theGlobal.weblocks;
const isWeblocks = (api) => typeof api === 'object' && api !== null && typeof api.LockManager === 'function' && api.locks instanceof api.LockManager;
if (!isWeblocks(previous)) {
  const api = createWasmLockApi(wasmBytes);
  theGlobal.weblocks = api;
  // Where it installed (and only the first time), same-origin frames the page makes get an API each.
  if (api.install()) installIntoFrames((view) => createWasmLockApi(wasmBytes, view));
}
