//! `takeOver`: a grant whoever holds the key, for stores shared between users that let some of them
//! break another's lease (an editor taking over a colleague's abandoned edit). The browser's IndexedDB
//! store does not offer it, so none of this is in the wasm.
//!
//! The replaced holder must learn what happened: its `LockId`'s next check, extend or release fails with
//! `Revoked`, not `TakenOver` (which means its lease had lapsed first). A store keeps, with the new lease,
//! the token [`TakeOver::decide`] says it revoked, and passes it to [`revoked_or`] when an operation on a
//! `LockId` fails because another lease holds its key.

use super::error::LeaseError;
use super::key::{LeaseKey, check_ttl_ms};
use super::lock_id::LockId;
use super::operation::{LeaseDecision, grant};
use super::record::LeaseRecord;
use super::token::Token;

/// A validated `takeOver(type, id, ttlMs)` with the token for the new lease.
#[derive(Clone, Debug, PartialEq)]
pub struct TakeOver {
    pub key: LeaseKey,
    pub ttl_ms: f64,
    pub token: Token,
}

impl TakeOver {
    pub fn new(
        lease_type: impl Into<String>,
        id: impl Into<String>,
        ttl_ms: f64,
        token: Token,
    ) -> Result<TakeOver, LeaseError> {
        let key = LeaseKey::new(lease_type, id)?;
        let ttl_ms = check_ttl_ms(ttl_ms)?;
        Ok(TakeOver { key, ttl_ms, token })
    }

    /// Always a grant (the same as a successful tryLock's), and the token of the live lease it revokes:
    /// `None` when the key was free or its lease had expired (that holder hears `TakenOver`, as after a
    /// tryLock).
    pub fn decide(
        &self,
        current: Option<&LeaseRecord>,
        now_ms: f64,
    ) -> (LeaseDecision, Option<Token>) {
        let revoked = current.filter(|r| !r.is_expired(now_ms)).map(|r| r.token);
        (grant(&self.key, self.token, now_ms + self.ttl_ms), revoked)
    }
}

/// `error`, from an operation on `lock_id` that found another lease on its key, as the holder should hear
/// it: `Revoked` if that lease took over `lock_id`'s while it was live (`revoked`: what
/// [`TakeOver::decide`] returned for it), else `error` unchanged.
pub fn revoked_or(error: LeaseError, lock_id: &LockId, revoked: Option<Token>) -> LeaseError {
    match error {
        LeaseError::TakenOver if revoked == Some(lock_id.token) => LeaseError::Revoked,
        other => other,
    }
}
