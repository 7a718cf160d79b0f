use std::rc::Rc;

use js_sys::{Array, Function, JsString, Object, Reflect};
use wasm_bindgen::prelude::*;

#[cfg(feature = "coordination")]
use crate::protocol::{Config, Node};
use crate::scheduler::{
    Decision, LockInfo, LockManager, LockMode, LockRequest, RequestError, Snapshot,
};

#[cfg(feature = "coordination")]
use super::coordination::Coordination;

/// Effect kinds passed to the sink as its first argument (mirrored in `js/lock_api.js`).
pub(super) const EFFECT_GRANTED: u32 = 1;
pub(super) const EFFECT_NOT_AVAILABLE: u32 = 2;
pub(super) const EFFECT_STOLEN: u32 = 3;
pub(super) const EFFECT_SNAPSHOT: u32 = 4;

/// Where decisions are made: the origin's shared lock manager (the coordination protocol), or, where
/// the global has no BroadcastChannel, this context alone.
enum Backend {
    #[cfg(feature = "coordination")]
    Origin(Rc<Coordination>),
    Alone(LockManager),
}

/// One context's lock engine as JS sees it. Requests are identified by ids that JS allocates; the
/// engine reports every decision by calling `sink(kind, id, payload)`.
#[wasm_bindgen]
pub struct Engine {
    client_id: Rc<str>,
    backend: Backend,
    sink: Function,
}

#[wasm_bindgen]
impl Engine {
    /// `scope` isolates a group of engines from the rest of the origin (tests); `undefined` joins the
    /// origin's one lock manager.
    #[wasm_bindgen(constructor)]
    pub fn new(client_id: String, sink: Function, scope: Option<String>) -> Engine {
        let backend = match origin_backend(&client_id, &sink, scope) {
            Some(backend) => backend,
            None => {
                web_sys::console::warn_1(
                    &"weblocks: this global has no BroadcastChannel; locks are coordinated within this \
                      context only."
                        .into(),
                );
                Backend::Alone(LockManager::new())
            }
        };
        Engine {
            client_id: client_id.into(),
            backend,
            sink,
        }
    }

    /// This context's client id.
    #[wasm_bindgen(getter, js_name = clientId)]
    pub fn client_id(&self) -> String {
        String::from(&*self.client_id)
    }

    /// Whether this engine shares the origin's lock manager (false: this context alone).
    #[wasm_bindgen(getter)]
    pub fn shared(&self) -> bool {
        !matches!(self.backend, Backend::Alone(_))
    }

    /// Request a lock (spec 4.1 step 3).
    pub fn request(
        &mut self,
        id: f64,
        name: String,
        exclusive: bool,
        if_available: bool,
        steal: bool,
    ) -> Result<(), JsError> {
        let mode = if exclusive {
            LockMode::Exclusive
        } else {
            LockMode::Shared
        };
        match &mut self.backend {
            #[cfg(feature = "coordination")]
            Backend::Origin(c) => {
                c.with_node(|n, t| n.request(t, id as u64, &name, mode, if_available, steal))
            }
            Backend::Alone(manager) => {
                let request = LockRequest {
                    id: id as u64,
                    client_id: self.client_id.clone(),
                    name: name.into(),
                    mode,
                };
                let decisions = manager.request_lock(request, if_available, steal).map_err(
                    |RequestError::DuplicateId(_)| {
                        JsError::new("weblocks: this request id is already in use")
                    },
                )?;
                deliver(&self.sink, &decisions);
            }
        }
        Ok(())
    }

    /// Release lock `id` (spec 4.2).
    pub fn release(&mut self, id: f64) {
        match &mut self.backend {
            #[cfg(feature = "coordination")]
            Backend::Origin(c) => c.with_node(|n, t| n.release(t, id as u64)),
            Backend::Alone(manager) => {
                let decisions = manager.release_lock(id as u64);
                deliver(&self.sink, &decisions);
            }
        }
    }

    /// Abort request `id` (spec 4.3). Returns false when it was no longer pending (it was granted).
    pub fn abort(&mut self, id: f64) -> bool {
        match &mut self.backend {
            #[cfg(feature = "coordination")]
            Backend::Origin(c) => c.with_node(|n, t| n.abort(t, id as u64)),
            Backend::Alone(manager) => match manager.abort_request(id as u64) {
                Some(decisions) => {
                    deliver(&self.sink, &decisions);
                    true
                }
                None => false,
            },
        }
    }

    /// Snapshot the lock state (spec 4.5); the snapshot reaches the sink as `(4, queryId, snapshot)`.
    pub fn query(&mut self, query_id: f64) {
        match &mut self.backend {
            #[cfg(feature = "coordination")]
            Backend::Origin(c) => c.with_node(|n, t| n.query(t, query_id as u64)),
            Backend::Alone(manager) => {
                let snapshot = snapshot_to_js(&manager.snapshot_lock_state());
                let _ = self.sink.call3(
                    &JsValue::NULL,
                    &EFFECT_SNAPSHOT.into(),
                    &query_id.into(),
                    &snapshot,
                );
            }
        }
    }

    /// This context is going away: give up its locks and requests, and tell the others at once.
    pub fn close(&mut self) {
        #[cfg(feature = "coordination")]
        if let Backend::Origin(c) = &self.backend {
            c.close();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.close();
    }
}

/// The origin's one lock manager, where the global has a BroadcastChannel.
#[cfg(feature = "coordination")]
fn origin_backend(client_id: &str, sink: &Function, scope: Option<String>) -> Option<Backend> {
    let node = Node::new(client_id, Config::default());
    Coordination::start(node, sink.clone(), scope).map(Backend::Origin)
}

/// Built without the protocol (only to measure its bytes): every context is alone.
#[cfg(not(feature = "coordination"))]
fn origin_backend(_: &str, _: &Function, _: Option<String>) -> Option<Backend> {
    None
}

fn deliver(sink: &Function, decisions: &[Decision]) {
    for d in decisions {
        let (kind, id) = match *d {
            Decision::Granted(id) => (EFFECT_GRANTED, id),
            Decision::NotAvailable(id) => (EFFECT_NOT_AVAILABLE, id),
            Decision::Stolen(id) => (EFFECT_STOLEN, id),
        };
        let _ = sink.call2(&JsValue::NULL, &kind.into(), &(id as f64).into());
    }
}

// The snapshot's keys and modes are JS string constants of the glue, never decoded from wasm memory
// (converting a Rust string is a TextDecoder call: most of a query's time before). rustfmt would drop
// the initializers of these statics, hence the skip.
#[rustfmt::skip]
#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(thread_local_v2, static_string)]
    static CLIENT_ID: JsString = "clientId";
    #[wasm_bindgen(thread_local_v2, static_string)]
    static MODE: JsString = "mode";
    #[wasm_bindgen(thread_local_v2, static_string)]
    static NAME: JsString = "name";
    #[wasm_bindgen(thread_local_v2, static_string)]
    static EXCLUSIVE: JsString = "exclusive";
    #[wasm_bindgen(thread_local_v2, static_string)]
    static SHARED: JsString = "shared";
}

/// The strings of one snapshot: the constants fetched once, and each distinct client id and name
/// converted once (a client holding or waiting for many locks has its id decoded once). Keyed by the
/// `Rc`'s address: the core shares one `Rc<str>` per client and per name.
struct SnapshotStrings {
    keys: [JsValue; 3],
    exclusive: JsValue,
    shared: JsValue,
    seen: Vec<(*const u8, JsValue)>,
}

impl SnapshotStrings {
    fn new() -> Self {
        let constant = |s: &JsString| JsValue::from(s);
        SnapshotStrings {
            keys: [
                CLIENT_ID.with(constant),
                MODE.with(constant),
                NAME.with(constant),
            ],
            exclusive: EXCLUSIVE.with(constant),
            shared: SHARED.with(constant),
            seen: Vec::new(),
        }
    }

    fn get(&mut self, s: &Rc<str>) -> JsValue {
        let key = s.as_ptr();
        if let Some((_, value)) = self.seen.iter().find(|(k, _)| *k == key) {
            return value.clone();
        }
        let value = JsValue::from_str(s);
        self.seen.push((key, value.clone()));
        value
    }

    fn lock_infos(&mut self, infos: &[LockInfo]) -> Array {
        infos
            .iter()
            .map(|info| {
                let o = Object::new();
                let mode = match info.mode {
                    LockMode::Exclusive => self.exclusive.clone(),
                    LockMode::Shared => self.shared.clone(),
                };
                let (client_id, name) = (self.get(&info.client_id), self.get(&info.name));
                // WebIDL dictionaries convert to objects with their members in lexicographic order.
                let [client_id_key, mode_key, name_key] = &self.keys;
                let _ = Reflect::set(&o, client_id_key, &client_id);
                let _ = Reflect::set(&o, mode_key, &mode);
                let _ = Reflect::set(&o, name_key, &name);
                JsValue::from(o)
            })
            .collect()
    }
}

pub(super) fn snapshot_to_js(s: &Snapshot) -> JsValue {
    let o = Object::new();
    let mut strings = SnapshotStrings::new();
    let _ = Reflect::set(&o, &"held".into(), &strings.lock_infos(&s.held));
    let _ = Reflect::set(&o, &"pending".into(), &strings.lock_infos(&s.pending));
    o.into()
}
