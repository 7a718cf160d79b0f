// Short import and export names for the classic build (scripts/size/embed_wasm.mjs): wasm-bindgen names
// every import `__wbg_<method>_<16 hex digits>` and some exports after their Rust path (up to 149 bytes),
// and each name is in the wasm and again in the glue, where minifying cannot touch it (an object key, a
// property of `instance.exports`). Renamed to `a`, `b`, ... in both: -1.1 KB (LZMA) in the wasm and -0.6 KB
// gzipped in the glue. Only the classic build is renamed: pkg/ keeps wasm-bindgen's names, which its
// .d.ts declares.
//
// `shortNames(wasm)` reads the names (the wasm's import and export sections); `renameWasm(wasm, names)`
// rewrites those two sections (leaving out the exports a filter rejects) and copies every other byte;
// `renameGlue(glue, names)` rewrites the glue's uses (`wasm.<export>`, `<import>:` keys of the imports object, the import module's name) and throws if
// any old name is left in it, so a glue of another shape fails the build instead of a page.

const IMPORT_SECTION = 2;
const EXPORT_SECTION = 7;

export function readUleb(bytes, at) {
  let value = 0;
  let shift = 0;
  for (;;) {
    const byte = bytes[at++];
    value += (byte & 0x7f) * 2 ** shift;
    shift += 7;
    if (byte < 0x80) return [value, at];
  }
}

function uleb(value) {
  const out = [];
  do {
    let byte = value % 128;
    value = Math.floor(value / 128);
    if (value > 0) byte |= 0x80;
    out.push(byte);
  } while (value > 0);
  return out;
}

const utf8 = new TextDecoder();
const encodeName = (name) => {
  const bytes = new TextEncoder().encode(name);
  return [...uleb(bytes.length), ...bytes];
};

function readName(bytes, at) {
  const [length, start] = readUleb(bytes, at);
  return [utf8.decode(bytes.subarray(start, start + length)), start + length];
}

/** The end of an import's descriptor (kind byte at `at`): function, table, memory, global or tag. */
function skipImportDescriptor(bytes, at) {
  const kind = bytes[at++];
  const skipLimits = (p) => {
    const flags = bytes[p++];
    [, p] = readUleb(bytes, p); // minimum
    if (flags & 1) [, p] = readUleb(bytes, p); // maximum
    return p;
  };
  switch (kind) {
    case 0: // function: type index
      return readUleb(bytes, at)[1];
    case 1: // table: reference type, limits
      return skipLimits(at + 1);
    case 2: // memory: limits
      return skipLimits(at);
    case 3: // global: value type, mutability
      return at + 2;
    case 4: // tag: attribute, type index
      return readUleb(bytes, at + 1)[1];
    default:
      throw new Error(`wasm_names: unknown import kind ${kind}`);
  }
}

/** The sections of a wasm module: `{ id, offset, start, end }`: where each begins, and its contents. */
export function sections(bytes) {
  const list = [];
  let at = 8; // magic and version
  while (at < bytes.length) {
    const id = bytes[at];
    const [size, start] = readUleb(bytes, at + 1);
    list.push({ id, offset: at, start, end: start + size });
    at = start + size;
  }
  return list;
}

/** Each import `{ module, name, descriptor }` and export `{ name, descriptor }` (the bytes after the name). */
export function readNames(bytes) {
  const imports = [];
  const exports = [];
  for (const { id, start } of sections(bytes)) {
    if (id !== IMPORT_SECTION && id !== EXPORT_SECTION) continue;
    let [count, at] = readUleb(bytes, start);
    for (; count > 0; count--) {
      if (id === IMPORT_SECTION) {
        let module;
        let name;
        [module, at] = readName(bytes, at);
        [name, at] = readName(bytes, at);
        const end = skipImportDescriptor(bytes, at);
        imports.push({ module, name, descriptor: bytes.subarray(at, end) });
        at = end;
      } else {
        let name;
        [name, at] = readName(bytes, at);
        const end = readUleb(bytes, at + 1)[1]; // kind byte, index
        exports.push({ name, descriptor: bytes.subarray(at, end) });
        at = end;
      }
    }
  }
  return { imports, exports };
}

/** `a`..`z`, `A`..`Z`, then two letters: short names that are also plain JS identifiers. */
function shortName(i) {
  const letters = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
  let name = '';
  do {
    name = letters[i % letters.length] + name;
    i = Math.floor(i / letters.length) - 1;
  } while (i >= 0);
  return name;
}

/** Old name -> short name, for the imports (and their one module) and the exports of `wasm`. */
export function shortNames(wasm) {
  const { imports, exports } = readNames(wasm);
  const modules = new Set(imports.map((i) => i.module));
  if (modules.size > 1) throw new Error(`wasm_names: imports from ${modules.size} modules, expected one`);
  return {
    module: { from: [...modules][0], to: 'a' },
    imports: new Map([...new Set(imports.map((i) => i.name))].map((name, i) => [name, shortName(i)])),
    exports: new Map(exports.map((e, i) => [e.name, shortName(i)])),
  };
}

/**
 * `wasm` with its import and export names replaced by `names` (from `shortNames`); with `keepExport`, only
 * the exports whose (old) name it accepts.
 */
export function renameWasm(wasm, names, keepExport = () => true) {
  const { imports, exports: allExports } = readNames(wasm);
  const exports = allExports.filter((e) => keepExport(e.name));
  const parts = [wasm.subarray(0, 8)];
  for (const { id, start, end } of sections(wasm)) {
    let contents;
    if (id === IMPORT_SECTION) {
      contents = [...uleb(imports.length)];
      for (const i of imports) contents.push(...encodeName(names.module.to), ...encodeName(names.imports.get(i.name)), ...i.descriptor);
    } else if (id === EXPORT_SECTION) {
      contents = [...uleb(exports.length)];
      for (const e of exports) contents.push(...encodeName(names.exports.get(e.name)), ...e.descriptor);
    } else {
      contents = wasm.subarray(start, end);
    }
    parts.push(Uint8Array.of(id, ...uleb(contents.length)), Uint8Array.from(contents));
  }
  return Buffer.concat(parts);
}

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The glue `glue` (wasm-bindgen's --target web JS) using the names of `renameWasm(wasm, names)`. */
export function renameGlue(glue, names) {
  const moduleKey = JSON.stringify(names.module.from);
  if (glue.split(moduleKey).length !== 2) throw new Error(`wasm_names: the glue names ${moduleKey} other than once`);
  let out = glue.replace(moduleKey, JSON.stringify(names.module.to));
  for (const [from, to] of names.exports) out = out.replace(new RegExp(`\\bwasm\\.${escape(from)}\\b`, 'g'), `wasm.${to}`);
  // An import is a key of the imports object: `name: function(...` at the start of a line.
  for (const [from, to] of names.imports) out = out.replace(new RegExp(`^(\\s*)${escape(from)}:`, 'gm'), `$1${to}:`);
  for (const from of [names.module.from, ...names.imports.keys(), ...names.exports.keys()]) {
    // A name may still appear as a local function of the glue (wasm-bindgen names the JS wrapper of a
    // closure export after it): only a property use or a key left over is an error.
    if (new RegExp(`(\\.${escape(from)}\\b|^\\s*${escape(from)}:|["']${escape(from)}["'])`, 'm').test(out)) {
      throw new Error(`wasm_names: the glue still uses ${from}`);
    }
  }
  return out;
}
