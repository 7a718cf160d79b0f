//! The service in process, as axum's testing example drives a router: the real router over an in-memory
//! SQLite database, each request sent with `tower::ServiceExt::oneshot`, no socket in between. Shared by
//! the route tests (each test crate uses part of it).
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use axum::response::Response;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, watch};
use tower::ServiceExt;

use weblocks_lease_server::app_state::{AppState, Limits};
use weblocks_lease_server::events::Events;
use weblocks_lease_server::grant_token::GrantKey;
use weblocks_lease_server::identity::TokenVerifier;
use weblocks_lease_server::limits::TtlBounds;
use weblocks_lease_server::server::router;
use weblocks_lease_server::store::{SqliteStore, Store};

pub const SECRET: &[u8] = b"in-process route tests: 0123456789abcdef";
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// A router over a fresh in-memory database, and its state (to reach the store, or stop the service).
pub struct Service {
    pub app: axum::Router,
    pub state: AppState,
    /// Sending `true` shuts the service down (its change streams end).
    pub stop: watch::Sender<bool>,
}

/// The service with room for `streams` change streams.
pub async fn service_with_streams(streams: usize) -> Service {
    let (events, _expiries) = Events::new();
    let events = Arc::new(events);
    let store = SqliteStore::open(Path::new(":memory:"), Arc::clone(&events), 8)
        .await
        .expect("sqlite opens");
    let (stop, shutdown) = watch::channel(false);
    let state = AppState {
        store: Arc::new(Store::Sqlite(store)),
        events,
        verifier: Arc::new(TokenVerifier::new(SECRET).expect("a strong secret")),
        grants: Arc::new(GrantKey::new(SECRET)),
        limits: Arc::new(Limits {
            ttls: TtlBounds {
                min_ms: 50.0,
                max_ms: 3_600_000.0,
            },
            max_body_bytes: MAX_BODY_BYTES,
            health_timeout: Duration::from_secs(2),
            keep_alive: Duration::from_secs(15),
            streams: Arc::new(Semaphore::new(streams)),
        }),
        shutdown,
    };
    Service {
        app: router(state.clone(), &[]),
        state,
        stop,
    }
}

pub async fn service() -> Service {
    service_with_streams(8).await
}

/// A token for `sub` (also its display name) with `perms`, valid for ten minutes.
pub fn token(sub: &str, perms: &[&str]) -> String {
    weblocks_lease_server::hs256::install();
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({ "sub": sub, "name": sub, "perms": perms, "exp": exp }),
        &jsonwebtoken::EncodingKey::from_secret(SECRET),
    )
    .unwrap()
}

pub fn bearer(sub: &str, perms: &[&str]) -> String {
    format!("Bearer {}", token(sub, perms))
}

/// Send `request`: the response, whole.
pub async fn send(app: &axum::Router, request: Request<Body>) -> Response {
    app.clone().oneshot(request).await.unwrap()
}

/// Send `request`: the status and the JSON answer (every answer but a stream's is JSON).
pub async fn answer(app: &axum::Router, request: Request<Body>) -> (StatusCode, Value) {
    let response = send(app, request).await;
    let status = response.status();
    assert_eq!(
        response.headers().get(header::CONTENT_TYPE).unwrap(),
        "application/json",
        "{status}"
    );
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

/// POST `body` to `path` as `sub` (allowed to take over): the status and the JSON answer.
pub async fn post(app: &axum::Router, sub: &str, path: &str, body: Value) -> (StatusCode, Value) {
    answer(app, post_request(sub, path, body.to_string())).await
}

/// A POST of `body` (any text) to `path` as `sub`, allowed to take over.
pub fn post_request(sub: &str, path: &str, body: String) -> Request<Body> {
    Request::post(path)
        .header(header::AUTHORIZATION, bearer(sub, &["takeover"]))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .unwrap()
}

/// GET `path_and_query` as `sub`: the status and the JSON answer.
pub async fn get(app: &axum::Router, sub: &str, path_and_query: &str) -> (StatusCode, Value) {
    answer(app, get_request(sub, path_and_query)).await
}

pub fn get_request(sub: &str, path_and_query: &str) -> Request<Body> {
    Request::get(path_and_query)
        .header(header::AUTHORIZATION, bearer(sub, &[]))
        .body(Body::empty())
        .unwrap()
}
