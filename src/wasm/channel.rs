//! A context's objects on the origin's channel, and the wire values as they cross it.

use js_sys::{Array, Function, Reflect};
use wasm_bindgen::prelude::*;

use crate::protocol::wire::{self, Value};

#[wasm_bindgen]
extern "C" {
    /// What the edge needs of a `BroadcastChannel` (over the log, the edge has a log storage object
    /// instead: `src/wasm/log_storage.rs`).
    pub(super) type Channel;
    #[wasm_bindgen(method, js_name = postMessage, catch)]
    pub(super) fn post_message(this: &Channel, data: &JsValue) -> Result<(), JsValue>;
    #[wasm_bindgen(method, setter)]
    pub(super) fn set_onmessage(this: &Channel, handler: Option<&Function>);
    #[wasm_bindgen(method)]
    pub(super) fn close(this: &Channel);
}

/// A context's two objects on the origin's channel: a channel object does not receive its own
/// messages; a second one does, in the order the browser delivers them to every context
/// (docs/PROTOCOL.md, assumption A1).
pub(super) struct Channels {
    pub rx: Channel,
    pub tx: Channel,
}

impl Channels {
    /// Opens a context's two BroadcastChannels on `name`; `None` where there is none.
    pub fn open(global: &JsValue, name: &str) -> Option<Channels> {
        // The global's own constructor, not this realm's: a frame's API runs in its parent's realm, whose
        // `BroadcastChannel` a page script may have deleted while the frame's is there (the transport was
        // chosen by the frame's: js/transport_choice.js).
        let constructor: Function = Reflect::get(global, &"BroadcastChannel".into())
            .ok()?
            .dyn_into()
            .ok()?;
        let arguments = Array::of1(&JsValue::from_str(name));
        let open = || -> Option<Channel> {
            Reflect::construct(&constructor, &arguments)
                .ok()
                .map(JsCast::unchecked_into)
        };
        // The receiving object is made first: a context's objects get each message in the order they
        // were made, so the one that acts on it does not wait behind the sending one's delivery (a task
        // that does nothing).
        let rx = open()?;
        let tx = open()?;
        Some(Channels { rx, tx })
    }

    /// Stops listening and closes the objects.
    pub fn close(self) {
        self.rx.set_onmessage(None);
        self.tx.close();
        self.rx.close();
    }
}

/// Wire values as a JS array (what a channel carries).
pub(super) fn values_to_js(values: &[Value]) -> Array {
    // Loops over plain indices and pushes, here and in the lease edge: no iterator adapters over
    // JS arrays in the wasm.
    let array = Array::new();
    for value in values {
        array.push(&match value {
            Value::Num(n) => JsValue::from_f64(*n),
            Value::Str(s) => JsValue::from_str(s),
        });
    }
    array
}

pub(super) fn message_to_js(message: &wire::Message) -> Array {
    values_to_js(&wire::encode(message))
}

/// A message's data as wire values; `None` for anything that is not a flat array of numbers and
/// strings of at most [`wire::MAX_SLOTS`] slots (other libraries may share the channel name; hostile
/// peers may send anything). The same data gives the same answer in every context.
pub(super) fn decode_values(data: &JsValue) -> Option<Vec<Value>> {
    if !Array::is_array(data) {
        return None;
    }
    let array: &Array = data.unchecked_ref();
    // Read once: each read is a call out of the wasm (a message's data is a fresh array of its own, which
    // nothing else can change while this runs).
    let length = array.length();
    if length as usize > wire::MAX_SLOTS {
        return None;
    }
    // A plain loop: iterator adapters would each add code to the wasm.
    let mut values = Vec::with_capacity(length as usize);
    for i in 0..length {
        let v = array.get(i);
        values.push(match v.as_f64() {
            Some(n) => Value::Num(n),
            None => Value::Str(v.as_string()?),
        });
    }
    Some(values)
}
