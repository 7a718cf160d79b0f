//! One binding for every call of a JS function from the edge.

use js_sys::Function;
use wasm_bindgen::JsValue;

/// `f.call(this, a, b, c)`. Every call of a JS function from the edge goes through this one binding, so
/// the glue and the wasm hold one import instead of one per number of arguments; a function given fewer
/// arguments gets `undefined` for the others, which none of them (the sink, timers, `queueMicrotask`,
/// `openChannel`) tells apart from a missing argument.
pub(super) fn call(
    f: &Function,
    this: &JsValue,
    a: &JsValue,
    b: &JsValue,
    c: &JsValue,
) -> Result<JsValue, JsValue> {
    f.call3(this, a, b, c)
}
