//! The I/O edge of the coordination protocol: the browser's [`Host`] of the edge loop, which carries a
//! [`Participant`]'s effects out over the channel (BroadcastChannel, or the log in IndexedDB), the
//! storage operations of its evidence of life and death (`js/liveness.js`) and timers; and the listeners that feed it the events
//! of this global scope (messages, timer, evidence, page lifecycle). It decides nothing (the loop's policies are in
//! [`crate::protocol::edge`]); every handler is written so that nothing it receives can throw out of it.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use js_sys::{Function, Reflect};
use wasm_bindgen::prelude::*;
use web_sys::{EventTarget, MessageEvent};

use crate::protocol::edge::{self, EdgeState, Host};
use crate::protocol::evidence::{Evidence, StorageOp};
use crate::protocol::log_writer::{LogOp, LogWriter};
use crate::protocol::wire::{self, Message, Value};
use crate::protocol::{LossReason, Participant, Transport};
use crate::scheduler::Snapshot;

use super::channel::{Channels, decode_values, message_to_js, values_to_js};
use super::evidence::{self, LivenessStorage};
use super::js_call::call;
use super::log_storage::{self, LogStorage};
use super::refusal::Refusal;
use super::sink::{
    EFFECT_GRANTED, EFFECT_NOT_AVAILABLE, EFFECT_SNAPSHOT, EFFECT_STOLEN, notify, refuse,
    snapshot_to_js,
};

/// The channel every weblocks context of an origin listens on; `scope` (tests) appends `:scope`.
const CHANNEL: &str = "weblocks";

fn now() -> u64 {
    js_sys::Date::now() as u64
}

/// Looks up a property of the global object without throwing.
fn global_property(global: &JsValue, name: &str) -> Option<JsValue> {
    Reflect::get(global, &JsValue::from_str(name))
        .ok()
        .filter(|v| !v.is_undefined() && !v.is_null())
}

/// A page transition event's `persisted` (true only if it is `true`).
fn persisted(event: &web_sys::Event) -> bool {
    Reflect::get(event, &"persisted".into())
        .ok()
        .and_then(|v| v.as_bool())
        == Some(true)
}

/// A function of the global object, if it has one by that name.
fn global_function(global: &JsValue, name: &str) -> Option<Function> {
    global_property(global, name)?.dyn_into().ok()
}

/// A JS function that runs a handler on the coordination: see [`callback`].
type Callback = Closure<dyn FnMut(web_sys::Event)>;

/// An event listener this edge added, kept to be removed on close.
type Listener = (EventTarget, &'static str, Callback);

/// A JS function that runs `handler` on the coordination while it lives (it holds a weak reference:
/// no callback keeps the coordination alive). One closure type for every callback (the timer, the
/// flush's microtask hops, channel messages, events): one set of closure code in the wasm and the
/// glue. The timer's and the microtask's are called with no event (`undefined`) and ignore it.
fn callback(this: Weak<Coordination>, handler: fn(&Coordination, &web_sys::Event)) -> Callback {
    Closure::new(move |event: web_sys::Event| {
        if let Some(this) = this.upgrade() {
            handler(&this, &event);
        }
    })
}

/// What the handlers share: the participant, the I/O objects, and the JS sink of the Engine contract.
pub(super) struct Coordination {
    participant: RefCell<Participant>,
    /// Open while the participant takes part in the protocol (`Effect::OpenChannels` ..
    /// `Effect::CloseChannels`).
    channels: RefCell<Option<Channels>>,
    /// Over the log: the writer (its decisions), the log storage object that carries out its
    /// operations (the Engine's `openChannel(name)`, `js/log_channel.js`), and that object's events'
    /// handler.
    log: Option<(RefCell<LogWriter>, LogStorage)>,
    on_log: Callback,
    sink: Function,
    /// The armed timer's handle.
    timer: Cell<Option<JsValue>>,
    timer_callback: Callback,
    /// The global's `setTimeout` and `clearTimeout`, looked up once.
    set_timeout: Option<Function>,
    clear_timeout: Option<Function>,
    listeners: RefCell<Vec<Listener>>,
    on_message: Callback,
    /// The armed farewell (`Effect::ArmFarewell`): a `pagehide` listener that runs no script of ours.
    farewell: RefCell<Option<Function>>,
    /// The global object where it has page lifecycle events (a Window): workers have no `pagehide`,
    /// and there the farewell is never armed.
    page: Option<EventTarget>,
    /// The channel's name.
    channel: String,
    /// The edge loop's state.
    edge: EdgeState,
    flush_callback: Callback,
    /// The global's `queueMicrotask`, looked up once (every flush takes a few hops through it); engines
    /// before it (Chrome 71, Safari 12.1) flush at once.
    queue_microtask: Option<Function>,
    /// The global object of the context this edge serves (the Engine's `global`).
    global: JsValue,
    /// Set, for good, once the log cannot be reached (a `fail` event): the context decides nothing more.
    refusal: Cell<Option<Refusal>>,
    /// The evidence of life and death (its decisions), the liveness storage object that carries out
    /// its operations (`js/liveness.js`), and that object's events' handler.
    evidence: RefCell<Evidence>,
    storage: LivenessStorage,
    on_storage: Callback,
    /// Where the participant stays a member in the back/forward cache: the JS function that makes the
    /// farewell a `pagehide` listener that posts only when the page goes for good (js/page_cache.js).
    unless_persisted: Option<Function>,
}

impl Coordination {
    /// Starts coordinating over the channels `open_channel(name)` makes, or where it is `None`, over
    /// BroadcastChannel; `None` where there is neither. Where there is one but no `evidence` of life
    /// and death, the context refuses (`Err`): only silence could then tell who is gone or alone.
    pub(super) fn start(
        participant: Participant,
        sink: Function,
        scope: Option<String>,
        open_channel: Option<Function>,
        global: JsValue,
        storage: Option<LivenessStorage>,
        unless_persisted: Option<Function>,
    ) -> Option<Result<Rc<Coordination>, Refusal>> {
        let channel = match &scope {
            Some(s) => CHANNEL.to_owned() + ":" + s,
            None => CHANNEL.to_owned(),
        };
        // Over the log, the log storage object, made once; else the channels, opened only to learn
        // that the global can: the participant is out of the protocol until it first needs a lock,
        // and opens them then (`Effect::OpenChannels`).
        let log_storage = match &open_channel {
            Some(open) => Some(
                call(
                    open,
                    &JsValue::NULL,
                    &JsValue::from_str(&channel),
                    &JsValue::UNDEFINED,
                    &JsValue::UNDEFINED,
                )
                .ok()
                .filter(|c| c.is_object())?
                .unchecked_into::<LogStorage>(),
            ),
            None => {
                Channels::open(&global, &channel)?.close();
                None
            }
        };
        let Some(storage) = storage else {
            return Some(Err(Refusal::Unreachable));
        };
        // A participant that stays a member in the back/forward cache posts its farewell only when
        // the page goes for good: without the JS that tells the two apart, it does not start (the glue
        // always gives it).
        let stays = participant.stays_in_cache();
        if stays && unless_persisted.is_none() {
            return Some(Err(Refusal::Unreachable));
        }
        // The keys of this context's liveness databases: 52 random bits each, as before the wasm.
        let seed = (js_sys::Math::random() * 9_007_199_254_740_992.0) as u64;
        let log = match (participant.transport(), log_storage) {
            (Transport::Log(wake), Some(log_storage)) => {
                let header = wire::entry_header(&participant.member_key(), participant.version());
                Some((
                    RefCell::new(LogWriter::new(wake, header, seed ^ 1)),
                    log_storage,
                ))
            }
            _ => None,
        };
        let ahead = storage.ahead() as u64;
        let mut evidence =
            Evidence::new(participant.client_id(), seed, (ahead != 0).then_some(ahead));
        evidence.set_back_forward_cache(participant.back_forward_cache());
        let this = Rc::new_cyclic(|weak: &Weak<Coordination>| Coordination {
            participant: RefCell::new(participant),
            channels: RefCell::new(None),
            log,
            on_log: callback(weak.clone(), |this, event| {
                if let Some(event) = log_storage::read_event(event) {
                    edge::log_event(&mut &*this, event);
                }
            }),
            sink,
            timer: Cell::new(None),
            set_timeout: global_function(&global, "setTimeout"),
            clear_timeout: global_function(&global, "clearTimeout"),
            timer_callback: callback(weak.clone(), |this, _| {
                this.timer.set(None);
                edge::timeout(&mut &*this);
            }),
            listeners: RefCell::new(Vec::new()),
            on_message: callback(weak.clone(), |this, event| this.on_message(event)),
            farewell: RefCell::new(None),
            page: Reflect::has(&global, &"onpagehide".into())
                .unwrap_or(false)
                .then(|| global.clone().unchecked_into()),
            channel,
            edge: EdgeState::default(),
            queue_microtask: global_function(&global, "queueMicrotask"),
            flush_callback: callback(weak.clone(), |this, _| edge::microtask(&mut &*this)),
            global,
            refusal: Cell::new(None),
            evidence: RefCell::new(evidence),
            storage,
            on_storage: callback(weak.clone(), |this, event| {
                if let Some(event) = evidence::read_event(event) {
                    edge::storage(&mut &*this, event);
                }
            }),
            unless_persisted: if stays { unless_persisted } else { None },
        });
        this.storage
            .listen(this.on_storage.as_ref().unchecked_ref());
        if let Some((_, log_storage)) = &this.log {
            log_storage.listen(this.on_log.as_ref().unchecked_ref());
            // The writer opens the log's database at once: the first lock need not wait for it.
            edge::carry_out(&mut &*this);
        }
        this.install_handlers();
        Some(Ok(this))
    }

    /// A message of the BroadcastChannel, dropped if its data does not decode (see
    /// [`decode_values`]).
    fn on_message(&self, event: &web_sys::Event) {
        if let Some(values) = decode_values(&event.unchecked_ref::<MessageEvent>().data()) {
            self.with_participant(|p, t| p.handle_message(t, &values));
        }
    }

    /// Why this context decides nothing more, if it does.
    pub(super) fn refusal(&self) -> Option<Refusal> {
        self.refusal.get()
    }

    /// The origin's transport cannot be reached, or is no longer this context's: the participant
    /// steps out (its held locks are lost, as after a reset) and leaves for good, every pending request
    /// and query is rejected, and every later one is refused (the Engine asks
    /// [`Coordination::refusal`] first). Granting on from its replica could make it a second lock
    /// manager beside the origin's.
    pub(super) fn refuse(&self, refusal: Refusal) {
        // Whichever of this context's IndexedDB users met the failure first (the evidence, the log, the
        // transport's record), the page is told that the browser took its storage, if it did.
        let lost = refusal == Refusal::Unreachable
            && self
                .evidence
                .try_borrow()
                .is_ok_and(|evidence| evidence.storage_lost());
        let refusal = if lost { Refusal::StorageLost } else { refusal };
        if self.refusal.replace(Some(refusal)).is_some() {
            return;
        }
        web_sys::console::warn_1(&refusal.message().into());
        self.with_participant(|p, t| {
            p.handle_missed_messages(t);
            p.handle_close(t);
        });
        refuse(&self.sink, 0, refusal);
    }

    /// Opens the channel objects for a participant that enters the protocol, before its `Join` goes
    /// out, so the receiving object gets its echo (over the log: and starts reading it). Where that
    /// fails (it did not at start), nothing is sent: the participant waits and, with no echo, starts no
    /// history.
    fn open_channels(&self) {
        if self.log.is_some() || self.channels.borrow().is_some() {
            return;
        }
        let Some(channels) = Channels::open(&self.global, &self.channel) else {
            return;
        };
        channels
            .rx
            .set_onmessage(Some(self.on_message.as_ref().unchecked_ref()));
        *self.channels.borrow_mut() = Some(channels);
    }

    /// Closes the channels of a participant out of the protocol: its replica is gone and it would only
    /// be woken by every message of the origin, on every lock handoff of every other context, for
    /// nothing. It listens again from its next `Join` on, as a new context does.
    fn close_channels(&self) {
        if let Some(channels) = self.channels.borrow_mut().take() {
            channels.close();
        }
    }

    fn install_handlers(self: &Rc<Self>) {
        let global: EventTarget = self.global.clone().unchecked_into();
        self.listen(&global, "pagehide", |this, event| {
            let persisted = persisted(event);
            this.with_participant(|p, t| p.handle_pagehide(t, persisted));
        });
        self.listen(&global, "pageshow", |this, event| {
            let persisted = persisted(event);
            this.with_participant(|p, t| p.handle_pageshow(t, persisted));
        });
        if let Some(document) =
            // Not checked to be an EventTarget: listening to it would fail, and nothing be listened to.
            global_property(&self.global, "document")
                .map(JsCast::unchecked_into::<EventTarget>)
        {
            self.listen(&document, "freeze", |this, _| {
                this.with_participant(|p, t| p.handle_freeze(t))
            });
            self.listen(&document, "resume", |this, _| {
                this.with_participant(|p, t| p.handle_resume(t))
            });
        }
    }

    /// Listens to `kind` on `target` (in the phase [`captures`] gives) until [`Coordination::close`].
    fn listen(
        self: &Rc<Self>,
        target: &EventTarget,
        kind: &'static str,
        handler: fn(&Coordination, &web_sys::Event),
    ) {
        let closure = callback(Rc::downgrade(self), handler);
        if target
            .add_event_listener_with_callback_and_bool(
                kind,
                closure.as_ref().unchecked_ref(),
                captures(kind),
            )
            .is_ok()
        {
            self.listeners
                .borrow_mut()
                .push((target.clone(), kind, closure));
        }
    }

    /// Runs one event through the participant, then carries out its effects (the edge loop).
    pub(super) fn with_participant<R>(&self, f: impl FnOnce(&mut Participant, u64) -> R) -> R {
        edge::input(&mut &*self, f)
    }

    /// Keeps the farewell ready as a `pagehide` listener. Firefox may stop a closing tab's `pagehide`
    /// listener as soon as it calls into wasm (the listeners after it still run), and then the
    /// participant's own Leave never goes out and the others wait for the evidence of its end. On
    /// the broadcast transport the farewell is `tx.postMessage` bound to the encoded Leave; over the
    /// log, the log object's own listener (`js/log_channel.js`): no script of ours runs to send it.
    fn arm_farewell(&self, farewell: Option<Message>) {
        let Some(page) = &self.page else {
            return;
        };
        let mut armed = self.farewell.borrow_mut();
        if let Some(listener) = armed.take() {
            let _ = page.remove_event_listener_with_callback_and_bool("pagehide", &listener, true);
        }
        let Some(message) = farewell else {
            return;
        };
        let data = message_to_js(&message);
        let mut listener: Function = if let Some((writer, log_storage)) = &self.log {
            let Some(object) = writer.borrow().object() else {
                return;
            };
            log_storage.farewell(object, &data)
        } else {
            let channels = self.channels.borrow();
            let Some(tx) = channels.as_ref().map(|c| &c.tx) else {
                return;
            };
            let Some(post) = Reflect::get(tx, &"postMessage".into())
                .ok()
                .and_then(|f| f.dyn_into::<Function>().ok())
            else {
                return;
            };
            post.bind1(tx, &data).unchecked_into()
        };
        // A member that stays in the back/forward cache says farewell only when the page goes for good.
        if let Some(unless_persisted) = &self.unless_persisted {
            match call(
                unless_persisted,
                &JsValue::UNDEFINED,
                &listener,
                &JsValue::UNDEFINED,
                &JsValue::UNDEFINED,
            )
            .ok()
            .and_then(|l| l.dyn_into().ok())
            {
                Some(filtered) => listener = filtered,
                None => return,
            }
        }
        if page
            .add_event_listener_with_callback_and_bool("pagehide", &listener, true)
            .is_ok()
        {
            *armed = Some(listener);
        }
    }

    /// The context is going away for good (the Engine is freed): the participant leaves (its `Leave`
    /// goes out, its channels close, its timer and farewell go); the listeners go here.
    pub(super) fn close(&self) {
        self.with_participant(|p, t| p.handle_close(t));
        while let Some((target, kind, closure)) = self.listeners.borrow_mut().pop() {
            let _ = target.remove_event_listener_with_callback_and_bool(
                kind,
                closure.as_ref().unchecked_ref(),
                captures(kind),
            );
        }
    }
}

/// The browser's primitives for the edge loop. The sink's calls hold no borrow: the sink may call back
/// into the Engine, which runs the loop again. The others call only browser functions, which run no
/// script of ours before they return. Each is inlined into the loop's one copy
/// ([`edge::carry_out`]), as the arms of one `match` would be, rather than kept as a function of its
/// own (a call and a function each, in the classic script's wasm).
impl Host for &Coordination {
    #[inline(always)]
    fn participant<R>(&mut self, f: impl FnOnce(&mut Participant) -> R) -> R {
        f(&mut self.participant.borrow_mut())
    }

    #[inline(always)]
    fn evidence<R>(&mut self, f: impl FnOnce(&mut Evidence) -> R) -> R {
        f(&mut self.evidence.borrow_mut())
    }

    #[inline(always)]
    fn state(&self) -> &EdgeState {
        &self.edge
    }

    #[inline(always)]
    fn now(&self) -> u64 {
        now()
    }

    #[inline(always)]
    fn log<R>(&mut self, f: impl FnOnce(&mut LogWriter) -> R) -> Option<R> {
        self.log
            .as_ref()
            .map(|(writer, _)| f(&mut writer.borrow_mut()))
    }

    #[inline(always)]
    fn transmit(&mut self, data: Vec<Value>) {
        if let Some(channels) = &*self.channels.borrow() {
            let _ = channels.tx.post_message(&values_to_js(&data));
        }
    }

    #[inline(always)]
    fn open_channels(&mut self) {
        Coordination::open_channels(self);
    }

    #[inline(always)]
    fn close_channels(&mut self) {
        Coordination::close_channels(self);
    }

    #[inline(always)]
    fn arm_farewell(&mut self, farewell: Option<Message>) {
        Coordination::arm_farewell(self, farewell);
    }

    #[inline(always)]
    fn log_op(&mut self, op: LogOp) {
        if let Some((_, log_storage)) = &self.log {
            log_storage::carry_out(log_storage, op);
        }
    }

    #[inline(always)]
    fn log_unreachable(&mut self) {
        self.refuse(Refusal::Unreachable);
    }

    #[inline(always)]
    fn storage(&mut self, op: StorageOp) {
        evidence::carry_out(&self.storage, op);
    }

    #[inline(always)]
    fn unreachable(&mut self) {
        self.refuse(Refusal::Unreachable);
    }

    #[inline(always)]
    fn register_waits(&mut self) {
        web_sys::console::warn_1(
            &"weblocks: its databases (weblocks-alive:, weblocks-transport) have not opened for 2 s: a \
              page of this origin is deleting them (logout code that deletes every database?), and \
              IndexedDB holds the deletion until every context that holds or waits for a weblocks lock \
              has released. This context's locks wait until then."
                .into(),
        );
    }

    #[inline(never)]
    fn deletion_waits(&mut self, names: &[String]) {
        // Joined by hand: `format!` would bring the formatting machinery into the wasm.
        let mut message = String::from(
            "weblocks: a page of this origin is deleting weblocks' IndexedDB databases (logout code?). \
             IndexedDB holds the deletion until this context has released the locks it holds (",
        );
        for (k, name) in names.iter().enumerate() {
            if k > 0 {
                message.push_str(", ");
            }
            message.push('"');
            message.push_str(name);
            message.push('"');
        }
        message.push_str(
            "): its open database is the evidence that it lives, which keeps its locks. Call close() from \
             weblocks before deleting databases to wait for that.",
        );
        web_sys::console::warn_1(&message.into());
    }

    #[inline(always)]
    fn arm_timer(&mut self, at: u64) -> bool {
        let Some(set_timeout) = &self.set_timeout else {
            return false;
        };
        let delay = at.saturating_sub(now()) as f64;
        let callback: &JsValue = self.timer_callback.as_ref();
        let u = &JsValue::UNDEFINED;
        match call(set_timeout, &JsValue::NULL, callback, &delay.into(), u) {
            Ok(handle) => {
                self.timer.set(Some(handle));
                true
            }
            Err(_) => false,
        }
    }

    #[inline(always)]
    fn cancel_timer(&mut self) {
        if let (Some(handle), Some(clear)) = (self.timer.take(), &self.clear_timeout) {
            let u = &JsValue::UNDEFINED;
            let _ = call(clear, &JsValue::NULL, &handle, u, u);
        }
    }

    #[inline(always)]
    fn queue_microtask(&mut self) -> bool {
        self.queue_microtask.as_ref().is_some_and(|queue| {
            let u = &JsValue::UNDEFINED;
            call(queue, &JsValue::NULL, self.flush_callback.as_ref(), u, u).is_ok()
        })
    }

    #[inline(always)]
    fn granted(&mut self, id: u64) {
        notify(&self.sink, EFFECT_GRANTED, id, &JsValue::UNDEFINED);
    }

    #[inline(always)]
    fn not_available(&mut self, id: u64) {
        notify(&self.sink, EFFECT_NOT_AVAILABLE, id, &JsValue::UNDEFINED);
    }

    #[inline(always)]
    fn stolen(&mut self, id: u64, reason: LossReason) {
        notify(&self.sink, EFFECT_STOLEN, id, &loss_reason(reason).into());
    }

    #[inline(always)]
    fn snapshot(&mut self, query: u64, snapshot: Snapshot) {
        notify(
            &self.sink,
            EFFECT_SNAPSHOT,
            query,
            &snapshot_to_js(&snapshot),
        );
    }

    #[inline(always)]
    fn incompatible(&mut self, version: u32) {
        let message = "weblocks: another context of this origin runs protocol version ".to_owned()
            + &decimal(version)
            + ", newer than this one's; this context gave up its locks and grants nothing more. \
               Reload it.";
        web_sys::console::warn_1(&message.into());
    }
}

/// Whether this edge listens to `kind` in the capture phase: at the target, capture listeners run
/// before the page's own (bubble) listeners, so what the participant sends goes out before any slow
/// page handler. Except `pagehide`, where the farewell ([`Coordination::arm_farewell`]) is the capture
/// listener and must run before the participant's listener, which Firefox may cut short.
fn captures(kind: &str) -> bool {
    kind != "pagehide"
}

/// The decimal digits of `n`, written by hand: no formatting machinery in the wasm.
fn decimal(n: u32) -> String {
    let mut digits = Vec::new();
    let mut n = n;
    loop {
        digits.push(b'0' + (n % 10) as u8);
        n /= 10;
        if n == 0 {
            break;
        }
    }
    digits.iter().rev().map(|&d| char::from(d)).collect()
}

fn loss_reason(reason: LossReason) -> &'static str {
    match reason {
        LossReason::Stolen => "stolen",
        LossReason::Evicted => "evicted",
        LossReason::Reset => "reset",
        LossReason::Retired => "retired",
        LossReason::Hidden => "hidden",
    }
}
