//! The HTTP/JSON API: the four lease operations, `takeOver`, `list`, a change stream, and `/health`.
//! Every request but `/health` needs a verified token ([`Identity`]); a lockId is the capability for
//! `checkLock`, `releaseLock` and `extendLockExpiration`. Every failure is a typed JSON error
//! ([`ApiError`]) and writes nothing.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::sse::{KeepAlive, Sse};
use serde::Deserialize;
use weblocks::lease::{LeaseError, LeaseKey, Operation, Token};

use crate::api_error::ApiError;
use crate::app_state::AppState;
use crate::bus::Topic;
use crate::extract::{JsonBody, QueryArgs};
use crate::grant_token::{GrantToken, check_request_id};
use crate::identity::Identity;
use crate::lease_row::{Grant, LeaseRequest, Reply};
use crate::limits::check_key_part;
use crate::responses::{Granted, Health, Held, LeaseList, Released, UnexpectedReply};
use crate::stream::change_stream;

/// `list`'s default and largest page.
const LIST_DEFAULT: usize = 1000;
const LIST_MAX: usize = 10_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KeyAndTtl {
    #[serde(rename = "type")]
    lease_type: String,
    id: String,
    ttl_ms: f64,
    /// Chosen by the client for one grant and repeated by its retries: a retry by the same user while
    /// the lease is live gets the same lease and lockId (see `grant_token`).
    request_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LockIdOnly {
    lock_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LockIdAndIncrement {
    lock_id: String,
    inc_ms: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    #[serde(rename = "type")]
    lease_type: Option<String>,
    limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatchQuery {
    #[serde(rename = "type")]
    lease_type: String,
    id: Option<String>,
}

/// `POST /v1/tryLock {type, id, ttlMs, requestId?}` → `{lockId, type, id, holder, acquiredAt, expiresAt,
/// fence, now}`.
pub async fn try_lock(
    State(state): State<AppState>,
    identity: Identity,
    JsonBody(body): JsonBody<KeyAndTtl>,
) -> Result<Json<Granted>, ApiError> {
    grant(&state, identity, &body, Grant::TryLock).await
}

/// `POST /v1/takeOver {type, id, ttlMs}`: as tryLock, whoever holds the key; needs the `takeover` (or
/// `admin`) permission. The replaced holder's next check or extend fails with `Revoked`.
pub async fn take_over(
    State(state): State<AppState>,
    identity: Identity,
    JsonBody(body): JsonBody<KeyAndTtl>,
) -> Result<Json<Granted>, ApiError> {
    if !identity.may_take_over {
        return Err(ApiError::Forbidden(
            "taking over a lease needs the `takeover` permission".into(),
        ));
    }
    let sub = identity.holder.sub.clone();
    let taken = grant(&state, identity, &body, Grant::TakeOver).await?;
    // Who took whose lease stays in the log (the lockId, a capability, never does).
    tracing::info!(
        sub,
        lease_type = body.lease_type,
        id = body.id,
        fence = taken.lease.fence,
        "lease taken over"
    );
    Ok(taken)
}

/// `POST /v1/checkLock {lockId}` → the lease, while it is live.
pub async fn check_lock(
    State(state): State<AppState>,
    identity: Identity,
    JsonBody(body): JsonBody<LockIdOnly>,
) -> Result<Json<Held>, ApiError> {
    on_lock_id(&state, identity, Operation::check(&body.lock_id)).await
}

/// `POST /v1/releaseLock {lockId}` → `{}`.
pub async fn release_lock(
    State(state): State<AppState>,
    identity: Identity,
    JsonBody(body): JsonBody<LockIdOnly>,
) -> Result<Json<Released>, ApiError> {
    let sub = identity.holder.sub.clone();
    let request = LeaseRequest::on_lock_id(Operation::release(&body.lock_id)?, identity.holder);
    let key = request.key().clone();
    let released = run(&state, request).await?;
    tracing::info!(
        sub,
        lease_type = key.lease_type(),
        id = key.id(),
        "lease released"
    );
    Ok(released)
}

/// `POST /v1/extendLockExpiration {lockId, incMs}` → the lease with its new expiry (capped at the
/// maximum ttl from now).
pub async fn extend_lock_expiration(
    State(state): State<AppState>,
    identity: Identity,
    JsonBody(body): JsonBody<LockIdAndIncrement>,
) -> Result<Json<Held>, ApiError> {
    on_lock_id(
        &state,
        identity,
        Operation::extend(&body.lock_id, body.inc_ms),
    )
    .await
}

async fn grant(
    state: &AppState,
    identity: Identity,
    body: &KeyAndTtl,
    kind: Grant,
) -> Result<Json<Granted>, ApiError> {
    check_key_part("type", &body.lease_type)?;
    check_key_part("id", &body.id)?;
    let ttl_ms = state.limits.ttls.check(body.ttl_ms)?;
    let token = match &body.request_id {
        Some(request_id) => {
            check_request_id(request_id).map_err(ApiError::Invalid)?;
            GrantToken::Requested {
                key: Arc::clone(&state.grants),
                request_id: request_id.clone(),
            }
        }
        None => GrantToken::Fresh(fresh_token()?),
    };
    let request = LeaseRequest::grant(
        kind,
        &body.lease_type,
        &body.id,
        ttl_ms,
        token,
        identity.holder,
    )?;
    run(state, request).await
}

/// An operation the core built from a lockId (or refused to: a malformed one is an InvalidArgument).
async fn on_lock_id(
    state: &AppState,
    identity: Identity,
    operation: Result<Operation, LeaseError>,
) -> Result<Json<Held>, ApiError> {
    run(state, LeaseRequest::on_lock_id(operation?, identity.holder)).await
}

/// `GET /v1/list[?type=T][&limit=N]` → `{leases: [{type, id, holder, acquiredAt, expiresAt, fence}], now}`:
/// the live leases, never a lockId.
pub async fn list(
    State(state): State<AppState>,
    _identity: Identity,
    QueryArgs(query): QueryArgs<ListQuery>,
) -> Result<Json<LeaseList>, ApiError> {
    if let Some(lease_type) = &query.lease_type {
        checked_type(lease_type)?;
    }
    let limit = query.limit.unwrap_or(LIST_DEFAULT);
    if !(1..=LIST_MAX).contains(&limit) {
        return Err(ApiError::Invalid(format!(
            "limit must be between 1 and {LIST_MAX}"
        )));
    }
    let (leases, now) = state.store.list(query.lease_type, limit).await?;
    Ok(Json(LeaseList { leases, now }))
}

/// `GET /v1/events?type=T[&id=I]`: server-sent events named `lease`, one per change of (type, id), or of
/// any key of the type, each `{kind, type, id, fence, lease, now}`. The first is the current state (for
/// a type: one per live lease).
pub async fn watch(
    State(state): State<AppState>,
    _identity: Identity,
    QueryArgs(query): QueryArgs<WatchQuery>,
) -> Result<
    Sse<
        impl futures_util::Stream<Item = Result<axum::response::sse::Event, std::convert::Infallible>>,
    >,
    ApiError,
> {
    let topic = match query.id {
        Some(id) => {
            check_key_part("type", &query.lease_type)?;
            check_key_part("id", &id)?;
            Topic::Key(LeaseKey::new(query.lease_type, id)?)
        }
        None => Topic::Type(checked_type(&query.lease_type)?.to_owned()),
    };
    let slot = Arc::clone(&state.limits.streams)
        .try_acquire_owned()
        .map_err(|_| {
            ApiError::Busy("this instance has as many change streams open as it may".into())
        })?;
    // Subscribe before reading the state: a change committed in between is then both in the state and in
    // the stream, never in neither (the stream drops what is not news).
    let subscription = state.events.bus.subscribe(topic.clone());
    let snapshot = state.store.snapshot(&topic).await?;
    for change in snapshot.iter().filter(|change| change.lease.is_some()) {
        state.events.time_expiry(change.clone());
    }
    let stream = change_stream(subscription, snapshot, state.shutdown.clone(), slot);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(state.limits.keep_alive)))
}

/// `GET /health` → `{status: "ok", database}` while the database answers (and, with PostgreSQL, this
/// instance listens for changes); else, within the health timeout, 503 with a `StorageError`.
pub async fn health(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    let bound = state.limits.health_timeout;
    let database = tokio::time::timeout(bound, state.store.health())
        .await
        .map_err(|_| {
            ApiError::from(LeaseError::Storage(format!(
                "the database did not answer within {} ms",
                bound.as_millis()
            )))
        })??;
    Ok(Json(Health {
        status: "ok",
        database,
    }))
}

pub async fn no_such_endpoint() -> ApiError {
    ApiError::NoSuchEndpoint
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// A type on its own (a list filter, a type's stream), checked as a lease's would be.
fn checked_type(lease_type: &str) -> Result<&str, ApiError> {
    check_key_part("type", lease_type)?;
    LeaseKey::new(lease_type, "-")?;
    Ok(lease_type)
}

/// 128 bits from the operating system's generator, for a new lease's token.
fn fresh_token() -> Result<Token, ApiError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| ApiError::from(LeaseError::Storage(format!("no randomness: {e}"))))?;
    Ok(Token::from_random_bytes(bytes))
}

/// Run `request` and answer with the reply its operation gives (`T`: [`Granted`], [`Held`] or
/// [`Released`]).
async fn run<T: TryFrom<Reply, Error = UnexpectedReply>>(
    state: &AppState,
    request: LeaseRequest,
) -> Result<Json<T>, ApiError> {
    let reply = state.store.run(request, state.limits.ttls.max_ms).await?;
    T::try_from(reply)
        .map(Json)
        .map_err(|UnexpectedReply(reply)| {
            // The variant only: an `Acquired` carries a lockId, which never goes to the log.
            let reply = match reply {
                Reply::Acquired { .. } => "acquired",
                Reply::Held { .. } => "held",
                Reply::Released => "released",
            };
            tracing::error!(reply, "a store replied as another operation would");
            ApiError::Internal
        })
}
