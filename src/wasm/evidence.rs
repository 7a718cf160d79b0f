//! The edge of the evidence of life and death (`js/liveness.js`, docs/PROTOCOL.md §7): the participant's
//! liveness database, the census of the origin's, and the watches of other contexts' databases.

use js_sys::Function;
use wasm_bindgen::prelude::*;

use crate::protocol::Participant;
use crate::protocol::wire::Value;

use super::channel::decode_values;

#[wasm_bindgen]
extern "C" {
    /// A context's evidence object (`makeEvidence` in `js/liveness.js`).
    pub(super) type Evidence;
    /// Once, before anything else: where its events go.
    #[wasm_bindgen(method)]
    pub(super) fn listen(this: &Evidence, handler: &Function);
    /// Opens a liveness database of this context's own under a new key (an `alive` event, or `fail`).
    #[wasm_bindgen(method)]
    pub(super) fn open(this: &Evidence, client_id: &str);
    /// Closes this context's liveness database, and deletes it.
    #[wasm_bindgen(method)]
    pub(super) fn close(this: &Evidence);
    /// From now on a `pagehide` with `persisted` leaves this context's liveness database open: the
    /// participant stays a member in the back/forward cache (`BackForwardCache::Stay`), and the
    /// browser evicts the page when another context watches that database.
    #[wasm_bindgen(method, js_name = keepOnHide)]
    pub(super) fn keep_on_hide(this: &Evidence);
    /// Lists the origin's liveness databases (a `known` event) and watches each.
    #[wasm_bindgen(method)]
    pub(super) fn census(this: &Evidence);
    /// Watches liveness database `key` of context `client_id` (a `dead` event once it has no
    /// connection).
    #[wasm_bindgen(method)]
    pub(super) fn watch(this: &Evidence, client_id: &str, key: f64);
}

/// The events of the evidence object are told apart by the first letter of their type: `alive`,
/// `lost`, `known`, `dead`, and `fail`, which is for the edge (the context refuses). Named as
/// `js/liveness.js` names them (tests/e2e/boundary_codes.test.mjs checks both say the same).
const ALIVE: u8 = b'a';
const LOST: u8 = b'l';
const KNOWN: u8 = b'k';
const DEAD: u8 = b'd';
pub(super) const FAIL: u8 = b'f';

/// What an event of the evidence object tells the participant, by the first letter of its type.
pub(super) fn deliver(
    p: &mut Participant,
    now: u64,
    kind: u8,
    key: u64,
    data: &wasm_bindgen::JsValue,
) {
    // `data`: client ids and keys, one after the other. A plain loop: iterator adapters would each add
    // code to the wasm.
    let values = decode_values(data).unwrap_or_default();
    let mut pairs: Vec<(std::rc::Rc<str>, u64)> = Vec::new();
    let mut at = 0;
    while let (Some(Value::Str(client)), Some(Value::Num(key))) =
        (values.get(at), values.get(at + 1))
    {
        pairs.push((client.as_str().into(), *key as u64));
        at += 2;
    }
    match kind {
        ALIVE => p.handle_alive(now, key),
        LOST => p.handle_alive_lost(now),
        KNOWN => p.handle_census(now, pairs),
        DEAD => {
            for (client, key) in pairs {
                p.handle_gone(now, &client, key);
            }
        }
        _ => {}
    }
}
