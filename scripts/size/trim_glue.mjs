// The wasm-bindgen glue (pkg/weblocks.js) as the classic build needs it (scripts/size/embed_wasm.mjs).
// What esbuild and terser do by themselves is not done here: functions nothing calls (the glue's fetch and
// Response paths once init is replaced, initSync), variables nothing reads, constant folding. What is left
// are the edits no tool option makes, each listed in EDITS with what it removes or rewrites:
//
// Paths that can never run in the classic script, where the glue is always initialised with the embedded
// bytes, `init({ module_or_path: promiseOfBytes })` (js/classic.js), once (js/wasm_lock_api.js):
//  - init's other inputs (a URL or string to fetch, a Response, the deprecated non-object parameter, the
//    default URL) and its guard against running twice;
//  - passStringToWasm0's branch for a missing `realloc` (every call passes the same malloc and realloc,
//    which it now reads itself);
//  - `Symbol.dispose` on Engine, which no code of the script disposes with `using`, Engine's `free` (the
//    engine lives as long as the page; nothing frees it), and its other members that js/ never calls
//    (checked: checkEngineMembersUnused);
//  - Engine's FinalizationRegistry: its wrapper can never be collected, as js/lock_api.js keeps it (`engine`)
//    in the scope of the `sink` function that the wasm holds (in the glue's heap of JS values) for the
//    Engine's life; with it goes the wasm's engine_free (the classic wasm keeps only the exports the glue
//    uses: scripts/size/embed_wasm.mjs);
//  - the closures' registry (checked: checkClosuresOwned);
//  - the freeing of Engine's constructor strings when passing one throws (it passes the script's own client
//    id, and no scope).
// What the engines of the support floor (ES2017, WebAssembly MVP) may lack keeps its fallback:
// TextEncoder.encodeInto (Chrome 74, Safari 14.1); FinalizationRegistry (Chrome 84, Safari 14.1) is read
// nowhere once its two registries are dropped.
//
// Shapes no minifier can shorten, rewritten: an import that may throw, `function() { return
// handleError(function (a, b) {...}, arguments); }`, becomes `handleError((a, b) => {...})` (and
// handleError returns the catching wrapper, made once instead of a closure per call); the other imports,
// `name: function(a) {...}`, become arrows (none uses `this` or `arguments`: checked); a (pointer, length)
// pair stored for the wasm is one call; property names of the glue's own objects are one letter; an
// argument copied to a constant (`const v = getObject(arg0);`) is read directly; a string (or none)
// returned through memory is one call, of the value itself; a result or an error returned through memory
// (the lease operations) is read by one helper; a boolean (or none) for the wasm is one expression, a
// number (or none) one test and one DataView; sizes and pointers are not multiplied or divided by 1; a
// Uint32Array copied out of memory is a copied view (no cached Uint32Array of the memory to keep, and
// reset, for that one import); the DataView that stores a few returned values is made per store (~0.1 µs,
// against a cache tested for a detached or replaced buffer at each use).
//
// The leases' glue (pkg/weblocks_leases.js, for the classic add-on) has no Engine and no closures: it gets
// the edits not marked `engine`.
//
// What an upgrade of wasm-bindgen risks: each edit is an exact text of wasm-bindgen 0.2.130's output and
// must match (once; or at least once; or, `count: 'any'`, for the shapes of imports that the Rust code may
// stop needing, any number of times): a glue of another shape fails the build instead of shipping
// half-edited. A new glue then needs each failing edit rewritten to its new text, or dropped.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const JS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'js');

const EDITS = [
  {
    what: "init's parameter forms other than { module_or_path: a promise of the Module } (js/embedded_wasm.js)",
    from: /async function __wbg_init_once\(module_or_path\) \{\n[^]*?\n\}\n/,
    to: `async function __wbg_init_once({ module_or_path }) {
    const imports = __wbg_get_imports();
    const module = await module_or_path;
    return __wbg_finalize_init(await WebAssembly.instantiate(module, imports), module);
}
`,
  },
  {
    what: "init's guard against a second instantiation (js/wasm_lock_api.js initialises the glue once, whatever the number of APIs)",
    from: /^let __wbg_init_promise;\nasync function __wbg_init\(module_or_path\) \{\n[^]*?\n\}\n\nasync function __wbg_init_once\(\{ module_or_path \}\) \{\n/m,
    to: 'async function __wbg_init({ module_or_path }) {\n',
  },
  {
    what: "passStringToWasm0's branch without realloc",
    from: /(function passStringToWasm0\(arg, malloc, realloc\) \{\n)    if \(realloc === undefined\) \{\n[^]*?\n    \}\n/,
    to: '$1',
  },
  {
    what: "passStringToWasm0's allocators, always the same two: read inside",
    from: /(function passStringToWasm0\(arg), malloc, realloc\) \{\n/,
    to: '$1) {\n    const malloc = wasm.__wbindgen_malloc;\n    const realloc = wasm.__wbindgen_realloc;\n',
  },
  {
    what: 'passStringToWasm0 calls',
    from: /(passStringToWasm0\(\w+), wasm\.__wbindgen_malloc, wasm\.__wbindgen_realloc\)/g,
    to: '$1)',
  },
  {
    what: 'Symbol.dispose',
    engine: true,
    from: /^if \(Symbol\.dispose\) \w+\.prototype\[Symbol\.dispose\] = \w+\.prototype\.free;\n/gm,
    to: '',
  },
  {
    what: "Engine's free",
    engine: true,
    from: /(export class Engine \{\n)    __destroy_into_raw\(\) \{\n[^]*?\n    \}\n    free\(\) \{\n[^]*?\n    \}\n/,
    to: '$1',
  },
  {
    what: "closures' FinalizationRegistry (every closure the wasm hands to JS is owned by Rust: see checkClosuresOwned)",
    engine: true,
    from: /^const CLOSURE_DTORS = [^;]*;\n|^ +CLOSURE_DTORS\.(?:register\(real, state, state\)|unregister\(state\));\n/gm,
    to: '',
    count: 3,
  },
  {
    what: "Engine's finalization (its wrapper is never garbage: js/lock_api.js keeps it in the scope of the sink the wasm holds)",
    engine: true,
    from: /^ +EngineFinalization\.register\(this, this\.\w+, this\);\n|^const EngineFinalization = [^;]*;\n/gm,
    to: '',
    count: 2,
  },
  {
    what: 'a string returned through memory: one helper',
    from: /^( +)getDataViewMemory0\(\)\.setInt32\(\(arg0 >>> 0\) \+ 4 \* 1, len1, true\);\n +getDataViewMemory0\(\)\.setInt32\(\(arg0 >>> 0\) \+ 4 \* 0, ptr1, true\);$/gm,
    to: '$1storeSlice(arg0, ptr1, len1);',
    count: 'any',
  },
  {
    what: 'a string returned through memory: the helper',
    from: /^function getStringFromWasm0\(/m,
    to: `function storeSlice(at, ptr, len) {
    const view = getDataViewMemory0();
    view.setInt32((at >>> 0) + 4, len, true);
    view.setInt32(at >>> 0, ptr, true);
}

function getStringFromWasm0(`,
  },
  {
    what: 'a string or none returned through memory: one helper',
    from: /^( +)(?:var|const) ptr1 = (?:isLikeNone\(ret\) \? 0 : )?passStringToWasm0\(ret\);\n +(?:var|const) len1 = WASM_VECTOR_LEN;\n +storeSlice\(arg0, ptr1, len1\);$/gm,
    to: '$1storeString(arg0, ret);',
    count: 'any',
  },
  {
    what: 'a string or none returned through memory: the helper',
    from: /^function getStringFromWasm0\(/m,
    to: `function storeString(at, value) {
    storeSlice(at, isLikeNone(value) ? 0 : passStringToWasm0(value), WASM_VECTOR_LEN);
}

function getStringFromWasm0(`,
  },
  {
    what: 'sizes and pointers multiplied or divided by 1',
    from: / [*\/] 1(?=[,)])/g,
    to: '',
    count: 'any',
  },
  {
    what: 'a Uint32Array copied from memory: a view copied (no cached Uint32Array of the memory)',
    from: /new Uint32Array\(getArrayU32FromWasm0\((arg\d), (arg\d)\)\)/g,
    to: 'new Uint32Array(wasm.memory.buffer, $1 >>> 0, $2 >>> 0).slice()',
    count: 'any',
  },
  {
    what: 'a DataView of the memory made when needed, not cached (no checks of a detached buffer)',
    from: /^let cachedDataViewMemory0 = null;\nfunction getDataViewMemory0\(\) \{\n[^]*?\n\}\n/m,
    to: 'function getDataViewMemory0() {\n    return new DataView(wasm.memory.buffer);\n}\n',
  },
  {
    what: 'the cached DataView reset',
    from: /^    cachedDataViewMemory0 = null;\n/m,
    to: '',
  },
  {
    what: "the property holding a Rust object's pointer, `__wbg_ptr` (no other code reads it): `p`",
    engine: true,
    from: /\.__wbg_ptr\b/g,
    to: '.p',
  },
  {
    what: 'the property of Rust closures that releases them, `_wbg_cb_unref` (of the glue only): `u`',
    engine: true,
    from: /\._wbg_cb_unref\b/g,
    to: '.u',
  },
  {
    what: 'imports that may throw, opening',
    from: /: function\(\) \{ return handleError\(function \(([^)]*)\) \{$/gm,
    to: ': handleError(($1) => {',
    count: 'any',
  },
  {
    what: 'imports that may throw, closing',
    from: /^( +)\}, arguments\); \},$/gm,
    to: '$1}),',
    count: 'any',
  },
  {
    what: 'handleError, made once per import',
    from: /function handleError\(f, args\) \{\n    try \{\n        return f\.apply\(this, args\);\n    \} catch \(e\) \{\n([^]*?)\n    \}\n\}\n/,
    to: 'function handleError(f) {\n    return (...args) => {\n    try {\n        return f(...args);\n    } catch (e) {\n$1\n    }\n    };\n}\n',
  },
  {
    what: 'an argument copied to a constant before its one use',
    from: /^ +const (v|val|obj) = (arg\d|getObject\(arg\d\));\n( +const ret = )(.*)$/gm,
    to: (_, name, arg, start, rest) => start + rest.replace(new RegExp(`\\b${name}\\b`, 'g'), () => arg),
    count: 'any',
  },
  {
    what: 'a number or none for the wasm: one DataView, one test',
    from: /^( +)const ret = typeof\(getObject\(arg1\)\) === 'number' \? getObject\(arg1\) : undefined;\n +getDataViewMemory0\(\)\.setFloat64\(\(arg0 >>> 0\) \+ 8, isLikeNone\(ret\) \? 0 : ret, true\);\n +getDataViewMemory0\(\)\.setInt32\(\(arg0 >>> 0\) \+ 4 \* 0, !isLikeNone\(ret\), true\);$/m,
    to: "$1const x = getObject(arg1);\n$1const isNumber = typeof x === 'number';\n$1const view = getDataViewMemory0();\n$1view.setFloat64((arg0 >>> 0) + 8, isNumber ? x : 0, true);\n$1view.setInt32(arg0 >>> 0, isNumber, true);",
    count: 'any',
  },
  {
    what: "Engine's constructor: no freeing of its strings when passing them throws (the script passes its own client id and no scope)",
    engine: true,
    from: /^( +)let ptr0, len0, ptr1, len1;\n +try \{\n +(ptr0 = passStringToWasm0\(client_id\);)\n +(len0 = WASM_VECTOR_LEN;)\n +(ptr1 = isLikeNone\(scope\) \? 0 : passStringToWasm0\(scope\);)\n +(len1 = WASM_VECTOR_LEN;)\n +\} catch \(e\) \{\n[^]*?\n +throw e;\n +\}\n/m,
    to: '$1const $2\n$1const $3\n$1const $4\n$1const $5\n',
  },
  {
    what: 'a boolean or none for the wasm (after the edit above)',
    from: /^( +)const ret = typeof\(getObject\(arg0\)\) === 'boolean' \? getObject\(arg0\) : undefined;\n +return isLikeNone\(ret\) \? 0xFFFFFF : ret \? 1 : 0;$/m,
    to: "$1const x = getObject(arg0);\n$1return typeof x === 'boolean' ? +x : 0xFFFFFF;",
    count: 'any',
      },
  {
    what: 'a result or an error returned through memory: one helper',
    from: /^( +)try \{\n +const retptr = wasm\.__wbindgen_add_to_stack_pointer\(-16\) >>> 0;\n((?: .*\n)*?) +var r0 = getDataViewMemory0\(\)\.getInt32\(retptr \+ 4 \* 0, true\);\n +var r1 = getDataViewMemory0\(\)\.getInt32\(retptr \+ 4, true\);\n +var r2 = getDataViewMemory0\(\)\.getInt32\(retptr \+ 4 \* 2, true\);\n +if \(r2\) \{\n +throw takeObject\(r1\);\n +\}\n +return (.*)\(r0\);\n +\} finally \{\n +wasm\.__wbindgen_add_to_stack_pointer\(16\);\n +\}$/gm,
    to: '$1return $3(resultOf((retptr) => {\n$2$1}));',
    count: 'any',
  },
  {
    what: 'a result or an error returned through memory: the helper',
    from: /^function getStringFromWasm0\(/m,
    to: `function resultOf(call) {
    const retptr = wasm.__wbindgen_add_to_stack_pointer(-16) >>> 0;
    try {
        call(retptr);
        const view = getDataViewMemory0();
        if (view.getInt32(retptr + 8, true)) throw takeObject(view.getInt32(retptr + 4, true));
        return view.getInt32(retptr, true);
    } finally {
        wasm.__wbindgen_add_to_stack_pointer(16);
    }
}

function getStringFromWasm0(`,
  },
  {
    what: 'the other imports as arrows',
    from: /^( {8}\w+): function\(([^)]*)\) \{$/gm,
    to: '$1: ($2) => {',
  },
];

// Engine's members that no module of js/ uses (js/lock_api.js calls request, abort, release and query):
// checked at each build (`engine.<member>` in js/), so that a new use fails the build, not the page.
const UNUSED_ENGINE_MEMBERS = ['get clientId', 'close', 'get shared'];

function checkEngineMembersUnused() {
  for (const file of fs.readdirSync(JS_DIR).filter((name) => name.endsWith('.js'))) {
    for (const [, member] of fs.readFileSync(path.join(JS_DIR, file), 'utf8').matchAll(/\bengine\.(\w+)/g)) {
      if (UNUSED_ENGINE_MEMBERS.some((unused) => unused.split(' ').pop() === member)) {
        throw new Error(`trim_glue: js/${file} uses engine.${member}, which the classic glue drops`);
      }
    }
  }
}

// The closures' FinalizationRegistry frees a Rust closure when JS collects its function, which matters
// only for closures Rust gave away (`into_js_value`, `forget`): every closure of src/wasm/ is owned by Rust
// (the coordination edge keeps its callbacks and drops them with it, which frees them), so the classic glue
// drops the registry, and a closure given away fails the build here instead of leaking in the page.
const WASM_DIR = path.join(JS_DIR, '..', 'src', 'wasm');

function checkClosuresOwned() {
  for (const file of fs.readdirSync(WASM_DIR).filter((name) => name.endsWith('.rs'))) {
    if (/\binto_js_value\(|\.forget\(\)/.test(fs.readFileSync(path.join(WASM_DIR, file), 'utf8'))) {
      throw new Error(`trim_glue: src/wasm/${file} gives a closure away (into_js_value or forget): the classic glue drops the closures' FinalizationRegistry`);
    }
  }
}

// The legacy build's memory is wasm2js's: growing it copies the memory into a new ArrayBuffer and leaves
// the old one as it was (not detached, as a WebAssembly.Memory's is), so a cached view of the memory is
// stale when its buffer is not the memory's current one.
const LEGACY_EDITS = [
  {
    what: 'cached views of the memory, checked against its current buffer',
    from: /^( +if \((cached\w+Memory0) === null \|\| )\2\.byteLength === 0\) \{$/gm,
    to: '$1$2.buffer !== wasm.memory.buffer) {',
  },
];

/**
 * `glue` with the edits above (and with `legacy`, those of the legacy build); throws if one of them does
 * not match as expected. `engine: false`: the leases' glue (js/lease_wasm.js), which has no Engine class
 * and no closures, and gets only the edits not marked `engine`.
 */
export function trimGlue(glue, { legacy = false, engine = true } = {}) {
  let out = glue;
  checkEngineMembersUnused();
  checkClosuresOwned();
  if (engine) {
    const engineClass = /^export class Engine \{\n[^]*?\n\}\n/m.exec(out);
    if (engineClass === null) throw new Error('trim_glue: no Engine class in the glue');
    let trimmed = engineClass[0];
    for (const member of UNUSED_ENGINE_MEMBERS) {
      trimmed = trimmed.replace(new RegExp(`^    ${member}\\(\\) \\{\n[^]*?\n    \\}\n`, 'm'), '');
    }
    out = out.replace(engineClass[0], () => trimmed);
  } else if (/\bclass \w+ \{/.test(out)) {
    throw new Error('trim_glue: the leases\' glue has a class: its edits are those of a glue without one');
  }
  const edits = (legacy ? [...EDITS, ...LEGACY_EDITS] : EDITS).filter((edit) => engine || !edit.engine);
  for (const { what, from, to, count } of edits) {
    const found = from.global ? [...out.matchAll(from)].length : from.test(out) ? 1 : 0;
    if (count === undefined ? found === 0 : count !== 'any' && found !== count) {
      throw new Error(`trim_glue: ${what}: the glue has ${found} matches, expected ${count}`);
    }
    out = out.replace(from, to);
  }
  if (/passStringToWasm0\(\w+,/.test(out)) throw new Error('trim_glue: a call of passStringToWasm0 of another shape');
  if (out.includes('handleError(function') || out.includes('arguments); }')) {
    throw new Error('trim_glue: an import that may throw kept its old shape');
  }
  // What the arrows rely on: no import function uses `this` or `arguments` any more; and no constant
  // that stood for an argument is read after the line that now reads the argument itself.
  const imports = (/function __wbg_get_imports\(\) \{\n[^]*?\n\}\n/.exec(out)?.[0] ?? '').replace(/\/\/.*$/gm, '');
  if (/\bthis\b|arguments\)/.test(imports)) throw new Error('trim_glue: an import of the glue uses `this` or `arguments`');
  if (/\b(v|val|obj)\b/.test(imports)) throw new Error('trim_glue: an import still reads a constant it no longer has');
  return out;
}
