//! The I/O edge of the coordination protocol: carries a [`Node`]'s effects out over BroadcastChannel,
//! localStorage and timers, and feeds it the events of this global scope (messages, timer, storage
//! changes, page lifecycle). It decides nothing; every handler is written so that nothing it receives
//! can throw out of it.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use js_sys::{Array, Function, Reflect};
use wasm_bindgen::prelude::*;
use web_sys::{BroadcastChannel, EventTarget, MessageEvent, Storage, StorageEvent};

#[wasm_bindgen]
extern "C" {
    /// What the edge needs of a channel: a `BroadcastChannel`, or the context's object on the log in
    /// IndexedDB that `js/log_channel.js` makes (`postMessage` appends; its events are entries, the
    /// answers to `start` and `read`, carried messages, pokes and gaps: docs/PROTOCOL.md §12).
    pub(super) type Channel;
    #[wasm_bindgen(method, js_name = postMessage, catch)]
    fn post_message(this: &Channel, data: &JsValue) -> Result<(), JsValue>;
    #[wasm_bindgen(method, setter)]
    fn set_onmessage(this: &Channel, handler: Option<&Function>);
    #[wasm_bindgen(method)]
    fn close(this: &Channel);
    /// Log only: find the log's last key (a `start` event).
    #[wasm_bindgen(method)]
    fn start(this: &Channel);
    /// Log only: read the entries after `after` (`entry` events, then a `read` event with the floor).
    #[wasm_bindgen(method)]
    fn read(this: &Channel, after: f64);
    /// Log only: the `pagehide` listener that posts `data` (the farewell) for the others to append.
    #[wasm_bindgen(method)]
    fn farewell(this: &Channel, data: &JsValue) -> Function;
}

use crate::protocol::wire::{self, Value};
use crate::protocol::{Effect, LIVE_KEY, LossReason, Node, live_record};

use super::engine::{
    EFFECT_GRANTED, EFFECT_NOT_AVAILABLE, EFFECT_SNAPSHOT, EFFECT_STOLEN, call, snapshot_to_js,
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

/// The global's localStorage, if it exists and can be read (it throws when storage is disabled).
fn local_storage(global: &JsValue) -> Option<Storage> {
    // Not checked to be a Storage: reading it throws if it is not, and so it is not used.
    let storage: Storage = global_property(global, "localStorage")?.unchecked_into();
    storage.get_item(LIVE_KEY).ok()?;
    Some(storage)
}

/// A JS function that runs a handler on the coordination: see [`callback`].
type Callback = Closure<dyn FnMut(web_sys::Event)>;

/// An event listener this edge added, kept to be removed on close.
type Listener = (EventTarget, &'static str, Callback);

/// A JS function that runs `handler` on the coordination while it lives (it holds a weak reference:
/// no callback keeps the coordination alive). One closure type for every callback (the timer, the
/// outbox's microtask hops, channel messages, events): one set of closure code in the wasm and the
/// glue. The timer's and the microtask's are called with no event (`undefined`) and ignore it.
fn callback(this: Weak<Coordination>, handler: fn(&Coordination, &web_sys::Event)) -> Callback {
    Closure::new(move |event: web_sys::Event| {
        if let Some(this) = this.upgrade() {
            handler(&this, &event);
        }
    })
}

/// A context's two objects on the origin's channel: a channel object does not receive its own
/// messages; a second one does, in the order the browser delivers them to every context
/// (docs/PROTOCOL.md, assumption A1). Over the log, one object is both: it hands the node every entry,
/// the context's own included.
struct Channels {
    rx: Channel,
    tx: Channel,
}

/// What the handlers share: the node, the I/O objects, and the JS sink of the Engine contract.
pub(super) struct Coordination {
    node: RefCell<Node>,
    /// Open while the node takes part in the protocol (see [`Coordination::carry_out_effects`]).
    channels: RefCell<Option<Channels>>,
    /// The Engine's `openChannel`, where the context coordinates over the log.
    open_channel: Option<Function>,
    /// The first slots of this context's carrier frames (`wire::entry_header`), for `openChannel`.
    entry_header: Array,
    storage: Option<Storage>,
    storage_key: String,
    sink: Function,
    /// The armed timer: its handle and when it fires.
    timer: Cell<Option<(JsValue, u64)>>,
    timer_callback: Callback,
    /// The global's `setTimeout` and `clearTimeout`, looked up once.
    set_timeout: Option<Function>,
    clear_timeout: Option<Function>,
    listeners: RefCell<Vec<Listener>>,
    on_message: Callback,
    /// The node's farewell as a `pagehide` listener that runs no script of ours: the channel's own
    /// `postMessage` bound to the encoded Leave, with the incarnation it was made for
    /// (see [`Node::farewell`] and [`Coordination::arm_farewell`]).
    farewell: RefCell<Option<(u32, Function)>>,
    /// The global object where it has page lifecycle events (a Window): workers and Node.js have no
    /// `pagehide`, and there the farewell is never armed.
    page: Option<EventTarget>,
    warned: Cell<bool>,
    /// Node.js only: whether the channels keep the process alive (see [`Coordination::keep_alive`]).
    referenced: Cell<bool>,
    /// The channel's name: a deputy listens on this name, `#`, and its page's client id.
    channel: String,
    /// Hands a message to this page's deputy (`js/deputy.js`), which posts it on the channel and then
    /// relays every message of its own channel there; `undefined` ends it. None where the JS side
    /// made no deputy (workers, Node.js).
    deputy: Option<Function>,
    /// The incarnation whose announcement the deputy was given.
    announced: Cell<Option<u32>>,
    /// Channels to other pages' deputies, most recently used last (a few: pings go to blockers).
    /// (BroadcastChannels, used as `Channel`s: one set of postMessage and close bindings for both.)
    deputies: RefCell<Vec<(Rc<str>, Channel)>>,
    /// Messages the node posted in this task, not sent yet (see [`Coordination::send_later`]), and the
    /// microtask hops left before they go.
    outbox: RefCell<Vec<wire::Message>>,
    outbox_hops: Cell<u32>,
    flush_callback: Callback,
    /// The global's `queueMicrotask`, looked up once (every post takes a few hops through it); engines
    /// before it (Chrome 71, Safari 12.1) send each post at once.
    queue_microtask: Option<Function>,
    /// The global object of the context this edge serves (the Engine's `global`).
    global: JsValue,
}

/// The events of a log channel (`js/log_channel.js`) are told apart by the first letter of their type,
/// which differs from a BroadcastChannel message's (`message`): `entry`, `start`, `read`, `carried`,
/// `poke`, and `gap` (a post failed, or the log's database went away: messages were lost).
const ENTRY: u8 = b'e';
const START: u8 = b's';
const READ: u8 = b'r';
const CARRIED: u8 = b'c';
const POKE: u8 = b'p';
const GAP: u8 = b'g';

/// How many microtask hops the outbox waits before it is sent: enough for a release and the request a
/// loop makes right after it (a few promise reactions apart) to go as one message.
const OUTBOX_HOPS: u32 = 4;

/// How many channels to other pages' deputies stay open.
const DEPUTY_CHANNELS: usize = 4;

impl Coordination {
    /// Starts coordinating over the channels `open_channel(name)` makes, or where it is `None`, over
    /// BroadcastChannel; `None` where there is neither.
    pub(super) fn start(
        node: Node,
        sink: Function,
        scope: Option<String>,
        deputy: Option<Function>,
        open_channel: Option<Function>,
        global: JsValue,
    ) -> Option<Rc<Coordination>> {
        let channel = match &scope {
            Some(s) => CHANNEL.to_owned() + ":" + s,
            None => CHANNEL.to_owned(),
        };
        let entry_header = values_to_js(&wire::entry_header(&node.member_key(), node.version()));
        let channels = open_channels(&global, &channel, open_channel.as_ref(), &entry_header)?;
        let storage_key = match &scope {
            Some(s) => LIVE_KEY.to_owned() + ":" + s,
            None => LIVE_KEY.to_owned(),
        };
        let this = Rc::new_cyclic(|weak: &Weak<Coordination>| Coordination {
            node: RefCell::new(node),
            channels: RefCell::new(Some(channels)),
            open_channel,
            entry_header,
            storage: local_storage(&global),
            storage_key,
            sink,
            timer: Cell::new(None),
            set_timeout: global_function(&global, "setTimeout"),
            clear_timeout: global_function(&global, "clearTimeout"),
            timer_callback: callback(weak.clone(), |this, _| {
                this.timer.set(None);
                this.with_node(|n, t| n.timer(t));
            }),
            listeners: RefCell::new(Vec::new()),
            on_message: callback(weak.clone(), |this, event| this.on_message(event)),
            farewell: RefCell::new(None),
            page: Reflect::has(&global, &"onpagehide".into())
                .unwrap_or(false)
                .then(|| global.clone().unchecked_into()),
            warned: Cell::new(false),
            referenced: Cell::new(true),
            channel,
            deputy,
            announced: Cell::new(None),
            deputies: RefCell::new(Vec::new()),
            outbox: RefCell::new(Vec::new()),
            outbox_hops: Cell::new(0),
            queue_microtask: global_function(&global, "queueMicrotask"),
            flush_callback: callback(weak.clone(), |this, _| this.flush_later()),
            global,
        });
        if let Some(channels) = &*this.channels.borrow() {
            this.listen_to(channels);
        }
        this.install_handlers();
        this.keep_alive(false);
        if let Some(storage) = &this.storage {
            let value = storage.get_item(&this.storage_key).ok().flatten();
            this.with_node(|n, t| n.storage_changed(t, LIVE_KEY, value.as_deref()));
        }
        // Closes the BroadcastChannels until the node first joins (it is detached): opening them
        // showed that the global can.
        this.carry_out_effects();
        Some(this)
    }

    /// Hands the receiving object's messages to the node.
    fn listen_to(&self, channels: &Channels) {
        channels
            .rx
            .set_onmessage(Some(self.on_message.as_ref().unchecked_ref()));
    }

    /// A message of the BroadcastChannel, or an event of the log. Every event that carries data is
    /// dropped if the data is not a flat array of numbers and strings.
    fn on_message(&self, event: &web_sys::Event) {
        let kind = event.type_().as_bytes().first().copied().unwrap_or(0);
        let key = Reflect::get(event, &"key".into())
            .ok()
            .and_then(|k| k.as_f64())
            .unwrap_or(0.0) as u64;
        let values = match kind {
            START | READ | POKE | GAP => Vec::new(),
            _ => match decode_values(&event.unchecked_ref::<MessageEvent>().data()) {
                Some(values) => values,
                None => return,
            },
        };
        self.with_node(|n, t| match kind {
            ENTRY => n.log_entry(t, key, &values),
            START => n.log_started(t, key),
            READ => n.log_read_done(t, key),
            CARRIED => n.carried(t, &values),
            POKE => n.log_poked(t),
            GAP => n.missed_messages(t),
            _ => n.deliver(t, &values),
        });
    }

    /// Opens the channel objects again if they were closed, for a node that (re)enters the protocol:
    /// before its `Join` is posted, so the receiving object gets its echo (over the log: before the
    /// node starts reading it). Where that fails (it did not at start), nothing is posted: the node waits
    /// and, with no echo, starts no history.
    fn reopen_channels(&self) {
        if self.channels.borrow().is_some() {
            return;
        }
        if let Some(channels) = open_channels(
            &self.global,
            &self.channel,
            self.open_channel.as_ref(),
            &self.entry_header,
        ) {
            self.listen_to(&channels);
            // New channels keep a Node.js process alive until unref'd (see `keep_alive`).
            self.referenced.set(true);
            *self.channels.borrow_mut() = Some(channels);
        }
    }

    /// Closes the channels of a node out of the protocol (never joined, made way, left, hidden,
    /// retired): its replica is gone and it would only be woken by every message of the origin, on
    /// every lock handoff of every other context, for nothing. The node ignores messages until it joins
    /// again, and then listens from its `Join` on, as a new context does.
    fn shut_channels(&self) {
        if let Some(channels) = self.channels.borrow_mut().take() {
            channels.rx.set_onmessage(None);
            channels.tx.close();
            channels.rx.close();
        }
    }

    fn install_handlers(self: &Rc<Self>) {
        let global: EventTarget = self.global.clone().unchecked_into();
        if self.storage.is_some() {
            self.listen(&global, "storage", |this, event| {
                // Only a StorageEvent has a `key` (a page may dispatch another event named `storage`,
                // which must not read as a cleared storage): a lookup, not an instanceof import.
                if !Reflect::has(event, &"key".into()).unwrap_or(false) {
                    return;
                }
                let event = event.unchecked_ref::<StorageEvent>();
                let key = event.key();
                // `key` is null when another context cleared the whole storage.
                if key.is_none() || key.as_deref() == Some(this.storage_key.as_str()) {
                    let value = event.new_value();
                    this.with_node(|n, t| n.storage_changed(t, LIVE_KEY, value.as_deref()));
                }
            });
        }
        self.listen(&global, "pagehide", |this, event| {
            let persisted = persisted(event);
            this.with_node(|n, t| n.pagehide(t, persisted));
        });
        self.listen(&global, "pageshow", |this, event| {
            let persisted = persisted(event);
            this.with_node(|n, t| n.pageshow(t, persisted));
        });
        if let Some(document) =
            // Not checked to be an EventTarget: listening to it would fail, and nothing be listened to.
            global_property(&self.global, "document")
                .map(JsCast::unchecked_into::<EventTarget>)
        {
            self.listen(&document, "freeze", |this, _| {
                this.with_node(|n, t| n.freeze(t))
            });
            self.listen(&document, "resume", |this, _| {
                this.with_node(|n, t| n.resume(t))
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

    /// Runs one event through the node, then carries out its effects with the node released (the sink
    /// may call back into the engine).
    pub(super) fn with_node<R>(&self, f: impl FnOnce(&mut Node, u64) -> R) -> R {
        let result = f(&mut self.node.borrow_mut(), now());
        self.carry_out_effects();
        result
    }

    /// The part of [`Coordination::with_node`] common to every event, kept out of line: inlined, it was
    /// copied into each of the dozen events' callers (~4 KB of wasm).
    #[inline(never)]
    fn carry_out_effects(&self) {
        let (effects, busy, farewell, announcement) = {
            let mut node = self.node.borrow_mut();
            (
                node.drain(),
                !node.is_quiet(),
                node.farewell(),
                node.deputy_announcement(),
            )
        };
        let left = farewell.is_none();
        if !left {
            self.reopen_channels();
        }
        self.keep_alive(busy);
        self.arm_farewell(farewell);
        self.brief_deputy(announcement);
        // Messages first: a closing tab's `pagehide` handler may be cut short (Firefox stops it about a
        // millisecond in), and its Leave must get out before the slower storage call: a context that
        // has just left sends its outbox at once.
        // Over the log, the read that starts it (`OpenLog`) must be made before the Join that follows.
        let mut rest = Vec::new();
        for effect in effects {
            if matches!(effect, Effect::Post(_) | Effect::OpenLog) {
                self.carry_out(effect);
            } else {
                rest.push(effect);
            }
        }
        if left {
            self.flush();
            self.shut_channels();
        }
        for effect in rest {
            self.carry_out(effect);
        }
    }

    /// Keeps the node's farewell ready as a `pagehide` listener. Firefox may stop a closing tab's
    /// `pagehide` listener as soon as it calls into wasm (the listeners after it still run), and then
    /// the node's own Leave never goes out and the others wait for eviction instead of 100 ms. The
    /// farewell is `tx.postMessage` bound to the encoded Leave: no script of ours runs to send it.
    /// Re-armed only when the incarnation changes (a Leave is applied by its sender alone).
    fn arm_farewell(&self, farewell: Option<wire::Message>) {
        let Some(page) = &self.page else {
            return;
        };
        let incarnation = farewell.as_ref().map(|m| m.sender.incarnation);
        let mut armed = self.farewell.borrow_mut();
        if armed.as_ref().map(|(i, _)| *i) == incarnation {
            return;
        }
        if let Some((_, listener)) = armed.take() {
            let _ = page.remove_event_listener_with_callback_and_bool("pagehide", &listener, true);
        }
        let Some(message) = farewell else {
            return;
        };
        let channels = self.channels.borrow();
        let Some(tx) = channels.as_ref().map(|c| &c.tx) else {
            return;
        };
        let data = message_to_js(&message);
        let listener: Function = if self.open_channel.is_some() {
            tx.farewell(&data)
        } else {
            let Some(post) = Reflect::get(tx, &"postMessage".into())
                .ok()
                .and_then(|f| f.dyn_into::<Function>().ok())
            else {
                return;
            };
            post.bind1(tx, &data).unchecked_into()
        };
        if page
            .add_event_listener_with_callback_and_bool("pagehide", &listener, true)
            .is_ok()
        {
            *armed = Some((message.sender.incarnation, listener));
        }
    }

    /// Queues `message` to go with the others this task posts: one channel message (a batch) instead
    /// of several, so a release and the request that follows it cost the origin one delivery in each
    /// context. Sent a few microtask hops later, still within this task (nothing of another task can
    /// run first), in order; where no microtask can be queued, at once.
    fn send_later(&self, message: wire::Message) {
        let first = {
            let mut outbox = self.outbox.borrow_mut();
            outbox.push(message);
            outbox.len() == 1
        };
        if !first {
            return;
        }
        self.outbox_hops.set(OUTBOX_HOPS);
        if !self.queue_flush() {
            self.flush();
        }
    }

    /// Queues the next hop of the outbox's wait; false where no microtask can be queued.
    fn queue_flush(&self) -> bool {
        self.queue_microtask.as_ref().is_some_and(|queue| {
            let u = &JsValue::UNDEFINED;
            call(queue, &JsValue::NULL, self.flush_callback.as_ref(), u, u).is_ok()
        })
    }

    fn flush_later(&self) {
        let hops = self.outbox_hops.get().saturating_sub(1);
        self.outbox_hops.set(hops);
        if hops == 0 || !self.queue_flush() {
            self.flush();
        }
    }

    /// Sends the outbox: one message as is, several as a batch (`wire::encode_batch`).
    fn flush(&self) {
        let messages = std::mem::take(&mut *self.outbox.borrow_mut());
        let data = match messages.len() {
            0 => return,
            1 => message_to_js(&messages[0]),
            _ => values_to_js(&wire::encode_batch(&messages)),
        };
        if let Some(channels) = &*self.channels.borrow() {
            let _ = channels.tx.post_message(&data);
        }
    }

    /// Gives this page's deputy the announcement of each new membership (docs/PROTOCOL.md, "the
    /// deputy"): the deputy posts it, and from then on the others wait less before evicting this page.
    fn brief_deputy(&self, announcement: Option<wire::Message>) {
        let (Some(deputy), Some(message)) = (&self.deputy, announcement) else {
            return;
        };
        let incarnation = Some(message.sender.incarnation);
        if self.announced.replace(incarnation) != incarnation {
            let own = self.deputy_channel_name(&message.sender.client);
            let _ = call(
                deputy,
                &JsValue::NULL,
                &JsValue::from_str(&self.channel),
                &JsValue::from_str(&own),
                &message_to_js(&message),
            );
        }
    }

    fn deputy_channel_name(&self, client: &str) -> String {
        self.channel.clone() + "#" + client
    }

    /// Asks the deputy of the page of `vouch.sender` to post `vouch`, on that deputy's channel.
    fn wake_deputy(&self, vouch: &wire::Message) {
        let mut deputies = self.deputies.borrow_mut();
        let client = &vouch.sender.client;
        let channel = match deputies.iter().position(|(c, _)| c == client) {
            Some(k) => deputies.remove(k).1,
            None => match BroadcastChannel::new(&self.deputy_channel_name(client)) {
                Ok(channel) => channel.unchecked_into::<Channel>(),
                Err(_) => return,
            },
        };
        let _ = channel.post_message(&message_to_js(vouch));
        deputies.push((client.clone(), channel));
        if deputies.len() > DEPUTY_CHANNELS {
            deputies.remove(0).1.close();
        }
    }

    fn carry_out(&self, effect: Effect) {
        match effect {
            Effect::Post(message) => self.send_later(message),
            Effect::StorageWrite { value, .. } => {
                if let Some(storage) = &self.storage {
                    let _ = storage.set_item(&self.storage_key, &value);
                }
            }
            Effect::StorageRemove { .. } => {
                if let Some(storage) = &self.storage {
                    let _ = storage.remove_item(&self.storage_key);
                }
            }
            Effect::SetTimer { at } => self.set_timer(at),
            Effect::ClearTimer => self.clear_timer(),
            Effect::Granted(id) => self.notify(EFFECT_GRANTED, id, &JsValue::UNDEFINED),
            Effect::NotAvailable(id) => self.notify(EFFECT_NOT_AVAILABLE, id, &JsValue::UNDEFINED),
            Effect::Stolen { id, reason } => {
                self.notify(EFFECT_STOLEN, id, &loss_reason(reason).into())
            }
            Effect::Snapshot { query, snapshot } => {
                self.notify(EFFECT_SNAPSHOT, query, &snapshot_to_js(&snapshot))
            }
            Effect::WakeDeputy(vouch) => self.wake_deputy(&vouch),
            Effect::OpenLog => {
                self.reopen_channels();
                if let Some(channels) = &*self.channels.borrow() {
                    channels.rx.start();
                }
            }
            Effect::ReadLog { after } => {
                if let Some(channels) = &*self.channels.borrow() {
                    channels.rx.read(after as f64);
                }
            }
            Effect::Incompatible { version } => {
                if !self.warned.replace(true) {
                    // The number written by the storage hint's formatter: no formatting machinery.
                    let message = "weblocks: another context of this origin runs protocol version "
                        .to_owned()
                        + &live_record::format(version.into())
                        + ", newer than this one's; this context gave up its locks and grants nothing \
                           more. Reload it.";
                    web_sys::console::warn_1(&message.into());
                }
            }
        }
    }

    /// In Node.js a BroadcastChannel keeps the process alive until it is unref'd: keep it referenced
    /// exactly while this context holds, waits or queries, so a pending request is not cut off and an
    /// idle import lets the process exit. (Browsers have no `ref`/`unref`: nothing happens there.)
    fn keep_alive(&self, busy: bool) {
        if self.referenced.replace(busy) == busy {
            return;
        }
        let method = if busy { "ref" } else { "unref" };
        let channels = self.channels.borrow();
        let Some(channels) = channels.as_ref() else {
            return;
        };
        for channel in [&channels.tx, &channels.rx] {
            if let Ok(f) = Reflect::get(channel, &method.into())
                && let Some(f) = f.dyn_ref::<Function>()
            {
                let u = &JsValue::UNDEFINED;
                let _ = call(f, channel, u, u, u);
            }
        }
    }

    fn notify(&self, kind: u32, id: u64, payload: &JsValue) {
        let _ = call(
            &self.sink,
            &JsValue::NULL,
            &kind.into(),
            &(id as f64).into(),
            payload,
        );
    }

    /// Arms the timer for `at`. A timer already armed to fire no later is kept: firing early only makes
    /// the node look at its deadlines once more (and arm the next), and a waiting context, whose ping
    /// deadline moves later with every message of the member it waits for, saves a clearTimeout and a
    /// setTimeout per message.
    fn set_timer(&self, at: u64) {
        match self.timer.take() {
            Some(armed) if armed.1 <= at => {
                self.timer.set(Some(armed));
                return;
            }
            Some((handle, _)) => self.cancel_timer(&handle),
            None => {}
        }
        let Some(set_timeout) = &self.set_timeout else {
            return;
        };
        let delay = at.saturating_sub(now()) as f64;
        let callback: &JsValue = self.timer_callback.as_ref();
        let u = &JsValue::UNDEFINED;
        if let Ok(handle) = call(set_timeout, &JsValue::NULL, callback, &delay.into(), u) {
            self.timer.set(Some((handle, at)));
        }
    }

    fn clear_timer(&self) {
        if let Some((handle, _)) = self.timer.take() {
            self.cancel_timer(&handle);
        }
    }

    fn cancel_timer(&self, handle: &JsValue) {
        if let Some(clear) = &self.clear_timeout {
            let u = &JsValue::UNDEFINED;
            let _ = call(clear, &JsValue::NULL, handle, u, u);
        }
    }

    /// The context is going away for good (the Engine is freed): leave, close the channels.
    pub(super) fn close(&self) {
        self.with_node(|n, t| n.terminate(t));
        self.flush();
        self.clear_timer();
        self.arm_farewell(None);
        self.shut_channels();
        // Popped (the order does not matter), not drained: no Drain code for these vectors.
        while let Some((_, channel)) = self.deputies.borrow_mut().pop() {
            channel.close();
        }
        if let Some(deputy) = &self.deputy {
            let u = &JsValue::UNDEFINED;
            let _ = call(deputy, &JsValue::NULL, u, u, u);
        }
        while let Some((target, kind, closure)) = self.listeners.borrow_mut().pop() {
            let _ = target.remove_event_listener_with_callback_and_bool(
                kind,
                closure.as_ref().unchecked_ref(),
                captures(kind),
            );
        }
    }
}

/// Opens a context's channel objects on `name`: its object on the log where `open_channel` is given
/// (`header` begins its carrier frames), else two BroadcastChannels; `None` where there is neither.
fn open_channels(
    global: &JsValue,
    name: &str,
    open_channel: Option<&Function>,
    header: &Array,
) -> Option<Channels> {
    if let Some(open) = open_channel {
        let log: Channel = call(
            open,
            &JsValue::NULL,
            &JsValue::from_str(name),
            header,
            &JsValue::UNDEFINED,
        )
        .ok()
        .filter(|c| c.is_object())?
        .unchecked_into();
        return Some(Channels {
            tx: log.clone().unchecked_into(),
            rx: log,
        });
    }
    global_property(global, "BroadcastChannel")?;
    let open =
        || -> Option<Channel> { BroadcastChannel::new(name).ok().map(JsCast::unchecked_into) };
    // The receiving object is made first: a context's objects get each message in the order they were
    // made, so the one that acts on it does not wait behind the sending one's delivery (a task that
    // does nothing).
    let rx = open()?;
    let tx = open()?;
    Some(Channels { rx, tx })
}

/// Whether this edge listens to `kind` in the capture phase: at the target, capture listeners run
/// before the page's own (bubble) listeners, so what the node sends goes out before any slow page
/// handler. Except `pagehide`, where the farewell ([`Coordination::arm_farewell`]) is the capture
/// listener and must run before the node's listener, which Firefox may cut short.
fn captures(kind: &str) -> bool {
    kind != "pagehide"
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

fn message_to_js(message: &wire::Message) -> Array {
    values_to_js(&wire::encode(message))
}

fn values_to_js(values: &[Value]) -> Array {
    // Loops over plain indices and pushes, here and in the lease edge: no iterator adapters over
    // JS arrays in the wasm.
    let array = Array::new();
    for value in values {
        array.push(&value_to_js(value));
    }
    array
}

fn value_to_js(value: &Value) -> JsValue {
    match value {
        Value::Num(n) => JsValue::from_f64(*n),
        Value::Str(s) => JsValue::from_str(s),
    }
}

/// A message's data as wire values; `None` for anything that is not a flat array of numbers and
/// strings (other libraries may share the channel name; hostile peers may send anything).
fn decode_values(data: &JsValue) -> Option<Vec<Value>> {
    if !Array::is_array(data) {
        return None;
    }
    let array: &Array = data.unchecked_ref();
    if array.length() > 100_000 {
        return None;
    }
    // A loop, not `collect::<Option<Vec<_>>>()`, whose adapters cost ~0.3 KB of wasm.
    let mut values = Vec::with_capacity(array.length() as usize);
    for i in 0..array.length() {
        let v = array.get(i);
        values.push(match v.as_f64() {
            Some(n) => Value::Num(n),
            None => Value::Str(v.as_string()?),
        });
    }
    Some(values)
}
