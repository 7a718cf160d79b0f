//! The simulated IndexedDB log: the storage the production log writer (src/protocol/log_writer.rs)
//! runs on, as js/log_channel.js carries out its operations. Appends commit in each writer's order,
//! reads, trims that leave a reader behind, connections that the browser closes, the wake of readers
//! without a carrier (storage pokes, a relayed farewell), and the log's database deleted and made anew.

use std::rc::Rc;

use weblocks::protocol::log_writer::{Abort, Found, LogEvent, LogOp, LogWriter};
use weblocks::protocol::replica::Replica;
use weblocks::protocol::wire::{self, Value};

use super::host::Entry;
use super::{Ev, LOG, Payload, Status, World, edge_decodes};

impl World {
    /// Runs an answer of the backend (or the carrier) through context `i`'s log writer.
    pub(super) fn log_answer(&mut self, i: usize, event: LogEvent) {
        if self.contexts[i].log_writer.is_some() {
            if self.trace.is_some() && std::env::var_os("WEBLOCKS_SIM_VERBOSE").is_some() {
                self.note(|| format!("ctx{i} log {event:?}"));
            }
            self.edge(i, Entry::Log(event));
        }
    }

    /// Context `i`'s carrier (or a storage event) brings `data` to the log object listening.
    pub(super) fn hear_carried(&mut self, i: usize, data: Vec<Value>) {
        if let Some(object) = self.contexts[i].carrier_object {
            self.log_answer(i, LogEvent::Carried { object, data });
        }
    }

    /// Context `i`'s log writer is about to hand `found` to its participant: the outcomes the entry
    /// before it confirmed are checked (its effects are carried out), and where the participant stands
    /// is noted.
    pub(super) fn before_found(&mut self, i: usize, found: &Found) {
        self.found_checks(i);
        if let Found::Read(floor) = found {
            self.read_floor(i, *floor);
        }
        self.contexts[i].log_checked = self.contexts[i].participant.log_position();
    }

    /// Context `i`'s participant took a finding of its log writer: checks what it reported for the
    /// entries it applied (its position in the log moved past them); the outcomes they decided are
    /// checked once its effects are carried out.
    pub(super) fn after_found(&mut self, i: usize) {
        let before = self.contexts[i].log_checked;
        let after = self.contexts[i].participant.log_position();
        let (Some(b), Some(a)) = (before, after) else {
            return;
        };
        if a <= b {
            return;
        }
        let base = self.log_bases.get(self.contexts[i].conn_log).copied();
        for key in b + 1..=a {
            // An entry the log it reads does not hold: a frame of another log taken for its own.
            let Some(msg) = base
                .and_then(|base| self.log.get(base + key as usize - 1))
                .cloned()
            else {
                return self.violation(format!(
                    "ctx{i} applied key {key}, which its log does not hold (a frame of another log?)"
                ));
            };
            if self.trace.is_some() && std::env::var_os("WEBLOCKS_SIM_VERBOSE").is_some() {
                let what = self.describe(i, &msg);
                self.note(|| format!("ctx{i} applies log key {key}: {what}"));
            }
            self.note_own_echo(i, &msg);
        }
        if let Some(base) = base {
            self.contexts[i].check_at = Some(base + a as usize - 1);
        }
    }

    /// The checks due once the effects of context `i`'s last finding are carried out: what it decided
    /// alone, then the outcomes the entries it applied decided.
    pub(super) fn found_checks(&mut self, i: usize) {
        for (inc, id, expect) in std::mem::take(&mut self.contexts[i].decided) {
            self.confirm(i, inc, id, expect, None);
        }
        if let Some(idx) = self.contexts[i].check_at.take() {
            self.check_expected(i, idx);
        }
    }

    /// Context `i`'s read of the log ended with this floor. A floor past its position is a trim it
    /// fell behind: the observer's decisions for it up to the floor are lost for it.
    fn read_floor(&mut self, i: usize, floor: u64) {
        if self.contexts[i]
            .participant
            .log_position()
            .is_some_and(|p| floor > p)
        {
            self.note(|| format!("ctx{i} fell behind a trim of the log to key {floor}"));
            let idx = self.log_bases[self.log_generation] + floor as usize - 1;
            while self.contexts[i]
                .expected
                .front()
                .is_some_and(|e| e.0 <= idx)
            {
                self.contexts[i].expected.pop_front();
            }
        }
    }

    /// The generation of the log context `i`'s connection `handle` is to, while the browser keeps
    /// it open.
    fn handle_log(&self, i: usize, handle: u32) -> Option<usize> {
        let n = &self.contexts[i];
        n.log_handles
            .iter()
            .find(|(h, _)| *h == handle)
            .map(|&(_, log)| log)
    }

    /// The browser closes context `i`'s connections to logs older than `log` (or to every log, with
    /// `None`), each with a `close` event.
    pub(super) fn close_connections(&mut self, i: usize, below: Option<usize>) {
        let (closed, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.contexts[i].log_handles)
            .into_iter()
            .partition(|&(_, log)| below.is_none_or(|below| log < below));
        self.contexts[i].log_handles = kept;
        for (handle, _) in closed {
            let delay = self.rng.range(0, 2);
            self.schedule(
                self.now + delay,
                i,
                Ev::LogAnswer(LogEvent::Closed { handle }),
            );
        }
    }

    /// Carries out one operation of context `i`'s log writer, as js/log_channel.js does.
    pub(super) fn log_op(&mut self, i: usize, op: LogOp) {
        let now = self.now;
        match op {
            LogOp::Open { handle } => {
                // An open waits behind a deletion under way, then makes the log anew.
                let log = self.log_generation + usize::from(self.deleting);
                let delay = self.rng.range(0, 2);
                self.schedule(now + delay, i, Ev::LogOpen { handle, log });
            }
            LogOp::Close { handle } => self.contexts[i].log_handles.retain(|(h, _)| *h != handle),
            LogOp::Append {
                handle,
                tx,
                data,
                identify,
            } => {
                let Some(log) = self.handle_log(i, handle) else {
                    return self.unusable(
                        i,
                        LogEvent::AppendAborted {
                            tx,
                            why: Abort::Unusable,
                        },
                    );
                };
                // A read/write transaction, run after the context's earlier ones.
                let delay = self.rng.range(0, self.env.send_max + 2);
                let n = &mut self.contexts[i];
                let at = (now + delay).max(n.last_append);
                n.last_append = at;
                let life = n.life;
                self.schedule(
                    at,
                    i,
                    Ev::Append {
                        msg: data,
                        life,
                        log,
                        tx,
                        identify: identify != 0,
                    },
                );
            }
            LogOp::Start { handle, tx } => {
                let Some(log) = self.handle_log(i, handle) else {
                    return self.unusable(i, LogEvent::ReadFailed { tx, unusable: true });
                };
                if log != self.log_generation {
                    return; // a deleted log's: the connection's `close` event comes
                }
                // The start read sees the log as it is now: the context's next appends come after it.
                let last = self.log_len() + self.floor;
                let delay = self.rng.range(0, 2);
                self.schedule(
                    now + delay,
                    i,
                    Ev::LogAnswer(LogEvent::Started {
                        tx,
                        identity: LOG + log as u64,
                        last,
                    }),
                );
                // Its read/write transactions made after that read run after it (A1′): none of its
                // appends commits, nor is told, before its start.
                let n = &mut self.contexts[i];
                n.last_append = n.last_append.max(now + delay);
            }
            LogOp::Read { handle, tx, after } => {
                let Some(log) = self.handle_log(i, handle) else {
                    return self.unusable(i, LogEvent::ReadFailed { tx, unusable: true });
                };
                let delay = self.rng.range(0, 3);
                self.schedule(now + delay, i, Ev::LogRead { log, after, tx });
            }
            LogOp::Trim { handle, upto, .. } => {
                // A floor only rises.
                if self.handle_log(i, handle) == Some(self.log_generation) {
                    self.floor = self.floor.max(upto.min(self.log_len() + self.floor));
                }
            }
            LogOp::Listen { object } => self.contexts[i].carrier_object = Some(object),
            LogOp::Unlisten { object } => {
                if self.contexts[i].carrier_object == Some(object) {
                    self.contexts[i].carrier_object = None;
                }
            }
            LogOp::CloseCarrier { .. } => {}
            LogOp::Carry {
                identity,
                key,
                frame,
                ..
            } => {
                let log = (identity - LOG) as usize;
                if log == self.log_generation {
                    self.unposted.remove(&key);
                }
                let frame = Rc::new(frame);
                self.channel_post(i, Payload::Entry { log, frame });
            }
            LogOp::Poke { .. } => self.poke_others(i),
        }
    }

    /// A transaction that cannot be made on a connection the browser closed fails at once (its
    /// answer, as every answer, comes in a task of its own).
    fn unusable(&mut self, i: usize, event: LogEvent) {
        self.schedule(self.now, i, Ev::LogAnswer(event));
    }

    /// Context `i`'s open of connection `handle` completes on the current log.
    /// (A page in the back/forward cache gets its answer once shown again.)
    pub(super) fn log_opened(&mut self, i: usize, handle: u32) {
        if !self.contexts[i].status.alive() && self.contexts[i].status != Status::Hidden {
            return;
        }
        let log = self.log_generation;
        self.contexts[i].log_handles.push((handle, log));
        self.contexts[i].conn_log = log;
        self.schedule(self.now, i, Ev::LogAnswer(LogEvent::Opened { handle }));
        if self.deleting {
            // Asked for before a page's deletion, it opened ahead of it; the deletion then waits for
            // it too, and tells it (`versionchange`).
            let ev = Ev::Storage(weblocks::protocol::evidence::StorageEvent::DeletionWaits);
            self.schedule(self.now, i, ev);
        }
    }

    /// A new log writer for context `i`.
    pub(super) fn new_log_writer(&mut self, i: usize, wake: weblocks::protocol::Wake) -> LogWriter {
        let p = &self.contexts[i].participant;
        let header = wire::entry_header(&p.member_key(), p.version());
        LogWriter::new(wake, header, self.rng.next_u64())
    }

    /// Without a carrier, a writer pokes the other documents through localStorage; a worker has none,
    /// and pokes nobody.
    pub(super) fn poke_others(&mut self, i: usize) {
        if !self.poked(i) {
            return;
        }
        for j in 0..self.contexts.len() {
            if j != i && self.contexts[j].status.alive() && self.poked(j) {
                let delay = self.rng.range(0, self.env.storage_lag_max);
                self.schedule(self.now + delay, j, Ev::Poke);
            }
        }
    }

    /// A read (transaction `tx`) of the log of generation `log` from `after` runs in the database for
    /// context `i`: it sees what has committed.
    pub(super) fn log_read(&mut self, i: usize, log: usize, after: u64, tx: u32) {
        if log != self.log_generation {
            return; // a deleted log's: the connection's `close` event comes
        }
        self.reads += 1;
        let delay = self.rng.range(0, 2);
        if std::mem::take(&mut self.contexts[i].fail_next_read) {
            self.bump("failed reads");
            self.meets_loss(i, "its read failed");
            let failed = LogEvent::ReadFailed {
                tx,
                unusable: false,
            };
            return self.schedule(self.now + delay, i, Ev::LogAnswer(failed));
        }
        let base = self.log_bases[self.log_generation];
        let from = base + after.max(self.floor) as usize;
        let mut entries = Vec::new();
        for idx in from..self.log.len() {
            let msg = self.log[idx].clone();
            // The edge hands on the key of an entry it does not decode, with no data (or, in a world
            // that models an edge that drops it, key and all).
            let key = (idx - base) as u64 + 1;
            if !self.edge_hands_on(i, &msg) {
                continue;
            }
            entries.push((key, edge_decodes(&msg).then(|| msg.to_vec())));
        }
        let read = LogEvent::Read {
            tx,
            identity: LOG + log as u64,
            floor: self.floor,
            entries,
        };
        self.schedule(self.now + delay, i, Ev::LogAnswer(read));
    }

    /// What the edge's farewell listener does in a `pagehide` over the log: it asks the others to append
    /// the participant's Leave, on the carrier or, without one, through a storage event.
    pub(super) fn farewell_relay(&mut self, i: usize) {
        let Some(m) = self.contexts[i].farewell.clone() else {
            return;
        };
        let msg = Rc::new(wire::encode_versioned(
            &m,
            self.contexts[i].participant.version(),
        ));
        self.note(|| format!("ctx{i}'s farewell asks for its Leave"));
        self.relayed.push(msg.clone());
        if self.carried() {
            self.channel_post(i, Payload::Relay(msg));
        } else if self.poked(i) {
            for j in 0..self.contexts.len() {
                if j != i && self.contexts[j].status.alive() && self.poked(j) {
                    let delay = self.rng.range(0, self.env.storage_lag_max);
                    self.schedule(self.now + delay, j, Ev::StorageRelay(msg.clone()));
                }
            }
        }
    }

    /// Log transport: the entries the log holds now (those above the floor).
    pub fn log_len(&self) -> u64 {
        (self.log.len() - self.log_bases[self.log_generation]) as u64 - self.floor
    }

    /// Log transport: the greatest key trimmed.
    pub fn floor(&self) -> u64 {
        self.floor
    }

    /// Log transport: context `i`'s append (transaction `tx`) to the log of generation `log` commits,
    /// unless it was lost with its context; its JS hears of it (and hands it on) when it next runs.
    pub(super) fn append(
        &mut self,
        i: usize,
        msg: Rc<Vec<Value>>,
        life: u32,
        log: usize,
        tx: u32,
        identify: bool,
    ) {
        if life != self.contexts[i].life && self.rng.chance(0.5) {
            return; // the transaction died with its context
        }
        if log != self.log_generation {
            return; // a deleted log's: the connection's `close` event comes
        }
        let delay = self.rng.range(0, 2);
        if std::mem::take(&mut self.contexts[i].abort_next_append) {
            self.bump("aborted appends");
            self.meets_loss(i, "its append aborted");
            let why = Abort::Other;
            return self.schedule(
                self.now + delay,
                i,
                Ev::LogAnswer(LogEvent::AppendAborted { tx, why }),
            );
        }
        let idx = self.log.len();
        self.log.push(msg.clone());
        self.longest_log = self.longest_log.max(self.log_len());
        let key = (idx - self.log_bases[log]) as u64 + 1;
        self.unposted.insert(key);
        self.observe(idx, &msg);
        let identity = if identify { LOG + log as u64 } else { 0 };
        self.schedule(
            self.now + delay,
            i,
            Ev::LogAnswer(LogEvent::Appended { tx, key, identity }),
        );
    }

    /// Context `j` has the current log open: it runs (or will: stalled, frozen) with its channels open
    /// on it, and the browser has not closed its connection. (One that left the protocol still holds
    /// its global's connection in the browser; the world lets a deletion complete without it, which
    /// only makes the world harsher: it joins the new log when it comes back.)
    pub(super) fn log_open(&self, j: usize) -> bool {
        let n = &self.contexts[j];
        n.status.alive()
            && n.connected
            && n.log_handles
                .iter()
                .any(|&(_, log)| log == self.log_generation)
    }

    /// Context `j` lives (or is in the back/forward cache) with a connection to the log as it is,
    /// in the protocol or not.
    pub(super) fn holds_log(&self, j: usize) -> bool {
        let n = &self.contexts[j];
        (n.status.alive() || n.status == Status::Hidden)
            && n.log_handles
                .iter()
                .any(|&(_, log)| log == self.log_generation)
    }

    /// The deletion under way completes once no context has the old log open: the next open makes
    /// the log anew (keys from 1, a new identity), and a new history starts, with observers of its own.
    pub(super) fn finish_deletion(&mut self) {
        if !self.deleting || (0..self.contexts.len()).any(|j| self.log_open(j)) {
            return;
        }
        self.deleting = false;
        self.log_generation += 1;
        self.log_bases.push(self.log.len());
        self.floor = 0;
        self.unposted.clear();
        self.note(|| "the log's database is deleted; the next open makes it anew".into());
        for o in &mut self.observers {
            o.replica = Replica::origin(o.version);
        }
        for n in &mut self.contexts {
            n.expected.clear();
            n.gap_floor = 0;
        }
        // The world lets the deletion complete under a context that holds a connection but is out of
        // the protocol (a browser would wait for it): the browser closes that connection.
        for j in 0..self.contexts.len() {
            self.close_connections(j, Some(self.log_generation));
        }
        for (j, ev) in std::mem::take(&mut self.blocked) {
            self.schedule(self.now, j, ev);
        }
    }
}
