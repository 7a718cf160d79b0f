// The Web Locks API backed by the wasm Engine: `createWasmLockApi(wasmSource)` starts loading the wasm
// asynchronously and returns the API at once (calls made meanwhile are queued by lock_api.js).
// `wasmSource` is what wasm-bindgen's init accepts (bytes, a URL, a Response...); by default the
// `weblocks_bg.wasm` next to the glue. Shared by the ESM entry (index.js) and the classic build.
import init, { Engine } from '../pkg/weblocks.js';
import { makeLogChannelFactory } from './log_channel.js';
import { makeDeputy } from './deputy.js';
import { createLockApi, installLockApi, theGlobal } from './lock_api.js';

// Where the wasm comes from when `createWasmLockApi` is given none: the glue's default (undefined) unless
// an entry sets another first (index_node.js: the bytes read with node:fs, since Node cannot fetch file:).
let defaultWasmSource;

export function setDefaultWasmSource(wasmSource) {
  defaultWasmSource = wasmSource;
}

export function createWasmLockApi(wasmSource = defaultWasmSource) {
  const api = createLockApi(async (clientId, sink) => {
    await init(wasmSource === undefined ? undefined : { module_or_path: wasmSource });
    const openLog = makeLogChannelFactory();
    return new Engine(clientId, sink, undefined, makeDeputy(), openLog, theGlobal, openLog && openLog.wake);
  });
  return Object.assign({}, api, {
    /** Install as `navigator.locks`, `LockManager`, `Lock` where `navigator.locks` is missing. */
    install: (globalObject = theGlobal) => installLockApi(api, globalObject),
  });
}
