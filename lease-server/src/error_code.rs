//! Every error code the service answers with, in one table: its name, its HTTP status, and whether the
//! JS client's `LockError` carries it as it is. The places that name codes by hand (the core's
//! `LeaseError::code`, `js/leases.js`, `types/leases.d.ts`, docs/LEASES.md) are checked against this
//! table by `tests/error_codes.rs`; [`crate::api_error`] takes its codes and statuses from here.

use axum::http::StatusCode;
use serde::Serialize;
use weblocks::lease::LeaseError;

/// A code of `{"error": {"code", ...}}`. It serializes as its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ErrorCode {
    InvalidArgument,
    AlreadyLocked,
    NotFound,
    Expired,
    TakenOver,
    Revoked,
    StorageError,
    Unauthorized,
    Forbidden,
    PayloadTooLarge,
    NoSuchEndpoint,
    MethodNotAllowed,
    InternalError,
    ServiceBusy,
}

/// What a page sees of a code: `LOCK_ERROR_CODES` (js/leases.js) lists the codes a `LockError` carries as
/// they are; any other code from the service reaches the page as a `StorageError` (the service failed,
/// or was called wrongly, as the page cannot fix).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InLockError {
    AsIs,
    AsStorageError,
}

/// One row of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeRow {
    pub code: ErrorCode,
    pub name: &'static str,
    pub status: StatusCode,
    pub in_lock_error: InLockError,
}

impl ErrorCode {
    /// Every code, in the table's order (the order of `LOCK_ERROR_CODES` for those a `LockError` carries).
    pub const ALL: [ErrorCode; 14] = [
        ErrorCode::InvalidArgument,
        ErrorCode::AlreadyLocked,
        ErrorCode::NotFound,
        ErrorCode::Expired,
        ErrorCode::TakenOver,
        ErrorCode::Revoked,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::StorageError,
        ErrorCode::PayloadTooLarge,
        ErrorCode::NoSuchEndpoint,
        ErrorCode::MethodNotAllowed,
        ErrorCode::InternalError,
        ErrorCode::ServiceBusy,
    ];

    /// The table. A conflict is 409; every "you do not hold this lease" (never had it, it expired,
    /// someone else has it now) is 403; a failed or busy service is 503.
    pub const fn row(self) -> CodeRow {
        use InLockError::{AsIs, AsStorageError};
        let (name, status, in_lock_error) = match self {
            ErrorCode::InvalidArgument => ("InvalidArgument", StatusCode::BAD_REQUEST, AsIs),
            ErrorCode::AlreadyLocked => ("AlreadyLocked", StatusCode::CONFLICT, AsIs),
            ErrorCode::NotFound => ("NotFound", StatusCode::FORBIDDEN, AsIs),
            ErrorCode::Expired => ("Expired", StatusCode::FORBIDDEN, AsIs),
            ErrorCode::TakenOver => ("TakenOver", StatusCode::FORBIDDEN, AsIs),
            ErrorCode::Revoked => ("Revoked", StatusCode::FORBIDDEN, AsIs),
            ErrorCode::Unauthorized => ("Unauthorized", StatusCode::UNAUTHORIZED, AsIs),
            ErrorCode::Forbidden => ("Forbidden", StatusCode::FORBIDDEN, AsIs),
            ErrorCode::StorageError => ("StorageError", StatusCode::SERVICE_UNAVAILABLE, AsIs),
            ErrorCode::PayloadTooLarge => (
                "PayloadTooLarge",
                StatusCode::PAYLOAD_TOO_LARGE,
                AsStorageError,
            ),
            ErrorCode::NoSuchEndpoint => ("NoSuchEndpoint", StatusCode::NOT_FOUND, AsStorageError),
            ErrorCode::MethodNotAllowed => (
                "MethodNotAllowed",
                StatusCode::METHOD_NOT_ALLOWED,
                AsStorageError,
            ),
            ErrorCode::InternalError => (
                "InternalError",
                StatusCode::INTERNAL_SERVER_ERROR,
                AsStorageError,
            ),
            ErrorCode::ServiceBusy => (
                "ServiceBusy",
                StatusCode::SERVICE_UNAVAILABLE,
                AsStorageError,
            ),
        };
        CodeRow {
            code: self,
            name,
            status,
            in_lock_error,
        }
    }

    pub const fn name(self) -> &'static str {
        self.row().name
    }

    pub const fn status(self) -> StatusCode {
        self.row().status
    }

    /// The code of a lease decision's failure (the core names it too: `LeaseError::code`, checked
    /// against this by a test).
    pub fn of_lease(error: &LeaseError) -> ErrorCode {
        match error {
            LeaseError::InvalidArgument(_) => ErrorCode::InvalidArgument,
            LeaseError::AlreadyLocked { .. } => ErrorCode::AlreadyLocked,
            LeaseError::NotFound => ErrorCode::NotFound,
            LeaseError::Expired { .. } => ErrorCode::Expired,
            LeaseError::TakenOver => ErrorCode::TakenOver,
            LeaseError::Revoked => ErrorCode::Revoked,
            LeaseError::Storage(_) => ErrorCode::StorageError,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_serializes_as_its_name_and_the_table_lists_each_once() {
        for (i, code) in ErrorCode::ALL.into_iter().enumerate() {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::json!(code.name())
            );
            assert_eq!(format!("{code:?}"), code.name());
            assert!(!ErrorCode::ALL[..i].contains(&code), "{code:?} twice");
        }
    }

    #[test]
    fn the_core_names_its_codes_as_the_table_does() {
        for error in [
            LeaseError::InvalidArgument("x".into()),
            LeaseError::AlreadyLocked { expires_at_ms: 1.0 },
            LeaseError::NotFound,
            LeaseError::Expired { expires_at_ms: 1.0 },
            LeaseError::TakenOver,
            LeaseError::Revoked,
            LeaseError::Storage("x".into()),
        ] {
            assert_eq!(
                ErrorCode::of_lease(&error).name(),
                error.code(),
                "{error:?}"
            );
        }
    }
}
