//! The IndexedDB lease store: the seed's `locks` table as an object store keyed by `[type, id]`.
//!
//! Why IndexedDB: a `readwrite` transaction is serialised with every other transaction on the same object
//! store, across all same-origin windows and workers, which gives the "two users can never both insert" of
//! the seed's primary key (`localStorage` has no such guarantee). Records survive reloads and closed tabs.
//!
//! Every operation is ONE `readwrite` transaction: request the record, and inside that request's success
//! callback decide (the pure [`Operation::decide`]) and issue the write. Nothing is awaited between the read
//! and the write: a transaction commits as soon as no request is pending at the end of a task, so awaiting
//! anything else there would commit it before the write (and let another context in between).

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, Function, Promise, Reflect};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    IdbDatabase, IdbFactory, IdbObjectStore, IdbObjectStoreParameters, IdbOpenDbRequest,
    IdbRequest, IdbTransactionMode,
};

use crate::lease::{
    LeaseError, LeaseInfo, LeaseKey, LeaseRecord, Operation, Outcome, Token, Write, list_live,
};

const OBJECT_STORE: &str = "leases";
const DB_VERSION: u32 = 1;

/// Open (creating on first use) the lease database `name` in this window or worker.
pub async fn open_database(name: &str) -> Result<IdbDatabase, LeaseError> {
    let factory: IdbFactory = global_property("indexedDB")
        .ok_or_else(|| LeaseError::Storage("IndexedDB is not available in this context".into()))?;
    let request = factory
        .open_with_u32(name, DB_VERSION)
        .map_err(storage_error)?;
    let on_upgrade = {
        let request = request.clone();
        Closure::<dyn FnMut()>::new(move || create_object_store(&request))
    };
    request.set_onupgradeneeded(Some(on_upgrade.as_ref().unchecked_ref()));
    let opened = settled(|resolve, reject| {
        request.set_onsuccess(Some(resolve));
        request.set_onerror(Some(reject));
    })
    .await;
    request.set_onupgradeneeded(None);
    drop(on_upgrade); // after the request settled: it can no longer fire
    opened.map_err(|_| LeaseError::Storage(request_error(&request)))?;
    request
        .result()
        .map_err(storage_error)?
        .dyn_into()
        .map_err(storage_error)
}

fn create_object_store(request: &IdbOpenDbRequest) {
    let Ok(db) = request.result().and_then(|db| db.dyn_into::<IdbDatabase>()) else {
        return;
    };
    if db.object_store_names().contains(OBJECT_STORE) {
        return;
    }
    let parameters = IdbObjectStoreParameters::new();
    parameters.set_key_path(&Array::of2(&"type".into(), &"id".into()));
    // A failure aborts the upgrade, and the open request then fails with it.
    let _ = db.create_object_store_with_optional_parameters(OBJECT_STORE, &parameters);
}

/// Run one operation in one `readwrite` transaction: read the record of its key, decide, write.
pub async fn run(db: &IdbDatabase, operation: Operation) -> Result<Outcome, LeaseError> {
    let key = key_to_js(operation.key());
    in_transaction(
        db,
        move |store| store.get(&key),
        move |current, store| {
            let decision =
                operation.decide(record_from_js(&current)?.as_ref(), js_sys::Date::now())?;
            match &decision.write {
                Write::Nothing => {}
                Write::Put(record) => {
                    _ = store.put(&record_to_js(record)).map_err(storage_error)?
                }
                Write::Delete(key) => _ = store.delete(&key_to_js(key)).map_err(storage_error)?,
            }
            Ok(decision.outcome)
        },
    )
    .await
}

/// `list()`: the live leases, deleting the records expired for a day in the same transaction.
pub async fn list(db: &IdbDatabase) -> Result<Vec<LeaseInfo>, LeaseError> {
    in_transaction(
        db,
        |store| store.get_all(),
        |all, store| {
            let records = Array::from(&all)
                .iter()
                .map(|value| record_from_js(&value)?.ok_or_else(|| corrupt("an empty record")))
                .collect::<Result<Vec<_>, _>>()?;
            let (live, purge) = list_live(&records, js_sys::Date::now());
            for key in &purge {
                store.delete(&key_to_js(key)).map_err(storage_error)?;
            }
            Ok(live)
        },
    )
    .await
}

/// Open a `readwrite` transaction, issue `read`, and call `then(result, store)` in the read's success
/// callback, while the transaction is still active; resolve with `then`'s answer once the transaction has
/// committed (a transaction that aborts is a storage error, whatever `then` answered).
async fn in_transaction<T: 'static>(
    db: &IdbDatabase,
    read: impl FnOnce(&IdbObjectStore) -> Result<IdbRequest, JsValue>,
    then: impl FnOnce(JsValue, &IdbObjectStore) -> Result<T, LeaseError> + 'static,
) -> Result<T, LeaseError> {
    let tx = db
        .transaction_with_str_and_mode(OBJECT_STORE, IdbTransactionMode::Readwrite)
        .map_err(storage_error)?;
    let store = tx.object_store(OBJECT_STORE).map_err(storage_error)?;
    let request = read(&store).map_err(storage_error)?;
    let answer: Rc<RefCell<Option<Result<T, LeaseError>>>> = Rc::default();
    let on_read = {
        let (request, answer) = (request.clone(), answer.clone());
        Closure::once(move || {
            let result = request
                .result()
                .map_err(storage_error)
                .and_then(|value| then(value, &store));
            *answer.borrow_mut() = Some(result);
        })
    };
    request.set_onsuccess(Some(on_read.as_ref().unchecked_ref()));
    let committed = settled(|resolve, reject| {
        tx.set_oncomplete(Some(resolve));
        tx.set_onabort(Some(reject));
    })
    .await;
    request.set_onsuccess(None);
    drop(on_read); // after the transaction finished: the callback can no longer fire
    if committed.is_err() {
        let why = tx.error().map(|e| format!("{}: {}", e.name(), e.message()));
        return Err(LeaseError::Storage(
            why.unwrap_or_else(|| "the transaction was aborted".into()),
        ));
    }
    answer
        .take()
        .unwrap_or_else(|| Err(LeaseError::Storage("the read never completed".into())))
}

/// A promise whose resolve/reject functions are handed to `hook` as event handlers, awaited.
async fn settled(hook: impl FnOnce(&Function, &Function)) -> Result<JsValue, JsValue> {
    let mut hook = Some(hook);
    let promise = Promise::new(&mut |resolve, reject| {
        if let Some(hook) = hook.take() {
            hook(&resolve, &reject);
        }
    });
    JsFuture::from(promise).await
}

/// 16 bytes from `crypto.getRandomValues` for a new lease's token.
pub fn random_token() -> Result<Token, LeaseError> {
    let crypto: web_sys::Crypto = global_property("crypto")
        .ok_or_else(|| LeaseError::Storage("crypto.getRandomValues is not available".into()))?;
    let mut bytes = [0u8; 16];
    crypto
        .get_random_values_with_u8_array(&mut bytes)
        .map_err(storage_error)?;
    Ok(Token::from_random_bytes(bytes))
}

/// `globalThis[name]`, in a window or any worker.
fn global_property<T: JsCast>(name: &str) -> Option<T> {
    Reflect::get(&js_sys::global(), &name.into())
        .ok()?
        .dyn_into()
        .ok()
}

fn key_to_js(key: &LeaseKey) -> JsValue {
    Array::of2(&key.lease_type().into(), &key.id().into()).into()
}

fn record_to_js(record: &LeaseRecord) -> JsValue {
    let object = js_sys::Object::new();
    for (field, value) in [
        ("type", JsValue::from_str(record.key.lease_type())),
        ("id", JsValue::from_str(record.key.id())),
        ("token", JsValue::from_str(&record.token.to_string())),
        ("expiresAt", JsValue::from_f64(record.expires_at_ms)),
    ] {
        let _ = Reflect::set(&object, &field.into(), &value);
    }
    object.into()
}

/// A stored record, or `None` for `undefined` (no record at that key).
fn record_from_js(value: &JsValue) -> Result<Option<LeaseRecord>, LeaseError> {
    if value.is_undefined() {
        return Ok(None);
    }
    let field = |name: &str| Reflect::get(value, &name.into()).unwrap_or(JsValue::UNDEFINED);
    let (lease_type, id) = (field("type").as_string(), field("id").as_string());
    let token = field("token")
        .as_string()
        .and_then(|t| Token::parse_hex(&t));
    let expires_at_ms = field("expiresAt").as_f64();
    match (lease_type, id, token, expires_at_ms) {
        (Some(lease_type), Some(id), Some(token), Some(expires_at_ms)) => {
            let key = LeaseKey::new(lease_type, id).map_err(|_| corrupt("a bad key"))?;
            Ok(Some(LeaseRecord {
                key,
                token,
                expires_at_ms,
            }))
        }
        _ => Err(corrupt("missing fields")),
    }
}

fn corrupt(what: &str) -> LeaseError {
    LeaseError::Storage(format!("a stored lease record is corrupt ({what})"))
}

fn request_error(request: &IdbRequest) -> String {
    match request.error() {
        Ok(Some(e)) => format!("{}: {}", e.name(), e.message()),
        _ => "the lease database could not be opened".into(),
    }
}

fn storage_error(e: JsValue) -> LeaseError {
    let message = Reflect::get(&e, &"message".into())
        .ok()
        .and_then(|m| m.as_string());
    LeaseError::Storage(message.unwrap_or_else(|| format!("{e:?}")))
}
