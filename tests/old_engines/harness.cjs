// Runs inside an old node binary (tests/old_engines/old_engines.test.mjs starts it): ES2015 and CommonJS
// only, as Node 6 (V8 5.1) parses them. `node harness.cjs config.json`, where the config names
//   build: the weblocks script under test (the classic script, or the legacy build),
//   cases: tests/web_cases.js bundled as a script that defines the global `weblocksCases`,
//   names: the cases to run, in order; caseTimeoutMs: how long one may take;
//   hideWebAssembly: whether the context has no WebAssembly (`--no-expose-wasm` hides it from Node 10 on,
//     not in Node 8.17: it is also deleted from the context);
//   noTextCoding: whether the context has no TextEncoder and TextDecoder (as Safari 10.0).
// Each case runs in a fresh vm context shaped like a dedicated worker of the engine's era: `self`,
// `navigator` (a WorkerNavigator without `locks`), timers, `console`, `atob`, `crypto.getRandomValues`,
// TextEncoder and TextDecoder (Chrome 38; unless noTextCoding), and the engine's own builtins (WebAssembly where it has it,
// Promise, typed arrays...); no `globalThis`, `queueMicrotask`, `AbortController`, `EventTarget`,
// `MessageChannel`, `BroadcastChannel`, IndexedDB, localStorage or DOMException. The build is loaded
// there as a classic script, and must install `navigator.locks`, `LockManager` and `Lock`; the case then
// gets that polyfill as its API (`env.createLockApi` hands it out once), so it locks within the context.
// Prints one JSON line per result: `{ "case": name, "ok": bool, "error": message }`, after a first line
// describing the engine.
'use strict';
const fs = require('fs');
const util = require('util');
const vm = require('vm');
const nodeCrypto = require('crypto');

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const build = new vm.Script(fs.readFileSync(config.build, 'utf8'), { filename: config.build });
const cases = new vm.Script(fs.readFileSync(config.cases, 'utf8'), { filename: 'web_cases.js' });

function print(object) {
  process.stdout.write(JSON.stringify(object) + '\n');
}

// UTF-8 through Buffer where the node binary has no TextEncoder (before 8.3): every browser engine of the
// era has one, so the context must too.
function BufferTextEncoder() {}
BufferTextEncoder.prototype.encode = function (text) {
  return new Uint8Array(Buffer.from(String(text === undefined ? '' : text), 'utf8'));
};
function BufferTextDecoder() {}
BufferTextDecoder.prototype.decode = function (bytes) {
  if (bytes === undefined) return '';
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
};

const TextEncoderHere = util.TextEncoder || BufferTextEncoder;
const TextDecoderHere = util.TextDecoder || BufferTextDecoder;

/** A fresh worker-shaped context; `warnings` collects what the script says with console.warn. */
function makeContext(warnings) {
  const sandbox = {
    setTimeout: setTimeout,
    clearTimeout: clearTimeout,
    setInterval: setInterval,
    clearInterval: clearInterval,
    atob: (text) => Buffer.from(String(text), 'base64').toString('binary'),
    crypto: {
      getRandomValues: (array) => {
        const bytes = nodeCrypto.randomBytes(array.byteLength);
        new Uint8Array(array.buffer, array.byteOffset, array.byteLength).set(bytes);
        return array;
      },
    },
    console: {
      log: () => {},
      warn: (message) => warnings.push(String(message)),
      error: (message) => warnings.push('error: ' + String(message)),
    },
  };
  if (!config.noTextCoding) {
    sandbox.TextEncoder = TextEncoderHere;
    sandbox.TextDecoder = TextDecoderHere;
  }
  const context = vm.createContext(sandbox);
  // The navigator's prototype is of the context's realm: the polyfill defines `locks` there.
  vm.runInContext(
    'delete this.globalThis; var self = this;' +
      (config.hideWebAssembly ? 'delete this.WebAssembly;' : '') +
      'function WorkerNavigator() {} WorkerNavigator.prototype.userAgent = "old engine";' +
      'var navigator = new WorkerNavigator();',
    context
  );
  return context;
}

// In the context, after the build and the cases: what the build installed, and a runner that calls back
// with null or a failure message.
const RUNNER = `(function () {
  var api = null;
  var installed = {
    navigatorLocks: typeof navigator.locks === 'object' && navigator.locks !== null,
    sameAsExport: typeof weblocks === 'object' && navigator.locks === weblocks.locks,
    interfaces: typeof LockManager === 'function' && typeof Lock === 'function' && navigator.locks instanceof LockManager
  };
  var env = {
    makeEngine: function makeEngine() {},
    createLockApi: function (makeEngine) {
      if (makeEngine !== env.makeEngine) throw new Error('this case needs an engine factory of its own');
      if (api !== null) throw new Error('this case needs a second API');
      api = { locks: navigator.locks, LockManager: LockManager, Lock: Lock, clientId: weblocks.clientId, ready: weblocks.ready };
      return api;
    }
  };
  return {
    installed: installed,
    run: function (name, timeoutMs, done) {
      var timer = setTimeout(function () { done('no outcome after ' + timeoutMs + ' ms (something never settled)'); }, timeoutMs);
      // After the case, the engine's load settles too (the case may end before it, e.g. on a TypeError).
      var settled = function (error) { weblocks.ready.then(function () { clearTimeout(timer); done(error); }, function (e) { clearTimeout(timer); done('the engine failed to load: ' + e); }); };
      Promise.resolve().then(function () { return weblocksCases[name](env); }).then(
        function () { settled(null); },
        function (e) { settled(e instanceof Error ? e.name + ': ' + e.message : String(e)); }
      );
    }
  };
})()`;

print({
  engine: {
    node: process.version,
    v8: process.versions.v8,
    webAssembly: vm.runInContext('typeof WebAssembly', makeContext([])),
    textEncoder: vm.runInContext('typeof TextEncoder', makeContext([])),
  },
});

let index = 0;
function next() {
  if (index === config.names.length) return;
  const name = config.names[index++];
  const warnings = [];
  let harness;
  try {
    const context = makeContext(warnings);
    build.runInContext(context);
    cases.runInContext(context);
    harness = vm.runInContext(RUNNER, context);
  } catch (e) {
    print({ case: name, ok: false, error: 'loading: ' + (e && e.stack ? e.stack : e) });
    setTimeout(next, 0);
    return;
  }
  harness.run(name, config.caseTimeoutMs, (error) => {
    const installed = harness.installed;
    let failure = error;
    if (!installed.navigatorLocks || !installed.sameAsExport || !installed.interfaces) {
      failure = 'the build did not install navigator.locks, LockManager and Lock: ' + JSON.stringify(installed);
    }
    print({ case: name, ok: failure === null, error: failure, warnings: warnings });
    setTimeout(next, 0);
  });
}
next();
