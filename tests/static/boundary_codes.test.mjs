// The numbers the wasm edge and the JS shim exchange are written on both sides of the boundary: each
// side names them, and this test checks that the names mean the same numbers on both (a code changed
// on one side only would make, say, a grant read as a steal). It reads the sources, so it needs no build.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../e2e/server.mjs';

const read = (file) => fs.readFileSync(path.join(repoRoot, file), 'utf8');

/** The value of Rust constant `name` (`const NAME: u32 = N;`) in `file`. */
function rustConst(file, name) {
  const found = read(file).match(new RegExp(`\\bconst ${name}: u32 = (\\d+);`));
  assert.ok(found, `${file} defines const ${name}`);
  return Number(found[1]);
}

/** The value of JS constant `name` (`const NAME = N;`, exported or not) in `file`. */
function jsConst(file, name) {
  const found = read(file).match(new RegExp(`\\bconst ${name} = (\\d+);`));
  assert.ok(found, `${file} defines const ${name}`);
  return Number(found[1]);
}

// Each shared set: its Rust file and JS file, and the names of its codes on each side.
const SETS = [
  {
    what: 'the sink kinds',
    rust: 'src/wasm/sink.rs',
    js: 'js/lock_api.js',
    names: ['EFFECT_GRANTED', 'EFFECT_NOT_AVAILABLE', 'EFFECT_STOLEN', 'EFFECT_SNAPSHOT', 'EFFECT_REFUSED'].map((n) => [n, n]),
  },
  {
    what: 'the refusals',
    rust: 'src/wasm/refusal.rs',
    js: 'js/transport_choice.js',
    names: ['REFUSED_DISAGREES', 'REFUSED_UNREACHABLE'].map((n) => [n, n]),
  },
  {
    what: 'what wakes a context over the log',
    rust: 'src/wasm/engine.rs',
    js: 'js/log_channel.js',
    names: ['WAKE_CARRIER', 'WAKE_POKES'].map((n) => [n, n]),
  },
  {
    what: "the liveness storage object's events",
    rust: 'src/wasm/evidence.rs',
    js: 'js/liveness.js',
    names: ['UPGRADING', 'OPENED', 'OPEN_FAILED', 'CLOSED', 'HIDDEN', 'WRITTEN', 'LISTED', 'MISSING', 'PAGE_HIDDEN', 'PAGE_SHOWN', 'DELETION_WAITS', 'RECORD_AGREED', 'DATABASES'].map((n) => [n, n]),
  },
  {
    what: "the log storage object's events",
    rust: 'src/wasm/log_storage.rs',
    js: 'js/log_channel.js',
    names: ['OPENED', 'OPEN_FAILED', 'CLOSED', 'VERSION_CHANGE', 'APPENDED', 'ABORTED', 'STARTED', 'READ', 'READ_FAILED', 'CARRIED', 'POKED'].map((n) => [n, n]),
  },
  {
    what: 'why an append of the log aborted',
    rust: 'src/wasm/log_storage.rs',
    js: 'js/log_channel.js',
    names: ['ABORT_QUOTA', 'ABORT_UNUSABLE'].map((n) => [n, n]),
  },
  {
    what: "the kinds of the register's entries",
    rust: 'src/wasm/evidence.rs',
    js: 'js/liveness.js',
    names: ['MEMBER', 'AHEAD'].map((n) => [n, n]),
  },
  {
    what: 'the lease operations',
    rust: 'src/wasm/lease_operation.rs',
    js: 'js/lease_idb_store.js',
    names: ['TRY_LOCK', 'CHECK', 'RELEASE', 'EXTEND'].map((n) => [n, n]),
  },
];

for (const set of SETS) {
  test(`${set.what} have the same numbers in ${set.rust} and ${set.js}, each its own`, () => {
    const seen = new Map();
    for (const [rustName, jsName] of set.names) {
      const rust = rustConst(set.rust, rustName);
      assert.equal(jsConst(set.js, jsName), rust, `${jsName} of ${set.js} is ${rustName} of ${set.rust}`);
      assert.ok(!seen.has(rust), `${rustName} and ${seen.get(rust)} share the number ${rust}`);
      seen.set(rust, rustName);
    }
  });
}

test('the log is woken by its own polls for any other number than the carrier and the pokes', () => {
  assert.ok(![jsConst('js/log_channel.js', 'WAKE_CARRIER'), jsConst('js/log_channel.js', 'WAKE_POKES')].includes(jsConst('js/log_channel.js', 'WAKE_POLLS')));
});

// A request's options cross as the LockOptions dictionary that `lockOptions` in js/lock_api.js converted,
// and the engine reads its members by name (src/wasm/request_options.rs): a member renamed on one side only
// would read as undefined, that is false, and the mode's enum values as an unknown mode.
test('the engine reads each member of the converted LockOptions but signal, by the name js/lock_api.js gives it', () => {
  const rust = read('src/wasm/request_options.rs');
  const getters = [...rust.matchAll(/#\[wasm_bindgen\(method, getter(?:, js_name = (\w+))?\)\]\s*fn (\w+)/g)].map(([, jsName, name]) => jsName ?? name);
  const literal = read('js/lock_api.js').match(/const converted = \{ ([^}]*) \};/);
  assert.ok(literal, 'lockOptions makes the converted dictionary as one object literal');
  const members = literal[1].split(',').map((member) => member.split(':')[0].trim());
  assert.deepEqual(getters.sort(), members.filter((m) => m !== 'signal').sort());
  const modes = [...rust.matchAll(/^\s*\w+ = "(\w+)",$/gm)].map((m) => m[1]);
  const accepted = [...new Set([...read('js/lock_api.js').matchAll(/mode !== '(\w+)'/g)].map((m) => m[1]))];
  assert.ok(modes.length > 0, 'src/wasm/request_options.rs names the values of LockMode');
  assert.deepEqual(modes.sort(), accepted.sort(), 'the LockMode values lockOptions accepts');
});
