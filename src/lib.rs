//! weblocks: the W3C Web Locks API as a Rust core compiled to WebAssembly.
//!
//! - [`scheduler`]: the spec's lock manager (sections 2 and 4), pure and deterministic.
//! - [`protocol`]: the coordination protocol that makes every context of an origin share one lock
//!   manager, as a sans-I/O state machine; see `docs/PROTOCOL.md`.
//! - [`lease`]: leases, offline pessimistic locks that outlive a page load (an extension; `docs/LEASES.md`).
//! - [`memory_copy`]: the wasm's `memcpy` and `memmove`.
//! - [`sequence_map`]: a sorted map for keys that come in order and leave from the front.
//! - [`sorted_vec`]: ordered map and set kept as sorted vectors, far smaller in the wasm than std's.
//! - [`wasm`]: the thin edge that JS drives (wasm32 only, but for the pure transfer form of `query()`'s
//!   snapshot, tested natively); see `docs/ARCHITECTURE.md` for its contract.
//!
//! The cargo features make the two shipped wasm modules from this one crate: `coordination` (the protocol,
//! with `locks`, the engine's edge) is the lock engine every build loads, `leases` the leases' add-on
//! (`Cargo.toml`; `node scripts/size/sizes.mjs --features` measures each).

#[cfg(feature = "leases")]
pub mod lease;
pub mod memory_copy;
#[cfg(feature = "coordination")]
pub mod protocol;
pub mod scheduler;
pub mod sequence_map;
pub mod sorted_vec;

pub mod wasm;

/// The wasm's global allocator: talc instead of std's dlmalloc, smaller in the wasm and faster. The
/// wasm is single-threaded (no `atomics` target feature), which `WasmDynamicTalc` requires.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();
