//! Request extractors whose every rejection is a typed JSON error ([`ApiError`]), never axum's plain text.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::api_error::ApiError;
use crate::app_state::AppState;
use crate::identity::Identity;

/// A JSON body of type `T` (unknown fields refused), within the body size limit.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::TooLarge {
                        limit: state.limits.max_body_bytes,
                    }
                } else {
                    ApiError::Invalid(rejection.body_text())
                }
            })?;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::Invalid(format!("the body is not the expected JSON: {e}")))
    }
}

/// The query string as `T`.
pub struct QueryArgs<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for QueryArgs<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        serde_urlencoded::from_str(query)
            .map(QueryArgs)
            .map_err(|e| ApiError::Invalid(format!("bad query: {e}")))
    }
}

impl FromRequestParts<AppState> for Identity {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = match parts.headers.get(AUTHORIZATION) {
            Some(value) => Some(value.to_str().map_err(|_| {
                ApiError::Unauthorized("the Authorization header is not text".into())
            })?),
            None => None,
        };
        state.verifier.verify(header)
    }
}
