// The legacy build's `WebAssembly` (scripts/build.mjs injects it in place of the global): there the wasm
// is embedded compiled to JavaScript by binaryen's wasm2js, as its `asmFunc(imports)`, which returns the
// module's exports, and the glue's one instantiation (scripts/size/trim_glue.mjs) calls it, as
// `WebAssembly.instantiate(module, imports)` is called, for an instance. The glue's
// other uses of WebAssembly (initSync, streaming) are not in the classic build.
export const WebAssembly = {
  instantiate: (asmFunc, imports) => Promise.resolve({ exports: asmFunc(imports) }),
};
