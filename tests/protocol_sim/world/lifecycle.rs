//! Faults and the page lifecycle: crashes, stalls, freezes, the back/forward cache, closes, the
//! IndexedDB faults, and what a context does when it comes back.

use std::rc::Rc;

use weblocks::protocol::Transport;
use weblocks::protocol::wire::{self, Value};

use super::{Admission, Ev, Fault, Payload, Status, World};

impl World {
    pub(super) fn fault(&mut self, i: usize, f: Fault) {
        self.note(|| format!("ctx{i} fault {f:?}"));
        if self.contexts[i].admission != Admission::Started {
            // A context that runs no participant (yet): it is gone, or busy, or runs its client's
            // logout code; nothing else of it is at stake.
            return match f {
                Fault::Crash | Fault::RecordDeleted | Fault::Sweep => self.fault_started(i, f),
                Fault::Close | Fault::CutClose => self.close(i),
                Fault::Stall(d) | Fault::Freeze(d) | Fault::Hide(d) | Fault::CutHide(d) => {
                    self.fault_started(i, Fault::Stall(d))
                }
                _ => {}
            };
        }
        self.fault_started(i, f)
    }

    fn fault_started(&mut self, i: usize, f: Fault) {
        let now = self.now;
        match f {
            Fault::Crash => {
                // The process goes, with every context in it.
                let process = self.contexts[i].process;
                let mut crashed = Vec::new();
                for (j, n) in self.contexts.iter_mut().enumerate() {
                    if n.process == process && n.status.alive() {
                        n.status = Status::Crashed;
                        n.life += 1;
                        n.deferred.clear();
                        n.expected.clear();
                        crashed.push(j);
                    }
                }
                for j in crashed {
                    self.storage_gone(j);
                    self.release_record(j);
                }
            }
            Fault::Stall(d) => {
                self.contexts[i].status = Status::Stalled;
                self.contexts[i].unresponsive.push((now, now + d, false));
                self.schedule(now + d, i, Ev::EndStall);
            }
            Fault::Freeze(d) => {
                self.contexts[i].participant.handle_freeze(now);
                self.effects(i);
                self.contexts[i].status = Status::Frozen;
                self.contexts[i].unresponsive.push((now, now + d, true));
                self.schedule(now + d, i, Ev::Resume);
            }
            Fault::Hide(d) => {
                if self.over_log() {
                    self.farewell_relay(i);
                }
                // The edge's capture listener closes the liveness database before the participant's.
                self.storage_hide(i);
                self.hiding = Some(i);
                self.contexts[i].participant.handle_pagehide(now, true);
                self.effects(i);
                self.hiding = None;
                self.enter_cache(i, d);
            }
            Fault::Close => {
                if self.over_log() {
                    self.farewell_relay(i);
                }
                self.contexts[i].participant.handle_close(now);
                self.effects(i);
                self.close(i);
            }
            Fault::CutHide(d) => {
                self.farewell(i);
                // The edge's own pagehide listener closes the liveness database too.
                self.storage_hide(i);
                self.enter_cache(i, d);
            }
            Fault::Gap(d) => {
                self.contexts[i].gap_until = now + d;
                self.contexts[i].gap_floor = self.log_len() + self.floor;
                self.contexts[i].unresponsive.push((now, now + d, false));
                self.bump("gaps");
                self.meets_loss(i, "a gap");
                self.schedule(now + d, i, Ev::EndGap);
            }
            Fault::CutClose => {
                self.farewell(i);
                self.close(i);
            }
            Fault::AppendAborts => self.contexts[i].abort_next_append = self.over_log(),
            Fault::ConnectionCloses => {
                if self.over_log() && self.contexts[i].connected {
                    // Its transactions in flight may still commit (or abort: `Fault::AppendAborts`);
                    // the `close` event comes after them.
                    self.bump("connections closed");
                    self.meets_loss(i, "its connection closed");
                    self.contexts[i].db_log = None;
                    let delay = self.rng.range(0, 2);
                    self.schedule(now + delay, i, Ev::LogGap("its connection closed"));
                }
            }
            Fault::ReadFails => self.contexts[i].fail_next_read = self.over_log(),
            Fault::LogDeleted | Fault::LogCleared => {
                if !self.over_log() || self.deleting {
                    return;
                }
                let cleared = matches!(f, Fault::LogCleared);
                self.bump(if cleared {
                    "logs cleared"
                } else {
                    "logs deleted"
                });
                // The browser closes every connection; a page's deletion closes none, and tells
                // each (`versionchange`).
                for j in 0..self.contexts.len() {
                    // (A page in the back/forward cache hears it once shown again.)
                    let status = self.contexts[j].status;
                    let global_holds = (status.alive() || status == Status::Hidden)
                        && self.contexts[j].db_log == Some(self.log_generation);
                    if self.log_open(j) || (!cleared && global_holds) {
                        let delay = self.rng.range(0, 2);
                        let ev = if cleared {
                            Ev::LogCleared
                        } else {
                            Ev::Storage(weblocks::protocol::evidence::StorageEvent::DeletionWaits)
                        };
                        self.schedule(now + delay, j, ev);
                    }
                }
                if cleared {
                    // Its global's connection too, where the context is out of the protocol.
                    for n in &mut self.contexts {
                        if !n.connected && n.db_log == Some(self.log_generation) {
                            n.db_log = None;
                        }
                    }
                }
                self.deleting = true;
                self.finish_deletion();
            }
            Fault::RecordDeleted => self.delete_record(i),
            Fault::Sweep => self.sweep(i),
            Fault::Undecodable => {
                self.bump("undecodable posts");
                let msg = Rc::new(vec![Value::Num(0.0); wire::MAX_SLOTS + 1]);
                if self.over_log() {
                    // Its edge's append, as any: the context's own entry event skips it too.
                    let n = &mut self.contexts[i];
                    let at = self.now.max(n.last_append);
                    n.last_append = at;
                    let life = n.life;
                    let log = n.conn_log;
                    self.schedule(at, i, Ev::Append { msg, life, log });
                } else {
                    self.channel_post(i, Payload::Message { msg, idx: None });
                }
            }
        }
    }

    /// Context `i` is in the back/forward cache (its channel closed) for `d` ms, then shown again.
    pub(super) fn enter_cache(&mut self, i: usize, d: u64) {
        let n = &mut self.contexts[i];
        n.status = Status::Hidden;
        n.connected = false;
        n.epoch += 1;
        n.hidden_count += 1;
        n.expected.clear();
        self.schedule(self.now + d, i, Ev::Show);
    }

    /// Context `i` is gone. Over the log, its appends still in flight may die with it.
    pub(super) fn close(&mut self, i: usize) {
        let n = &mut self.contexts[i];
        n.status = Status::Closed;
        n.expected.clear();
        if matches!(self.env.config.transport, Transport::Log(_)) {
            n.life += 1;
        }
        self.storage_gone(i);
        self.release_record(i);
    }

    /// What the edge's farewell listener does in a `pagehide` cut short: post the participant's Leave
    /// (over the log: ask the others to append it).
    pub(super) fn farewell(&mut self, i: usize) {
        if self.over_log() {
            self.farewell_relay(i);
        } else if let Some(m) = self.contexts[i].farewell.clone() {
            let version = self.contexts[i].participant.version();
            let data = wire::encode_transmit(std::slice::from_ref(&m), version);
            self.transmit(i, &[m], data);
        }
    }

    pub(super) fn end_stall(&mut self, i: usize) {
        let now = self.now;
        if let Some(last) = self.contexts[i].unresponsive.last_mut() {
            last.1 = now;
        }
        self.contexts[i].status = Status::Running;
        self.run_deferred(i);
    }

    pub(super) fn resume(&mut self, i: usize) {
        let now = self.now;
        if let Some(last) = self.contexts[i].unresponsive.last_mut() {
            last.1 = now;
        }
        self.contexts[i].status = Status::Running;
        self.note(|| format!("ctx{i} resumes"));
        self.contexts[i].participant.handle_resume(now);
        self.effects(i);
        self.run_deferred(i);
    }

    pub(super) fn show(&mut self, i: usize) {
        let now = self.now;
        self.contexts[i].status = Status::Running;
        self.note(|| format!("ctx{i} pageshow"));
        // Inside pageshow a participant catches up on a `pagehide` cut short (Fault::CutHide): its locks
        // go then.
        self.hiding = Some(i);
        self.contexts[i].participant.handle_pageshow(now, true);
        self.effects(i);
        self.hiding = None;
        self.run_deferred(i);
    }

    pub(super) fn run_deferred(&mut self, i: usize) {
        while self.contexts[i].status == Status::Running {
            let Some(ev) = self.contexts[i].deferred.pop_front() else {
                break;
            };
            self.run(i, ev);
        }
    }
}
