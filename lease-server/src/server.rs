//! Putting the service together: the store, the change hub and its expiry timers, the purge of old
//! rows, the router with its layers (CORS for the configured origins only, body limit, request logs,
//! panics answered as 500s), the connections with their limits ([`crate::connections`]), and a shutdown
//! that finishes in-flight requests within its grace period.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, Method, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::trace::{DefaultMakeSpan, DefaultOnResponse, TraceLayer};
use tracing::Level;

use crate::api;
use crate::api_error::ApiError;
use crate::app_state::{AppState, Limits};
use crate::config::Config;
use crate::events::Events;
use crate::grant_token::GrantKey;
use crate::identity::TokenVerifier;
use crate::store::Store;

pub fn router(state: AppState, origins: &[String]) -> Router {
    let max_body_bytes = state.limits.max_body_bytes;
    let mut router = Router::new()
        .route("/v1/tryLock", post(api::try_lock))
        .route("/v1/takeOver", post(api::take_over))
        .route("/v1/checkLock", post(api::check_lock))
        .route("/v1/releaseLock", post(api::release_lock))
        .route(
            "/v1/extendLockExpiration",
            post(api::extend_lock_expiration),
        )
        .route("/v1/list", get(api::list))
        .route("/v1/events", get(api::watch))
        .route("/health", get(api::health))
        .fallback(api::no_such_endpoint)
        .method_not_allowed_fallback(api::method_not_allowed)
        .with_state(state)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(CatchPanicLayer::custom(|_| {
            ApiError::Internal.into_response()
        }))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(DefaultMakeSpan::new().level(Level::INFO))
                .on_response(DefaultOnResponse::new().level(Level::INFO)),
        );
    if !origins.is_empty() {
        let allowed: Vec<HeaderValue> = origins
            .iter()
            .filter_map(|origin| HeaderValue::from_str(origin).ok())
            .collect();
        // Outermost, so that error answers carry the CORS headers too (a page can read why it failed).
        router = router.layer(
            CorsLayer::new()
                .allow_origin(AllowOrigin::list(allowed))
                .allow_methods([Method::GET, Method::POST])
                .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE])
                .max_age(Duration::from_secs(600)),
        );
    }
    router
}

/// Run the service until SIGTERM or SIGINT, then finish in-flight requests (within the grace period),
/// end the change streams and close the database.
pub async fn run(config: Config, secret: Vec<u8>) -> Result<(), String> {
    let verifier =
        TokenVerifier::new(&secret).map_err(|why| format!("WEBLOCKS_LEASE_SECRET: {why}"))?;
    let connection_limits = config.connection_limits();
    let needed = config.max_connections as u64
        + config.pg_pool as u64
        + crate::descriptors::BESIDES_CONNECTIONS;
    match crate::descriptors::make_room(needed) {
        Ok(limit) if limit < needed => tracing::warn!(
            limit,
            needed,
            "the open-file limit is below what --max-connections needs: lower it or raise the limit \
             (LimitNOFILE= in a systemd unit)"
        ),
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "cannot read the open-file limit"),
    }
    let (events, expiry_requests) = Events::new();
    let events = Arc::new(events);
    let store = Arc::new(
        Store::open(
            &config.database,
            Arc::clone(&events),
            config.store_options(),
        )
        .await?,
    );
    let database = store
        .health()
        .await
        .map_err(|e| format!("the database does not answer: {e}"))?;
    let (stop, shutdown) = watch::channel(false);
    let expiries = tokio::spawn(crate::expiry::watch(
        expiry_requests,
        Arc::clone(&events),
        Arc::clone(&store),
        shutdown.clone(),
    ));
    let purge = tokio::spawn(crate::purge::run(Arc::clone(&store), shutdown.clone()));
    let state = AppState {
        store: Arc::clone(&store),
        events,
        verifier: Arc::new(verifier),
        grants: Arc::new(GrantKey::new(&secret)),
        limits: Arc::new(Limits {
            ttls: config.ttl_bounds(),
            max_body_bytes: config.max_body_bytes,
            health_timeout: Duration::from_millis(config.health_timeout_ms),
            keep_alive: (connection_limits.idle_timeout / 3).min(Duration::from_secs(15)),
            streams: Arc::new(Semaphore::new(config.max_streams)),
        }),
        shutdown: shutdown.clone(),
    };
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    tracing::info!(%address, database, origins = ?config.origins, "listening");

    tokio::spawn(async move {
        termination().await;
        tracing::info!("shutting down: finishing in-flight requests");
        let _ = stop.send(true);
    });
    let router = router(state, &config.origins);
    if !crate::connections::serve(listener, router, connection_limits, shutdown).await {
        tracing::warn!(
            grace = ?connection_limits.grace,
            "connections still open after the grace period: stopping anyway"
        );
    }
    let _ = expiries.await;
    let _ = purge.await;
    store.close().await;
    tracing::info!("stopped");
    Ok(())
}

async fn termination() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = interrupt => {}
                    _ = terminate.recv() => {}
                }
            }
            Err(_) => {
                let _ = interrupt.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
