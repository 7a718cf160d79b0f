//! Why a lease operation failed. JS sees these as a `LockError` whose `code` is [`LeaseError::code`].

use std::fmt;

/// A failed lease operation. Every variant maps to one stable `code` string (see `docs/LEASES.md`).
#[derive(Clone, Debug, PartialEq)]
pub enum LeaseError {
    /// An argument is malformed: an empty or too long type or id, a ttl or increment that is not a positive
    /// finite number of milliseconds or exceeds the maximum, a string that is not a `LockId`.
    InvalidArgument(String),
    /// `tryLock`: another holder has a live lease on this (type, id); it expires at `expires_at_ms`.
    AlreadyLocked { expires_at_ms: f64 },
    /// No lease exists for this `LockId`'s (type, id): it was released, or expired a day ago and was
    /// cleaned up.
    NotFound,
    /// The lease of this `LockId` still exists but has expired (nobody has taken it over yet).
    Expired { expires_at_ms: f64 },
    /// The lease of this `LockId` expired or was released, and another holder now has a lease on the same
    /// (type, id). The stale `LockId` can neither check, extend nor release it.
    TakenOver,
    /// The lease of this `LockId` was live when another holder took it over (`takeOver`, which a store
    /// grants only to callers allowed to); the `LockId` can neither check, extend nor release the new lease.
    Revoked,
    /// The store failed (IndexedDB unavailable, quota, a corrupt record...). Only stores raise it.
    Storage(String),
}

impl LeaseError {
    /// The stable code JS sees as `LockError.code`.
    pub fn code(&self) -> &'static str {
        match self {
            LeaseError::InvalidArgument(_) => "InvalidArgument",
            LeaseError::AlreadyLocked { .. } => "AlreadyLocked",
            LeaseError::NotFound => "NotFound",
            LeaseError::Expired { .. } => "Expired",
            LeaseError::TakenOver => "TakenOver",
            LeaseError::Revoked => "Revoked",
            LeaseError::Storage(_) => "StorageError",
        }
    }

    /// When the lease the error is about expires or expired, if the error is about one.
    pub fn expires_at_ms(&self) -> Option<f64> {
        match self {
            LeaseError::AlreadyLocked { expires_at_ms } | LeaseError::Expired { expires_at_ms } => {
                Some(*expires_at_ms)
            }
            _ => None,
        }
    }
}

impl LeaseError {
    /// The message JS sees (also the `Display` form); built without `format!`, which would bring the
    /// formatting machinery into the wasm.
    pub fn message(&self) -> String {
        match self {
            LeaseError::InvalidArgument(why) => "invalid argument: ".to_owned() + why,
            LeaseError::AlreadyLocked { .. } => "already locked by another holder".into(),
            LeaseError::NotFound => "no such lease (released, or expired long ago)".into(),
            LeaseError::Expired { .. } => "the lease has expired".into(),
            LeaseError::TakenOver => "the lease was taken over by another holder".into(),
            LeaseError::Revoked => {
                "the lease was taken over by another holder while it was live".into()
            }
            LeaseError::Storage(why) => "lease storage failed: ".to_owned() + why,
        }
    }
}

impl fmt::Display for LeaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for LeaseError {}
