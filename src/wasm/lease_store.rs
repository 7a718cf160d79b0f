//! `IndexedDbLeaseStore`, the default `LeaseStore` of `js/leases.js`: converts JS arguments, runs the
//! operation on the IndexedDB store (`lease_idb.rs`), and settles a promise with the outcome or with an
//! `Error` named `LockError` that carries a `code` (`js/leases.js` turns it into its `LockError` class).

use js_sys::{Array, Object, Promise, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;
use web_sys::IdbDatabase;

use super::lease_idb;
use crate::lease::{LeaseError, LeaseInfo, Operation, Outcome};

/// The leases of one IndexedDB database (default name `weblocks-leases`), shared by every same-origin
/// window and worker.
#[wasm_bindgen(js_name = IndexedDbLeaseStore)]
pub struct IndexedDbLeaseStore {
    db: IdbDatabase,
    /// Closes this connection when another one wants to upgrade the database, so it is never blocked.
    _on_version_change: Closure<dyn FnMut()>,
}

#[wasm_bindgen(js_class = IndexedDbLeaseStore)]
impl IndexedDbLeaseStore {
    /// Open the database `name`; rejects with a `LockError` (`StorageError`) if IndexedDB is unavailable.
    pub async fn open(name: String) -> Result<IndexedDbLeaseStore, JsValue> {
        console_error_panic_hook::set_once();
        let db = lease_idb::open_database(&name)
            .await
            .map_err(|e| lock_error(&e))?;
        let on_version_change = {
            let db = db.clone();
            Closure::<dyn FnMut()>::new(move || db.close())
        };
        db.set_onversionchange(Some(on_version_change.as_ref().unchecked_ref()));
        Ok(IndexedDbLeaseStore {
            db,
            _on_version_change: on_version_change,
        })
    }

    /// `tryLock(type, id, ttlMs) -> Promise<{ lockId, type, id, expiresAt }>`.
    #[wasm_bindgen(js_name = tryLock)]
    pub fn try_lock(&self, lease_type: JsValue, id: JsValue, ttl_ms: JsValue) -> Promise {
        let operation = (|| {
            let lease_type = string_argument("type", &lease_type)?;
            let id = string_argument("id", &id)?;
            let ttl_ms = number_argument("ttlMs", &ttl_ms)?;
            Operation::try_lock(&lease_type, &id, ttl_ms, lease_idb::random_token()?)
        })();
        self.run(operation)
    }

    /// `checkLock(lockId) -> Promise<{ type, id, expiresAt }>`.
    #[wasm_bindgen(js_name = checkLock)]
    pub fn check_lock(&self, lock_id: JsValue) -> Promise {
        self.run(string_argument("lockId", &lock_id).and_then(|l| Operation::check(&l)))
    }

    /// `releaseLock(lockId) -> Promise<undefined>`.
    #[wasm_bindgen(js_name = releaseLock)]
    pub fn release_lock(&self, lock_id: JsValue) -> Promise {
        self.run(string_argument("lockId", &lock_id).and_then(|l| Operation::release(&l)))
    }

    /// `extendLockExpiration(lockId, incMs) -> Promise<{ type, id, expiresAt }>`.
    #[wasm_bindgen(js_name = extendLockExpiration)]
    pub fn extend_lock_expiration(&self, lock_id: JsValue, inc_ms: JsValue) -> Promise {
        let operation = string_argument("lockId", &lock_id)
            .and_then(|l| Operation::extend(&l, number_argument("incMs", &inc_ms)?));
        self.run(operation)
    }

    /// `list() -> Promise<[{ type, id, expiresAt }]>`: the live leases, never their tokens.
    pub fn list(&self) -> Promise {
        let db = self.db.clone();
        future_to_promise(async move {
            let live = lease_idb::list(&db).await.map_err(|e| lock_error(&e))?;
            Ok(live.iter().map(info_to_js).collect::<Array>().into())
        })
    }

    /// Close the database connection; later calls fail with a `StorageError`.
    pub fn close(&self) {
        self.db.close();
    }
}

impl IndexedDbLeaseStore {
    fn run(&self, operation: Result<Operation, LeaseError>) -> Promise {
        let db = self.db.clone();
        future_to_promise(async move {
            let outcome = lease_idb::run(&db, operation.map_err(|e| lock_error(&e))?)
                .await
                .map_err(|e| lock_error(&e))?;
            Ok(match outcome {
                Outcome::Acquired { lock_id, info } => {
                    let object = info_to_js(&info);
                    set(&object, "lockId", &lock_id.to_string().into());
                    object
                }
                Outcome::Held(info) => info_to_js(&info),
                Outcome::Released => JsValue::UNDEFINED,
            })
        })
    }
}

/// A string argument; lone surrogates are refused (converted to Rust they would collapse into U+FFFD, so
/// two different JS strings could name the same lease).
fn string_argument(name: &str, value: &JsValue) -> Result<String, LeaseError> {
    match value.dyn_ref::<js_sys::JsString>() {
        Some(s) if s.is_valid_utf16() => Ok(String::from(s)),
        Some(_) => Err(LeaseError::InvalidArgument(format!(
            "{name} contains a lone surrogate"
        ))),
        None => Err(LeaseError::InvalidArgument(format!(
            "{name} must be a string"
        ))),
    }
}

fn number_argument(name: &str, value: &JsValue) -> Result<f64, LeaseError> {
    value.as_f64().ok_or_else(|| {
        LeaseError::InvalidArgument(format!("{name} must be a number of milliseconds"))
    })
}

fn info_to_js(info: &LeaseInfo) -> JsValue {
    let object: JsValue = Object::new().into();
    set(&object, "type", &info.key.lease_type().into());
    set(&object, "id", &info.key.id().into());
    set(&object, "expiresAt", &info.expires_at_ms.into());
    object
}

/// `Error { name: 'LockError', code, message, expiresAt? }`.
fn lock_error(error: &LeaseError) -> JsValue {
    let object: JsValue = js_sys::Error::new(&error.to_string()).into();
    set(&object, "name", &"LockError".into());
    set(&object, "code", &error.code().into());
    if let Some(expires_at_ms) = error.expires_at_ms() {
        set(&object, "expiresAt", &expires_at_ms.into());
    }
    object
}

fn set(object: &JsValue, field: &str, value: &JsValue) {
    let _ = Reflect::set(object, &field.into(), value);
}
