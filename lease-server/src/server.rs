//! Putting the service together: the store, the change hub and its expiry timers, the router with its
//! layers (CORS for the configured origins only, body limit, request logs, panics answered as 500s),
//! and a graceful shutdown that finishes in-flight requests.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, Method, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::trace::{DefaultMakeSpan, DefaultOnResponse, TraceLayer};
use tracing::Level;

use crate::api;
use crate::api_error::ApiError;
use crate::config::Config;
use crate::events::Events;
use crate::identity::{MIN_SECRET_BYTES, TokenVerifier};
use crate::limits::TtlBounds;
use crate::store::Store;

pub struct Limits {
    pub ttls: TtlBounds,
    pub max_body_bytes: usize,
}

#[derive(Clone)]
pub struct AppState {
    pub store: Arc<Store>,
    pub events: Arc<Events>,
    pub verifier: Arc<TokenVerifier>,
    pub limits: Arc<Limits>,
    /// Becomes true when the service shuts down: change streams end.
    pub shutdown: watch::Receiver<bool>,
}

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
    let verifier = TokenVerifier::new(&secret).ok_or_else(|| {
        format!(
            "WEBLOCKS_LEASE_SECRET must be set to a secret of at least {MIN_SECRET_BYTES} bytes"
        )
    })?;
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
        .map_err(|e| format!("the database does not answer: {e:?}"))?;
    let (stop, shutdown) = watch::channel(false);
    let expiries = tokio::spawn(crate::expiry::watch(
        expiry_requests,
        Arc::clone(&events),
        Arc::clone(&store),
        shutdown.clone(),
    ));
    let state = AppState {
        store: Arc::clone(&store),
        events,
        verifier: Arc::new(verifier),
        limits: Arc::new(Limits {
            ttls: config.ttl_bounds(),
            max_body_bytes: config.max_body_bytes,
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
    let mut stopping = shutdown.clone();
    let server =
        axum::serve(listener, router(state, &config.origins)).with_graceful_shutdown(async move {
            crate::shutdown::stopped(&mut stopping).await;
        });
    let mut stopping = shutdown.clone();
    let grace = Duration::from_millis(config.shutdown_grace_ms);
    tokio::select! {
        served = server => served.map_err(|e| e.to_string())?,
        () = async move {
            crate::shutdown::stopped(&mut stopping).await;
            tokio::time::sleep(grace).await;
        } => tracing::warn!(?grace, "requests still running after the grace period: stopping anyway"),
    }
    let _ = expiries.await;
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
