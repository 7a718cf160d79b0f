//! The API's contract, route by route, in process (see `service`): each route's status and body shape
//! (every field's name and JSON type, and the fields docs/LEASES.md's endpoint table gives it), and its
//! error codes: bad input is answered with a typed JSON error and changes nothing (the store is read
//! after). A renamed, added or dropped field fails here, before any browser starts.

mod service;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Map, Value, json};

use service::{
    MAX_BODY_BYTES, Service, answer, bearer, get, get_request, post, post_request, send, service,
    service_with_streams,
};

const ARTICLE: &str = "domain.Article";

/// `value` with each leaf replaced by the name of its JSON type (`integer` for whole numbers without a
/// fraction in the text, such as a fencing number), an array by its first element's shape.
fn shape(value: &Value) -> Value {
    match value {
        Value::Null => json!("null"),
        Value::Bool(_) => json!("boolean"),
        Value::Number(n) if n.is_i64() || n.is_u64() => json!("integer"),
        Value::Number(_) => json!("number"),
        Value::String(_) => json!("string"),
        Value::Array(items) => Value::Array(items.iter().take(1).map(shape).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(name, value)| (name.clone(), shape(value)))
                .collect(),
        ),
    }
}

/// A lease as anyone may see it (never its lockId).
fn lease_shape() -> Value {
    json!({
        "type": "string", "id": "string", "holder": { "sub": "string", "name": "string" },
        "acquiredAt": "number", "expiresAt": "number", "fence": "integer",
    })
}

/// `fields` added to the object `base`.
fn with(mut base: Value, fields: Value) -> Value {
    let extra: Map<String, Value> = serde_json::from_value(fields).unwrap();
    base.as_object_mut().unwrap().extend(extra);
    base
}

fn granted_shape() -> Value {
    with(
        lease_shape(),
        json!({ "lockId": "string", "now": "number" }),
    )
}

fn held_shape() -> Value {
    with(lease_shape(), json!({ "now": "number" }))
}

// --- docs/LEASES.md's endpoint table -------------------------------------------------------------

/// The answer's fields docs/LEASES.md's endpoint table gives `endpoint` (e.g. `POST /v1/tryLock`), as a
/// JSON object whose leaves are null where the table does not say more ("the same": the row above's).
fn documented(endpoint: &str) -> Value {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/LEASES.md"))
        .expect("docs/LEASES.md");
    let rows: Vec<&str> = doc
        .lines()
        .filter(|line| line.starts_with("| `POST /") || line.starts_with("| `GET /"))
        .collect();
    let at = rows
        .iter()
        .position(|row| {
            row[3..]
                .strip_prefix(endpoint)
                .is_some_and(|rest| rest.starts_with([' ', '`', '[', '?']))
        })
        .unwrap_or_else(|| panic!("docs/LEASES.md has no row for {endpoint}"));
    // Up to the row that writes the answer out: "the same" refers to the row above.
    let row = rows[..=at]
        .iter()
        .rev()
        .find(|row| row.contains("| `{") || row.contains(", each `{"))
        .expect("an answer written out");
    let answer = &row[row.rfind("`{").unwrap() + 1..];
    let (fields, _) = parse_fields(answer);
    fields
}

/// `{a, b: {c}, d: [{e}], f: "x" | "y"}` from the start of `text`: the object of its field names, and
/// the text after its closing brace.
fn parse_fields(text: &str) -> (Value, &str) {
    let mut rest = text.strip_prefix('{').expect("an object");
    let mut fields = Map::new();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix('}') {
            return (Value::Object(fields), after);
        }
        let end = rest.find([',', ':', '}']).expect("a field's end");
        let name = rest[..end].trim().to_owned();
        rest = &rest[end..];
        let mut value = Value::Null;
        if let Some(after) = rest.strip_prefix(':') {
            let after = after.trim_start();
            if after.starts_with('{') {
                (value, rest) = parse_fields(after);
            } else if let Some(inner) = after.strip_prefix('[') {
                let (item, after_item) = parse_fields(inner.trim_start());
                value = json!([item]);
                rest = after_item
                    .trim_start()
                    .strip_prefix(']')
                    .expect("a list's end");
            } else {
                rest = &after[after.find([',', '}']).expect("a value's end")..];
            }
        }
        fields.insert(name, value);
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// Whether `body` has exactly the fields `documented` names, at every depth it names them.
fn assert_documented(endpoint: &str, body: &Value) {
    fn matches(documented: &Value, body: &Value) -> bool {
        match (documented, body) {
            (Value::Null, _) => true,
            (Value::Object(doc), Value::Object(fields)) => {
                doc.len() == fields.len()
                    && doc
                        .iter()
                        .all(|(name, d)| fields.get(name).is_some_and(|f| matches(d, f)))
            }
            (Value::Array(doc), Value::Array(items)) => {
                items.iter().all(|item| matches(&doc[0], item))
            }
            _ => false,
        }
    }
    let doc = documented(endpoint);
    assert!(
        matches(&doc, body),
        "{endpoint}: docs/LEASES.md gives {doc}, the service answers {body}"
    );
}

#[test]
fn the_endpoint_table_reads_as_field_lists() {
    assert_eq!(
        documented("POST /v1/tryLock"),
        json!({
            "lockId": null, "type": null, "id": null, "holder": { "sub": null, "name": null },
            "acquiredAt": null, "expiresAt": null, "fence": null, "now": null,
        })
    );
    assert_eq!(
        documented("POST /v1/takeOver"),
        documented("POST /v1/tryLock")
    );
    assert_eq!(
        documented("GET /v1/list"),
        json!({ "leases": [{ "type": null, "id": null, "holder": null, "acquiredAt": null,
            "expiresAt": null, "fence": null }], "now": null })
    );
    assert_eq!(
        documented("GET /health"),
        json!({ "status": null, "database": null })
    );
    assert_eq!(documented("POST /v1/releaseLock"), json!({}));
}

// --- the store, read after a refusal -------------------------------------------------------------

/// The live leases, as `list` gives them (without the time).
async fn leases(app: &axum::Router) -> Value {
    let (status, mut list) = get(app, "reader", "/v1/list").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    list["leases"].take()
}

/// `body`'s error is `code`, answered with `status`, and has only the fields an error may carry.
#[track_caller]
fn assert_refused(answer: &(StatusCode, Value), status: StatusCode, code: &str) {
    let (got, body) = answer;
    assert_eq!(
        (*got, body["error"]["code"].as_str()),
        (status, Some(code)),
        "{body}"
    );
    let error = body["error"].as_object().unwrap();
    assert_eq!(body.as_object().unwrap().len(), 1, "{body}");
    assert!(error["message"].is_string(), "{body}");
    let allowed = [
        "code",
        "message",
        "expiresAt",
        "holder",
        "acquiredAt",
        "fence",
        "now",
    ];
    assert!(
        error.keys().all(|k| allowed.contains(&k.as_str())),
        "{body}"
    );
}

/// An error with its code and message only.
#[track_caller]
fn assert_plain_refusal(answer: &(StatusCode, Value), status: StatusCode, code: &str) {
    assert_refused(answer, status, code);
    assert_eq!(
        shape(&answer.1),
        json!({ "error": { "code": "string", "message": "string" } }),
        "{}",
        answer.1
    );
}

async fn try_lock(app: &axum::Router, sub: &str, id: &str, ttl_ms: f64) -> (StatusCode, Value) {
    post(
        app,
        sub,
        "/v1/tryLock",
        json!({ "type": ARTICLE, "id": id, "ttlMs": ttl_ms }),
    )
    .await
}

async fn check_lock(app: &axum::Router, sub: &str, lock_id: &Value) -> (StatusCode, Value) {
    post(app, sub, "/v1/checkLock", json!({ "lockId": lock_id })).await
}

// --- each route ----------------------------------------------------------------------------------

#[tokio::test]
async fn try_lock_answers_the_lease_with_its_lock_id() {
    let app = service().await.app;
    let (status, body) = try_lock(&app, "alice", "1", 60_000.0).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(shape(&body), granted_shape(), "{body}");
    assert_documented("POST /v1/tryLock", &body);
    assert_eq!(
        (&body["type"], &body["id"], &body["holder"], &body["fence"]),
        (
            &json!(ARTICLE),
            &json!("1"),
            &json!({ "sub": "alice", "name": "alice" }),
            &json!(1)
        )
    );
    assert_eq!(body["acquiredAt"], body["now"]);
    assert_eq!(
        body["expiresAt"].as_f64().unwrap() - body["now"].as_f64().unwrap(),
        60_000.0
    );
    assert!(
        body["lockId"]
            .as_str()
            .unwrap()
            .starts_with("domain.Article/1/")
    );

    // Someone else's tryLock: 409 with the holding lease (never its lockId), and the database's time.
    let conflict = try_lock(&app, "bob", "1", 60_000.0).await;
    assert_refused(&conflict, StatusCode::CONFLICT, "AlreadyLocked");
    assert_eq!(
        shape(&conflict.1),
        json!({ "error": {
            "code": "string", "message": "string", "holder": { "sub": "string", "name": "string" },
            "acquiredAt": "number", "expiresAt": "number", "fence": "integer", "now": "number",
        }}),
        "{}",
        conflict.1
    );
    assert_eq!(conflict.1["error"]["holder"]["sub"], "alice");
    assert_eq!(conflict.1["error"]["expiresAt"], body["expiresAt"]);
    assert_eq!(leases(&app).await.as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn take_over_needs_the_permission_and_revokes_the_holder() {
    let app = service().await.app;
    let (_, alice) = try_lock(&app, "alice", "2", 60_000.0).await;
    let before = leases(&app).await;
    let take = |perms: &'static [&'static str]| {
        Request::post("/v1/takeOver")
            .header(header::AUTHORIZATION, bearer("bob", perms))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(
                json!({ "type": ARTICLE, "id": "2", "ttlMs": 60_000 }).to_string(),
            ))
            .unwrap()
    };
    let refused = answer(&app, take(&[])).await;
    assert_plain_refusal(&refused, StatusCode::FORBIDDEN, "Forbidden");
    assert_eq!(
        leases(&app).await,
        before,
        "a refused takeOver changes nothing"
    );

    let (status, taken) = answer(&app, take(&["takeover"])).await;
    assert_eq!(status, StatusCode::OK, "{taken}");
    assert_eq!(shape(&taken), granted_shape(), "{taken}");
    assert_documented("POST /v1/takeOver", &taken);
    assert_eq!(
        (&taken["holder"]["sub"], &taken["fence"]),
        (&json!("bob"), &json!(2))
    );
    let revoked = check_lock(&app, "alice", &alice["lockId"]).await;
    assert_refused(&revoked, StatusCode::FORBIDDEN, "Revoked");
    assert_eq!(revoked.1["error"]["holder"]["sub"], "bob");
    let (status, again) = answer(&app, take(&["admin"])).await;
    assert_eq!(
        (status, &again["fence"]),
        (StatusCode::OK, &json!(3)),
        "admin may too"
    );
}

#[tokio::test]
async fn check_lock_answers_the_live_lease() {
    let app = service().await.app;
    let (_, granted) = try_lock(&app, "alice", "3", 60_000.0).await;
    let (status, body) = check_lock(&app, "alice", &granted["lockId"]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(shape(&body), held_shape(), "{body}");
    assert_documented("POST /v1/checkLock", &body);
    assert_eq!(
        (&body["expiresAt"], &body["fence"]),
        (&granted["expiresAt"], &granted["fence"])
    );

    let malformed = check_lock(&app, "alice", &json!("nope")).await;
    assert_plain_refusal(&malformed, StatusCode::BAD_REQUEST, "InvalidArgument");
    let free_key = format!("{ARTICLE}/none/{}", "0".repeat(32));
    let unknown = check_lock(&app, "alice", &json!(free_key)).await;
    assert_refused(&unknown, StatusCode::FORBIDDEN, "NotFound");
    let wrong_token = format!("{ARTICLE}/3/{}", "0".repeat(32));
    let other = check_lock(&app, "bob", &json!(wrong_token)).await;
    assert_refused(&other, StatusCode::FORBIDDEN, "TakenOver");
}

#[tokio::test]
async fn extend_lock_expiration_answers_the_lease_with_its_new_expiry() {
    let app = service().await.app;
    let (_, granted) = try_lock(&app, "alice", "4", 60_000.0).await;
    let lock_id = &granted["lockId"];
    let before = leases(&app).await;
    for bad in [json!(-1), json!(0), json!("10"), json!(null)] {
        let refused = post(
            &app,
            "alice",
            "/v1/extendLockExpiration",
            json!({ "lockId": lock_id, "incMs": bad }),
        )
        .await;
        assert_plain_refusal(&refused, StatusCode::BAD_REQUEST, "InvalidArgument");
    }
    assert_eq!(
        leases(&app).await,
        before,
        "a refused extension changes nothing"
    );

    let (status, body) = post(
        &app,
        "alice",
        "/v1/extendLockExpiration",
        json!({ "lockId": lock_id, "incMs": 1000 }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(shape(&body), held_shape(), "{body}");
    assert_documented("POST /v1/extendLockExpiration", &body);
    assert!(
        body["expiresAt"].as_f64() > granted["expiresAt"].as_f64(),
        "{body}"
    );
    assert_eq!(body["fence"], granted["fence"]);
}

#[tokio::test]
async fn release_lock_answers_an_empty_object_and_frees_the_key() {
    let app = service().await.app;
    let (_, granted) = try_lock(&app, "alice", "5", 60_000.0).await;
    let release = json!({ "lockId": granted["lockId"] });
    let (status, body) = post(&app, "alice", "/v1/releaseLock", release.clone()).await;
    assert_eq!((status, &body), (StatusCode::OK, &json!({})));
    assert_documented("POST /v1/releaseLock", &body);
    assert_eq!(leases(&app).await, json!([]));
    let again = post(&app, "alice", "/v1/releaseLock", release.clone()).await;
    assert_refused(&again, StatusCode::FORBIDDEN, "NotFound");
    let check = post(&app, "alice", "/v1/checkLock", release).await;
    assert_refused(&check, StatusCode::FORBIDDEN, "NotFound");
    // The key's number is kept: the next lease gets the next one.
    let (_, next) = try_lock(&app, "bob", "5", 60_000.0).await;
    assert_eq!(next["fence"], 2);
}

#[tokio::test]
async fn list_answers_the_live_leases_without_lock_ids() {
    let app = service().await.app;
    try_lock(&app, "alice", "6", 60_000.0).await;
    try_lock(&app, "alice", "7", 60_000.0).await;
    let (_, other) = post(
        &app,
        "bob",
        "/v1/tryLock",
        json!({ "type": "domain.Order", "id": "1", "ttlMs": 60_000 }),
    )
    .await;
    assert_eq!(other["fence"], 1);
    let (status, body) = get(&app, "carol", "/v1/list").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        shape(&body),
        json!({ "leases": [lease_shape()], "now": "number" }),
        "{body}"
    );
    assert_documented("GET /v1/list", &body);
    let keys = |body: &Value| -> Vec<(String, String)> {
        body["leases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                (
                    l["type"].as_str().unwrap().into(),
                    l["id"].as_str().unwrap().into(),
                )
            })
            .collect()
    };
    assert_eq!(
        keys(&body),
        [
            (ARTICLE.into(), "6".into()),
            (ARTICLE.into(), "7".into()),
            ("domain.Order".into(), "1".into())
        ]
    );
    let (_, of_type) = get(&app, "carol", "/v1/list?type=domain.Order&limit=5").await;
    assert_eq!(keys(&of_type), [("domain.Order".into(), "1".into())]);
    let (_, first) = get(&app, "carol", "/v1/list?limit=1").await;
    assert_eq!(keys(&first), [(ARTICLE.into(), "6".into())]);

    for bad in [
        "/v1/list?limit=0",
        "/v1/list?limit=10001",
        "/v1/list?limit=x",
        "/v1/list?type=",
        "/v1/list?kind=x",
    ] {
        let refused = get(&app, "carol", bad).await;
        assert_plain_refusal(&refused, StatusCode::BAD_REQUEST, "InvalidArgument");
    }
}

#[tokio::test]
async fn events_open_a_stream_whose_first_event_is_the_key_s_state() {
    let Service { app, stop, .. } = service().await;
    let response = send(
        &app,
        get_request("carol", "/v1/events?type=domain.Article&id=8"),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers().get(header::CONTENT_TYPE).unwrap(),
        "text/event-stream"
    );
    let mut body = response.into_body();
    let frame = body.frame().await.unwrap().unwrap().into_data().unwrap();
    let text = String::from_utf8(frame.to_vec()).unwrap();
    let data = text
        .lines()
        .find_map(|line| line.strip_prefix("data: "))
        .unwrap_or_else(|| panic!("no data in {text:?}"));
    assert!(text.contains("event: lease\n"), "{text:?}");
    let event: Value = serde_json::from_str(data).unwrap();
    assert_eq!(
        shape(&event),
        json!({ "kind": "string", "type": "string", "id": "string", "fence": "integer",
            "lease": "null", "now": "number" }),
        "{event}"
    );
    assert_documented("GET /v1/events", &event);
    assert_eq!(
        (&event["kind"], &event["id"], &event["fence"]),
        (&json!("current"), &json!("8"), &json!(0))
    );
    // Shutting down ends the stream.
    stop.send(true).unwrap();
    while let Some(frame) = body.frame().await {
        frame.unwrap();
    }

    let app = service().await.app;
    for bad in [
        "/v1/events",
        "/v1/events?id=8",
        "/v1/events?type=",
        "/v1/events?type=domain.Article&since=1",
    ] {
        let refused = answer(&app, get_request("carol", bad)).await;
        assert_plain_refusal(&refused, StatusCode::BAD_REQUEST, "InvalidArgument");
    }
    let full = service_with_streams(0).await.app;
    let busy = answer(
        &full,
        get_request("carol", "/v1/events?type=domain.Article"),
    )
    .await;
    assert_plain_refusal(&busy, StatusCode::SERVICE_UNAVAILABLE, "ServiceBusy");
}

#[tokio::test]
async fn health_answers_without_a_token() {
    let app = service().await.app;
    let request = Request::get("/health").body(Body::empty()).unwrap();
    let (status, body) = answer(&app, request).await;
    assert_eq!(
        (status, &body),
        (
            StatusCode::OK,
            &json!({ "status": "ok", "database": "sqlite" })
        )
    );
    assert_documented("GET /health", &body);
}

#[tokio::test]
async fn unknown_endpoints_and_methods_get_typed_errors() {
    let app = service().await.app;
    let missing = get(&app, "alice", "/v1/tryLocks").await;
    assert_plain_refusal(&missing, StatusCode::NOT_FOUND, "NoSuchEndpoint");
    let wrong_method = get(&app, "alice", "/v1/tryLock").await;
    assert_plain_refusal(
        &wrong_method,
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
    );
    let post_list = post(&app, "alice", "/v1/list", json!({})).await;
    assert_plain_refusal(
        &post_list,
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
    );
}

// --- what every route refuses ----------------------------------------------------------------------

#[tokio::test]
async fn every_route_but_health_needs_a_valid_token() {
    let app = service().await.app;
    let forged = {
        let token = service::token("alice", &["admin"]);
        let (rest, signature) = token.rsplit_once('.').unwrap();
        let flipped = if signature.starts_with('A') { 'B' } else { 'A' };
        format!("Bearer {rest}.{flipped}{}", &signature[1..])
    };
    let routes = [
        ("POST", "/v1/tryLock"),
        ("POST", "/v1/takeOver"),
        ("POST", "/v1/checkLock"),
        ("POST", "/v1/releaseLock"),
        ("POST", "/v1/extendLockExpiration"),
        ("GET", "/v1/list"),
        ("GET", "/v1/events?type=domain.Article"),
    ];
    for (method, path) in routes {
        for authorization in [None, Some("Basic YWxpY2U6eA=="), Some(forged.as_str())] {
            let mut request = Request::builder().method(method).uri(path);
            if let Some(value) = authorization {
                request = request.header(header::AUTHORIZATION, value);
            }
            let body = if method == "POST" {
                json!({ "type": ARTICLE, "id": "9", "ttlMs": 60_000 }).to_string()
            } else {
                String::new()
            };
            let request = request
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body))
                .unwrap();
            let response = send(&app, request).await;
            assert_eq!(
                response
                    .headers()
                    .get(header::WWW_AUTHENTICATE)
                    .map(|v| v.as_bytes()),
                Some(&b"Bearer"[..]),
                "{method} {path}"
            );
            let status = response.status();
            let bytes = response.into_body().collect().await.unwrap().to_bytes();
            let refused = (status, serde_json::from_slice(&bytes).unwrap());
            assert_plain_refusal(&refused, StatusCode::UNAUTHORIZED, "Unauthorized");
        }
    }
    assert_eq!(
        leases(&app).await,
        json!([]),
        "no refused request granted anything"
    );
}

#[tokio::test]
async fn a_bad_body_is_refused_and_changes_nothing() {
    let app = service().await.app;
    try_lock(&app, "alice", "held", 60_000.0).await;
    let before = leases(&app).await;
    let too_long = "x".repeat(1025);
    let mut bodies = vec![
        "not json".to_owned(),
        "[]".to_owned(),
        json!({ "type": ARTICLE, "id": "10" }).to_string(),
        json!({ "type": ARTICLE, "id": 10, "ttlMs": 60_000 }).to_string(),
        json!({ "type": ARTICLE, "id": "10", "ttlMs": 60_000, "owner": "x" }).to_string(),
        json!({ "type": "", "id": "10", "ttlMs": 60_000 }).to_string(),
        json!({ "type": ARTICLE, "id": too_long, "ttlMs": 60_000 }).to_string(),
        json!({ "type": ARTICLE, "id": "a\nb", "ttlMs": 60_000 }).to_string(),
        json!({ "type": ARTICLE, "id": "10", "ttlMs": 49 }).to_string(),
        json!({ "type": ARTICLE, "id": "10", "ttlMs": 3_600_001 }).to_string(),
    ];
    bodies.push(
        json!({ "type": ARTICLE, "id": "10", "ttlMs": 60_000, "requestId": "short" }).to_string(),
    );
    for path in ["/v1/tryLock", "/v1/takeOver"] {
        for body in &bodies {
            let refused = answer(&app, post_request("alice", path, body.clone())).await;
            assert_plain_refusal(&refused, StatusCode::BAD_REQUEST, "InvalidArgument");
        }
    }
    for path in [
        "/v1/checkLock",
        "/v1/releaseLock",
        "/v1/extendLockExpiration",
    ] {
        for body in ["{}", r#"{"lockId": 1}"#, r#"{"lockId": "x", "extra": 1}"#] {
            let refused = answer(&app, post_request("alice", path, body.into())).await;
            assert_plain_refusal(&refused, StatusCode::BAD_REQUEST, "InvalidArgument");
        }
    }
    let huge =
        json!({ "type": ARTICLE, "id": "10", "ttlMs": 60_000, "pad": "x".repeat(MAX_BODY_BYTES) });
    let too_large = answer(&app, post_request("alice", "/v1/tryLock", huge.to_string())).await;
    assert_plain_refusal(&too_large, StatusCode::PAYLOAD_TOO_LARGE, "PayloadTooLarge");

    assert_eq!(
        leases(&app).await,
        before,
        "no refused request changed a lease"
    );
    // Nor a key's fencing number: the first lease of the refused key is its first.
    let (_, first) = try_lock(&app, "bob", "10", 60_000.0).await;
    assert_eq!(first["fence"], 1, "{first}");
}

#[tokio::test]
async fn a_failing_database_is_a_storage_error_with_no_details() {
    let Service { app, state, .. } = service().await;
    state.store.close().await;
    for refused in [
        try_lock(&app, "alice", "11", 60_000.0).await,
        get(&app, "alice", "/v1/list").await,
        answer(&app, Request::get("/health").body(Body::empty()).unwrap()).await,
    ] {
        assert_plain_refusal(&refused, StatusCode::SERVICE_UNAVAILABLE, "StorageError");
        assert_eq!(
            refused.1["error"]["message"],
            "lease storage failed (details in the service's log)"
        );
    }
}
