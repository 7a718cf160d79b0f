// weblocks, the polyfill: `import 'weblocks/polyfill'` installs `navigator.locks`, `LockManager` and
// `Lock` where `navigator.locks` is missing (e.g. plain-http pages), and leaves a native one alone.
// Where it installed, same-origin frames the page makes get an API each (js/frames.js).
import { install } from './index.js';
import { createWasmLockApi } from './wasm_lock_api.js';
import { installIntoFrames } from './frames.js';

if (install()) installIntoFrames((view) => createWasmLockApi(undefined, view));
