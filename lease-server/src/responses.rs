//! The JSON bodies the API answers with, one type per answer (docs/LEASES.md's endpoint table; the
//! route tests, `tests/contract.rs`, check each against it). Errors: [`ErrorBody`].

use serde::Serialize;

use crate::error_code::ErrorCode;
use crate::holder::Holder;
use crate::lease_row::{LeaseView, Reply};

/// `tryLock` and `takeOver`: `{lockId, type, id, holder, acquiredAt, expiresAt, fence, now}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Granted {
    pub lock_id: String,
    #[serde(flatten)]
    pub lease: LeaseView,
    /// The database's time when it decided: with it a client turns `expiresAt` into time left.
    pub now: f64,
}

/// `checkLock` and `extendLockExpiration`: `{type, id, holder, acquiredAt, expiresAt, fence, now}`.
#[derive(Debug, Serialize)]
pub struct Held {
    #[serde(flatten)]
    pub lease: LeaseView,
    pub now: f64,
}

/// `releaseLock`: `{}`.
#[derive(Debug, Serialize)]
pub struct Released {}

/// `list`: `{leases, now}`, never a lockId.
#[derive(Debug, Serialize)]
pub struct LeaseList {
    pub leases: Vec<LeaseView>,
    pub now: f64,
}

/// `/health`: `{status: "ok", database: "sqlite" | "postgres"}`.
#[derive(Debug, Serialize)]
pub struct Health {
    pub status: &'static str,
    pub database: &'static str,
}

/// Every failure: `{"error": {"code", "message", ...}}`.
#[derive(Debug, Serialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// The error: its code and message; for a lease error about a held key, the live lease's `holder`,
/// `acquiredAt`, `fence` and `expiresAt` (also for `Expired`: when the lease expired); the database's
/// `now` whenever the database decided.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorDetail {
    pub code: ErrorCode,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<Holder>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acquired_at: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fence: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub now: Option<f64>,
}

/// A store's reply that is not the one its operation gives (a grant that did not grant, a check that
/// released): a bug, answered as an `InternalError`.
#[derive(Debug)]
pub struct UnexpectedReply(pub Reply);

impl TryFrom<Reply> for Granted {
    type Error = UnexpectedReply;

    fn try_from(reply: Reply) -> Result<Granted, UnexpectedReply> {
        match reply {
            Reply::Acquired {
                lock_id,
                lease,
                now,
            } => Ok(Granted {
                lock_id,
                lease,
                now,
            }),
            other => Err(UnexpectedReply(other)),
        }
    }
}

impl TryFrom<Reply> for Held {
    type Error = UnexpectedReply;

    fn try_from(reply: Reply) -> Result<Held, UnexpectedReply> {
        match reply {
            Reply::Held { lease, now } => Ok(Held { lease, now }),
            other => Err(UnexpectedReply(other)),
        }
    }
}

impl TryFrom<Reply> for Released {
    type Error = UnexpectedReply;

    fn try_from(reply: Reply) -> Result<Released, UnexpectedReply> {
        match reply {
            Reply::Released => Ok(Released {}),
            other => Err(UnexpectedReply(other)),
        }
    }
}
