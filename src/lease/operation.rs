//! The four lease operations as pure decisions over the one record they concern.
//!
//! A store runs an [`Operation`] atomically: read the record at [`Operation::key`], call
//! [`Operation::decide`] with it and the current time, carry out the [`Write`], report the [`LeaseOutcome`].
//! An operation that fails writes nothing.

use super::error::LeaseError;
use super::key::{LeaseKey, MAX_TTL_MS, check_positive_ms, check_ttl_ms};
use super::lock_id::LockId;
use super::record::{LeaseInfo, LeaseRecord};
use super::token::Token;

/// A validated request. Build it with the constructors, which check the arguments.
#[derive(Clone, Debug, PartialEq)]
pub enum Operation {
    /// Take the lease on `key` for `ttl_ms` unless someone holds a live one; the new lease gets `token`.
    TryLock {
        key: LeaseKey,
        ttl_ms: f64,
        token: Token,
    },
    /// Succeed only while the lease of this `LockId` is live.
    Check(LockId),
    /// Remove the lease of this `LockId` (live or expired, as long as nobody took it over).
    Release(LockId),
    /// Push the expiry of a live lease `inc_ms` later (`expiration + inc`), capped at
    /// [`MAX_TTL_MS`] from now, or a store's lower bound ([`Operation::decide_within`]), so any positive
    /// `inc_ms` is accepted.
    Extend { lock_id: LockId, inc_ms: f64 },
}

/// What the caller gets back.
#[derive(Clone, Debug, PartialEq)]
pub enum LeaseOutcome {
    /// `TryLock` succeeded: the holder's `LockId` and the lease.
    Acquired { lock_id: LockId, info: LeaseInfo },
    /// `Check` or `Extend` succeeded: the lease as it now is.
    Held(LeaseInfo),
    /// `Release` succeeded.
    Released,
}

/// The store change a decision asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    Nothing,
    /// Insert or replace the record at its key.
    Put(LeaseRecord),
    Delete(LeaseKey),
}

/// A successful decision: the outcome and the write that makes it true.
#[derive(Clone, Debug, PartialEq)]
pub struct LeaseDecision {
    pub outcome: LeaseOutcome,
    pub write: Write,
}

impl Operation {
    /// `tryLock(type, id, { ttlMs })` with the token for the new lease (from 16 random bytes).
    pub fn try_lock(
        lease_type: impl Into<String>,
        id: impl Into<String>,
        ttl_ms: f64,
        token: Token,
    ) -> Result<Operation, LeaseError> {
        let key = LeaseKey::new(lease_type, id)?;
        let ttl_ms = check_ttl_ms(ttl_ms)?;
        Ok(Operation::TryLock { key, ttl_ms, token })
    }

    pub fn check(lock_id: &str) -> Result<Operation, LeaseError> {
        Ok(Operation::Check(LockId::parse(lock_id)?))
    }

    pub fn release(lock_id: &str) -> Result<Operation, LeaseError> {
        Ok(Operation::Release(LockId::parse(lock_id)?))
    }

    pub fn extend(lock_id: &str, inc_ms: f64) -> Result<Operation, LeaseError> {
        let lock_id = LockId::parse(lock_id)?;
        let inc_ms = check_positive_ms("incMs", inc_ms)?;
        Ok(Operation::Extend { lock_id, inc_ms })
    }

    /// The one record this operation reads and may write.
    pub fn key(&self) -> &LeaseKey {
        match self {
            Operation::TryLock { key, .. } => key,
            Operation::Check(lock_id)
            | Operation::Release(lock_id)
            | Operation::Extend { lock_id, .. } => &lock_id.key,
        }
    }

    /// Decide, given the record currently stored at [`Self::key`] and the time.
    pub fn decide(
        &self,
        current: Option<&LeaseRecord>,
        now_ms: f64,
    ) -> Result<LeaseDecision, LeaseError> {
        self.decide_within(current, now_ms, MAX_TTL_MS)
    }

    /// [`Self::decide`] for a store that bounds how long a lease may have left lower than
    /// [`MAX_TTL_MS`]: an extension is capped at `max_left_ms` from now (the ttl of a new lease is the
    /// store's to check before building the operation).
    pub fn decide_within(
        &self,
        current: Option<&LeaseRecord>,
        now_ms: f64,
        max_left_ms: f64,
    ) -> Result<LeaseDecision, LeaseError> {
        match self {
            Operation::TryLock { key, ttl_ms, token } => {
                if let Some(held) = current.filter(|r| !r.is_expired(now_ms)) {
                    return Err(LeaseError::AlreadyLocked {
                        expires_at_ms: held.expires_at_ms,
                    });
                }
                // An expired record is replaced here: that is the lazy clean-up of its key.
                Ok(grant(key, *token, now_ms + ttl_ms))
            }
            Operation::Check(lock_id) => {
                let record = live(held_by(current, lock_id)?, now_ms)?;
                Ok(LeaseDecision {
                    outcome: LeaseOutcome::Held(record.info()),
                    write: Write::Nothing,
                })
            }
            Operation::Release(lock_id) => {
                held_by(current, lock_id)?;
                Ok(LeaseDecision {
                    outcome: LeaseOutcome::Released,
                    write: Write::Delete(lock_id.key.clone()),
                })
            }
            Operation::Extend { lock_id, inc_ms } => {
                let record = live(held_by(current, lock_id)?, now_ms)?;
                let expires_at_ms =
                    (record.expires_at_ms + inc_ms).min(now_ms + max_left_ms.min(MAX_TTL_MS));
                let extended = LeaseRecord {
                    expires_at_ms,
                    ..record.clone()
                };
                Ok(LeaseDecision {
                    outcome: LeaseOutcome::Held(extended.info()),
                    write: Write::Put(extended),
                })
            }
        }
    }
}

/// A new lease on `key`: the decision of a successful tryLock or takeOver.
pub(crate) fn grant(key: &LeaseKey, token: Token, expires_at_ms: f64) -> LeaseDecision {
    let record = LeaseRecord {
        key: key.clone(),
        token,
        expires_at_ms,
    };
    LeaseDecision {
        outcome: LeaseOutcome::Acquired {
            lock_id: record.lock_id(),
            info: record.info(),
        },
        write: Write::Put(record),
    }
}

/// The record if it belongs to `lock_id`: `NotFound` without one, `TakenOver` if it has another token
/// (which a store that offers takeOver refines with [`super::take_over::revoked_or`]).
fn held_by<'a>(
    current: Option<&'a LeaseRecord>,
    lock_id: &LockId,
) -> Result<&'a LeaseRecord, LeaseError> {
    match current {
        None => Err(LeaseError::NotFound),
        Some(record) if record.token != lock_id.token => Err(LeaseError::TakenOver),
        Some(record) => Ok(record),
    }
}

fn live(record: &LeaseRecord, now_ms: f64) -> Result<&LeaseRecord, LeaseError> {
    if record.is_expired(now_ms) {
        return Err(LeaseError::Expired {
            expires_at_ms: record.expires_at_ms,
        });
    }
    Ok(record)
}

/// How long an expired record is kept when nobody takes its key over: a day, so a holder who comes back
/// (a laptop that slept overnight) still learns `Expired` rather than `NotFound`.
pub const PURGE_EXPIRED_AFTER_MS: f64 = 24.0 * 60.0 * 60.0 * 1000.0;

/// `list()`: the live leases among `records` (in their order), and the keys of the records that expired
/// at least [`PURGE_EXPIRED_AFTER_MS`] ago, which the store deletes in the same transaction (the lazy
/// clean-up; a `tryLock` on an expired lease's key replaces it at once).
pub fn list_live(records: &[LeaseRecord], now_ms: f64) -> (Vec<LeaseInfo>, Vec<LeaseKey>) {
    let (mut live, mut purge) = (Vec::new(), Vec::new());
    for r in records {
        if !r.is_expired(now_ms) {
            live.push(r.info());
        } else if r.is_expired(now_ms - PURGE_EXPIRED_AFTER_MS) {
            purge.push(r.key.clone());
        }
    }
    (live, purge)
}
