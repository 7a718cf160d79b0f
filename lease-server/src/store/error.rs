//! How a store operation fails. The store says what happened; the HTTP edge decides what the client
//! sees (`impl From<StoreError> for ApiError`).

use std::fmt;

use weblocks::lease::LeaseError;

use crate::lease_row::Refusal;

/// A failed store operation.
#[derive(Debug)]
pub enum StoreError {
    /// The lease core refused the operation, which wrote nothing (the refusal comes before any write),
    /// with the live lease on the key where there is one.
    Refused(Box<Refusal>),
    /// The database failed or did not answer in time, or a row did not decode. The text is for the
    /// service's log only: it may quote SQL or the database's own words.
    Database(String),
    /// A bug: the task running the operation panicked or was cancelled.
    Internal,
}

impl From<Refusal> for StoreError {
    fn from(refusal: Refusal) -> StoreError {
        StoreError::Refused(Box::new(refusal))
    }
}

/// The core's errors met while reading rows: `Storage` is the database's failure (a row that does not
/// decode); any other is the core refusing a key read back from the table.
impl From<LeaseError> for StoreError {
    fn from(error: LeaseError) -> StoreError {
        match error {
            LeaseError::Storage(why) => StoreError::Database(why),
            error => StoreError::from(Refusal {
                error,
                holder: None,
                now: None,
            }),
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Refused(refusal) => write!(f, "refused: {}", refusal.error),
            StoreError::Database(why) => write!(f, "{why}"),
            StoreError::Internal => write!(f, "a store operation's task failed"),
        }
    }
}
