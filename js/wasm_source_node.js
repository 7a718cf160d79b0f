// Node only (imported first by index_node.js and polyfill_node.js): the glue's default wasm source is a
// fetch() of the file: URL next to it, which Node cannot do, so read the bytes with node:fs instead.
import { readFile } from 'node:fs/promises';
import { setDefaultWasmSource } from './wasm_lock_api.js';

setDefaultWasmSource(readFile(new URL('../pkg/weblocks_bg.wasm', import.meta.url)));
