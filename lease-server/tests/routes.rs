//! The service's routes in process (see `service`), over an in-memory SQLite database.
//! Here: grants that carry a request id (a retry after a lost answer gets the same lease and lockId, for
//! its user only, and only while that lease lives), and the database's time in every answer that
//! carries an expiry. Every route's status, body and error codes: `contract.rs`.

mod service;

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use service::{post, service};

fn grant(id: &str, ttl_ms: f64, request_id: &str) -> Value {
    json!({ "type": "domain.Article", "id": id, "ttlMs": ttl_ms, "requestId": request_id })
}

#[tokio::test]
async fn a_repeated_request_id_returns_the_same_lease_to_its_user_only() {
    let app = service().await.app;
    let request_id = "aaaabbbbccccdddd0001";
    let (status, first) = post(
        &app,
        "alice",
        "/v1/tryLock",
        grant("1", 60_000.0, request_id),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{first}");
    // The answer was lost: the retry gets the same lease and lockId, not AlreadyLocked.
    let (status, again) = post(
        &app,
        "alice",
        "/v1/tryLock",
        grant("1", 60_000.0, request_id),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["lockId"], first["lockId"]);
    assert_eq!(
        (&again["fence"], &again["expiresAt"]),
        (&first["fence"], &first["expiresAt"])
    );
    assert!(again["now"].as_f64().unwrap() >= first["now"].as_f64().unwrap());

    // Another user with the same request id is refused and told the holder.
    let (status, bob) = post(&app, "bob", "/v1/tryLock", grant("1", 60_000.0, request_id)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{bob}");
    assert_eq!(
        (
            bob["error"]["code"].as_str(),
            bob["error"]["holder"]["sub"].as_str()
        ),
        (Some("AlreadyLocked"), Some("alice"))
    );
    // So is alice's other grant attempt (another request id), and a grant without one.
    let (status, _) = post(
        &app,
        "alice",
        "/v1/tryLock",
        grant("1", 60_000.0, "aaaabbbbccccdddd0002"),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, _) = post(
        &app,
        "alice",
        "/v1/tryLock",
        json!({ "type": "domain.Article", "id": "1", "ttlMs": 60_000 }),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);

    // The lockId works: check, extend, release.
    let lock_id = first["lockId"].clone();
    let (status, checked) =
        post(&app, "alice", "/v1/checkLock", json!({ "lockId": lock_id })).await;
    assert_eq!(status, StatusCode::OK, "{checked}");
    let (status, _) = post(
        &app,
        "alice",
        "/v1/releaseLock",
        json!({ "lockId": lock_id }),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // Released: the id names nothing now; the same request id is a new grant with a new lockId.
    let (status, renewed) = post(
        &app,
        "alice",
        "/v1/tryLock",
        grant("1", 60_000.0, request_id),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_ne!(renewed["lockId"], first["lockId"]);
    assert_eq!(
        renewed["fence"].as_i64(),
        first["fence"].as_i64().map(|f| f + 1)
    );
}

#[tokio::test]
async fn a_request_id_expires_with_its_lease() {
    let app = service().await.app;
    let request_id = "expiring-request-id-0001";
    let (_, first) = post(&app, "alice", "/v1/tryLock", grant("2", 150.0, request_id)).await;
    tokio::time::sleep(Duration::from_millis(250)).await;
    // The lease expired: the retry is a new grant (a new number and lockId), and the old lockId is refused.
    let (status, late) = post(
        &app,
        "alice",
        "/v1/tryLock",
        grant("2", 60_000.0, request_id),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{late}");
    assert_ne!(late["lockId"], first["lockId"]);
    assert_eq!(
        late["fence"].as_i64(),
        first["fence"].as_i64().map(|f| f + 1)
    );
    let (status, stale) = post(
        &app,
        "alice",
        "/v1/checkLock",
        json!({ "lockId": first["lockId"] }),
    )
    .await;
    assert_eq!(
        (status, stale["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("TakenOver"))
    );
}

#[tokio::test]
async fn a_retried_take_over_takes_over_once() {
    let app = service().await.app;
    let (_, alice) = post(
        &app,
        "alice",
        "/v1/tryLock",
        grant("3", 60_000.0, "alice-request-00001"),
    )
    .await;
    let (_, taken) = post(
        &app,
        "bob",
        "/v1/takeOver",
        grant("3", 60_000.0, "bob-take-over-00001"),
    )
    .await;
    let (status, again) = post(
        &app,
        "bob",
        "/v1/takeOver",
        grant("3", 60_000.0, "bob-take-over-00001"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (&again["lockId"], &again["fence"]),
        (&taken["lockId"], &taken["fence"]),
        "no second take-over"
    );
    let (_, revoked) = post(
        &app,
        "alice",
        "/v1/extendLockExpiration",
        json!({ "lockId": alice["lockId"], "incMs": 10 }),
    )
    .await;
    assert_eq!(revoked["error"]["code"], "Revoked");
}

#[tokio::test]
async fn every_answer_with_an_expiry_says_the_database_s_time() {
    let app = service().await.app;
    let (_, granted) = post(
        &app,
        "alice",
        "/v1/tryLock",
        grant("4", 200.0, "time-request-000001"),
    )
    .await;
    let now = granted["now"].as_f64().expect("tryLock says now");
    let left = granted["expiresAt"].as_f64().unwrap() - now;
    assert_eq!(left, 200.0, "a fresh lease has its ttl left");
    let lock_id = &granted["lockId"];
    for (path, body) in [
        ("/v1/checkLock", json!({ "lockId": lock_id })),
        (
            "/v1/extendLockExpiration",
            json!({ "lockId": lock_id, "incMs": 100 }),
        ),
    ] {
        let (status, answer) = post(&app, "alice", path, body).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        assert!(answer["now"].as_f64().unwrap() >= now, "{path}: {answer}");
        assert!(answer["expiresAt"].is_number());
    }
    let (_, conflict) = post(
        &app,
        "bob",
        "/v1/tryLock",
        grant("4", 200.0, "bob-time-request-01"),
    )
    .await;
    assert!(
        conflict["error"]["now"].is_number() && conflict["error"]["expiresAt"].is_number(),
        "{conflict}"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (_, expired) = post(&app, "alice", "/v1/checkLock", json!({ "lockId": lock_id })).await;
    assert_eq!(expired["error"]["code"], "Expired");
    assert!(
        expired["error"]["now"].as_f64().unwrap()
            >= expired["error"]["expiresAt"].as_f64().unwrap(),
        "{expired}"
    );
}

#[tokio::test]
async fn a_bad_request_id_is_refused_and_changes_nothing() {
    let app = service().await.app;
    for bad in [
        json!("short"),
        json!("has/a/slash/0123456"),
        json!(12345678901234567i64),
        json!("x".repeat(129)),
    ] {
        let body =
            json!({ "type": "domain.Article", "id": "5", "ttlMs": 60_000, "requestId": bad });
        let (status, answer) = post(&app, "alice", "/v1/tryLock", body).await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("InvalidArgument")),
            "{bad}"
        );
    }
    let (status, _) = post(
        &app,
        "bob",
        "/v1/tryLock",
        grant("5", 60_000.0, "after-bad-ids-00001"),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "nothing was granted by the refused requests"
    );
}
