//! The I/O of the evidence of life and death: the storage operations of
//! [`crate::protocol::evidence`] carried out by the context's liveness storage object
//! (`makeLivenessStorage` in `js/liveness.js`, which runs the IndexedDB calls and decides nothing), and
//! its events read back into [`StorageEvent`]s.

use std::rc::Rc;

use js_sys::{Array, Reflect};
use wasm_bindgen::prelude::*;

use crate::protocol::evidence::{Database, Entry, StorageEvent, StorageOp};

#[wasm_bindgen]
extern "C" {
    /// A context's liveness storage object (`makeLivenessStorage` in `js/liveness.js`).
    pub(super) type LivenessStorage;
    /// Once, before anything else: where its events go (those of the operations it made ahead come
    /// first, in order).
    #[wasm_bindgen(method)]
    pub(super) fn listen(this: &LivenessStorage, handler: &js_sys::Function);
    /// The key of this context's database it opened ahead, as handle 2 (0: none).
    #[wasm_bindgen(method, getter)]
    pub(super) fn ahead(this: &LivenessStorage) -> f64;
    /// Opens the register (`client` undefined) or liveness database `key` of `client`, at `version`,
    /// as connection `handle`; `hides`: closed by the object itself as the page enters the
    /// back/forward cache.
    #[wasm_bindgen(method)]
    fn open(
        this: &LivenessStorage,
        handle: u32,
        client: Option<&str>,
        key: f64,
        version: u32,
        hides: bool,
    );
    #[wasm_bindgen(method)]
    fn close(this: &LivenessStorage, handle: u32);
    /// Deletes liveness database `key` of `client`.
    #[wasm_bindgen(method)]
    fn delete(this: &LivenessStorage, client: &str, key: f64);
    /// On the register's connection `handle`, one read/write transaction `tx`: deletes the entry
    /// (`remove_kind`, `remove_client`, `remove_key`), then puts the other (kind 0: none).
    #[wasm_bindgen(method)]
    #[allow(clippy::too_many_arguments)]
    fn write(
        this: &LivenessStorage,
        handle: u32,
        tx: u32,
        remove_kind: u32,
        remove_client: &str,
        remove_key: f64,
        put_kind: u32,
        put_client: &str,
        put_key: f64,
    );
    /// On the register's connection `handle`, reads every entry in transaction `tx`.
    #[wasm_bindgen(method)]
    fn read(this: &LivenessStorage, handle: u32, tx: u32);
    /// Lists the origin's liveness databases with their versions.
    #[wasm_bindgen(method)]
    fn list(this: &LivenessStorage);
    /// Gives up the context's other weblocks connections (the transport record, the log's database)
    /// for a deletion, and asks the record again behind it.
    #[wasm_bindgen(method)]
    fn release(this: &LivenessStorage);
}

/// The events of the liveness storage object, by their `type` (as `js/liveness.js` numbers them:
/// tests/static/boundary_codes.test.mjs checks both say the same). `key` is the handle, or for `WRITTEN`
/// and `LISTED` the transaction.
const UPGRADING: u32 = 1;
const OPENED: u32 = 2;
const OPEN_FAILED: u32 = 3;
const CLOSED: u32 = 4;
const HIDDEN: u32 = 5;
/// `data`: whether it completed.
const WRITTEN: u32 = 6;
/// `data`: kind, client id and key of each entry one after the other, or null if the read failed.
const LISTED: u32 = 7;
const MISSING: u32 = 8;
/// The page entered the back/forward cache, and was shown again after it (`key` 0).
const PAGE_HIDDEN: u32 = 9;
const PAGE_SHOWN: u32 = 10;
/// `versionchange` without a new version on any of the context's weblocks connections.
const DELETION_WAITS: u32 = 11;
/// The record, asked again after `release`, names the transport this context uses.
const RECORD_AGREED: u32 = 12;
/// `data`: version, client id and key of each liveness database one after the other, or null if the
/// listing failed.
const DATABASES: u32 = 13;

/// The kinds of the register's entries, as `js/liveness.js` numbers them.
const MEMBER: u32 = 1;
const AHEAD: u32 = 2;

/// Carries out `op` on the object.
pub(super) fn carry_out(storage: &LivenessStorage, op: StorageOp) {
    match op {
        StorageOp::Open {
            handle,
            database,
            version,
            hides,
        } => match database {
            Database::Register => storage.open(handle, None, 0.0, version, hides),
            Database::Alive { client, key } => {
                storage.open(handle, Some(&client), key as f64, version, hides)
            }
        },
        StorageOp::Close { handle } => storage.close(handle),
        StorageOp::Delete { database } => {
            if let Database::Alive { client, key } = database {
                storage.delete(&client, key as f64);
            }
        }
        StorageOp::Write {
            handle,
            tx,
            remove,
            put,
        } => {
            let (rk, rc, rkey) = entry_parts(&remove);
            let (pk, pc, pkey) = entry_parts(&put);
            storage.write(handle, tx, rk, rc, rkey, pk, pc, pkey);
        }
        StorageOp::Read { handle, tx } => storage.read(handle, tx),
        StorageOp::List => storage.list(),
        StorageOp::ReleaseRecord => storage.release(),
    }
}

/// An entry as the object takes it: kind (0: none), client id, key.
fn entry_parts(entry: &Option<Entry>) -> (u32, &str, f64) {
    match entry {
        Some(Entry::Member { client, key }) => (MEMBER, client, *key as f64),
        Some(Entry::Ahead { client, key }) => (AHEAD, client, *key as f64),
        None => (0, "", 0.0),
    }
}

/// The storage event an event of the object tells, if it is one.
pub(super) fn read_event(event: &JsValue) -> Option<StorageEvent> {
    let get = |name: &str| Reflect::get(event, &name.into()).unwrap_or(JsValue::UNDEFINED);
    let kind = get("type").as_f64()? as u32;
    let key = get("key").as_f64()? as u32;
    let data = get("data");
    Some(match kind {
        UPGRADING => StorageEvent::Upgrading { handle: key },
        OPENED => StorageEvent::Opened { handle: key },
        OPEN_FAILED => StorageEvent::OpenFailed { handle: key },
        CLOSED => StorageEvent::Closed { handle: key },
        HIDDEN => StorageEvent::Hidden { handle: key },
        MISSING => StorageEvent::Missing { handle: key },
        PAGE_HIDDEN => StorageEvent::PageHidden,
        PAGE_SHOWN => StorageEvent::PageShown,
        DELETION_WAITS => StorageEvent::DeletionWaits,
        RECORD_AGREED => StorageEvent::RecordAgreed,
        WRITTEN => StorageEvent::Written {
            tx: key,
            ok: data.as_bool() == Some(true),
        },
        LISTED => StorageEvent::Listed {
            tx: key,
            entries: triples(&data).map(entries),
        },
        DATABASES => StorageEvent::Databases(triples(&data)),
        _ => return None,
    })
}

/// A `LISTED` event's triples (kind, client id, key) as entries; those of no kind are skipped.
fn entries(triples: Vec<(Rc<str>, u64, u32)>) -> Vec<Entry> {
    let mut entries = Vec::new();
    for (client, key, kind) in triples {
        match kind {
            MEMBER => entries.push(Entry::Member { client, key }),
            AHEAD => entries.push(Entry::Ahead { client, key }),
            _ => {}
        }
    }
    entries
}

/// The triples of a `LISTED` or `DATABASES` event's data (a number, a client id, a key, one after the
/// other), as (client id, key, number); those that do not read as one are skipped. A plain loop:
/// iterator adapters would each add code to the wasm.
fn triples(data: &JsValue) -> Option<Vec<(Rc<str>, u64, u32)>> {
    let values: &Array = data.dyn_ref()?;
    let mut triples = Vec::new();
    let mut at = 0;
    while at + 2 < values.length() {
        let number = values.get(at).as_f64();
        let client = values.get(at + 1).as_string();
        let key = values.get(at + 2).as_f64();
        at += 3;
        if let (Some(number), Some(client), Some(key)) = (number, client, key) {
            triples.push((client.into(), key as u64, number as u32));
        }
    }
    Some(triples)
}
