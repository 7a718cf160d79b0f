//! The simulated origin as the [`Host`] of the production edge loop (`weblocks::protocol::edge`): each
//! context's effects are carried out by the same loop as in a browser, with its flush hops and its
//! timer rule; this module gives it the simulated primitives. A microtask is a per-context count, run
//! at the end of the current event before any other event ([`World::effects`]); the timer fires late
//! by up to the context's `timer_lateness`.

use weblocks::protocol::edge::{self, EdgeState, Host};
use weblocks::protocol::evidence::{Evidence, StorageEvent, StorageOp};
use weblocks::protocol::log_writer::{Found, LogEvent, LogOp, LogWriter};
use weblocks::protocol::wire::{Message, Value};
use weblocks::protocol::{Effect, LossReason, Participant, Transport};
use weblocks::scheduler::Snapshot;

use super::{Ev, World};

/// Context `i` of the world, as the host of its edge loop.
pub(super) struct SimHost<'w> {
    world: &'w mut World,
    i: usize,
}

/// Where the world enters a context's edge loop.
#[derive(Clone)]
pub(super) enum Entry {
    /// After an input: carry out the effects ([`edge::carry_out`]).
    Effects,
    /// The timer fired ([`edge::timeout`]).
    Timeout,
    /// A microtask ran ([`edge::microtask`]).
    Microtask,
    /// The storage backend answered the evidence ([`edge::storage`]).
    Storage(StorageEvent),
    /// The log's storage (or its carrier) answered the log writer ([`edge::log_event`]).
    Log(LogEvent),
}

impl World {
    /// Carries out context `i`'s effects through the edge loop, then (at the end of the event, but
    /// inside an `Action::Batch`) the microtasks it queued: the flush's hops.
    pub(super) fn effects(&mut self, i: usize) {
        self.edge(i, Entry::Effects);
    }

    /// Runs `entry` of the edge loop for context `i`, then, unless inside an `Action::Batch`, every
    /// microtask the context queued.
    pub(super) fn edge(&mut self, i: usize, entry: Entry) {
        self.edge_entry(i, entry);
        if self.in_task {
            return;
        }
        while self.contexts[i].microtasks > 0 {
            self.contexts[i].microtasks -= 1;
            self.edge_entry(i, Entry::Microtask);
        }
    }

    fn edge_entry(&mut self, i: usize, entry: Entry) {
        let host = &mut SimHost { world: self, i };
        match entry {
            Entry::Effects => edge::carry_out(host),
            Entry::Timeout => edge::timeout(host),
            Entry::Microtask => edge::microtask(host),
            Entry::Storage(event) => edge::storage(host, event),
            Entry::Log(event) => edge::log_event(host, event),
        }
        self.found_checks(i);
        if std::mem::take(&mut self.contexts[i].refusing) {
            self.refuse_from_now(i);
        }
    }
}

impl Host for SimHost<'_> {
    fn participant<R>(&mut self, f: impl FnOnce(&mut Participant) -> R) -> R {
        f(&mut self.world.contexts[self.i].participant)
    }

    fn evidence<R>(&mut self, f: impl FnOnce(&mut Evidence) -> R) -> R {
        f(&mut self.world.contexts[self.i].evidence)
    }

    fn log<R>(&mut self, f: impl FnOnce(&mut LogWriter) -> R) -> Option<R> {
        let (w, i) = (&mut *self.world, self.i);
        if w.contexts[i].log_writer.is_none() {
            let Transport::Log(wake) = w.contexts[i].participant.transport() else {
                return None;
            };
            let writer = w.new_log_writer(i, wake);
            w.contexts[i].log_writer = Some(writer);
        }
        w.contexts[i].log_writer.as_mut().map(f)
    }

    fn log_op(&mut self, op: LogOp) {
        self.world.log_op(self.i, op);
    }

    fn log_found(&mut self, found: &Found) {
        self.world.before_found(self.i, found);
    }

    fn log_found_taken(&mut self) {
        self.world.after_found(self.i);
    }

    fn log_unreachable(&mut self) {
        // The simulated backend never fails an open of the log.
        let i = self.i;
        self.world
            .violation(format!("ctx{i}'s log writer found the log unreachable"));
    }

    fn state(&self) -> &EdgeState {
        &self.world.contexts[self.i].edge
    }

    fn now(&self) -> u64 {
        self.world.now
    }

    fn carrying_out(&mut self, effect: &Effect) {
        if self.world.recording {
            self.world.contexts[self.i].recorded.push(effect.clone());
        }
        // What it decided alone is observed at its place among the effects, before those that report
        // its outcomes; they are checked once the entry's effects are carried out (`found_checks`).
        if let Effect::Decided(m) = effect {
            let decided = self.world.observe_decided(self.i, m);
            self.world.contexts[self.i].decided.extend(decided);
        }
    }

    fn transmitting(&mut self, messages: &[Message]) {
        self.world.transmitting(self.i, messages);
    }

    fn transmit(&mut self, data: Vec<Value>) {
        let msg = std::rc::Rc::new(data);
        self.world
            .channel_post(self.i, super::Payload::Message { msg, idx: None });
    }

    fn open_channels(&mut self) {
        let (w, i) = (&mut *self.world, self.i);
        let n = &mut w.contexts[i];
        n.connected = true;
        n.epoch += 1;
        // A new membership: a loss met before it is no cause for losing what it is granted.
        w.met_loss.remove(&i);
    }

    fn close_channels(&mut self) {
        let n = &mut self.world.contexts[self.i];
        n.connected = false;
        n.epoch += 1;
    }

    fn arm_farewell(&mut self, farewell: Option<Message>) {
        self.world.contexts[self.i].farewell = farewell;
    }

    fn storage(&mut self, op: StorageOp) {
        self.world.storage_op(self.i, op);
    }

    fn register_waits(&mut self) {
        self.world.bump("register waits told");
    }

    fn deletion_waits(&mut self, _names: &[String]) {
        self.world.bump("deletion waits told");
    }

    fn unreachable(&mut self) {
        // The simulated backend fails an open of a context's own database only once its storage was
        // taken (`Fault::StorageLost`); its evidence must have seen a connection of its closed, unless
        // it had none open then.
        let i = self.i;
        if !self.world.storage.lost.contains(&i) {
            return self
                .world
                .violation(format!("ctx{i}'s evidence found its database unreachable"));
        }
        if !self.world.contexts[i].evidence.storage_lost()
            && !self.world.storage.lost_unseen.contains(&i)
        {
            return self.world.violation(format!(
                "ctx{i} refuses without its evidence knowing that its storage was taken"
            ));
        }
        self.world.bump("storage lost: refused");
        // As the browser's edge refuses (src/wasm/coordination.rs): its participant hears of a gap
        // and closes (its Leave goes out); then its edge rejects everything.
        let now = self.world.now;
        self.participant(|p| {
            p.handle_missed_messages(now);
            p.handle_close(now);
        });
        self.world.contexts[i].refusing = true;
    }

    fn arm_timer(&mut self, at: u64) -> bool {
        let (w, i) = (&mut *self.world, self.i);
        let lateness = w.rng.range(0, w.contexts[i].timer_lateness);
        let n = &mut w.contexts[i];
        n.timer_generation += 1;
        let generation = n.timer_generation;
        w.schedule(at.max(w.now) + lateness, i, Ev::Timer { generation });
        true
    }

    fn cancel_timer(&mut self) {
        self.world.contexts[self.i].timer_generation += 1;
    }

    fn queue_microtask(&mut self) -> bool {
        self.world.contexts[self.i].microtasks += 1;
        true
    }

    fn granted(&mut self, id: u64) {
        self.world.on_granted(self.i, id);
    }

    fn not_available(&mut self, id: u64) {
        self.world.on_not_available(self.i, id);
    }

    fn stolen(&mut self, id: u64, reason: LossReason) {
        self.world.on_stolen(self.i, id, reason);
    }

    fn snapshot(&mut self, query: u64, snapshot: Snapshot) {
        self.world.on_snapshot(self.i, query, snapshot);
    }

    fn incompatible(&mut self, version: u32) {
        let i = self.i;
        self.world
            .note(|| format!("ctx{i} incompatible with v{version}"));
        self.world.contexts[i].retired = true;
    }
}
