use std::rc::Rc;

use js_sys::Function;
use wasm_bindgen::prelude::*;

#[cfg(feature = "coordination")]
use crate::protocol::{BackForwardCache, Config, Participant, Transport, Wake};
use crate::scheduler::{LockManager, LockOptions};

#[cfg(feature = "coordination")]
use super::coordination::Coordination;
#[cfg(feature = "coordination")]
use super::evidence::LivenessStorage;
use super::refusal::Refusal;
use super::request_options::RequestOptions;
use super::sink::{EFFECT_SNAPSHOT, deliver, notify, refuse, snapshot_to_js};

/// What wakes a context over the log, as the engine's `wake` argument numbers it (the `WAKE_*` of
/// `js/log_channel.js`; tests/static/boundary_codes.test.mjs checks that both say the same); anything else
/// is its own polls.
#[cfg(feature = "coordination")]
const WAKE_CARRIER: u32 = 1;
#[cfg(feature = "coordination")]
const WAKE_POKES: u32 = 2;

/// Where decisions are made: the origin's shared lock manager (the coordination protocol), or, where
/// the global has no channel to the others, this context alone; or nowhere, where the context cannot be
/// sure it shares its origin's manager (`super::refusal`).
enum Backend {
    #[cfg(feature = "coordination")]
    Origin(Rc<Coordination>),
    Alone(LockManager),
    Refused(Refusal),
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
    /// origin's one lock manager. `openChannel(name, header)` opens this context's object on the log the contexts coordinate
    /// over where the engine's BroadcastChannel does not give one order (`js/log_channel.js`), and
    /// `wake` (its `WAKE_*`) says what wakes the context; `undefined`: BroadcastChannel. `global` is
    /// the global object of the context the engine serves: its timers, page lifecycle events and
    /// channels. `refusal` (a `REFUSED_*` of js/transport_choice.js) makes instead an engine that
    /// decides nothing, where the context cannot be sure it shares its origin's lock manager: every
    /// request and query is rejected with its error. `evidence` is the context's liveness storage object
    /// (`makeLivenessStorage` of js/liveness.js), which runs the evidence's storage operations; an
    /// engine that could reach the others without one refuses too, since only silence could then tell
    /// who is gone or alone. `engine` is the JavaScript engine's family (`engineFamily()` of
    /// js/transport_choice.js), from which the participant's [`BackForwardCache`] policy follows, and
    /// `unless_persisted(post)` makes the `pagehide` listener that calls `post()` only when the page
    /// goes for good (js/page_cache.js): the farewell of a context that stays a member in the
    /// back/forward cache.
    // One argument per thing JS hands the engine, as the glue passes them: an options object would cost
    // the glue and the wasm code to unpack it.
    #[allow(clippy::too_many_arguments)]
    #[wasm_bindgen(constructor)]
    pub fn new(
        client_id: String,
        sink: Function,
        scope: Option<String>,
        open_channel: Option<Function>,
        global: JsValue,
        wake: Option<u32>,
        refusal: Option<u32>,
        evidence: JsValue,
        engine: JsValue,
        unless_persisted: Option<Function>,
    ) -> Engine {
        let backend = match refusal.and_then(Refusal::from_code) {
            Some(refusal) => Some(Backend::Refused(refusal)),
            None => origin_backend(
                &client_id,
                &sink,
                scope,
                open_channel,
                global,
                wake,
                evidence,
                engine,
                unless_persisted,
            ),
        };
        let backend = match backend {
            Some(Backend::Refused(refusal)) => {
                web_sys::console::warn_1(&refusal.message().into());
                Backend::Refused(refusal)
            }
            Some(backend) => backend,
            None => {
                web_sys::console::warn_1(
                    &"weblocks: this global has neither a BroadcastChannel that delivers in one order \
                      nor IndexedDB; locks are coordinated within this context only."
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

    /// Whether this engine shares the origin's lock manager (false: this context alone, or refusing).
    #[wasm_bindgen(getter)]
    pub fn shared(&self) -> bool {
        !matches!(self.backend, Backend::Alone(_)) && self.refusal().is_none()
    }

    /// Why this engine refuses to decide, if it does: from the start, or since its origin's transport
    /// became unreachable.
    fn refusal(&self) -> Option<Refusal> {
        match &self.backend {
            #[cfg(feature = "coordination")]
            Backend::Origin(c) => c.refusal(),
            Backend::Alone(_) => None,
            Backend::Refused(refusal) => Some(*refusal),
        }
    }

    /// Request a lock (spec 4.1 step 3) with `options`, request()'s converted `LockOptions`. `id` is
    /// new: JS allocates ids from a counter and never reuses one (docs/ARCHITECTURE.md), so the
    /// manager's refusal of a duplicate id cannot happen (it would decide nothing).
    pub fn request(&mut self, id: f64, name: String, options: &RequestOptions) {
        if let Some(refusal) = self.refusal() {
            refuse(&self.sink, id as u64, refusal);
            return;
        }
        let options = LockOptions::from(options);
        match &mut self.backend {
            #[cfg(feature = "coordination")]
            Backend::Origin(c) => {
                c.with_participant(|p, t| p.handle_request(t, id as u64, &name, options))
            }
            Backend::Alone(manager) => {
                let client_id = self.client_id.clone();
                if let Ok(decisions) =
                    manager.request_lock(id as u64, client_id, name.into(), options)
                {
                    deliver(&self.sink, &decisions);
                }
            }
            // Refused above.
            Backend::Refused(_) => {}
        }
    }

    /// Release lock `id` (spec 4.2).
    pub fn release(&mut self, id: f64) {
        match &mut self.backend {
            #[cfg(feature = "coordination")]
            Backend::Origin(c) => c.with_participant(|p, t| p.handle_release(t, id as u64)),
            Backend::Alone(manager) => {
                let decisions = manager.release_lock(id as u64);
                deliver(&self.sink, &decisions);
            }
            Backend::Refused(_) => {}
        }
    }

    /// Abort request `id` (spec 4.3). Returns false when it was no longer pending (it was granted).
    pub fn abort(&mut self, id: f64) -> bool {
        match &mut self.backend {
            #[cfg(feature = "coordination")]
            Backend::Origin(c) => c.with_participant(|p, t| p.handle_abort(t, id as u64)),
            Backend::Alone(manager) => match manager.abort_request(id as u64) {
                Some(decisions) => {
                    deliver(&self.sink, &decisions);
                    true
                }
                None => false,
            },
            // Its requests were rejected when made: none is pending.
            Backend::Refused(_) => false,
        }
    }

    /// Snapshot the lock state (spec 4.5); the snapshot reaches the sink as `(4, queryId, snapshot)`.
    pub fn query(&mut self, query_id: f64) {
        if let Some(refusal) = self.refusal() {
            refuse(&self.sink, query_id as u64, refusal);
            return;
        }
        match &mut self.backend {
            #[cfg(feature = "coordination")]
            Backend::Origin(c) => c.with_participant(|p, t| p.handle_query(t, query_id as u64)),
            Backend::Alone(manager) => {
                let snapshot = snapshot_to_js(&manager.snapshot_lock_state());
                notify(&self.sink, EFFECT_SNAPSHOT, query_id as u64, &snapshot);
            }
            Backend::Refused(_) => {}
        }
    }

    /// The origin's record of its transport changed under this context (it was deleted, and a context
    /// that came meanwhile recorded one this context does not use), or can no longer be reached: from
    /// now on it decides nothing (`refusal`: a `REFUSED_*` of js/transport_choice.js).
    #[cfg_attr(not(feature = "coordination"), allow(unused_variables))]
    pub fn refuse(&mut self, refusal: u32) {
        #[cfg(feature = "coordination")]
        if let Backend::Origin(c) = &self.backend {
            c.refuse(Refusal::from_code(refusal).unwrap_or(Refusal::Unreachable));
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

/// The origin's one lock manager, where the global has a channel to the other contexts.
#[cfg(feature = "coordination")]
#[allow(clippy::too_many_arguments)]
fn origin_backend(
    client_id: &str,
    sink: &Function,
    scope: Option<String>,
    open_channel: Option<Function>,
    global: JsValue,
    wake: Option<u32>,
    evidence: JsValue,
    engine: JsValue,
    unless_persisted: Option<Function>,
) -> Option<Backend> {
    let evidence = (!evidence.is_undefined()).then(|| evidence.unchecked_into::<LivenessStorage>());
    let transport = match (&open_channel, wake) {
        (None, _) => Transport::Broadcast,
        (Some(_), Some(WAKE_CARRIER)) => Transport::Log(Wake::Carrier),
        (Some(_), Some(WAKE_POKES)) => Transport::Log(Wake::Pokes),
        (Some(_), _) => Transport::Log(Wake::Polls),
    };
    let config = Config {
        transport,
        back_forward_cache: BackForwardCache::of_engine_family(
            &engine.as_string().unwrap_or_default(),
        ),
        ..Config::default()
    };
    let participant = Participant::new(client_id, config);
    Coordination::start(
        participant,
        sink.clone(),
        scope,
        open_channel,
        global,
        evidence,
        unless_persisted,
    )
    .map(|started| match started {
        Ok(c) => Backend::Origin(c),
        Err(refusal) => Backend::Refused(refusal),
    })
}

/// Built without the protocol (only to measure its bytes): every context is alone.
#[cfg(not(feature = "coordination"))]
#[allow(clippy::too_many_arguments)]
fn origin_backend(
    _: &str,
    _: &Function,
    _: Option<String>,
    _: Option<Function>,
    _: JsValue,
    _: Option<u32>,
    _: JsValue,
    _: JsValue,
    _: Option<Function>,
) -> Option<Backend> {
    None
}
