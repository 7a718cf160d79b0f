//! What a participant has whatever its state: its identity and counters, its own requests and queries,
//! the messages it has queued and the effects it has produced, and what every state does with them.

use std::collections::VecDeque;
use std::rc::Rc;

use crate::protocol::replica::Outcome;
use crate::protocol::wire::{self, Body, MemberKey, Message};
use crate::scheduler::{LockInfo, LockMode, LockOptions, Snapshot};
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
    pub(super) name: Rc<str>,
    pub(super) options: LockOptions,
    pub(super) state: RequestState,
    /// Its place among this context's calls (a query sees the requests made before it).
    pub(super) call: u64,
}

/// A `query()` waiting for the replica to include every request this context made before it.
#[derive(Clone, Debug)]
struct PendingQuery {
    id: u64,
    /// The sequence number of this context's last message queued before the query, once every request
    /// made before the query has been queued; the query is answered once that message is applied.
    watermark: Option<u64>,
    /// Its place among this context's calls.
    call: u64,
}

/// The earlier of two optional deadlines (`None`: no deadline).
pub(super) fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        _ => a.or(b),
    }
}

pub(super) struct Core {
    config: Config,
    version: u32,
    client: Rc<str>,
    /// Grows each time the context (re)joins: messages of an earlier membership are recognisably stale.
    incarnation: u32,
    /// Sequence number of the last message queued.
    seq: u64,
    /// Sequence number of the last own message applied in the order (seen back).
    echoed_seq: u64,
    requests: SequenceMap<u64, LocalRequest>,
    queries: Vec<PendingQuery>,
    /// Counts this context's request and query calls.
    calls: u64,
    /// When this context last called `query()`.
    queried_at: Option<u64>,
    /// Another member's request was applied since this context last had anything to do: if it is
    /// idle, it makes way.
    saw_request: bool,
    /// Messages queued since the last `Transmit`.
    outbox: Vec<Message>,
    out: VecDeque<Effect>,
    /// The next deadline: when the participant wants [`super::Participant::handle_timeout`].
    deadline: Option<u64>,
    /// The key of this context's open liveness database, 0 while it has none.
    watch: u64,
    /// An `Effect::OpenAlive` is under way.
    opening_alive: bool,
}

impl Core {
    pub(super) fn new(client: &str, config: Config, version: u32) -> Core {
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
            queried_at: None,
            saw_request: false,
            outbox: Vec::new(),
            out: VecDeque::new(),
            deadline: None,
            watch: 0,
            opening_alive: false,
        }
    }

    pub(super) fn config(&self) -> &Config {
        &self.config
    }

    /// The protocol version this context speaks.
    pub(super) fn version(&self) -> u32 {
        self.version
    }

    pub(super) fn client(&self) -> &Rc<str> {
        &self.client
    }

    pub(super) fn incarnation(&self) -> u32 {
        self.incarnation
    }

    /// Sequence number of the last message queued.
    pub(super) fn seq(&self) -> u64 {
        self.seq
    }

    /// Sequence number of the last own message seen back in the order.
    pub(super) fn echoed_seq(&self) -> u64 {
        self.echoed_seq
    }

    /// Every message this context queued has come back in the order.
    pub(super) fn all_echoed(&self) -> bool {
        self.echoed_seq == self.seq
    }

    /// Own message `seq`, come back in the order, came past an earlier one of this context's that has
    /// not come back: that one was lost.
    pub(super) fn echo_skips(&self, seq: u64) -> bool {
        seq > self.echoed_seq + 1 && seq <= self.seq
    }

    /// Own message `seq` came back in the order.
    pub(super) fn echoed(&mut self, seq: u64) {
        self.echoed_seq = self.echoed_seq.max(seq);
    }

    /// The context left the protocol: the messages it sent will not come back on its closed channels.
    pub(super) fn forget_echoes(&mut self) {
        self.echoed_seq = self.seq;
    }

    /// A new incarnation: queues its `Join`, announcing this context's liveness database, and returns
    /// the Join's sequence number.
    pub(super) fn send_join(&mut self) -> u64 {
        self.incarnation += 1;
        self.send(Body::Join { watch: self.watch });
        self.seq
    }

    // ---- the liveness database ----------------------------------------------------------------------

    /// The key of this context's open liveness database, 0 while it has none.
    pub(super) fn watch(&self) -> u64 {
        self.watch
    }

    /// Asks the edge to open this context's liveness database, unless it is already being opened.
    pub(super) fn open_alive(&mut self) {
        if !self.opening_alive {
            self.opening_alive = true;
            self.emit(Effect::OpenAlive);
        }
    }

    /// The liveness database is open under key `watch`. False (and ignored) if none was asked for:
    /// it was closed meanwhile.
    pub(super) fn alive_opened(&mut self, watch: u64) -> bool {
        if !self.opening_alive {
            return false;
        }
        self.opening_alive = false;
        self.watch = watch;
        true
    }

    /// Closes this context's liveness database, if it has one or one is being opened.
    pub(super) fn close_alive(&mut self) {
        if self.watch != 0 || self.opening_alive {
            self.watch = 0;
            self.opening_alive = false;
            self.emit(Effect::CloseAlive);
        }
    }

    /// The context ends: whatever liveness database its edge keeps for it goes, even one the edge
    /// opened ahead before this context asked for it.
    pub(super) fn end_alive(&mut self) {
        self.watch = 0;
        self.opening_alive = false;
        self.emit(Effect::EndAlive);
    }

    /// The browser closed this context's liveness database. Returns false if it had none open.
    pub(super) fn alive_lost(&mut self) -> bool {
        let had = self.watch != 0;
        self.watch = 0;
        had
    }

    // ---- the requests and queries ----------------------------------------------------------------------

    /// Nothing held, pending or queried here.
    pub(super) fn is_idle(&self) -> bool {
        self.requests.is_empty() && self.queries.is_empty()
    }

    pub(super) fn has_queries(&self) -> bool {
        !self.queries.is_empty()
    }

    pub(super) fn requests(&self) -> impl Iterator<Item = &LocalRequest> {
        self.requests.values()
    }

    pub(super) fn request_count(&self) -> usize {
        self.requests.len()
    }

    pub(super) fn request_state(&self, id: u64) -> Option<RequestState> {
        self.requests.get(&id).map(|r| r.state)
    }

    /// Keeps new request `id` (a new call), queued until sent.
    pub(super) fn add_request(&mut self, id: u64, name: &str, options: LockOptions) {
        debug_assert!(!self.requests.contains_key(&id), "request {id} again");
        let call = self.next_call();
        self.requests.insert(
            id,
            LocalRequest {
                name: name.into(),
                options,
                state: RequestState::Queued,
                call,
            },
        );
    }

    /// Forgets request `id` (released, aborted or decided).
    pub(super) fn forget_request(&mut self, id: u64) {
        self.requests.remove(&id);
    }

    /// Request `id`, if it is queued, is posted now: returns the `Request` that sends it.
    pub(super) fn post_request(&mut self, id: u64) -> Option<Body> {
        let r = self
            .requests
            .get_mut(&id)
            .filter(|r| r.state == RequestState::Queued)?;
        r.state = RequestState::Posted;
        Some(Body::Request {
            id,
            name: r.name.clone(),
            options: r.options,
        })
    }

    /// The queued requests as (call, id), in call order.
    pub(super) fn queued_in_call_order(&self) -> Vec<(u64, u64)> {
        let mut queued: Vec<(u64, u64)> = Vec::new();
        for (id, r) in self.requests.iter() {
            if r.state == RequestState::Queued {
                queued.push((r.call, *id));
            }
        }
        queued.sort_unstable();
        queued
    }

    /// A retired context grants nothing: every `ifAvailable` request it still has is not available.
    pub(super) fn refuse_if_available(&mut self) {
        for id in self.request_ids(|r| r.options.if_available) {
            self.requests.remove(&id);
            self.emit(Effect::NotAvailable(id));
        }
    }

    /// A new `query()` call, `query`, at `now`: it waits for a watermark.
    pub(super) fn add_query(&mut self, now: u64, query: u64) {
        let call = self.next_call();
        self.queried_at = Some(now);
        self.queries.push(PendingQuery {
            id: query,
            watermark: None,
            call,
        });
    }

    /// Until when the last `query()` keeps this context in the protocol (`query_linger` after it).
    pub(super) fn query_linger_end(&self) -> Option<u64> {
        self.queried_at.map(|t| t + self.config.query_linger)
    }

    /// Answers query `query` with what this context alone knows.
    pub(super) fn answer_locally(&mut self, query: u64) {
        let snapshot = self.local_snapshot();
        self.emit(Effect::Snapshot { query, snapshot });
    }

    /// Answers every query with what this context alone knows (it can no longer see the origin's).
    pub(super) fn answer_all_locally(&mut self) {
        for q in std::mem::take(&mut self.queries) {
            self.answer_locally(q.id);
        }
    }

    /// Answers, with `snapshot`, the queries whose earlier calls are all applied: those with a watermark
    /// at or below `applied` (the last own message applied).
    pub(super) fn answer_queries(&mut self, applied: u64, snapshot: impl Fn() -> Snapshot) {
        self.settle_watermarks();
        let mut waiting = Vec::new();
        for q in std::mem::take(&mut self.queries) {
            if q.watermark.is_some_and(|a| a <= applied) {
                self.emit(Effect::Snapshot {
                    query: q.id,
                    snapshot: snapshot(),
                });
            } else {
                waiting.push(q);
            }
        }
        self.queries = waiting;
    }

    /// Another member's request was applied: if this context is idle, it may make way.
    pub(super) fn saw_request(&mut self) {
        self.saw_request |= self.is_idle();
    }

    /// Whether another member's request was applied while this context was idle, since the last call.
    pub(super) fn take_saw_request(&mut self) -> bool {
        std::mem::take(&mut self.saw_request)
    }

    pub(super) fn member_key(&self) -> MemberKey {
        MemberKey {
            client: self.client.clone(),
            incarnation: self.incarnation,
        }
    }

    pub(super) fn emit(&mut self, effect: Effect) {
        self.out.push_back(effect);
    }

    pub(super) fn next_effect(&mut self) -> Option<Effect> {
        self.out.pop_front()
    }

    /// A new call of this context (a request or a query): its place among the others.
    fn next_call(&mut self) -> u64 {
        self.calls += 1;
        self.calls
    }

    /// This context's next message: `body` with the next sequence number.
    pub(super) fn next_message(&mut self, body: Body) -> Message {
        self.seq += 1;
        Message {
            sender: self.member_key(),
            seq: self.seq,
            body,
        }
    }

    /// `body` as a message decided alone and never sent: it takes no place in the order, so the
    /// sequence number does not move.
    pub(super) fn unsent_message(&self, body: Body) -> Message {
        Message {
            sender: self.member_key(),
            seq: self.seq,
            body,
        }
    }

    /// Queues `body` for the channel as this context's next message.
    pub(super) fn send(&mut self, body: Body) {
        let message = self.next_message(body);
        self.queue(message);
    }

    /// Queues `message` (this context's, or another's it appends for it) for the channel.
    pub(super) fn queue(&mut self, message: Message) {
        if self.outbox.is_empty() {
            self.emit(Effect::FlushSoon);
        }
        self.outbox.push(message);
    }

    /// The queued messages go out: as one `Transmit`, or several in order where one would be over the
    /// cap of what a context decodes (see [`wire::split_transmit`]).
    pub(super) fn flush(&mut self) {
        if !self.outbox.is_empty() {
            let messages = std::mem::take(&mut self.outbox);
            for post in wire::split_transmit(messages, self.version) {
                self.emit(Effect::Transmit(post));
            }
        }
    }

    /// The next deadline is `at` (`None`: none): see [`super::Participant::poll_timeout`].
    pub(super) fn set_deadline(&mut self, at: Option<u64>) {
        self.deadline = at;
    }

    pub(super) fn next_deadline(&self) -> Option<u64> {
        self.deadline
    }

    pub(super) fn deadline_reached(&mut self) {
        self.deadline = None;
    }

    /// Nothing held, pending, queued or queried here, and no deadline set.
    pub(super) fn is_quiet(&self) -> bool {
        self.requests.is_empty() && self.queries.is_empty() && self.deadline.is_none()
    }

    pub(super) fn has_interest(&self) -> bool {
        !self.requests.is_empty()
    }

    /// Whether this context holds a lock on `name` that a request in `mode` conflicts with and has not
    /// released it. Costs a pass over this context's requests, only for `ifAvailable` calls.
    pub(super) fn holds_conflicting(&self, name: &str, mode: LockMode) -> bool {
        self.requests.values().any(|r| {
            r.state == RequestState::Held
                && *r.name == *name
                && (r.options.mode == LockMode::Exclusive || mode == LockMode::Exclusive)
        })
    }

    /// The ids of this context's requests that `pick` selects, in id order.
    fn request_ids(&self, pick: fn(&LocalRequest) -> bool) -> Vec<u64> {
        let mut ids = Vec::new();
        for (id, r) in self.requests.iter() {
            if pick(r) {
                ids.push(*id);
            }
        }
        ids
    }

    /// Turns the replica's outcomes of one applied message for this incarnation's requests into effects.
    pub(super) fn handle_outcomes(&mut self, outcomes: Vec<Outcome>) {
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
    pub(super) fn lose_membership(&mut self, reason: LossReason) {
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
    pub(super) fn reset_watermarks(&mut self) {
        for q in &mut self.queries {
            q.watermark = None;
        }
    }

    /// Gives a watermark to each query that no unsent request of this context precedes: the snapshot
    /// must include exactly this context's calls made before the query, not those made after it.
    fn settle_watermarks(&mut self) {
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
    pub(super) fn settle_watermarks_before(&mut self, first_queued: Option<u64>) {
        let seq = self.seq;
        for q in &mut self.queries {
            if q.watermark.is_none() && first_queued.is_none_or(|c| c > q.call) {
                q.watermark = Some(seq);
            }
        }
    }

    /// What this context alone knows (used once it can no longer see the origin's state).
    fn local_snapshot(&self) -> Snapshot {
        let mut snapshot = Snapshot {
            held: Vec::new(),
            pending: Vec::new(),
        };
        for r in self.requests.values() {
            let info = LockInfo {
                name: r.name.clone(),
                mode: r.options.mode,
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
