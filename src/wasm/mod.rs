//! The wasm-bindgen edge: converts values between JS and the pure core, and carries out its decisions.
//! Nothing here decides anything; see `docs/ARCHITECTURE.md` for the contract with `js/lock_api.js`.
//! Only [`snapshot_transfer`] and [`refusal`], pure, also build natively, for their tests.

#[cfg(all(target_arch = "wasm32", feature = "coordination"))]
mod channel;
#[cfg(all(target_arch = "wasm32", feature = "coordination"))]
mod coordination;
#[cfg(target_arch = "wasm32")]
mod engine;
#[cfg(all(target_arch = "wasm32", feature = "coordination"))]
mod evidence;
#[cfg(target_arch = "wasm32")]
mod js_call;
#[cfg(all(target_arch = "wasm32", feature = "leases"))]
mod lease_operation;
pub mod refusal;
#[cfg(target_arch = "wasm32")]
mod request_options;
#[cfg(target_arch = "wasm32")]
mod sink;
pub mod snapshot_transfer;
#[cfg(all(target_arch = "wasm32", feature = "coordination"))]
mod transport_settle;

#[cfg(target_arch = "wasm32")]
pub use engine::Engine;
