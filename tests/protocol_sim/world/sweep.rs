//! A page's logout sweep ([`Fault::Sweep`](super::Fault)): it deletes every database of the origin,
//! and each deletion waits for the connections to its database. The contexts run the production
//! decision (`weblocks::protocol::evidence::sweep`, through the edge loop): one that holds and waits for
//! nothing leaves and gives its connections up, one that holds or waits keeps them until it does not.
//! Exclusion is checked at every step as in every run; [`World::check_swept`] checks at the end, once
//! nothing is held or waited for, that every deletion completed.
//!
//! A world without the record's model ([`super::transport_record`]) still has the record in a browser:
//! the sweep deletes it too, and that deletion waits for every context that runs (each keeps its
//! connection) until it gives it up; a context that gave it up, and any that starts meanwhile, waits
//! for the deletion to complete ([`ImplicitRecord`]).

use std::collections::BTreeSet;

use weblocks::protocol::evidence::StorageEvent;

use super::{Admission, Ev, Status, World};

/// The record's deletion under way in a world without the record's model.
#[derive(Debug, Default)]
pub(super) struct ImplicitRecord {
    /// The contexts whose connection it waits for.
    holders: BTreeSet<usize>,
    /// Those that gave it up and asked again, and those that start meanwhile, in order.
    askers: Vec<usize>,
    starting: Vec<usize>,
}

impl World {
    pub(super) fn sweep(&mut self, i: usize) {
        self.bump("sweeps");
        self.note(|| format!("ctx{i} deletes every database of the origin"));
        self.delete_every_liveness_database();
        if self.record.is_some() {
            self.delete_record(i);
            return;
        }
        if self.implicit_record.is_none() {
            let holders: BTreeSet<usize> = (0..self.contexts.len())
                .filter(|&j| {
                    // One whose storage the browser took has no connection left to wait for.
                    let status = self.contexts[j].status;
                    (status.alive() || status == Status::Hidden) && !self.storage.lost.contains(&j)
                })
                .collect();
            for &j in &holders {
                let delay = self.rng.range(0, 2);
                let ev = Ev::Storage(StorageEvent::DeletionWaits);
                self.schedule(self.now + delay, j, ev);
            }
            self.implicit_record = Some(ImplicitRecord {
                holders,
                ..ImplicitRecord::default()
            });
            self.finish_implicit();
        }
        if self.over_log() {
            self.fault(i, super::Fault::LogDeleted);
        }
    }

    /// Context `i` gave the record up (`StorageOp::ReleaseRecord`) and asks again.
    pub(super) fn implicit_release(&mut self, i: usize) {
        let Some(rec) = self.implicit_record.as_mut() else {
            // No deletion under way: the record answers at once.
            return self.schedule(self.now, i, Ev::Storage(StorageEvent::RecordAgreed));
        };
        rec.holders.remove(&i);
        // One answer per release.
        rec.askers.push(i);
        self.finish_implicit();
    }

    /// Context `i` gave the record up for the deletion under way and waits for its answer.
    pub(super) fn implicit_asks(&self, i: usize) -> bool {
        self.implicit_record
            .as_ref()
            .is_some_and(|r| r.askers.contains(&i))
    }

    /// Context `i` is gone: the deletion no longer waits for it.
    pub(super) fn implicit_gone(&mut self, i: usize) {
        if let Some(rec) = self.implicit_record.as_mut() {
            rec.holders.remove(&i);
            rec.askers.retain(|&j| j != i);
            rec.starting.retain(|&j| j != i);
            self.finish_implicit();
        }
    }

    /// A context starts: behind the record's deletion, if one is under way.
    pub(super) fn start_unless_swept(&mut self, i: usize) {
        match self.implicit_record.as_mut() {
            Some(rec) => {
                // Its JS runs; its calls wait for the engine, which waits for the record.
                rec.starting.push(i);
                self.contexts[i].status = Status::Running;
                self.contexts[i].admission = Admission::Awaiting;
            }
            None => self.start(i),
        }
    }

    /// Once no connection is left, the record is deleted: those that asked read it again, and those
    /// that waited start.
    fn finish_implicit(&mut self) {
        if self
            .implicit_record
            .as_ref()
            .is_none_or(|r| !r.holders.is_empty())
        {
            return;
        }
        let rec = self.implicit_record.take().expect("under way");
        self.note(|| "the record is deleted".into());
        for j in rec.askers {
            self.schedule(self.now, j, Ev::Storage(StorageEvent::RecordAgreed));
        }
        for j in rec.starting {
            self.contexts[j].admission = Admission::Started;
            self.start(j);
            for action in std::mem::take(&mut self.contexts[j].awaiting) {
                self.client(j, action);
            }
        }
    }

    /// The deletions still under way (for the trace and the checks).
    pub fn deletions_waiting(&self) -> Vec<String> {
        let mut waiting = self.liveness_deletion_waits();
        if let Some(r) = self.record.as_ref().filter(|r| r.deleting) {
            waiting.push(format!("the record (open by {:?})", r.open));
        }
        if let Some(r) = &self.implicit_record {
            waiting.push(format!("the record (open by {:?})", r.holders));
        }
        if self.deleting {
            let open: Vec<usize> = (0..self.contexts.len())
                .filter(|&j| self.log_open(j))
                .collect();
            waiting.push(format!("the log (open by {open:?})"));
        }
        waiting
    }

    /// After settling, with nothing held or waited for: no deletion of a sweep still waits.
    pub fn check_swept(&mut self) {
        let waiting = self.deletions_waiting();
        if !waiting.is_empty() {
            self.violation(format!(
                "a page's deletion still waits once the origin is settled: {}",
                waiting.join(", ")
            ));
        }
    }
}
