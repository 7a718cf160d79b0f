//! The wasm-bindgen edge: converts values between JS and the pure core, and carries out its decisions.
//! Nothing here decides anything; see `docs/ARCHITECTURE.md` for the contract with `js/lock_api.js`.

#[cfg(feature = "coordination")]
mod coordination;
mod engine;
#[cfg(feature = "leases")]
mod lease_operation;

pub use engine::Engine;
