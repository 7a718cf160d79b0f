// Loaded first on every bench page, before any lock library: counts what a page does in the background
// (scenario 10, idle) and finds the wasm memory of the library (scenario 3, memory per pending request).
//
// Counted: timers scheduled and fired (setTimeout, setInterval, requestAnimationFrame,
// requestIdleCallback), messages posted (window, MessagePort, BroadcastChannel, Worker), storage writes
// (localStorage/sessionStorage setItem/removeItem/clear; IndexedDB put/add/delete/clear), on pages
// opened with ?instrument. The harness itself never uses these wrapped functions: it waits on the Node
// side, and keeps the originals for its own use in `bench.original`.
'use strict';
(() => {
  const counts = { timersScheduled: 0, timersFired: 0, messagesPosted: 0, storageWrites: 0 };
  const calls = {}; // per wrapped function, for the report: which function was called
  const original = {};

  function count(kind, label) {
    counts[kind] += 1;
    calls[label] = (calls[label] ?? 0) + 1;
  }

  function wrapMethod(owner, key, kind, label, wrapCallbackAt) {
    const fn = owner?.[key];
    if (typeof fn !== 'function') return;
    original[label] = fn;
    const wrapped = function (...args) {
      count(kind, label);
      if (wrapCallbackAt !== undefined && typeof args[wrapCallbackAt] === 'function') {
        const callback = args[wrapCallbackAt];
        args[wrapCallbackAt] = function (...callbackArgs) {
          count('timersFired', `${label} fired`);
          return callback.apply(this, callbackArgs);
        };
      }
      return fn.apply(this, args);
    };
    Object.defineProperty(wrapped, 'name', { value: fn.name });
    Object.defineProperty(wrapped, 'length', { value: fn.length });
    owner[key] = wrapped;
  }

  /** Wrap every function that makes background activity, so calls to it are counted. */
  function wrapEverything() {
    wrapMethod(self, 'setTimeout', 'timersScheduled', 'setTimeout', 0);
    wrapMethod(self, 'setInterval', 'timersScheduled', 'setInterval', 0);
    wrapMethod(self, 'requestAnimationFrame', 'timersScheduled', 'requestAnimationFrame', 0);
    wrapMethod(self, 'requestIdleCallback', 'timersScheduled', 'requestIdleCallback', 0);
    wrapMethod(self, 'postMessage', 'messagesPosted', 'window.postMessage');
    wrapMethod(self.MessagePort?.prototype, 'postMessage', 'messagesPosted', 'MessagePort.postMessage');
    wrapMethod(self.BroadcastChannel?.prototype, 'postMessage', 'messagesPosted', 'BroadcastChannel.postMessage');
    wrapMethod(self.Worker?.prototype, 'postMessage', 'messagesPosted', 'Worker.postMessage');
    for (const key of ['setItem', 'removeItem', 'clear']) {
      wrapMethod(self.Storage?.prototype, key, 'storageWrites', `Storage.${key}`);
    }
    for (const key of ['put', 'add', 'delete', 'clear']) {
      wrapMethod(self.IDBObjectStore?.prototype, key, 'storageWrites', `IDBObjectStore.${key}`);
    }
  }

  // Only on pages opened with ?instrument (the idle scenario): the wrappers cost time on every call, which
  // would be charged to weblocks (it posts a message per callback task) and not to the native API.
  const instrumented = new URLSearchParams(location.search).has('instrument');
  if (instrumented) wrapEverything();

  // The library's wasm memories: every instance made through the WebAssembly JS API is seen here.
  const memories = [];
  function noteInstance(instance) {
    const memory = instance?.exports?.memory;
    if (memory instanceof WebAssembly.Memory && !memories.includes(memory)) memories.push(memory);
  }
  function noteResult(result) {
    noteInstance(result instanceof WebAssembly.Instance ? result : result?.instance);
    return result;
  }
  if (typeof WebAssembly === 'object') {
    for (const key of ['instantiate', 'instantiateStreaming']) {
      const fn = WebAssembly[key];
      if (typeof fn !== 'function') continue;
      WebAssembly[key] = function (...args) {
        return fn.apply(this, args).then(noteResult);
      };
    }
    const NativeInstance = WebAssembly.Instance;
    WebAssembly.Instance = new Proxy(NativeInstance, {
      construct(target, args, newTarget) {
        const instance = Reflect.construct(target, args, newTarget);
        noteInstance(instance);
        return instance;
      },
    });
  }

  self.bench = {
    instrumented,
    original,
    /** Zero the counters; returns nothing. */
    resetCounts() {
      for (const key of Object.keys(counts)) counts[key] = 0;
      for (const key of Object.keys(calls)) delete calls[key];
    },
    /** The counters since the last reset, and which functions were called. */
    counts() {
      return { ...counts, calls: { ...calls } };
    },
    /** Bytes of wasm linear memory the page's wasm instances hold (0 when there are none). */
    wasmMemoryBytes() {
      return memories.reduce((sum, memory) => sum + memory.buffer.byteLength, 0);
    },
  };
})();
