//! The edge loop: what every edge does with a [`Participant`]'s effects, generic over the [`Host`] that
//! gives it its primitives (the browser's in `src/wasm/coordination.rs`, the simulated origin's in
//! `tests/protocol_sim/world/host.rs`), so that the simulation runs the same policies as a browser.
//!
//! After every input ([`input`], [`storage`]), the loop carries out the participant's effects in order
//! until there are none, then arms the host's timer for the next deadline of the participant
//! ([`Participant::poll_timeout`]) and of its evidence ([`Evidence::poll_timeout`]). The participant's
//! evidence effects (`OpenAlive`, `CloseAlive`, `EndAlive`, `Census`, `Watch`) go to the [`Evidence`] machine the
//! host keeps beside it, whose storage operations the host carries out ([`Host::storage`]) and whose
//! findings the loop hands to the participant: so the evidence's bookkeeping (retries, the register,
//! what to watch and collect) runs in the simulation as in a browser. Over the log, the participant's
//! `Transmit`, `ReadLog`, `TrimLog`, `OpenChannels` and `CloseChannels` also go to the host's
//! [`LogWriter`] ([`Host::log`]), whose operations the host carries out ([`Host::log_op`]), its answers
//! coming back through [`log_event`], and whose findings the loop hands to the participant. Two policies live here, not in
//! the participant, because they are about the host's primitives rather than the protocol:
//! - **Flush hops**: a [`Effect::FlushSoon`] waits [`FLUSH_HOPS`] microtask hops before
//!   [`Participant::handle_flush`], so that the messages the current task still queues go in the same
//!   channel message; where the host can queue no microtask it flushes at once.
//! - **Keep an earlier timer**: a timer already armed to fire no later than the participant's next
//!   deadline is kept. Firing early only makes the participant look at its deadlines once more (and the
//!   loop arm the next one), and saves a cancel and an arm each time a deadline moves later.
//!
//! # Re-entrancy
//!
//! A host call may run another input through the loop before it returns (in a browser, the Engine's sink
//! runs JS that calls the Engine again). So the loop holds no borrow of the participant nor of its own
//! state across a host call: [`Host::participant`] lends the participant for one call at a time, and the
//! loop's state ([`EdgeState`]) is in cells, each read or written between host calls. The inner run
//! carries out the effects the inner input made, in order after those the outer run already carried
//! out, and arms the timer; the outer run then finds no effect left and arms the same timer.

use std::cell::Cell;

use super::evidence::{Evidence, Finding, StorageEvent, StorageOp};
use super::log_writer::{Found, LogEvent, LogOp, LogWriter};
use super::participant::{Effect, LossReason, Participant, SweepStep};
use super::wire::{self, Message, Value};
use crate::scheduler::Snapshot;

/// How many microtask hops a flush waits: enough for a release and the request a loop makes right
/// after it (a few promise reactions apart) to go as one message.
pub const FLUSH_HOPS: u32 = 4;

/// What an edge gives the loop: its participant, the clock, and one method per primitive the effects
/// need. Each primitive is carried out as the effect's doc ([`Effect`]) says; the loop decides when.
pub trait Host {
    /// Runs `f` on the participant. Called for one participant call at a time, never across a host
    /// call, so that a host call may itself run an input through the loop.
    fn participant<R>(&mut self, f: impl FnOnce(&mut Participant) -> R) -> R;
    /// Runs `f` on the participant's evidence machine, as [`Host::participant`] does.
    fn evidence<R>(&mut self, f: impl FnOnce(&mut Evidence) -> R) -> R;
    /// Runs `f` on the context's log writer, as [`Host::participant`] does; `None` where the context
    /// does not coordinate over the log.
    fn log<R>(&mut self, f: impl FnOnce(&mut LogWriter) -> R) -> Option<R>;
    /// The loop's own state, which the host keeps (beside its participant).
    fn state(&self) -> &EdgeState;
    /// The wall-clock time in ms (`Date.now()`). It need not be monotonic: it only paces this
    /// context's own timers and retries (a jump makes one fire early or late), and no rule of the
    /// protocol reads it (docs/PROTOCOL.md §2, A3).
    fn now(&self) -> u64;

    /// Told of each effect before it is carried out: a simulator records them; a browser does nothing.
    fn carrying_out(&mut self, _effect: &Effect) {}

    /// Told of the messages of each [`Effect::Transmit`] before they go: a simulator records them.
    fn transmitting(&mut self, _messages: &[Message]) {}
    /// [`Effect::Transmit`] on the broadcast transport: post `data` as one channel message (over the
    /// log, the writer appends it).
    fn transmit(&mut self, data: Vec<Value>);
    /// [`Effect::OpenChannels`] (over the log, the writer then opens its log object).
    fn open_channels(&mut self);
    /// [`Effect::CloseChannels`] (over the log, the writer then closes its log object).
    fn close_channels(&mut self);
    /// [`Effect::ArmFarewell`].
    fn arm_farewell(&mut self, farewell: Option<Message>);
    /// One operation of the log writer ([`LogOp`]); its answers come back through [`log_event`].
    fn log_op(&mut self, op: LogOp);
    /// One storage operation of the evidence ([`StorageOp`]); its answers come back through
    /// [`storage`].
    fn storage(&mut self, op: StorageOp);
    /// The evidence cannot be given ([`Finding::Unreachable`]): the context refuses from now on.
    fn unreachable(&mut self);
    /// The log cannot be reached ([`Found::Unreachable`]): the context refuses from now on.
    fn log_unreachable(&mut self);
    /// Told of each finding of the log writer before the participant takes it, and after: a
    /// simulator checks what the participant applied; a browser does nothing.
    fn log_found(&mut self, _found: &Found) {}
    fn log_found_taken(&mut self) {}
    /// The register has not opened for a while ([`Finding::RegisterWaits`]): say why, once (in a
    /// browser, in the console).
    fn register_waits(&mut self);
    /// A page's deletion of a weblocks database waits for this context, which holds or waits for the
    /// locks `names` (a page's sweep, [`crate::protocol::evidence::sweep`]): say so, once (in a
    /// browser, in the console).
    fn deletion_waits(&mut self, names: &[String]);
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
#[derive(Default)]
pub struct EdgeState {
    /// The microtask hops left before the participant's queued messages go.
    flush_hops: Cell<u32>,
    /// When the armed timer fires (as asked; the host may fire it later).
    timer: Cell<Option<u64>>,
    /// The incompatibility was told.
    warned: Cell<bool>,
}

impl EdgeState {
    /// When the armed timer fires (as asked), if one is armed.
    pub fn timer(&self) -> Option<u64> {
        self.timer.get()
    }
}

/// Runs one input through the participant (`f`, given the time), then carries out its effects.
pub fn input<H: Host, R>(host: &mut H, f: impl FnOnce(&mut Participant, u64) -> R) -> R {
    let now = host.now();
    let result = host.participant(|p| f(p, now));
    carry_out(host);
    result
}

/// An answer of the storage backend to one of the evidence's operations.
pub fn storage<H: Host>(host: &mut H, event: StorageEvent) {
    let now = host.now();
    host.evidence(|e| e.handle_storage(now, event));
    carry_out(host);
}

/// An answer of the log's storage (or its carrier) to the log writer.
pub fn log_event<H: Host>(host: &mut H, event: LogEvent) {
    let now = host.now();
    host.log(|l| l.handle_event(now, event));
    carry_out(host);
}

/// The host's timer fired: the participant and its evidence look at their deadlines.
pub fn timeout<H: Host>(host: &mut H) {
    host.state().timer.set(None);
    let now = host.now();
    host.evidence(|e| e.handle_timeout(now));
    host.log(|l| l.handle_timeout(now));
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

/// Carries out the participant's effects in order, then its evidence's operations and findings (a
/// finding is an input of the participant, whose effects come first again), then the log writer's
/// findings, then arms the timer for the next deadline. The log writer's operations go first, as soon
/// as an effect made them: an append goes out in its `Transmit`'s place among the effects, as a
/// channel post does. Kept out of line, so that every input of an edge shares one copy.
#[inline(never)]
pub fn carry_out<H: Host>(host: &mut H) {
    loop {
        if let Some(Some(op)) = host.log(LogWriter::poll_op) {
            host.log_op(op);
        } else if let Some(effect) = host.participant(Participant::poll_effect) {
            host.carrying_out(&effect);
            carry_out_one(host, effect);
        } else if let Some(op) = host.evidence(Evidence::poll_op) {
            host.storage(op);
        } else if let Some(finding) = host.evidence(Evidence::poll_finding) {
            deliver(host, finding);
        } else if let Some(Some(found)) = host.log(LogWriter::poll_found) {
            deliver_log(host, found);
        } else if sweep(host) {
            continue;
        } else {
            break;
        }
    }
    arm_timer(host);
}

/// Hands a finding of the log writer to the participant.
fn deliver_log<H: Host>(host: &mut H, found: Found) {
    let now = host.now();
    host.log_found(&found);
    match found {
        Found::Unreachable => host.log_unreachable(),
        found => host.participant(|p| p.handle_log(now, found)),
    }
    host.log_found_taken();
}

/// Hands a finding of the evidence to the participant.
fn deliver<H: Host>(host: &mut H, finding: Finding) {
    let now = host.now();
    match finding {
        Finding::Alive(key) => host.participant(|p| p.handle_alive(now, key)),
        Finding::Lost => host.participant(|p| p.handle_alive_lost(now)),
        Finding::Census(listed) => host.participant(|p| p.handle_census(now, listed)),
        Finding::Gone(client, key) => host.participant(|p| p.handle_gone(now, &client, key)),
        Finding::Unreachable => host.unreachable(),
        Finding::RegisterWaits => host.register_waits(),
        Finding::RecordAgreed => host.participant(|p| p.handle_record_agreed(now)),
    }
}

/// A deletion of one of weblocks' databases waits for this context's connections (a page's logout
/// code; docs/PROTOCOL.md §7, "a page's sweep"), once every effect is carried out: a context that holds
/// and waits for nothing leaves (its `Leave` goes first) and then gives its connections up; one that
/// holds or waits keeps them, says so once, and is asked again after every input until it does not.
/// Returns whether it made anything to carry out.
fn sweep<H: Host>(host: &mut H) -> bool {
    if !host.evidence(|e| e.deletion_waits_here()) {
        return false;
    }
    let now = host.now();
    match host.participant(|p| p.sweep_step(now)) {
        SweepStep::Left => true,
        SweepStep::Release => {
            host.evidence(|e| e.release_for_sweep(now));
            true
        }
        SweepStep::Keeps(names) => {
            if host.evidence(Evidence::take_sweep_told) {
                host.deletion_waits(&names);
            }
            false
        }
    }
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
            host.transmitting(&messages);
            let mut data = Some(data);
            let appended = host.log(|l| l.append(data.take().unwrap_or_default()));
            if let (None, Some(data)) = (appended, data) {
                host.transmit(data);
            }
        }
        // Seen by `Host::carrying_out`; nothing goes out.
        Effect::Decided(_) => {}
        Effect::OpenChannels => {
            host.open_channels();
            host.log(LogWriter::open_object);
        }
        Effect::CloseChannels => {
            host.close_channels();
            host.log(LogWriter::close_object);
        }
        Effect::ArmFarewell(farewell) => host.arm_farewell(farewell),
        Effect::ReadLog { after } => {
            host.log(|l| l.read(after));
        }
        Effect::TrimLog { upto } => {
            host.log(|l| l.trim(upto));
        }
        Effect::OpenAlive => {
            let now = host.now();
            host.evidence(|e| e.open_own(now));
        }
        Effect::CloseAlive => host.evidence(Evidence::leave_own),
        Effect::EndAlive => host.evidence(Evidence::end_own),
        Effect::Census => {
            let now = host.now();
            host.evidence(|e| e.census(now));
        }
        Effect::Watch { client, watch } => host.evidence(|e| e.watch(client, watch)),
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

/// Arms the host's timer for the next deadline of the participant and its evidence, keeping one armed
/// to fire no later.
fn arm_timer<H: Host>(host: &mut H) {
    let next = [
        host.participant(|p| p.poll_timeout()),
        host.evidence(|e| e.poll_timeout()),
        host.log(|l| l.poll_timeout()).flatten(),
    ]
    .into_iter()
    .flatten()
    .min();
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
