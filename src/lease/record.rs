//! What a store keeps per (type, id), and the view of it that may be shown to anyone.

use super::key::LeaseKey;
use super::lock_id::LockId;
use super::token::Token;

/// One row of the `locks` table: (type, id) primary key, the holder's token, the expiry.
#[derive(Clone, Debug, PartialEq)]
pub struct LeaseRecord {
    pub key: LeaseKey,
    pub token: Token,
    /// Milliseconds since the Unix epoch.
    pub expires_at_ms: f64,
}

impl LeaseRecord {
    /// A lease whose expiry is `now_ms` or earlier is expired: at `expires_at_ms` it is already free.
    pub fn is_expired(&self, now_ms: f64) -> bool {
        self.expires_at_ms <= now_ms
    }

    /// The `LockId` of this lease.
    pub fn lock_id(&self) -> LockId {
        LockId {
            key: self.key.clone(),
            token: self.token,
        }
    }

    /// The public view: everything but the token.
    pub fn info(&self) -> LeaseInfo {
        LeaseInfo {
            key: self.key.clone(),
            expires_at_ms: self.expires_at_ms,
        }
    }
}

/// A lease as `list()` and `checkLock` report it. It carries no token, so it grants nothing.
#[derive(Clone, Debug, PartialEq)]
pub struct LeaseInfo {
    pub key: LeaseKey,
    pub expires_at_ms: f64,
}
