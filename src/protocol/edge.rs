//! The edge loop: what every edge does with a [`Participant`]'s effects, generic over the [`Host`] that
//! gives it its primitives (the browser's in `src/wasm/coordination.rs`, the simulated origin's in
//! `tests/protocol_sim/world/host.rs`), so that the simulation runs the same policies as a browser.
//!
//! After every input ([`input`]), the loop carries out the participant's effects in order until there
//! are none, then arms the host's timer for the participant's next deadline
//! ([`Participant::poll_timeout`]). Three policies live here, not in the participant, because they are
//! about the host's primitives rather than the protocol:
//! - **Flush hops**: a [`Effect::FlushSoon`] waits [`FLUSH_HOPS`] microtask hops before
//!   [`Participant::handle_flush`], so that the messages the current task still queues go in the same
//!   channel message; where the host can queue no microtask it flushes at once.
//! - **Keep an earlier timer**: a timer already armed to fire no later than the participant's next
//!   deadline is kept. Firing early only makes the participant look at its deadlines once more (and the
//!   loop arm the next one); a waiting context, whose ping deadline moves later with every message of
//!   the member it waits for, saves a cancel and an arm per message.
//! - **Deputy channels**: [`Effect::WakeDeputy`] posts on a channel to the pinged page's deputy; the
//!   [`DEPUTY_CHANNELS`] most recently used stay open (pings go to the few contexts that block this
//!   one).
//!
//! # Re-entrancy
//!
//! A host call may run another input through the loop before it returns (in a browser, the Engine's sink
//! runs JS that calls the Engine again). So the loop holds no borrow of the participant nor of its own
//! state across a host call: [`Host::participant`] lends the participant for one call at a time, and the
//! loop's state ([`EdgeState`]) is in cells, each read or written between host calls. The inner run
//! carries out the effects the inner input made, in order after those the outer run already carried
//! out, and arms the timer; the outer run then finds no effect left and arms the same timer.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use super::participant::{Effect, LossReason, Participant};
use super::wire::{self, Message, Value};
use crate::scheduler::Snapshot;

/// How many microtask hops a flush waits: enough for a release and the request a loop makes right
/// after it (a few promise reactions apart) to go as one message.
pub const FLUSH_HOPS: u32 = 4;

/// How many channels to other pages' deputies stay open.
pub const DEPUTY_CHANNELS: usize = 4;

/// What an edge gives the loop: its participant, the clock, and one method per primitive the effects
/// need. Each primitive is carried out as the effect's doc ([`Effect`]) says; the loop decides when.
pub trait Host {
    /// The host's handle of a channel to another page's deputy.
    type DeputyChannel;

    /// Runs `f` on the participant. Called for one participant call at a time, never across a host
    /// call, so that a host call may itself run an input through the loop.
    fn participant<R>(&mut self, f: impl FnOnce(&mut Participant) -> R) -> R;
    /// The loop's own state, which the host keeps (beside its participant).
    fn state(&self) -> &EdgeState<Self::DeputyChannel>;
    /// The wall-clock time in ms (`Date.now()`).
    fn now(&self) -> u64;

    /// Told of each effect before it is carried out: a simulator records them; a browser does nothing.
    fn carrying_out(&mut self, _effect: &Effect) {}

    /// [`Effect::Transmit`]: post `data`, the encoded `messages`, as one channel message (one append
    /// over the log).
    fn transmit(&mut self, messages: &[Message], data: Vec<Value>);
    /// [`Effect::OpenChannels`].
    fn open_channels(&mut self);
    /// [`Effect::CloseChannels`].
    fn close_channels(&mut self);
    /// [`Effect::ArmFarewell`].
    fn arm_farewell(&mut self, farewell: Option<Message>);
    /// [`Effect::Announce`]: hand the announcement to this page's deputy, if it has one.
    fn brief_deputy(&mut self, announcement: &Message);
    /// Opens a channel to the deputy of the page of `client` (`None`: it cannot).
    fn open_deputy(&mut self, client: &str) -> Option<Self::DeputyChannel>;
    /// Posts `vouch` on a channel to a deputy.
    fn post_deputy(&mut self, channel: &Self::DeputyChannel, vouch: &Message);
    /// Closes a channel to a deputy.
    fn close_deputy(&mut self, channel: Self::DeputyChannel);
    /// [`Effect::ReadLog`].
    fn read_log(&mut self, after: u64);
    /// [`Effect::TrimLog`].
    fn trim_log(&mut self, upto: u64);
    /// [`Effect::OpenAlive`].
    fn open_alive(&mut self);
    /// [`Effect::CloseAlive`].
    fn close_alive(&mut self);
    /// [`Effect::Census`].
    fn census(&mut self);
    /// [`Effect::Watch`].
    fn watch(&mut self, client: Rc<str>, watch: u64);
    /// [`Effect::StorageWrite`].
    fn write_storage(&mut self, value: String);
    /// [`Effect::StorageRemove`].
    fn remove_storage(&mut self);
    /// Arms the host's timer to call [`timeout`] at (or after) `at` (the loop cancels an armed one
    /// first); false where it cannot.
    fn arm_timer(&mut self, at: u64) -> bool;
    /// Cancels the armed timer.
    fn cancel_timer(&mut self);
    /// Queues a microtask that calls [`microtask`]; false where the host cannot.
    fn queue_microtask(&mut self) -> bool;
    /// Engine sink: [`Effect::Granted`].
    fn granted(&mut self, id: u64);
    /// Engine sink: [`Effect::NotAvailable`].
    fn not_available(&mut self, id: u64);
    /// Engine sink: [`Effect::Stolen`].
    fn stolen(&mut self, id: u64, reason: LossReason);
    /// Engine sink: [`Effect::Snapshot`].
    fn snapshot(&mut self, query: u64, snapshot: Snapshot);
    /// [`Effect::Incompatible`], once per context: say so (in a browser, in the console).
    fn incompatible(&mut self, version: u32);
}

/// The loop's state, kept by the host. In cells: see "Re-entrancy" in the module docs.
pub struct EdgeState<C> {
    /// The microtask hops left before the participant's queued messages go.
    flush_hops: Cell<u32>,
    /// When the armed timer fires (as asked; the host may fire it later).
    timer: Cell<Option<u64>>,
    /// Channels to other pages' deputies by client id, most recently used last.
    deputies: RefCell<Vec<(Rc<str>, C)>>,
    /// The incompatibility was told.
    warned: Cell<bool>,
}

impl<C> Default for EdgeState<C> {
    fn default() -> Self {
        EdgeState {
            flush_hops: Cell::new(0),
            timer: Cell::new(None),
            deputies: RefCell::new(Vec::new()),
            warned: Cell::new(false),
        }
    }
}

impl<C> EdgeState<C> {
    /// When the armed timer fires (as asked), if one is armed.
    pub fn timer(&self) -> Option<u64> {
        self.timer.get()
    }

    /// How many channels to deputies are open.
    pub fn deputy_channels(&self) -> usize {
        self.deputies.borrow().len()
    }
}

/// Runs one input through the participant (`f`, given the time), then carries out its effects.
pub fn input<H: Host, R>(host: &mut H, f: impl FnOnce(&mut Participant, u64) -> R) -> R {
    let now = host.now();
    let result = host.participant(|p| f(p, now));
    carry_out(host);
    result
}

/// The host's timer fired: the participant looks at its deadlines.
pub fn timeout<H: Host>(host: &mut H) {
    host.state().timer.set(None);
    input(host, |p, now| p.handle_timeout(now));
}

/// A microtask the loop queued ran: one hop of a flush's wait. Still within the task that queued the
/// messages (nothing of another task can run first), so they go in order, after whatever that task
/// still sends.
pub fn microtask<H: Host>(host: &mut H) {
    let hops = host.state().flush_hops.get().saturating_sub(1);
    host.state().flush_hops.set(hops);
    if hops == 0 || !host.queue_microtask() {
        input(host, |p, _| p.handle_flush());
    }
}

/// Closes every channel to a deputy (the context goes away).
pub fn close_deputies<H: Host>(host: &mut H) {
    // Popped one at a time: no borrow of the state across the host call.
    loop {
        let popped = host.state().deputies.borrow_mut().pop();
        let Some((_, channel)) = popped else {
            return;
        };
        host.close_deputy(channel);
    }
}

/// Carries out the participant's effects in order, then arms the timer for its next deadline. Kept out
/// of line, so that every input of an edge shares one copy.
#[inline(never)]
pub fn carry_out<H: Host>(host: &mut H) {
    while let Some(effect) = host.participant(Participant::poll_effect) {
        host.carrying_out(&effect);
        carry_out_one(host, effect);
    }
    arm_timer(host);
}

fn carry_out_one<H: Host>(host: &mut H, effect: Effect) {
    match effect {
        Effect::FlushSoon => {
            host.state().flush_hops.set(FLUSH_HOPS);
            if !host.queue_microtask() {
                host.participant(Participant::handle_flush);
            }
        }
        Effect::Transmit(messages) => {
            let version = host.participant(|p| p.version());
            let data = wire::encode_transmit(&messages, version);
            host.transmit(&messages, data);
        }
        Effect::OpenChannels => host.open_channels(),
        Effect::CloseChannels => host.close_channels(),
        Effect::ArmFarewell(farewell) => host.arm_farewell(farewell),
        Effect::Announce(announcement) => host.brief_deputy(&announcement),
        Effect::WakeDeputy(vouch) => wake_deputy(host, &vouch),
        Effect::ReadLog { after } => host.read_log(after),
        Effect::TrimLog { upto } => host.trim_log(upto),
        Effect::OpenAlive => host.open_alive(),
        Effect::CloseAlive => host.close_alive(),
        Effect::Census => host.census(),
        Effect::Watch { client, watch } => host.watch(client, watch),
        Effect::StorageWrite { value } => host.write_storage(value),
        Effect::StorageRemove => host.remove_storage(),
        Effect::Granted(id) => host.granted(id),
        Effect::NotAvailable(id) => host.not_available(id),
        Effect::Stolen { id, reason } => host.stolen(id, reason),
        Effect::Snapshot { query, snapshot } => host.snapshot(query, snapshot),
        Effect::Incompatible { version } => {
            if !host.state().warned.replace(true) {
                host.incompatible(version);
            }
        }
    }
}

/// Asks the deputy of the page of `vouch.sender` to post `vouch`, on that deputy's channel, kept open
/// among the most recently used.
fn wake_deputy<H: Host>(host: &mut H, vouch: &Message) {
    let client = &vouch.sender.client;
    let cached = {
        let mut deputies = host.state().deputies.borrow_mut();
        let k = deputies.iter().position(|(c, _)| c == client);
        k.map(|k| deputies.remove(k).1)
    };
    let Some(channel) = cached.or_else(|| host.open_deputy(client)) else {
        return;
    };
    host.post_deputy(&channel, vouch);
    let evicted = {
        let mut deputies = host.state().deputies.borrow_mut();
        deputies.push((client.clone(), channel));
        (deputies.len() > DEPUTY_CHANNELS).then(|| deputies.remove(0).1)
    };
    if let Some(channel) = evicted {
        host.close_deputy(channel);
    }
}

/// Arms the host's timer for the participant's next deadline, keeping one armed to fire no later.
fn arm_timer<H: Host>(host: &mut H) {
    let next = host.participant(|p| p.poll_timeout());
    let armed = host.state().timer.get();
    match (armed, next) {
        (Some(armed), Some(next)) if armed <= next => return,
        (None, None) => return,
        (Some(_), _) => {
            host.state().timer.set(None);
            host.cancel_timer();
        }
        (None, Some(_)) => {}
    }
    if let Some(at) = next
        && host.arm_timer(at)
    {
        host.state().timer.set(Some(at));
    }
}

#[cfg(test)]
mod tests;
