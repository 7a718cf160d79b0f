//! `settleTransport` for js/transport_choice.js: what a context uses by its origin's record, decided by
//! the pure [`crate::protocol::transport_record`], which the simulation runs too.

use wasm_bindgen::prelude::*;

use super::refusal::Refusal;
use crate::protocol::transport_record::{Recorded, settle};

/// What a context that prefers the transport named `preferred` uses where the origin's record holds
/// `recorded`: the name of that transport, or the code of [`Refusal::Disagreement`]. A record no version
/// writes (another library's value under the key) disagrees with every context alike.
#[wasm_bindgen(js_name = settleTransport)]
pub fn settle_transport(preferred: &str, recorded: &str) -> JsValue {
    let settled = match (Recorded::parse(preferred), Recorded::parse(recorded)) {
        (Some(preferred), Some(recorded)) => settle(preferred, recorded).ok(),
        _ => None,
    };
    match settled {
        Some(transport) => JsValue::from_str(transport.name()),
        None => JsValue::from(Refusal::Disagreement.code()),
    }
}
