use std::rc::Rc;

use js_sys::{Array, Function, Object, Reflect};
use wasm_bindgen::prelude::*;

use crate::scheduler::{Decision, LockInfo, LockManager, LockMode, LockRequest, Snapshot};

/// Effect kinds passed to the sink as its first argument (mirrored in `js/lock_api.js`).
const EFFECT_GRANTED: u32 = 1;
const EFFECT_NOT_AVAILABLE: u32 = 2;
const EFFECT_STOLEN: u32 = 3;
const EFFECT_SNAPSHOT: u32 = 4;

/// One context's lock engine as JS sees it. Requests are identified by ids that JS allocates; the
/// engine reports every decision by calling `sink(kind, id, payload)`.
#[wasm_bindgen]
pub struct Engine {
    client_id: Rc<str>,
    manager: LockManager,
    sink: Function,
}

#[wasm_bindgen]
impl Engine {
    #[wasm_bindgen(constructor)]
    pub fn new(client_id: String, sink: Function) -> Engine {
        console_error_panic_hook::set_once();
        Engine {
            client_id: client_id.into(),
            manager: LockManager::new(),
            sink,
        }
    }

    /// This context's client id.
    #[wasm_bindgen(getter, js_name = clientId)]
    pub fn client_id(&self) -> String {
        self.client_id.to_string()
    }

    /// Request a lock (spec 4.1 step 3). Decisions reach the sink before this returns.
    pub fn request(
        &mut self,
        id: f64,
        name: String,
        exclusive: bool,
        if_available: bool,
        steal: bool,
    ) -> Result<(), JsError> {
        let request = LockRequest {
            id: id as u64,
            client_id: self.client_id.clone(),
            name: name.into(),
            mode: if exclusive {
                LockMode::Exclusive
            } else {
                LockMode::Shared
            },
        };
        let decisions = self
            .manager
            .request_lock(request, if_available, steal)
            .map_err(|e| JsError::new(&format!("{e:?}")))?;
        self.deliver(&decisions);
        Ok(())
    }

    /// Release lock `id` (spec 4.2).
    pub fn release(&mut self, id: f64) {
        let decisions = self.manager.release_lock(id as u64);
        self.deliver(&decisions);
    }

    /// Abort request `id` (spec 4.3). Returns false when it was no longer pending (it was granted).
    pub fn abort(&mut self, id: f64) -> bool {
        match self.manager.abort_request(id as u64) {
            Some(decisions) => {
                self.deliver(&decisions);
                true
            }
            None => false,
        }
    }

    /// Snapshot the lock state (spec 4.5); the snapshot reaches the sink as `(4, queryId, snapshot)`.
    pub fn query(&mut self, query_id: f64) {
        let snapshot = snapshot_to_js(&self.manager.snapshot_lock_state());
        let _ = self.sink.call3(
            &JsValue::NULL,
            &EFFECT_SNAPSHOT.into(),
            &query_id.into(),
            &snapshot,
        );
    }
}

impl Engine {
    fn deliver(&self, decisions: &[Decision]) {
        for d in decisions {
            let (kind, id) = match *d {
                Decision::Granted(id) => (EFFECT_GRANTED, id),
                Decision::NotAvailable(id) => (EFFECT_NOT_AVAILABLE, id),
                Decision::Stolen(id) => (EFFECT_STOLEN, id),
            };
            let _ = self
                .sink
                .call2(&JsValue::NULL, &kind.into(), &(id as f64).into());
        }
    }
}

fn lock_infos_to_js(infos: &[LockInfo]) -> Array {
    infos
        .iter()
        .map(|info| {
            let o = Object::new();
            // WebIDL dictionaries convert to objects with their members in lexicographic order.
            let _ = Reflect::set(&o, &"clientId".into(), &JsValue::from_str(&info.client_id));
            let _ = Reflect::set(&o, &"mode".into(), &info.mode.as_str().into());
            let _ = Reflect::set(&o, &"name".into(), &JsValue::from_str(&info.name));
            JsValue::from(o)
        })
        .collect()
}

fn snapshot_to_js(s: &Snapshot) -> JsValue {
    let o = Object::new();
    let _ = Reflect::set(&o, &"held".into(), &lock_infos_to_js(&s.held));
    let _ = Reflect::set(&o, &"pending".into(), &lock_infos_to_js(&s.pending));
    o.into()
}
