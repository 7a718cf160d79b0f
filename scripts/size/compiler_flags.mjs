// The compilers' own options that make the release wasm smaller (scripts/build.mjs applies them; the
// support floor's options, `-Ctarget-cpu=mvp` and wasm-opt's `--mvp-features`, are build.mjs's own).
// What each saves and what it risks on an upgrade: docs/SIZE.md.

/**
 * rustc flags of the release wasm, on top of the release profile (opt-level z, fat LTO, one codegen unit,
 * panic abort: Cargo.toml). Several are unstable flags of the pinned stable toolchain, enabled for this
 * one build with RUSTC_BOOTSTRAP=1; they change no behaviour of the library (nothing it does reads a Debug
 * string or a panic message), only bytes:
 *  - panics abort at once (`-Cpanic=immediate-abort`: no panic message formatting, no unwinding tables);
 *  - Debug formatting and panic locations compiled out (`-Zfmt-debug=none`, `-Zlocation-detail=none`);
 *  - LLVM's inliner at threshold 1 (opt-level z: 5; 1 to 4 make the same wasm, 0 a larger one): it inlines
 *    less, and wasm-opt decides the rest (WASM_OPT_PASSES);
 *  - every function of another crate (std, alloc, wasm-bindgen, js-sys) offered to that inliner
 *    (`-Zcross-crate-inline-threshold=always`): it then weighs std's small generic helpers in their callers
 *    here, as it already does this crate's own, instead of calling them out of line;
 *  - no shared generics (`-Zshare-generics=n`; opt-level z turns sharing on): every generic instance this
 *    crate uses is made here, where LLVM inlines and simplifies it with the code that calls it, instead of
 *    called out of line from std's copy.
 */
export const SIZE_RUSTFLAGS = [
  '-Zunstable-options',
  '-Cpanic=immediate-abort',
  '-Zfmt-debug=none',
  '-Zlocation-detail=none',
  '-Cllvm-args=--inline-threshold=1',
  '-Zshare-generics=n',
  '-Zcross-crate-inline-threshold=always',
];

/** std rebuilt with the crate (`-Z build-std`, which the MVP needs anyway) with its size feature. */
export const BUILD_STD_ARGS = ['-Z', 'build-std=std,panic_abort', '-Z', 'build-std-features=optimize_for_size'];

// Control flow flattened and rebuilt by the Relooper, once before the main -Oz and once after (then -Oz
// twice): the code comes out in more regular shapes, which compress better.
const RELOOP = ['--flatten', '--rereloop'];

/**
 * wasm-opt's passes over wasm-bindgen's output (after `--mvp-features`):
 *  - `-Oz`, and `--converge` to repeat it until it gains nothing;
 *  - functions sorted by their (Rust) names: the copies of one generic and the functions of one module
 *    end up side by side, where LZMA finds their likeness (the name section is dropped from the output);
 *  - inlining: a function with one caller only up to 20 bytes (-Oz: any size), a function of up to 4 bytes
 *    always (-Oz: 2). The wasm comes out larger but compresses better: a function left whole keeps the
 *    shapes it shares with similar code, where inlined into its caller it becomes something unique;
 *  - `--low-memory-unused`: constant offsets fold into loads and stores. It assumes nothing lives below
 *    address 1024, true of Rust's wasm, whose 1 MB stack comes first and grows down towards 0 (a program
 *    that got that deep would be broken anyway);
 *  - the producers and target features sections, which no engine reads, stripped.
 */
export const WASM_OPT_PASSES = [
  ...['-Oz', ...RELOOP],
  '--reorder-functions-by-name',
  '-Oz',
  '--converge',
  '--one-caller-inline-max-function-size=20',
  '--always-inline-max-function-size=4',
  '--low-memory-unused',
  '--strip-producers',
  '--strip-target-features',
  ...[...RELOOP, '-Oz', '-Oz'],
];
