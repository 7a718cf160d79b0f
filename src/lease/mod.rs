//! Leases: offline pessimistic locks that outlive a page load (an extension, not part of the Web Locks spec).
//!
//! A Web Lock lives only as long as its callback. A lease is the lock of an edit form: taken when the form is
//! shown, released when the change is saved, and expiring unless extended, so a user who walks away never
//! blocks the others for ever. The lease manager has four operations, all here: `tryLock(type, id) ->
//! LockId`, `checkLock`, `releaseLock` and `extendLockExpiration`.
//!
//! Everything in this module is pure: the clock (`now_ms`, milliseconds since the Unix epoch) and the
//! randomness of a new lease's token are passed in. Each operation touches the record of exactly one
//! (type, id) key, so a store runs it as "read that record, [`Operation::decide`], write", atomically.
//!
//! - [`key`]: a lease's (type, id) key and the argument limits.
//! - [`token`] and [`lock_id`]: the unguessable token and the `LockId` string a holder keeps.
//! - [`record`]: what a store keeps per key, and the public view of it (never the token).
//! - [`operation`]: the four operations and their decisions; [`error`]: why one failed.
//! - [`store`]: the [`LeaseStore`] seam, an in-memory store, and [`Leases`], which runs operations on a store.
//! - [`take_over`]: `takeOver`, a grant whoever holds the key, for stores shared between users (the lease
//!   service); its replaced holder is told `Revoked`.
//!
//! In the browser, the wasm edge (`src/wasm/lease_operation.rs`) hands validated operations to the
//! IndexedDB store (`js/lease_idb_store.js`), which calls [`Operation::decide`] inside one `readwrite`
//! transaction per operation.

pub mod error;
pub mod key;
pub mod lock_id;
pub mod operation;
pub mod record;
pub mod store;
pub mod take_over;
pub mod token;

pub use error::LeaseError;
pub use key::LeaseKey;
pub use lock_id::LockId;
pub use operation::{LeaseDecision, LeaseOutcome, Operation, Write, list_live};
pub use record::{LeaseInfo, LeaseRecord};
pub use store::{LeaseStore, Leases, MemoryLeaseStore};
pub use take_over::{TakeOver, revoked_or};
pub use token::Token;

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
