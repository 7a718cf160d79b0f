// The classic build's embedded wasm (scripts/size/embed_wasm.mjs) made a WebAssembly.Module: its bytes are
// a zlib stream (DEFLATE, written by Zopfli), which the engine inflates itself where it has
// DecompressionStream, and compiles as the bytes come (`WebAssembly.compileStreaming`), both off the main
// thread, while the context's storage requests (js/wasm_lock_api.js) are under way. An engine without
// DecompressionStream (before Chrome 80, Firefox 113, Safari 16.4) inflates in JS (js/inflate.js), in a
// task of its own, so that the page's next script and the storage requests go first; and so does one whose
// native path fails (a `compileStreaming` that refuses a made-up Response): the bytes are the same, so a
// failure that is the wasm's own (a CSP without 'wasm-unsafe-eval') comes back from the second compile.
import { inflate } from './inflate.js';

/** A promise of the Module of `text`, the embedded zlib stream as a binary string (atob), inflating to `size` bytes. */
export function compileEmbeddedWasm(text, size) {
  const packed = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) packed[i] = text.charCodeAt(i);
  return natively(packed).catch(() => new Promise(nextTask).then(() => WebAssembly.compile(inflate(packed, size))));
}

async function natively(packed) {
  if (typeof DecompressionStream !== 'function') throw new Error('no DecompressionStream');
  const bytes = new Response(packed).body.pipeThrough(new DecompressionStream('deflate'));
  const wasm = new Response(bytes, { headers: { 'Content-Type': 'application/wasm' } });
  return typeof WebAssembly.compileStreaming === 'function' ? WebAssembly.compileStreaming(wasm) : WebAssembly.compile(await wasm.arrayBuffer());
}

/** Calls `resolve` in a task of its own: a MessageChannel message, which no engine delays as it does timers in a hidden page; a timer where a page took MessageChannel away. */
function nextTask(resolve) {
  if (typeof MessageChannel !== 'function') return setTimeout(resolve);
  const channel = new MessageChannel();
  channel.port1.onmessage = () => {
    channel.port1.close();
    resolve();
  };
  channel.port2.postMessage(0);
}
