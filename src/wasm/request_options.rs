//! A request's options as JS hands them to the engine: the `LockOptions` dictionary of `request()`
//! after its WebIDL conversion (`lockOptions` in js/lock_api.js), read by its members' names. Its
//! `signal` stays in JS.

use wasm_bindgen::prelude::*;

use crate::scheduler::{LockMode, LockOptions};

/// The values of the WebIDL enum `LockMode`, as the glue reads them from a string.
#[wasm_bindgen(js_name = LockMode)]
#[derive(Clone, Copy)]
pub enum LockModeName {
    Exclusive = "exclusive",
    Shared = "shared",
}

#[wasm_bindgen]
extern "C" {
    /// A converted `LockOptions` dictionary: a plain object whose every member is set, `mode` to a
    /// `LockMode` value and `ifAvailable` and `steal` to booleans.
    pub type RequestOptions;

    #[wasm_bindgen(method, getter)]
    fn mode(this: &RequestOptions) -> LockModeName;

    #[wasm_bindgen(method, getter, js_name = ifAvailable)]
    fn if_available(this: &RequestOptions) -> bool;

    #[wasm_bindgen(method, getter)]
    fn steal(this: &RequestOptions) -> bool;
}

impl From<&RequestOptions> for LockOptions {
    /// The options the lock manager takes. JS converted the dictionary, so `mode` is one of the enum's
    /// values; were it anything else, the request would be exclusive, the mode that excludes the most.
    fn from(options: &RequestOptions) -> LockOptions {
        LockOptions {
            mode: match options.mode() {
                LockModeName::Shared => LockMode::Shared,
                _ => LockMode::Exclusive,
            },
            if_available: options.if_available(),
            steal: options.steal(),
        }
    }
}
