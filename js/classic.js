// Entry of the classic-script build (dist/weblocks.polyfill.js, bundled by scripts/build.mjs): the wasm
// is embedded, so the one file works from any path, file://, windows and every kind of worker. It
// installs the polyfill where `navigator.locks` is missing; its exports become the global `weblocks`.
// In this order (no module has effects another depends on), the bundle's modules gzip best (-25 B).
import { LockError as NewLockError, createLeases as newCreateLeases, createWasmLeases } from './leases.js';
import { createWasmLockApi } from './wasm_lock_api.js';
import { theGlobal } from './global_object.js';
import { installIntoFrames } from './frames.js';
import wasmBytes from '../pkg/weblocks_bg.wasm';

// Loaded a second time in the same context, it reuses the first instance: one lock manager per context.
const previous = theGlobal.weblocks;
const isWeblocks = (api) => typeof api === 'object' && api !== null && typeof api.LockManager === 'function' && api.locks instanceof api.LockManager;
const api = isWeblocks(previous) ? previous : createWasmLockApi(wasmBytes);
// Where it installed (and only the first time), same-origin frames the page makes get an API each.
if (api.install()) installIntoFrames((view) => createWasmLockApi(wasmBytes, view));

export const { locks, LockManager, Lock, clientId, ready, install } = api;

// Leases (an extension, docs/LEASES.md): reused with the rest on a second load, so `instanceof LockError` holds.
export const { leases, LockError, createLeases } =
  api === previous && previous.leases
    ? previous
    : { leases: createWasmLeases(() => api.ready), LockError: NewLockError, createLeases: newCreateLeases };
