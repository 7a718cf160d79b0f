//! What a participant has whatever its state: its identity and counters, its own requests and queries,
//! the messages it has queued and the effects it has produced, and what every state does with them.

use std::collections::VecDeque;
use std::rc::Rc;

use crate::protocol::replica::Outcome;
use crate::protocol::storage_hint;
use crate::protocol::wire::{self, Body, MemberKey, Message};
use crate::scheduler::{LockInfo, LockMode, Snapshot};
use crate::sequence_map::SequenceMap;

use super::config::Config;
use super::effect::{Effect, LossReason};

/// Where one of this context's requests stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RequestState {
    /// Not sent yet (the context is joining, or lost its membership and will send it again).
    Queued,
    /// Sent; its outcome comes from the replica.
    Posted,
    /// Granted and not released.
    Held,
}

/// One of this context's requests (spec 4.1 step 3's request), by its JS id.
#[derive(Clone, Debug)]
pub(super) struct LocalRequest {
    pub name: Rc<str>,
    pub mode: LockMode,
    pub if_available: bool,
    pub steal: bool,
    pub state: RequestState,
    /// Its place among this context's calls (a query sees the requests made before it).
    pub call: u64,
}

/// A `query()` waiting for the replica to include every request this context made before it.
#[derive(Clone, Debug)]
pub(super) struct PendingQuery {
    pub id: u64,
    /// The sequence number of this context's last message queued before the query, once every request
    /// made before the query has been queued; the query is answered once that message is applied.
    pub watermark: Option<u64>,
    /// Its place among this context's calls.
    pub call: u64,
}

/// The earlier of two optional deadlines (`None`: no deadline).
pub(super) fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        _ => a.or(b),
    }
}

pub(super) struct Core {
    pub config: Config,
    pub version: u32,
    pub client: Rc<str>,
    /// Grows each time the context (re)joins: messages of an earlier membership are recognisably stale.
    pub incarnation: u32,
    /// Sequence number of the last message queued.
    pub seq: u64,
    /// Sequence number of the last own message applied in the order (seen back).
    pub echoed_seq: u64,
    pub requests: SequenceMap<u64, LocalRequest>,
    pub queries: Vec<PendingQuery>,
    /// Counts this context's request and query calls.
    calls: u64,
    /// The storage hint as last read or written.
    pub live_until: Option<u64>,
    /// This context wrote the storage hint and has not removed it since.
    pub wrote_hint: bool,
    /// When this context last called `query()`.
    pub queried_at: Option<u64>,
    /// Another member's request was applied since this context last had anything to do: if it is
    /// idle, it makes way.
    pub saw_request: bool,
    /// The messages decided alone without queueing them (the lone member), kept only when asked
    /// (the simulation's observer must apply them too; nothing else reads them).
    decided: Option<Vec<Message>>,
    /// Messages queued since the last `Transmit`.
    outbox: Vec<Message>,
    out: VecDeque<Effect>,
    /// The deadline of the armed timer.
    timer: Option<u64>,
    /// The key of this context's open liveness database (`Config::evidence`), 0 while it has none.
    pub watch: u64,
    /// An `Effect::OpenAlive` is under way.
    pub opening_alive: bool,
}

impl Core {
    pub fn new(client: &str, config: Config, version: u32) -> Core {
        Core {
            config,
            version,
            client: client.into(),
            incarnation: 0,
            seq: 0,
            echoed_seq: 0,
            requests: SequenceMap::new(),
            queries: Vec::new(),
            calls: 0,
            live_until: None,
            wrote_hint: false,
            queried_at: None,
            saw_request: false,
            decided: None,
            outbox: Vec::new(),
            out: VecDeque::new(),
            timer: None,
            watch: 0,
            opening_alive: false,
        }
    }

    pub fn member_key(&self) -> MemberKey {
        MemberKey {
            client: self.client.clone(),
            incarnation: self.incarnation,
        }
    }

    pub fn emit(&mut self, effect: Effect) {
        self.out.push_back(effect);
    }

    pub fn next_effect(&mut self) -> Option<Effect> {
        self.out.pop_front()
    }

    /// A new call of this context (a request or a query): its place among the others.
    pub fn next_call(&mut self) -> u64 {
        self.calls += 1;
        self.calls
    }

    /// This context's next message: `body` with the next sequence number.
    pub fn next_message(&mut self, body: Body) -> Message {
        self.seq += 1;
        Message {
            sender: self.member_key(),
            seq: self.seq,
            body,
        }
    }

    /// Queues `body` for the channel as this context's next message.
    pub fn send(&mut self, body: Body) {
        let message = self.next_message(body);
        self.queue(message);
    }

    /// Queues `message` (this context's, or another's it appends for it) for the channel.
    pub fn queue(&mut self, message: Message) {
        if self.outbox.is_empty() {
            self.emit(Effect::FlushSoon);
        }
        self.outbox.push(message);
    }

    /// The queued messages go out: as one `Transmit`, or several in order where one would be over the
    /// cap of what a context decodes (see [`wire::split_transmit`]).
    pub fn flush(&mut self) {
        if !self.outbox.is_empty() {
            let messages = std::mem::take(&mut self.outbox);
            for post in wire::split_transmit(messages, self.version) {
                self.emit(Effect::Transmit(post));
            }
        }
    }

    pub fn record_decisions(&mut self) {
        self.decided.get_or_insert_with(Vec::new);
    }

    pub fn take_decided(&mut self) -> Vec<Message> {
        self.decided
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// A message this context decided alone without queueing it (the lone member).
    pub fn decided(&mut self, message: Message) {
        if let Some(decided) = &mut self.decided {
            decided.push(message);
        }
    }

    /// Arms the timer for `at` (`None`: no timer), if that changes it.
    pub fn set_timer(&mut self, at: Option<u64>) {
        if at == self.timer {
            return;
        }
        self.timer = at;
        self.emit(match at {
            Some(at) => Effect::SetTimer { at },
            None => Effect::ClearTimer,
        });
    }

    pub fn timer_fired(&mut self) {
        self.timer = None;
    }

    /// Nothing held, pending, queued or queried here, and no timer set.
    pub fn is_quiet(&self) -> bool {
        self.requests.is_empty() && self.queries.is_empty() && self.timer.is_none()
    }

    pub fn has_interest(&self) -> bool {
        !self.requests.is_empty()
    }

    pub fn write_live(&mut self, until: u64) {
        self.live_until = Some(until);
        self.emit(Effect::StorageWrite {
            value: storage_hint::format(until),
        });
    }

    pub fn remove_live(&mut self) {
        self.wrote_hint = false;
        self.live_until = None;
        self.emit(Effect::StorageRemove);
    }

    /// Whether this context holds a lock on `name` that a request in `mode` conflicts with and has not
    /// released it. Costs a pass over this context's requests, only for `ifAvailable` calls.
    pub fn holds_conflicting(&self, name: &str, mode: LockMode) -> bool {
        self.requests.values().any(|r| {
            r.state == RequestState::Held
                && *r.name == *name
                && (r.mode == LockMode::Exclusive || mode == LockMode::Exclusive)
        })
    }

    /// The ids of this context's requests that `pick` selects, in id order.
    pub fn request_ids(&self, pick: fn(&LocalRequest) -> bool) -> Vec<u64> {
        let mut ids = Vec::new();
        for (id, r) in self.requests.iter() {
            if pick(r) {
                ids.push(*id);
            }
        }
        ids
    }

    /// Turns the replica's outcomes of one applied message for this incarnation's requests into effects.
    pub fn handle_outcomes(&mut self, outcomes: Vec<Outcome>) {
        let me = self.member_key();
        for o in &outcomes {
            let (member, local_id) = match o {
                Outcome::Granted { member, local_id }
                | Outcome::NotAvailable { member, local_id }
                | Outcome::Revoked {
                    member, local_id, ..
                } => (member, *local_id),
            };
            // Absent when JS aborted the request meanwhile (the origin releases it on the Abort), or
            // released the lock before learning it was taken.
            let Some(r) = self.requests.get_mut(&local_id) else {
                continue;
            };
            // Another member's outcome is none of this context's business; a grant keeps the
            // request (now held); the other outcomes end it.
            let effect = match o {
                _ if *member != me => continue,
                Outcome::Granted { .. } if r.state == RequestState::Posted => {
                    r.state = RequestState::Held;
                    self.emit(Effect::Granted(local_id));
                    continue;
                }
                Outcome::NotAvailable { .. } if r.state == RequestState::Posted => {
                    Effect::NotAvailable(local_id)
                }
                Outcome::Revoked { reason, .. } if r.state == RequestState::Held => {
                    Effect::Stolen {
                        id: local_id,
                        reason: (*reason).into(),
                    }
                }
                _ => continue,
            };
            self.requests.remove(&local_id);
            self.emit(effect);
        }
    }

    /// This context's membership is gone (for `reason`): every lock it holds is gone too (forgotten,
    /// and JS told, as after a steal), and its other requests go back to the queue, to be sent again
    /// once it is an active member again (and the queries wait for them to be sent again).
    pub fn lose_membership(&mut self, reason: LossReason) {
        for id in self.request_ids(|r| r.state == RequestState::Held) {
            self.requests.remove(&id);
            self.emit(Effect::Stolen { id, reason });
        }
        for r in self.requests.values_mut() {
            r.state = RequestState::Queued;
        }
        self.reset_watermarks();
    }

    /// The queries wait for the requests made before them to be sent (again).
    pub fn reset_watermarks(&mut self) {
        for q in &mut self.queries {
            q.watermark = None;
        }
    }

    /// Gives a watermark to each query that no unsent request of this context precedes: the snapshot
    /// must include exactly this context's calls made before the query, not those made after it.
    pub fn settle_watermarks(&mut self) {
        if self.queries.iter().all(|q| q.watermark.is_some()) {
            return;
        }
        let mut first_queued = None;
        for r in self.requests.values() {
            if r.state == RequestState::Queued {
                first_queued = earliest(first_queued, Some(r.call));
            }
        }
        self.settle_watermarks_before(first_queued);
    }

    /// [`Core::settle_watermarks`] given the call of the first request still queued.
    pub fn settle_watermarks_before(&mut self, first_queued: Option<u64>) {
        let seq = self.seq;
        for q in &mut self.queries {
            if q.watermark.is_none() && first_queued.is_none_or(|c| c > q.call) {
                q.watermark = Some(seq);
            }
        }
    }

    /// What this context alone knows (used once it can no longer see the origin's state).
    pub fn local_snapshot(&self) -> Snapshot {
        let mut snapshot = Snapshot {
            held: Vec::new(),
            pending: Vec::new(),
        };
        for r in self.requests.values() {
            let info = LockInfo {
                name: r.name.clone(),
                mode: r.mode,
                client_id: self.client.clone(),
            };
            match r.state {
                RequestState::Held => snapshot.held.push(info),
                _ => snapshot.pending.push(info),
            }
        }
        snapshot
    }
}
