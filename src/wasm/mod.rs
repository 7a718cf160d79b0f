//! The wasm-bindgen edge: converts values between JS and the pure core, and carries out its decisions.
//! Nothing here decides anything; see `docs/ARCHITECTURE.md` for the contract with `js/lock_api.js`.
//! Only [`snapshot_transfer`] and [`refusal`], pure, also build natively, for their tests. The engine's
//! modules build with the `locks` feature, the leases' one with `leases`: each shipped wasm has one of the
//! two (`Cargo.toml`).

#[cfg(all(target_arch = "wasm32", feature = "coordination"))]
mod channel;
#[cfg(all(target_arch = "wasm32", feature = "coordination"))]
mod coordination;
#[cfg(all(target_arch = "wasm32", feature = "locks"))]
mod engine;
#[cfg(all(target_arch = "wasm32", feature = "coordination"))]
mod evidence;
#[cfg(all(target_arch = "wasm32", feature = "locks"))]
mod js_call;
#[cfg(all(target_arch = "wasm32", feature = "leases"))]
mod lease_operation;
#[cfg(all(target_arch = "wasm32", feature = "coordination"))]
mod log_storage;
pub mod refusal;
#[cfg(all(target_arch = "wasm32", feature = "locks"))]
mod request_options;
#[cfg(all(target_arch = "wasm32", feature = "locks"))]
mod sink;
pub mod snapshot_transfer;
#[cfg(all(target_arch = "wasm32", feature = "coordination"))]
mod transport_settle;

#[cfg(all(target_arch = "wasm32", feature = "locks"))]
pub use engine::Engine;
