//! Every way a request can fail, as the typed JSON error the client gets:
//! `{"error": {"code", "message", ...}}`, with the HTTP status of its code. Nothing else ever reaches a
//! client: no stack trace, no database message (those go to the log).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use weblocks::lease::LeaseError;

use crate::error_code::ErrorCode;
use crate::lease_row::Refusal;
use crate::responses::{ErrorBody, ErrorDetail};
use crate::store::StoreError;

#[derive(Debug)]
pub enum ApiError {
    /// A lease operation refused by the core (or a store failure), with the live lease on the key.
    Lease(Box<Refusal>),
    /// 400 `InvalidArgument`: a body that is not JSON or not the expected shape, a bad query, a value
    /// outside the service's limits.
    Invalid(String),
    /// 413 `PayloadTooLarge`.
    TooLarge { limit: usize },
    /// 401 `Unauthorized`: no token, or one that does not verify.
    Unauthorized(String),
    /// 403 `Forbidden`: the token lacks the permission the request needs.
    Forbidden(String),
    /// 404 `NoSuchEndpoint`.
    NoSuchEndpoint,
    /// 405 `MethodNotAllowed`.
    MethodNotAllowed,
    /// 500 `InternalError`: a bug (a handler panicked); the service stays up.
    Internal,
    /// 503 `ServiceBusy`: a limit of the service is reached (e.g. its change streams); try again later.
    Busy(String),
}

impl From<LeaseError> for ApiError {
    fn from(error: LeaseError) -> ApiError {
        ApiError::Lease(Box::new(Refusal {
            error,
            holder: None,
            now: None,
        }))
    }
}

/// A store failure as the client sees it: a refusal with its live lease; a database failure as a
/// `StorageError` (503) whose details stay in the log; a bug as an `InternalError` (500).
impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> ApiError {
        match error {
            StoreError::Refused(refusal) => ApiError::Lease(refusal),
            StoreError::Database(why) => ApiError::from(LeaseError::Storage(why)),
            StoreError::Internal => ApiError::Internal,
        }
    }
}

impl ApiError {
    /// The error's code (JS sees it as `LockError.code`); its HTTP status is the code's
    /// ([`ErrorCode::row`]).
    pub fn code(&self) -> ErrorCode {
        match self {
            ApiError::Lease(refusal) => ErrorCode::of_lease(&refusal.error),
            ApiError::Invalid(_) => ErrorCode::InvalidArgument,
            ApiError::TooLarge { .. } => ErrorCode::PayloadTooLarge,
            ApiError::Unauthorized(_) => ErrorCode::Unauthorized,
            ApiError::Forbidden(_) => ErrorCode::Forbidden,
            ApiError::NoSuchEndpoint => ErrorCode::NoSuchEndpoint,
            ApiError::MethodNotAllowed => ErrorCode::MethodNotAllowed,
            ApiError::Internal => ErrorCode::InternalError,
            ApiError::Busy(_) => ErrorCode::ServiceBusy,
        }
    }

    /// The error's code by name, and its HTTP status.
    pub fn code_and_status(&self) -> (&'static str, StatusCode) {
        let code = self.code();
        (code.name(), code.status())
    }

    fn message(&self) -> String {
        match self {
            // A store's message may quote SQL or the database's words: the client gets the code only.
            ApiError::Lease(refusal) if matches!(refusal.error, LeaseError::Storage(_)) => {
                "lease storage failed (details in the service's log)".into()
            }
            ApiError::Lease(refusal) => refusal.error.message(),
            ApiError::Invalid(why) => format!("invalid argument: {why}"),
            ApiError::TooLarge { limit } => format!("the request body is over {limit} bytes"),
            ApiError::Unauthorized(why) => format!("unauthorized: {why}"),
            ApiError::Forbidden(why) => format!("forbidden: {why}"),
            ApiError::NoSuchEndpoint => "no such endpoint".into(),
            ApiError::MethodNotAllowed => "method not allowed on this endpoint".into(),
            ApiError::Internal => "internal error (details in the service's log)".into(),
            ApiError::Busy(why) => format!("busy: {why}"),
        }
    }

    /// The JSON body: `{"error": {"code", "message"}}`, plus for a lease error on a held key the live
    /// lease's `holder`, `acquiredAt`, `fence`, and `expiresAt` where the core gives one; and the
    /// database's `now` whenever the database decided, so that an `expiresAt` can be read as time left.
    pub fn body(&self) -> ErrorBody {
        let mut error = ErrorDetail {
            code: self.code(),
            message: self.message(),
            expires_at: None,
            holder: None,
            acquired_at: None,
            fence: None,
            now: None,
        };
        if let ApiError::Lease(refusal) = self {
            error.expires_at = refusal.error.expires_at_ms();
            if let Some(lease) = refusal.holder.as_deref() {
                error.holder = Some(lease.holder.clone());
                error.acquired_at = Some(lease.acquired_at);
                error.expires_at = Some(lease.expires_at);
                error.fence = Some(lease.fence);
            }
            error.now = refusal.now;
        }
        ErrorBody { error }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.code().status();
        if let ApiError::Lease(refusal) = &self
            && let LeaseError::Storage(why) = &refusal.error
        {
            tracing::error!(error = %why, "lease storage failed");
        }
        let mut response = (status, Json(self.body())).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::holder::Holder;
    use crate::lease_row::LeaseView;
    use serde_json::{Value, json};

    fn body(error: &ApiError) -> Value {
        serde_json::to_value(error.body()).unwrap()
    }

    #[test]
    fn a_conflict_carries_the_holder_and_since_when() {
        let refusal = Refusal {
            error: LeaseError::AlreadyLocked {
                expires_at_ms: 2000.0,
            },
            holder: Some(Box::new(LeaseView {
                lease_type: "Order".into(),
                id: "1".into(),
                holder: Holder {
                    sub: "alice".into(),
                    name: "Alice".into(),
                },
                acquired_at: 1000.0,
                expires_at: 2000.0,
                fence: 7,
            })),
            now: Some(1500.0),
        };
        let error = ApiError::from(StoreError::from(refusal));
        assert_eq!(
            error.code_and_status(),
            ("AlreadyLocked", StatusCode::CONFLICT)
        );
        assert_eq!(
            body(&error),
            json!({ "error": {
                "code": "AlreadyLocked", "message": "already locked by another holder",
                "expiresAt": 2000.0, "holder": { "sub": "alice", "name": "Alice" }, "acquiredAt": 1000.0, "fence": 7,
                "now": 1500.0,
            }})
        );
    }

    #[test]
    fn statuses_and_a_store_failure_s_details_stay_in_the_log() {
        for (error, code, status) in [
            (LeaseError::NotFound, "NotFound", 403),
            (LeaseError::TakenOver, "TakenOver", 403),
            (LeaseError::Revoked, "Revoked", 403),
            (LeaseError::Expired { expires_at_ms: 1.0 }, "Expired", 403),
            (
                LeaseError::InvalidArgument("x".into()),
                "InvalidArgument",
                400,
            ),
        ] {
            assert_eq!(
                ApiError::from(error).code_and_status(),
                (code, StatusCode::from_u16(status).unwrap())
            );
        }
        let storage = ApiError::from(StoreError::Database(
            "relation \"locks\" does not exist".into(),
        ));
        assert_eq!(storage.code_and_status().1, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            body(&storage),
            json!({ "error": {
                "code": "StorageError", "message": "lease storage failed (details in the service's log)",
            }})
        );
        assert_eq!(
            ApiError::from(StoreError::Internal).code_and_status(),
            ("InternalError", StatusCode::INTERNAL_SERVER_ERROR)
        );
    }
}
