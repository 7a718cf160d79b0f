//! The wasm edge of leases: the operations that a JS store runs atomically, one record each.
//!
//! The store (`js/lease_idb_store.js` for IndexedDB) names an operation by number ([`TRY_LOCK`],
//! [`CHECK`], [`RELEASE`], [`EXTEND`]) with its arguments. `leaseKey` validates them and returns the key
//! of the one record the operation reads and may write (a bad argument throws at once); inside a
//! `readwrite` transaction the store reads that record and, in the read's success callback, calls
//! `decideLease` with the same arguments, the record and `Date.now()`, and issues the write it returns, so
//! that the read, the decision and the write are one transaction. The arguments are primitives (and the
//! same random bytes make the same token), so both calls build the same operation. Everything decided is
//! the core's ([`crate::lease`]); this file only converts values. Errors are thrown as `Error`s named
//! `LockError` with a `code` (and `expiresAt` where it applies), which `js/leases.js` turns into its
//! `LockError` class.

use js_sys::{Array, JsString, Object, Reflect};
use wasm_bindgen::prelude::*;

use crate::lease::key::invalid;
use crate::lease::{
    LeaseError, LeaseInfo, LeaseKey, LeaseOutcome, LeaseRecord, Operation, Token, Write, list_live,
};

/// The operations by number, as `js/lease_idb_store.js` names them (tests/static/boundary_codes.test.mjs
/// checks that both say the same).
const TRY_LOCK: u32 = 0;
const CHECK: u32 = 1;
const RELEASE: u32 = 2;
const EXTEND: u32 = 3;

/// Operation `method` on `args`, validated: `tryLock(type, id, ttlMs)` followed by the 16 random bytes of
/// the new lease's token (from `crypto.getRandomValues`); `checkLock(lockId)`, `releaseLock(lockId)`,
/// `extendLockExpiration(lockId, incMs)`.
fn operation(method: u32, args: &Array) -> Result<Operation, LeaseError> {
    let arg = |i: u32| args.get(i);
    if method == TRY_LOCK {
        if args.length() != 3 + 16 {
            return Err(LeaseError::Storage("a token needs 16 random bytes".into()));
        }
        let mut bytes = [0u8; 16];
        for (i, byte) in (3..).zip(bytes.iter_mut()) {
            *byte = arg(i).as_f64().unwrap_or(0.0) as u8;
        }
        return Operation::try_lock(
            string_argument("type", &arg(0))?,
            string_argument("id", &arg(1))?,
            number_argument("ttlMs", &arg(2))?,
            Token::from_random_bytes(bytes),
        );
    }
    let lock_id = string_argument("lockId", &arg(0))?;
    match method {
        CHECK => Operation::check(&lock_id),
        RELEASE => Operation::release(&lock_id),
        EXTEND => Operation::extend(&lock_id, number_argument("incMs", &arg(1))?),
        _ => Err(LeaseError::Storage("unknown lease operation".into())),
    }
}

/// The key `[type, id]` of the one record operation `method` on `args` (see [`operation`]) reads and may
/// write. Throws a `LockError` for a bad argument.
#[wasm_bindgen(js_name = leaseKey)]
pub fn lease_key(method: u32, args: Array) -> Result<JsValue, JsValue> {
    let operation = operation(method, &args).map_err(to_js_error)?;
    Ok(key_to_js(operation.key()))
}

/// Decide operation `method` on `args` (those of its `leaseKey`), given the record stored at its key
/// (`undefined` if none) and the time. Returns `{ outcome, put }` (a record to store), `{ outcome, delete }`
/// (a key to delete) or `{ outcome }`; `outcome` is `{ lockId, type, id, expiresAt }` for tryLock,
/// `{ type, id, expiresAt }` for check and extend, `undefined` for release. Throws a `LockError` when the
/// operation fails (then nothing is written).
#[wasm_bindgen(js_name = decideLease)]
pub fn decide_lease(
    method: u32,
    args: Array,
    current: JsValue,
    now_ms: f64,
) -> Result<JsValue, JsValue> {
    let operation = operation(method, &args).map_err(to_js_error)?;
    let current = record_from_js(&current).map_err(to_js_error)?;
    let decision = operation
        .decide(current.as_ref(), now_ms)
        .map_err(to_js_error)?;
    let answer: JsValue = Object::new().into();
    set(&answer, "outcome", &outcome_to_js(decision.outcome));
    match decision.write {
        Write::Nothing => {}
        Write::Put(record) => set(&answer, "put", &record_to_js(&record)),
        Write::Delete(key) => set(&answer, "delete", &key_to_js(&key)),
    }
    Ok(answer)
}

/// `list()`, given every stored record and the time: `{ live: [{ type, id, expiresAt }], purge: [key] }`,
/// the keys to delete in the same transaction.
#[wasm_bindgen(js_name = decideLeaseList)]
pub fn decide_lease_list(records: Array, now_ms: f64) -> Result<JsValue, JsValue> {
    // The first record that does not convert fails the whole list (nothing is purged).
    let mut list = Vec::new();
    for i in 0..records.length() {
        let value = records.get(i);
        let record =
            record_from_js(&value).and_then(|r| r.ok_or_else(|| corrupt("an empty record")));
        list.push(record.map_err(to_js_error)?);
    }
    let (live, purge) = list_live(&list, now_ms);
    let answer: JsValue = Object::new().into();
    let (live_js, purge_js) = (Array::new(), Array::new());
    for info in &live {
        live_js.push(&info_to_js(info));
    }
    for key in &purge {
        purge_js.push(&key_to_js(key));
    }
    set(&answer, "live", &live_js);
    set(&answer, "purge", &purge_js);
    Ok(answer)
}

/// A string argument; lone surrogates are refused (converted to Rust they would collapse into U+FFFD, so
/// two different JS strings could name the same lease).
fn string_argument(name: &str, value: &JsValue) -> Result<String, LeaseError> {
    match value.dyn_ref::<JsString>() {
        // `as_string` of a string is never `None` (`String::from` would unwrap it with a throw path).
        Some(s) if well_formed(s) => Ok(value.as_string().unwrap_or_default()),
        Some(_) => Err(invalid(name, " contains a lone surrogate")),
        None => Err(invalid(name, " must be a string")),
    }
}

/// Whether `s` is well-formed UTF-16 (`JsString::is_valid_utf16`): every high surrogate followed by a
/// low one, and no low one alone.
fn well_formed(s: &JsString) -> bool {
    let unit = |i: u32| s.char_code_at(i) as u32;
    let is_low = |i: u32| (0xDC00..0xE000).contains(&unit(i));
    let (n, mut i) = (s.length(), 0);
    while i < n {
        if (0xD800..0xDC00).contains(&unit(i)) {
            if i + 1 == n || !is_low(i + 1) {
                return false;
            }
            i += 1;
        } else if is_low(i) {
            return false;
        }
        i += 1;
    }
    true
}

fn number_argument(name: &str, value: &JsValue) -> Result<f64, LeaseError> {
    value
        .as_f64()
        .ok_or_else(|| invalid(name, " must be a number of milliseconds"))
}

fn outcome_to_js(outcome: LeaseOutcome) -> JsValue {
    match outcome {
        LeaseOutcome::Acquired { lock_id, info } => {
            let object = info_to_js(&info);
            set(&object, "lockId", &lock_id.to_text().into());
            object
        }
        LeaseOutcome::Held(info) => info_to_js(&info),
        LeaseOutcome::Released => JsValue::UNDEFINED,
    }
}

fn info_to_js(info: &LeaseInfo) -> JsValue {
    let object: JsValue = Object::new().into();
    set(&object, "type", &info.key.lease_type().into());
    set(&object, "id", &info.key.id().into());
    set(&object, "expiresAt", &info.expires_at_ms.into());
    object
}

fn key_to_js(key: &LeaseKey) -> JsValue {
    Array::of2(&key.lease_type().into(), &key.id().into()).into()
}

/// The stored form: `{ type, id, token, expiresAt }` (the object store's key path is `['type', 'id']`).
fn record_to_js(record: &LeaseRecord) -> JsValue {
    let object = info_to_js(&record.info());
    set(&object, "token", &record.token.to_hex().into());
    object
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
    match (lease_type, id, token, field("expiresAt").as_f64()) {
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
    LeaseError::Storage("a stored lease record is corrupt (".to_owned() + what + ")")
}

/// `Error { name: 'LockError', code, message, expiresAt? }`.
fn to_js_error(error: LeaseError) -> JsValue {
    // A `JsError` (JS `Error(message)`).
    let object: JsValue = JsError::new(&error.message()).into();
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
