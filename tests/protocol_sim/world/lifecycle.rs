//! Faults and the page lifecycle: crashes, stalls, freezes, the back/forward cache, closes, the
//! IndexedDB faults, and what a context does when it comes back.

use std::rc::Rc;

use weblocks::protocol::evidence::StorageEvent;
use weblocks::protocol::wire::{self, Value};
use weblocks::protocol::{BackForwardCache, Transport};

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
            Fault::Hide(d) if self.stays_in_cache() => {
                // The edge's farewell waits for a `pagehide` without `persisted`: nothing is posted.
                // Its storage object's listener tells the evidence first (no connection of it hides).
                self.storage_hide(i);
                self.hiding = Some(i);
                self.contexts[i].participant.handle_pagehide(now, true);
                self.effects(i);
                self.hiding = None;
                self.enter_cache_as_member(i, d);
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
            Fault::CutHide(d) if self.stays_in_cache() => {
                // The farewell does not act on entering the cache and the participant never hears of
                // it: it is the member it was when it is shown again. The storage object's listener,
                // which runs no wasm, does.
                self.storage_hide(i);
                self.enter_cache_as_member(i, d);
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
                    self.close_connections(i, None);
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
                // Every connection to the log as it is, whether or not its context is in the
                // protocol (a writer opens the log before its context joins).
                let holders: Vec<usize> = (0..self.contexts.len())
                    .filter(|&j| self.holds_log(j))
                    .collect();
                for j in holders {
                    if cleared {
                        // The browser closes every connection.
                        self.note(|| {
                            format!("ctx{j}'s connection to the log is closed: the log is cleared")
                        });
                        if self.log_open(j) {
                            self.meets_loss(j, "the log cleared");
                        }
                        self.close_connections(j, None);
                    } else {
                        // A page's deletion closes none, and tells each connection
                        // (`versionchange`, which the edge hands to its sweep); a page in the
                        // back/forward cache hears it once shown again.
                        let delay = self.rng.range(0, 2);
                        let ev =
                            Ev::Storage(weblocks::protocol::evidence::StorageEvent::DeletionWaits);
                        self.schedule(now + delay, j, ev);
                    }
                }
                self.deleting = true;
                self.finish_deletion();
            }
            Fault::RecordDeleted => self.delete_record(i),
            Fault::StorageLost => {
                if self.storage.lost.contains(&i) {
                    return;
                }
                self.bump("storage lost under a live context");
                self.storage_lost(i);
                if self.over_log() && self.contexts[i].connected {
                    // The log's connection goes with the rest (it is opened again in this world,
                    // where only the evidence's storage stays lost: the context refuses all the same).
                    self.meets_loss(i, "its storage was lost");
                    self.close_connections(i, None);
                }
            }
            Fault::Sweep => self.sweep(i),
            Fault::Undecodable => {
                self.bump("undecodable posts");
                let msg = Rc::new(vec![Value::Num(0.0); wire::MAX_SLOTS + 1]);
                if self.over_log() {
                    // Its edge's append, as any: the context's own entry event skips it too.
                    if let Some(writer) = self.contexts[i].log_writer.as_mut() {
                        writer.append(msg.to_vec());
                        self.effects(i);
                    }
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

    /// Whether the origin's pages stay members in the back/forward cache (Blink, Gecko), rather than
    /// step out on entering it (WebKit).
    pub(super) fn stays_in_cache(&self) -> bool {
        self.env.config.back_forward_cache == BackForwardCache::Stay
    }

    /// Context `i` is in the back/forward cache as a member for `d` ms, then shown again, unless it is
    /// evicted first. A page that enters it while another context's open at a newer version already
    /// waits for its liveness database is evicted at once in Chromium, and kept in Firefox: both.
    pub(super) fn enter_cache_as_member(&mut self, i: usize, d: u64) {
        let watched = self
            .storage
            .dbs
            .values()
            .any(|db| db.watched_while_open_by(i));
        let n = &mut self.contexts[i];
        n.status = Status::Cached;
        n.hidden_count += 1;
        n.unresponsive.push((self.now, self.now + d, true));
        self.schedule(self.now + d, i, Ev::Show);
        if watched && self.rng.chance(0.5) {
            self.evict(i, "a watch of its liveness database was waiting");
        }
    }

    /// The browser discards context `i` from the back/forward cache: it is gone, as if closed
    /// without `pagehide` (its connections close; no farewell, no script of it runs).
    pub(super) fn evict(&mut self, i: usize, why: &'static str) {
        self.note(|| format!("ctx{i} evicted from the back/forward cache: {why}"));
        self.bump("evictions from the back/forward cache");
        if let Some(last) = self.contexts[i].unresponsive.last_mut() {
            last.1 = self.now;
        }
        self.contexts[i].deferred.clear();
        self.close(i);
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
        if let (Status::Cached, Some(last)) = (
            self.contexts[i].status,
            self.contexts[i].unresponsive.last_mut(),
        ) {
            last.1 = now;
        }
        self.contexts[i].status = Status::Running;
        self.note(|| format!("ctx{i} pageshow"));
        // Inside pageshow a participant catches up on a `pagehide` cut short (Fault::CutHide): its locks
        // go then.
        self.hiding = Some(i);
        self.contexts[i].participant.handle_pageshow(now, true);
        self.effects(i);
        self.hiding = None;
        // Its storage object's `pageshow` listener runs after the participant's; its event comes
        // after those that waited for the page.
        self.contexts[i]
            .deferred
            .push_back(Ev::Storage(StorageEvent::PageShown));
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
