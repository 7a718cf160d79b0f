//! The wasm-bindgen edge: converts values between JS and the pure core, and carries out its decisions.
//! Nothing here decides anything; see `docs/ARCHITECTURE.md` for the contract with `js/lock_api.js`.

#[cfg(feature = "coordination")]
mod channel;
#[cfg(feature = "coordination")]
mod coordination;
mod engine;
mod js_call;
#[cfg(feature = "leases")]
mod lease_operation;
mod sink;

pub use engine::Engine;
