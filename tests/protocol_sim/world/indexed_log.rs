//! The simulated IndexedDB log: appends that commit in each writer's order, reads, trims that leave a
//! reader behind, the wake of readers without a carrier (storage pokes, a relayed farewell), and the
//! log's database deleted and made anew.

use std::rc::Rc;

use weblocks::protocol::Participant;
use weblocks::protocol::replica::Replica;
use weblocks::protocol::wire::{self, Value};

use super::{Ev, Payload, World};

impl World {
    /// Runs a log event through context `i`'s participant, then checks what it reported for the entries
    /// it applied (its position in the log moved past them).
    pub(super) fn log_event(&mut self, i: usize, f: impl FnOnce(&mut Participant, u64)) {
        let now = self.now;
        let before = self.contexts[i].participant.log_position();
        f(&mut self.contexts[i].participant, now);
        let after = self.contexts[i].participant.log_position();
        if let (Some(b), Some(a)) = (before, after)
            && a > b
        {
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
        }
        self.effects(i);
        if let (Some(b), Some(a)) = (before, after)
            && a > b
        {
            let base = self.log_bases[self.contexts[i].conn_log];
            self.check_expected(i, base + a as usize - 1);
        }
    }

    /// Context `i`'s read of the log ended with this floor. A floor past its position is a trim it
    /// fell behind: the observer's decisions for it up to the floor are lost for it.
    pub(super) fn read_done(&mut self, i: usize, floor: u64) {
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
        let now = self.now;
        self.contexts[i].participant.handle_log_read(now, floor);
        self.effects(i);
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

    /// A read of the log from `after` runs in the database for context `i`: it sees what has committed.
    pub(super) fn log_read(&mut self, i: usize, after: u64) {
        self.reads += 1;
        if std::mem::take(&mut self.contexts[i].fail_next_read) {
            self.bump("failed reads");
            self.meets_loss(i, "its read failed");
            let delay = self.rng.range(0, 2);
            self.schedule(self.now + delay, i, Ev::LogGap("its read failed"));
            return;
        }
        let base = self.log_bases[self.log_generation];
        let from = base + after.max(self.floor) as usize;
        let entries = (from..self.log.len())
            .map(|idx| ((idx - base) as u64 + 1, self.log[idx].clone()))
            .collect();
        let floor = self.floor;
        let delay = self.rng.range(0, 2);
        let log = self.log_generation;
        self.schedule(
            self.now + delay,
            i,
            Ev::LogReadDone {
                log,
                entries,
                floor,
            },
        );
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

    /// Log transport: context `i`'s append commits, unless it was lost with its context; its JS hears
    /// of it (and hands it on) when it next runs.
    pub(super) fn append(&mut self, i: usize, msg: Rc<Vec<Value>>, life: u32) {
        if life != self.contexts[i].life && self.rng.chance(0.5) {
            return; // the transaction died with its context
        }
        if std::mem::take(&mut self.contexts[i].abort_next_append) {
            self.bump("aborted appends");
            self.meets_loss(i, "its append aborted");
            let delay = self.rng.range(0, 2);
            self.schedule(self.now + delay, i, Ev::LogGap("its append aborted"));
            return;
        }
        let idx = self.log.len();
        self.log.push(msg.clone());
        self.longest_log = self.longest_log.max(self.log_len());
        let log = self.log_generation;
        let key = (idx - self.log_bases[log]) as u64 + 1;
        self.unposted.insert(key);
        self.observe(idx, &msg);
        let delay = self.rng.range(0, 2);
        self.schedule(self.now + delay, i, Ev::Committed { log, key });
    }

    /// Context `j` has the current log open: it runs (or will: stalled, frozen) with its channels open
    /// on it, and the browser has not closed its connection. (One that left the protocol still holds
    /// its global's connection in the browser; the world lets a deletion complete without it, which
    /// only makes the world harsher: it joins the new log when it comes back.)
    pub(super) fn log_open(&self, j: usize) -> bool {
        let n = &self.contexts[j];
        n.status.alive() && n.connected && n.conn_log == self.log_generation
    }

    /// Whether context `i`'s work `ev` on the log of generation `log` waits for a deletion under way
    /// (then it is kept until the log is made anew) or is of a deleted log (then it fails: the browser
    /// closed its connection). False when it runs now.
    pub(super) fn waits_for_deletion(
        &mut self,
        i: usize,
        log: usize,
        ev: impl FnOnce() -> Ev,
    ) -> bool {
        if log < self.log_generation {
            return true;
        }
        if log > self.log_generation {
            self.blocked.push((i, ev()));
            return true;
        }
        false
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
        for (j, ev) in std::mem::take(&mut self.blocked) {
            self.schedule(self.now, j, ev);
        }
    }
}
