//! The origin's record of its transport (docs/PROTOCOL.md §2, "the record"), in a world whose contexts
//! prefer different transports.
//!
//! Each context of such a world, when it starts, opens the record's database and, in one read/write
//! transaction, reads the value or writes its preference where there is none; the database runs those
//! transactions one at a time (A1′), so every context reads the first writer's value. It then settles
//! with the production function (`weblocks::protocol::transport_record::settle`): it starts a
//! participant on the recorded transport, or refuses (it never starts one, and every request of it is
//! rejected).
//!
//! Every context keeps its connection to the record while it lives and ignores `versionchange`, so a
//! deletion of the record (a page's logout code, [`Fault::RecordDeleted`](super::Fault)) waits until
//! every context that holds it is gone (crashed or closed: a stall, a freeze or the back/forward cache
//! keep it), and the transactions of contexts that start meanwhile wait behind it, in the order they
//! were made. Once it completes the record is empty: the first of them writes its preference, and the
//! origin may move to another transport. The world runs one transport at a time: the one the first
//! settle (after a deletion: the first after it) gave; [`World::check_one_transport`] verifies at every
//! step that no context running on another is left.
//!
//! `Env::reask_on_versionchange` gives the world the behaviour the record must not have: a context
//! closes its connection on `versionchange` and at once (when its handler runs: a busy context runs it
//! late) asks again with the transport it uses. The deletion then completes as soon as the last holder
//! has closed, and a newcomer whose transaction was queued before a slow holder's writes its own
//! preference first; the holder refuses once it reads it, but until then two transports run.

use std::collections::{BTreeSet, VecDeque};

use weblocks::protocol::transport_record::{Recorded, settle};
use weblocks::protocol::{Transport, Wake};

use super::{Action, Ev, ReqState, Status, World};

/// Whether a context of a world with a record runs a participant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// It runs one (every context of a world without a record).
    Started,
    /// Its transaction on the record has not answered yet: its client's calls wait.
    Awaiting,
    /// The record named a transport it cannot use (or, re-asking, another than the one it used): it
    /// grants nothing, and rejects every request.
    Refused,
}

/// The record's database, as the storage backend keeps it.
#[derive(Debug, Default)]
pub struct TransportRecord {
    /// The value at the record's key.
    pub value: Option<Recorded>,
    /// The contexts with a connection to it open.
    pub open: BTreeSet<usize>,
    /// A deletion is under way: it waits for every connection in `open` to close.
    pub deleting: bool,
    /// The contexts whose transactions wait behind the deletion, in the order they were made.
    pub queue: VecDeque<usize>,
    /// The transport the world runs: what the first settle gave (after a deletion: the first after it).
    pub current: Option<Recorded>,
}

impl World {
    /// Makes this world's contexts go through the origin's record before they start.
    pub fn with_record(&mut self) {
        self.record = Some(TransportRecord::default());
    }

    /// Adds a context that starts at `at` preferring `preference` (a worker polls where it finds the
    /// log without a carrier); the world has a record.
    pub fn add_preferring(
        &mut self,
        at: u64,
        version: u32,
        timer_lateness: u64,
        preference: Recorded,
        worker: bool,
    ) -> usize {
        let i = self.add_context(at, version, timer_lateness);
        self.contexts[i].preference = Some(preference);
        self.contexts[i].worker = worker;
        i
    }

    /// Context `i` starts in a world with a record: its JS runs, and makes its transaction on the
    /// record after a moment (its calls wait for the answer).
    pub(super) fn start_at_record(&mut self, i: usize) {
        self.contexts[i].status = Status::Running;
        self.contexts[i].admission = Admission::Awaiting;
        let preference = self.contexts[i].preference;
        self.note(|| format!("ctx{i} starts, preferring {preference:?}"));
        // What its edge does before the engine exists: the evidence's first operations.
        self.prepare_evidence(i);
        let delay = self.rng.range(0, 5);
        self.schedule(self.now + delay, i, Ev::RecordAsk);
    }

    /// Context `i` asks the record (opens its database and makes its transaction): behind a deletion
    /// under way, or at once.
    pub(super) fn record_ask(&mut self, i: usize) {
        let rec = self.record.as_mut().expect("a world with a record");
        if rec.deleting {
            rec.queue.push_back(i);
            self.note(|| format!("ctx{i}'s transaction on the record waits behind its deletion"));
        } else {
            self.record_transaction(i);
        }
    }

    /// The database runs context `i`'s transaction: it reads the value, or writes what the context
    /// prefers (a context that runs a participant: the transport it uses). The answer reaches it after
    /// the backend's delay.
    fn record_transaction(&mut self, i: usize) {
        if !self.holds_record(i) {
            return; // its context is gone: its requests went with it
        }
        let n = &self.contexts[i];
        let writes = n.uses.or(n.preference).expect("a preference");
        let rec = self.record.as_mut().expect("a world with a record");
        rec.open.insert(i);
        let value = *rec.value.get_or_insert(writes);
        self.note(|| format!("ctx{i} reads the record: {value:?}"));
        let delay = self.rng.range(0, 2);
        self.schedule(self.now + delay, i, Ev::RecordAnswer(value));
    }

    /// Context `i` may hold a connection to the record: it lives (running, stalled, frozen or in the
    /// back/forward cache, as a member or not).
    fn holds_record(&self, i: usize) -> bool {
        self.contexts[i].status.alive() || self.contexts[i].status == Status::Hidden
    }

    /// Context `i` reads the record's answer and settles.
    pub(super) fn record_answer(&mut self, i: usize, recorded: Recorded) {
        match self.contexts[i].admission {
            Admission::Awaiting => {
                let preference = self.contexts[i].preference.expect("a preference");
                match settle(preference, recorded) {
                    Ok(t) => self.admit(i, t),
                    Err(_) => {
                        self.note(|| format!("ctx{i} refuses: {preference:?} / {recorded:?}"));
                        self.bump("refused contexts");
                        self.contexts[i].admission = Admission::Refused;
                        // No engine: its edge ends what it made ahead, and closes the record
                        // (js/transport_choice.js closes it on a refusal).
                        self.storage_end(i);
                        if let Some(rec) = self.record.as_mut() {
                            rec.open.remove(&i);
                        }
                        self.finish_record_deletion();
                        for action in std::mem::take(&mut self.contexts[i].awaiting) {
                            self.client_refused(i, &action);
                        }
                    }
                }
            }
            Admission::Started => {
                // It asked again (`Env::reask_on_versionchange`, or after giving the record up for
                // a sweep) with the transport it uses.
                let used = self.contexts[i].uses.expect("settled");
                if settle(used, recorded) != Ok(used) {
                    self.refuse_running(i, recorded);
                } else if let Some(answers) = self.contexts[i].reasks.pop_front() {
                    for _ in 0..answers {
                        let event =
                            Ev::Storage(weblocks::protocol::evidence::StorageEvent::RecordAgreed);
                        self.schedule(self.now, i, event);
                    }
                }
            }
            Admission::Refused => {}
        }
    }

    /// Context `i` settled on `t`: it starts its participant there, and its waiting calls run. The
    /// first settle decides the world's transport; the first after a deletion may move it.
    fn admit(&mut self, i: usize, t: Recorded) {
        let rec = self.record.as_mut().expect("a world with a record");
        let previous = rec.current.replace(t);
        if previous != Some(t) {
            self.move_transport(previous, t);
        }
        // Without a carrier a document with storage is poked; a worker, or any context without
        // storage, polls.
        let bare = if self.contexts[i].worker || !self.env.storage {
            Wake::Polls
        } else {
            Wake::Pokes
        };
        self.configure(i, transport_of(t, bare));
        let n = &mut self.contexts[i];
        n.uses = Some(t);
        n.admission = Admission::Started;
        self.bump("admitted contexts");
        self.start(i);
        for action in std::mem::take(&mut self.contexts[i].awaiting) {
            if self.contexts[i].status != Status::Running {
                break;
            }
            self.client(i, action);
        }
    }

    /// The world runs `to` from now on (`from`: what it ran). Between the broadcast transport and the
    /// log, the log starts empty (deleted with the record by the logout, or never made), with a new
    /// history; between the two logs it is the same log, read with the other wake.
    fn move_transport(&mut self, from: Option<Recorded>, to: Recorded) {
        self.env.config.transport = transport_of(to, Wake::Pokes);
        let Some(from) = from else {
            return;
        };
        self.bump("transports changed");
        self.note(|| format!("the origin moves from {from:?} to {to:?}"));
        self.unposted.clear();
        if from == Recorded::Broadcast || to == Recorded::Broadcast {
            self.log_generation += 1;
            self.log_bases.push(self.log.len());
            self.floor = 0;
            for o in &mut self.observers {
                o.replica = weblocks::protocol::replica::Replica::origin(o.version);
            }
            for n in &mut self.contexts {
                n.expected.clear();
                n.gap_floor = 0;
            }
        }
    }

    /// What the client of a context that refuses gets: every request rejected, nothing granted.
    pub(super) fn client_refused(&mut self, i: usize, action: &Action) {
        match action {
            Action::Request { .. } | Action::Query | Action::Loop { .. } => {
                self.note(|| format!("ctx{i} rejects {action:?}: it refuses"));
                self.bump("refused");
            }
            Action::Batch(actions) => {
                for a in actions {
                    self.client_refused(i, a);
                }
            }
            Action::Release(_) | Action::Abort(_) => {}
        }
    }

    /// A running context found another transport recorded than the one it uses
    /// (`Env::reask_on_versionchange`): it refuses from then on. Its participant is dropped: its
    /// locks are lost, its requests rejected, and it hears nothing more.
    fn refuse_running(&mut self, i: usize, recorded: Recorded) {
        self.note(|| format!("ctx{i} finds {recorded:?} recorded and refuses from now on"));
        self.bump("refused running contexts");
        self.refuse_from_now(i);
    }

    /// A running context refuses from now on. Its participant is dropped: its locks are lost, its
    /// requests rejected, and it hears nothing more.
    pub(super) fn refuse_from_now(&mut self, i: usize) {
        let n = &mut self.contexts[i];
        n.admission = Admission::Refused;
        n.connected = false;
        n.epoch += 1;
        n.timer_generation += 1;
        n.expected.clear();
        n.deferred.clear();
        for r in n.requests.values_mut() {
            r.state = match r.state {
                ReqState::Pending => ReqState::Aborted,
                ReqState::Held => ReqState::Released,
                s => s,
            };
        }
        self.beliefs.retain(|b| b.0 != i);
        self.unconfirmed.retain(|u| u.0 != i);
        self.stale.retain(|k, _| k.0 != i);
        // Its engine is dropped: its edge's connections go, as the backend closes them, and so does
        // its connection to the record (js/transport_choice.js closes it on a refusal).
        self.storage_gone(i);
        if let Some(rec) = self.record.as_mut() {
            rec.open.remove(&i);
        }
        self.finish_record_deletion();
    }

    /// A page's logout code deletes the record (`Fault::RecordDeleted`): it waits for every
    /// connection to it; over the log, the log's database is deleted with it.
    pub(super) fn delete_record(&mut self, i: usize) {
        let Some(rec) = self.record.as_mut() else {
            return;
        };
        if rec.deleting {
            return;
        }
        rec.deleting = true;
        let open: Vec<usize> = rec.open.iter().copied().collect();
        self.bump("records deleted");
        for j in open {
            let delay = self.rng.range(0, 2);
            let ev = if self.env.reask_on_versionchange {
                Ev::RecordVersionChange
            } else {
                // `versionchange`, which the edge forwards to the production decision.
                Ev::Storage(weblocks::protocol::evidence::StorageEvent::DeletionWaits)
            };
            self.schedule(self.now + delay, j, ev);
        }
        if self.over_log() {
            self.fault(i, super::Fault::LogDeleted);
        }
        self.finish_record_deletion();
    }

    /// `Env::reask_on_versionchange`: context `i`'s handler of the record's `versionchange` closes its
    /// connection and asks again at once (its request waits behind the deletion).
    pub(super) fn record_version_change(&mut self, i: usize) {
        self.note(|| format!("ctx{i} closes the record on versionchange and asks again"));
        let rec = self.record.as_mut().expect("a world with a record");
        rec.open.remove(&i);
        self.record_ask(i);
        self.finish_record_deletion();
    }

    /// Context `i`'s edge gives the record up for a page's deletion (the production decision,
    /// `StorageOp::ReleaseRecord`: it holds and waits for nothing, and is out of the protocol) and asks
    /// it again at once, behind the deletion; `RecordAgreed` comes once it reads the transport it uses.
    pub(super) fn sweep_release_record(&mut self, i: usize) {
        // Its connection to the log goes too (js/log_channel.js closes it as the browser would, and
        // its writer opens the log anew, behind a deletion under way).
        self.close_connections(i, None);
        if self.storage.lost.contains(&i) {
            // Its read cannot open the record: it refuses once its tries are over.
            self.implicit_gone(i);
            if let Some(rec) = self.record.as_mut() {
                rec.open.remove(&i);
            }
            self.finish_record_deletion();
            return self.record_refused_later(i);
        }
        let Some(rec) = self.record.as_mut() else {
            return self.implicit_release(i);
        };
        if !rec.open.remove(&i) && rec.queue.contains(&i) {
            // Asked again already, and waits behind the deletion: that read answers this one too.
            if let Some(last) = self.contexts[i].reasks.back_mut() {
                *last += 1;
            }
            return;
        }
        self.note(|| format!("ctx{i} gives the record up for a deletion and asks again"));
        self.bump("records given up for a sweep");
        self.contexts[i].reasks.push_back(1);
        self.record_ask(i);
        self.finish_record_deletion();
    }

    /// Context `i` asked the record again but cannot read it (the browser took its storage): after
    /// js/transport_choice.js's tries (100, 400 and 1,600 ms apart) it refuses.
    pub(super) fn record_refused_later(&mut self, i: usize) {
        self.contexts[i].reasks.clear();
        self.schedule(self.now + 2_100, i, Ev::RecordUnreachable);
    }

    /// Context `i`'s read of the record failed for good: a context let back in only on the record's
    /// answer refuses from now on.
    pub(super) fn record_unreachable(&mut self, i: usize) {
        if self.contexts[i].admission == Admission::Started {
            self.note(|| format!("ctx{i} cannot read the record again and refuses from now on"));
            self.bump("refused running contexts");
            self.refuse_from_now(i);
        }
    }

    /// Context `i` is gone (crashed, closed): the browser closes its connection to the record, and its
    /// transaction waiting behind a deletion goes with it.
    pub(super) fn release_record(&mut self, i: usize) {
        self.implicit_gone(i);
        let Some(rec) = self.record.as_mut() else {
            return;
        };
        rec.open.remove(&i);
        rec.queue.retain(|&j| j != i);
        self.finish_record_deletion();
    }

    /// The deletion under way completes once no connection to the record is left: the record is
    /// empty, and the transactions queued behind it run in the order they were made.
    fn finish_record_deletion(&mut self) {
        let Some(rec) = self.record.as_mut() else {
            return;
        };
        if !rec.deleting || !rec.open.is_empty() {
            return;
        }
        rec.deleting = false;
        rec.value = None;
        let queue = std::mem::take(&mut rec.queue);
        self.note(|| "the record is deleted".into());
        for j in queue {
            self.record_transaction(j);
        }
    }

    /// At every step: every context that runs a participant (alive, started, not refused) uses the
    /// same transport, with the same wake (a carrier or none), as every other.
    pub(crate) fn check_one_transport(&mut self) {
        if let Some((i, _)) = self
            .contexts
            .iter()
            .enumerate()
            .find(|(_, n)| n.status.alive() && n.participant.waits_for_record() && n.connected)
        {
            self.violation(format!(
                "ctx{i} gave the record up for a sweep and is in the protocol before reading it again"
            ));
        }
        let mut running = self
            .contexts
            .iter()
            .enumerate()
            .filter(|(_, n)| n.status.alive() && n.admission == Admission::Started)
            // One that gave the record up for a sweep runs no transport until it read it again.
            .filter(|(_, n)| !n.participant.waits_for_record())
            // One whose storage the browser took lost its record's connection with it, and refuses once
            // its read fails: until then it reaches no log, and its evidence lets it grant nothing
            // (what it does meanwhile is under the exclusion checks of every step).
            .filter(|&(i, _)| !self.storage.lost.contains(&i))
            .filter_map(|(i, n)| Some((i, n.uses?)));
        let Some((first, t)) = running.next() else {
            return;
        };
        if let Some((other, u)) = running.find(|&(_, u)| u != t) {
            self.violation(format!(
                "two transports in one origin: ctx{first} runs {t:?} and ctx{other} runs {u:?}"
            ));
        }
    }
}

/// The transport a context runs where it settled on `recorded`: without a carrier, woken by `bare`.
fn transport_of(recorded: Recorded, bare: Wake) -> Transport {
    match recorded {
        Recorded::Broadcast => Transport::Broadcast,
        Recorded::Log => Transport::Log(Wake::Carrier),
        Recorded::LogBare => Transport::Log(bare),
    }
}
