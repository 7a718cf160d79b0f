// Entry of the classic-script build (dist/weblocks.polyfill.js, bundled by scripts/build.mjs): the wasm
// is embedded, so the one file works from any path, file://, windows and every kind of worker. It
// installs the polyfill where `navigator.locks` is missing; its exports become the global `weblocks`.
import wasmBytes from '../pkg/weblocks_bg.wasm';
import { createWasmLockApi } from './wasm_lock_api.js';

const api = createWasmLockApi(wasmBytes);
api.install();

export const { locks, LockManager, Lock, clientId, ready, install } = api;
