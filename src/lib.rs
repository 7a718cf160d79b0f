//! weblocks: the W3C Web Locks API as a Rust core compiled to WebAssembly.
//!
//! - [`scheduler`]: the spec's lock manager (sections 2 and 4), pure and deterministic.
//! - [`lease`]: leases, offline pessimistic locks that outlive a page load (an extension; `docs/LEASES.md`).
//! - `wasm` (wasm32 only): the thin edge that JS drives; see `docs/ARCHITECTURE.md` for its contract.

pub mod lease;
pub mod scheduler;

#[cfg(target_arch = "wasm32")]
pub mod wasm;
