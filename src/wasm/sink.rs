//! The Engine's sink: how decisions reach `js/lock_api.js`, as `sink(kind, id, payload)`.

use js_sys::{Array, Function, Uint32Array};
use wasm_bindgen::JsValue;

use super::refusal::Refusal;
use super::snapshot_transfer::encode_snapshot;
use crate::scheduler::{Decision, Snapshot};

use super::js_call::call;

/// Effect kinds passed to the sink as its first argument, as `js/lock_api.js` names them
/// (tests/static/boundary_codes.test.mjs checks that both say the same).
pub(super) const EFFECT_GRANTED: u32 = 1;
pub(super) const EFFECT_NOT_AVAILABLE: u32 = 2;
pub(super) const EFFECT_STOLEN: u32 = 3;
pub(super) const EFFECT_SNAPSHOT: u32 = 4;
/// The context refuses (`super::refusal`): request or query `id` (0: every one pending) is rejected with
/// the DOMException `[name, message]` the payload gives.
pub(super) const EFFECT_REFUSED: u32 = 5;

/// Tells the sink `kind` happened to request (or query) `id`. What the sink throws is dropped: it is
/// JS's to report, and the engine's state is already decided.
pub(super) fn notify(sink: &Function, kind: u32, id: u64, payload: &JsValue) {
    let _ = call(
        sink,
        &JsValue::NULL,
        &kind.into(),
        &(id as f64).into(),
        payload,
    );
}

/// Tells the sink the lock manager's decisions, in order.
pub(super) fn deliver(sink: &Function, decisions: &[Decision]) {
    for d in decisions {
        let (kind, id) = match *d {
            Decision::Granted(id) => (EFFECT_GRANTED, id),
            Decision::NotAvailable(id) => (EFFECT_NOT_AVAILABLE, id),
            Decision::Stolen(id) => (EFFECT_STOLEN, id),
        };
        notify(sink, kind, id, &JsValue::UNDEFINED);
    }
}

/// A snapshot as the sink receives it: `[text, numbers]` (see `super::snapshot_transfer`; JS builds the
/// dictionaries).
pub(super) fn snapshot_to_js(s: &Snapshot) -> JsValue {
    let t = encode_snapshot(s);
    Array::of2(
        &JsValue::from_str(&t.text),
        &Uint32Array::from(&t.numbers[..]),
    )
    .into()
}

/// Tells the sink that request or query `id` (0: every one pending) is refused.
pub(super) fn refuse(sink: &Function, id: u64, refusal: Refusal) {
    let error = Array::of2(
        &JsValue::from_str(refusal.name()),
        &JsValue::from_str(refusal.message()),
    );
    notify(sink, EFFECT_REFUSED, id, &error);
}
