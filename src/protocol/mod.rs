//! The coordination protocol that gives every context of an origin one lock manager (issue 3), as a
//! sans-I/O state machine: a [`Node`] per JS context takes events (local calls, delivered messages,
//! timers, storage changes, lifecycle) with the time passed in, and returns [`Effect`]s (post a
//! message, write a storage key, set a timer, grant/reject locally). The design, its assumptions and
//! the safety argument are in docs/PROTOCOL.md.
//!
//! - [`wire`]: the versioned messages and their JS-friendly wire form (an array of numbers/strings).
//! - [`replica`]: the replicated lock state every context derives from the channel's sequence.
//! - [`node`]: one context: joining, the local requests, liveness checks, the storage hint.

pub mod replica;
pub mod wire;

mod joining;
pub mod live_record;
mod log_order;
mod node;
mod synced;

pub use live_record::LIVE_KEY;
pub use node::{Config, Effect, LossReason, Node, Transport, Wake};
