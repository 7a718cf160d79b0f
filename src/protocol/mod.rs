//! The coordination protocol that gives every context of an origin one lock manager, as a sans-I/O state
//! machine: a [`Participant`] per JS context takes events (local calls, delivered messages and log
//! entries, timers, evidence of life and death, lifecycle) with the time passed in, and gives
//! [`Effect`]s (send messages, open or close channels and liveness databases, grant or reject locally)
//! and its next deadline. The design, its assumptions and the safety argument are in docs/PROTOCOL.md.
//!
//! - [`wire`]: the versioned messages and their JS-friendly wire form (an array of numbers/strings).
//! - [`replica`]: the replicated lock state every context derives from the order of messages.
//! - [`participant`]: one context: joining, the local requests, the evidence of life and death;
//!   what the caller does after each call is in its module docs.
//! - [`edge`]: the edge loop that does it, generic over its host (the browser, the simulated origin):
//!   it carries out the participant's effects, arms its timer, and runs the edge's policies (flush
//!   hops, keeping an earlier timer).
//! - [`evidence`]: the evidence of life and death as the edge keeps it (this context's liveness
//!   database, the origin's register, the watches), sans-I/O behind the edge loop: the storage
//!   operations out, the backend's answers in.
//! - [`log_writer`]: the log transport's writer (its connection, appends with their retries, reads,
//!   trims, what hands an entry on), sans-I/O behind the edge loop as the evidence is.
//! - `log_order`: the order of the log transport, restored from entries that arrive in any order.
//! - [`transport_record`]: the origin's one record of its transport, and what each context uses by it.

pub mod replica;
pub mod wire;

pub mod edge;
pub mod evidence;
mod log_order;
pub mod log_writer;
pub mod participant;
pub mod transport_record;

pub use participant::{
    BackForwardCache, Config, Effect, LossReason, Participant, TRIM_STEP, Transport, Wake,
};
