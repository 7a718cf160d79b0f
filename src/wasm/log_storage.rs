//! The I/O of the log transport: the operations of [`crate::protocol::log_writer`] carried out by the
//! context's log storage object (`js/log_channel.js`, which runs the IndexedDB, BroadcastChannel and
//! localStorage calls and decides nothing), and its events read back into [`LogEvent`]s.

use js_sys::{Array, Function, Reflect};
use wasm_bindgen::prelude::*;

use crate::protocol::log_writer::{Abort, LogEvent, LogOp};

use super::channel::{decode_values, values_to_js};

#[wasm_bindgen]
extern "C" {
    /// A context's log storage object (the Engine's `openChannel(name)`, `js/log_channel.js`).
    pub(super) type LogStorage;
    /// Once, before anything else: where its events go.
    #[wasm_bindgen(method)]
    pub(super) fn listen(this: &LogStorage, handler: &Function);
    #[wasm_bindgen(method)]
    fn open(this: &LogStorage, handle: u32);
    #[wasm_bindgen(method)]
    fn close(this: &LogStorage, handle: u32);
    #[wasm_bindgen(method)]
    fn append(this: &LogStorage, handle: u32, tx: u32, data: &Array, identify: f64);
    #[wasm_bindgen(method)]
    fn start(this: &LogStorage, handle: u32, tx: u32);
    #[wasm_bindgen(method)]
    fn read(this: &LogStorage, handle: u32, tx: u32, after: f64);
    #[wasm_bindgen(method)]
    fn trim(this: &LogStorage, handle: u32, upto: f64, identity: f64);
    /// Log object `object` listens on its carrier, or for `storage` events.
    #[wasm_bindgen(method)]
    fn hear(this: &LogStorage, object: u32);
    #[wasm_bindgen(method)]
    fn unhear(this: &LogStorage, object: u32);
    #[wasm_bindgen(method, js_name = closeCarrier)]
    fn close_carrier(this: &LogStorage, object: u32);
    #[wasm_bindgen(method)]
    fn carry(this: &LogStorage, object: u32, frame: &Array);
    #[wasm_bindgen(method)]
    fn poke(this: &LogStorage, key: f64);
    /// The `pagehide` listener that posts `data` (the farewell) for the others to append, on log
    /// object `object`'s carrier or in a `storage` event: it runs no script of ours.
    #[wasm_bindgen(method)]
    pub(super) fn farewell(this: &LogStorage, object: u32, data: &JsValue) -> Function;
}

/// The events of the log storage object, by their `type` (as `js/log_channel.js` numbers them:
/// tests/static/boundary_codes.test.mjs checks both say the same). `key` is the handle, the transaction,
/// or for `CARRIED` and `POKED` the object.
const OPENED: u32 = 1;
const OPEN_FAILED: u32 = 2;
const CLOSED: u32 = 3;
/// `data`: the new version, or null for a deletion.
const VERSION_CHANGE: u32 = 4;
/// `data`: the entry's key; `id`: the identity it found (0: it did not look).
const APPENDED: u32 = 5;
/// `data`: why, as [`ABORT_QUOTA`], [`ABORT_UNUSABLE`] or anything else.
const ABORTED: u32 = 6;
/// `data`: the last key; `id`: the identity.
const STARTED: u32 = 7;
/// `data`: the floor, then each entry's key and data; `id`: the identity.
const READ: u32 = 8;
/// `data`: whether the transaction could not be made.
const READ_FAILED: u32 = 9;
const CARRIED: u32 = 10;
const POKED: u32 = 11;
const ABORT_QUOTA: u32 = 1;
const ABORT_UNUSABLE: u32 = 2;

/// Carries out `op` on the object.
pub(super) fn carry_out(storage: &LogStorage, op: LogOp) {
    match op {
        LogOp::Open { handle } => storage.open(handle),
        LogOp::Close { handle } => storage.close(handle),
        LogOp::Append {
            handle,
            tx,
            data,
            identify,
        } => storage.append(handle, tx, &values_to_js(&data), identify as f64),
        LogOp::Start { handle, tx } => storage.start(handle, tx),
        LogOp::Read { handle, tx, after } => storage.read(handle, tx, after as f64),
        LogOp::Trim {
            handle,
            upto,
            identity,
        } => storage.trim(handle, upto as f64, identity as f64),
        LogOp::Listen { object } => storage.hear(object),
        LogOp::Unlisten { object } => storage.unhear(object),
        LogOp::CloseCarrier { object } => storage.close_carrier(object),
        LogOp::Carry { object, frame, .. } => storage.carry(object, &values_to_js(&frame)),
        LogOp::Poke { key } => storage.poke(key as f64),
    }
}

/// The log event an event of the object tells, if it is one. Data that does not decode is dropped
/// but for a read's entries, whose keys take their place all the same (docs/PROTOCOL.md §12, "order
/// first, decode second").
pub(super) fn read_event(event: &JsValue) -> Option<LogEvent> {
    let get = |name: &str| Reflect::get(event, &name.into()).unwrap_or(JsValue::UNDEFINED);
    let kind = get("type").as_f64()? as u32;
    let key = get("key").as_f64()? as u32;
    let data = get("data");
    let number = |v: &JsValue| v.as_f64().unwrap_or(0.0) as u64;
    let identity = number(&get("id"));
    Some(match kind {
        OPENED => LogEvent::Opened { handle: key },
        OPEN_FAILED => LogEvent::OpenFailed { handle: key },
        CLOSED => LogEvent::Closed { handle: key },
        VERSION_CHANGE => LogEvent::VersionChange {
            handle: key,
            new_version: data.as_f64().map(|v| v as u32),
        },
        APPENDED => LogEvent::Appended {
            tx: key,
            key: number(&data),
            identity,
        },
        ABORTED => LogEvent::AppendAborted {
            tx: key,
            why: match number(&data) as u32 {
                ABORT_QUOTA => Abort::Quota,
                ABORT_UNUSABLE => Abort::Unusable,
                _ => Abort::Other,
            },
        },
        STARTED => LogEvent::Started {
            tx: key,
            identity,
            last: number(&data),
        },
        READ => {
            let values: &Array = data.dyn_ref()?;
            let mut entries = Vec::new();
            let mut at = 1;
            // A plain loop: iterator adapters would each add code to the wasm.
            while at + 1 < values.length() {
                entries.push((number(&values.get(at)), decode_values(&values.get(at + 1))));
                at += 2;
            }
            LogEvent::Read {
                tx: key,
                identity,
                floor: number(&values.get(0)),
                entries,
            }
        }
        READ_FAILED => LogEvent::ReadFailed {
            tx: key,
            unusable: data.as_bool() == Some(true),
        },
        CARRIED => LogEvent::Carried {
            object: key,
            data: decode_values(&data)?,
        },
        POKED => LogEvent::Poked { object: key },
        _ => return None,
    })
}
