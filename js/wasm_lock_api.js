// The Web Locks API backed by the wasm Engine: `createWasmLockApi(wasmSource)` starts loading the wasm
// asynchronously and returns the API at once (calls made meanwhile are queued by lock_api.js).
// `wasmSource` is what wasm-bindgen's init accepts (bytes, a URL, a Response...); by default the
// `weblocks_bg.wasm` next to the glue. Shared by the ESM entry (index.js) and the classic build.
import { createLockApi, installLockApi } from './lock_api.js';
import init, { Engine, settleTransport } from '../pkg/weblocks.js';
import { makeLogChannelFactory } from './log_channel.js';
import { agreeOnTransport, ALONE, BROADCAST, engineFamily, LOG } from './transport_choice.js';
import { unlessPersisted } from './page_cache.js';
import { makeLivenessStorage } from './liveness.js';
import { theGlobal } from './global_object.js';

// Where the wasm comes from when `createWasmLockApi` is given none: the glue's default (undefined) unless
// an entry sets another first (index_node.js: the bytes read with node:fs, since Node cannot fetch file:).
let defaultWasmSource;

export function setDefaultWasmSource(wasmSource) {
  defaultWasmSource = wasmSource;
}

// The glue's wasm instance, made once per realm whatever the number of APIs (a frame's, js/frames.js).
let initialized = null;

/**
 * `globalObject`: the global of the context the API serves (default: this realm's); its engine uses that
 * global's timers, storage and lifecycle events, and a window's document gates the calls (fully active).
 */
export function createWasmLockApi(wasmSource = defaultWasmSource, globalObject = theGlobal) {
  // The extension `close()`, once the engine is made (where it coordinates through IndexedDB).
  let whenReleased = () => undefined;
  const api = createLockApi(async (clientId, sink) => {
    if (initialized === null) initialized = init(wasmSource === undefined ? undefined : { module_or_path: wasmSource });
    // The evidence's first steps need no engine, and its storage works while the wasm is decoded and
    // compiled: started now, they are off the path to the first grant. The context's own database is
    // opened ahead only for the window that loaded the script, which drops it on `pagehide` unless it
    // joined: not for a worker (no such event), nor for each same-origin frame the page makes (most
    // never lock).
    const evidence = makeLivenessStorage(globalObject);
    if (evidence !== undefined) evidence.prepare(clientId, globalObject === theGlobal && globalObject.document !== undefined);
    // The transport is agreed with the origin's other contexts before this one can first join
    // (js/transport_choice.js): a number is a refusal, now or once the origin's record changed under it.
    let engine = null;
    let refusedLater;
    const onChange = (refusal) => {
      refusedLater = refusal;
      if (engine !== null) engine.refuse(refusal);
    };
    // A page's deletion of a weblocks database (logout code): the record's and the log's `versionchange`
    // go to the core with the evidence's, and so does what it decides (src/protocol/evidence/sweep.rs).
    const record = {};
    const log = {};
    if (evidence !== undefined) {
      record.onDeletion = log.onDeletion = evidence.deletionWaits;
      evidence.onRelease = () => {
        if (log.release) log.release();
        if (record.release) record.release(evidence.agreed);
        else evidence.agreed();
      };
    }
    let transport;
    try {
      // What the record gives this context is the wasm's to decide (src/protocol/transport_record.rs).
      const settle = (preferred, recorded) => initialized.then(() => settleTransport(preferred, recorded));
      transport = (await Promise.all([agreeOnTransport(globalObject, undefined, onChange, settle, record), initialized]))[0];
    } catch (error) {
      // No engine: the database opened ahead goes.
      if (evidence !== undefined) evidence.end();
      throw error;
    }
    const refusal = typeof transport === 'number' ? transport : undefined;
    const openLog = refusal !== undefined || transport === BROADCAST ? undefined : makeLogChannelFactory(globalObject, transport === LOG, log);
    // Evidence of life and death (its storage: js/liveness.js) wherever the context coordinates with
    // others: an engine that could reach them without it refuses.
    const evidenceUsed = refusal === undefined && transport !== ALONE ? evidence : undefined;
    if (evidence !== undefined && evidenceUsed === undefined) evidence.end();
    // The engine's family (evidence a page script cannot alter) sets what a page does in the back/forward
    // cache: the participant's to decide (src/protocol/participant/config.rs).
    engine = new Engine(clientId, sink, undefined, openLog, globalObject, openLog && openLog.wake, refusal, evidenceUsed, engineFamily(), unlessPersisted);
    if (refusedLater !== undefined) engine.refuse(refusedLater);
    if (evidenceUsed !== undefined) whenReleased = evidenceUsed.whenReleased;
    return engine;
  }, globalObject.document);
  return Object.assign({}, api, {
    /** Install as `navigator.locks`, `LockManager`, `Lock` where `navigator.locks` is missing. */
    install: (target = globalObject) => installLockApi(api, target),
    /**
     * Extension: closes this context's weblocks databases, as before a page deletes its origin's databases
     * (logout code). Resolves once this context holds no lock and has closed them (it leaves the
     * origin's protocol, its pending requests kept); later requests open them again.
     */
    close: () => api.ready.then(() => whenReleased()),
  });
}
