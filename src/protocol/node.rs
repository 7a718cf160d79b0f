//! One context's protocol node: the local requests of the Engine contract, the lifecycle, and the
//! dispatch of events to the joining or synced phase (`joining.rs`, `synced.rs`).
//!
//! Every public method takes `now` (the wall clock in ms, `Date.now()`) and leaves its effects in the
//! node; the edge calls [`Node::drain`] after each call and carries them out in order.

use std::rc::Rc;

use crate::scheduler::{LockInfo, LockMode, Snapshot};
use crate::sequence_map::SequenceMap;

use super::joining::Joining;
use super::live_record;
use super::log_order::{LogOrder, ReadEnd};
use super::replica::RevokeReason;
use super::synced::Synced;
use super::wire::{
    self, Body, Decoded, KIND_JOIN, MemberKey, Message, MessageId, PROTOCOL_VERSION, Value,
    decode_versioned, split_batch,
};

/// The protocol's timings, in ms. The defaults meet the bounds of issue 3; docs/PROTOCOL.md explains
/// each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// How long a joiner waits for a state transfer before it starts a new history, when nothing says
    /// a history is alive (this is the cost of the first lock in a lone context).
    pub join_wait: u64,
    /// How long a joiner keeps waiting after it saw signs of a live history (traffic, or a Genesis or
    /// State it could not use) before it rejoins or starts a history.
    pub join_patience: u64,
    /// Delay between the members that answer a joiner (by rank), to avoid duplicate state transfers.
    pub state_stagger: u64,
    /// A waiter pings a member that blocks it once that member has been silent this long.
    pub ping_interval: u64,
    /// A pinged member that stays silent this long (after the ping reached the pinger) is evicted.
    pub evict_after: u64,
    /// The same for a member whose deputy has spoken (a worker of its page that answers pings while
    /// the page runs a long task): only a page that is gone stays silent, so this can be short.
    pub evict_after_deputy: u64,
    /// A context announcing `freeze` keeps its locks this long.
    pub freeze_grace: u64,
    /// Lifetime of the storage hint written by busy members (renewed at half of it).
    pub live_ttl: u64,
    /// Most messages a joiner buffers while it waits for a state transfer.
    pub buffer_limit: usize,
    /// An idle member that sees another member's request leaves (so that one can decide alone), unless
    /// it asked `query()` within this long (a page watching the origin's locks keeps its replica).
    pub query_linger: u64,
    /// What gives the origin's messages their one order (docs/PROTOCOL.md §2).
    pub transport: Transport,
    /// Over the carried log: how long an entry may wait behind a missing key before the context reads
    /// the log (the carrier usually brings the missing one within a hop; a read costs a transaction).
    pub log_hole_wait: u64,
    /// Over the log without a carrier: how often a context that waits for something reads the log.
    pub log_poll: u64,
}

/// What gives the messages of the origin their one order, which every context applies (assumption A1
/// or A1′ of docs/PROTOCOL.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// The delivery order of BroadcastChannel, in the engines whose channel delivers every message
    /// of the origin in one order to every context, the sender's own included (A1: Blink, Gecko).
    Broadcast,
    /// The order of a log in IndexedDB: a message's place is its key (A1′, docs/PROTOCOL.md §12),
    /// and what tells this context that others appended to it.
    Log(Wake),
}

/// What tells a context over the log that other contexts appended to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// A BroadcastChannel carries each committed entry to the other contexts as soon as it commits,
    /// in any order ([`super::log_order`] restores the log's): a context hears the origin as promptly
    /// as over the broadcast transport.
    Carrier,
    /// There is no BroadcastChannel, but the context is a document with localStorage: each append
    /// pokes it with a `storage` event, which may come late (A4). It also reads every `log_poll` while
    /// it holds, waits or queries.
    Pokes,
    /// Nothing wakes it (a worker without BroadcastChannel): it reads every `log_poll` while it is in
    /// the protocol, and leaves the protocol once idle for `query_linger`.
    Polls,
}

impl Transport {
    /// Whether a context hears every message of the origin within a hop, as long as it runs: what lets
    /// the lone member decide alone (docs/PROTOCOL.md §5; over pokes or polls an idle member may not
    /// have heard a joiner's `Join`, then its `Genesis`, when it decides).
    pub(super) fn prompt(self) -> bool {
        matches!(self, Transport::Broadcast | Transport::Log(Wake::Carrier))
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            join_wait: 50,
            join_patience: 1000,
            state_stagger: 5,
            ping_interval: 150,
            evict_after: 650,
            evict_after_deputy: 200,
            freeze_grace: 10_000,
            live_ttl: 2_000,
            buffer_limit: 100_000,
            query_linger: 2_000,
            transport: Transport::Broadcast,
            log_hole_wait: 20,
            log_poll: 40,
        }
    }
}

/// Why a held lock was lost (all are reported to JS as "stolen": spec 4.1 step 3.4.1's AbortError).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossReason {
    /// Another request used `steal`.
    Stolen,
    /// This context was presumed dead (silent after a ping, or frozen beyond the grace).
    Evicted,
    /// A context that could reach no member started a new history.
    Reset,
    /// A newer protocol version runs in the origin.
    Retired,
    /// This page entered the back/forward cache (`pagehide` with `persisted`).
    Hidden,
}

impl From<RevokeReason> for LossReason {
    fn from(r: RevokeReason) -> Self {
        match r {
            RevokeReason::Stolen => LossReason::Stolen,
            RevokeReason::Evicted => LossReason::Evicted,
            RevokeReason::Reset => LossReason::Reset,
            RevokeReason::Retired => LossReason::Retired,
        }
    }
}

/// The earlier of two optional deadlines (`None`: no deadline), or the smaller of two optional values.
pub(super) fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        _ => a.or(b),
    }
}

/// What the edge must do.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Broadcast this message (encode it with `wire::encode`).
    Post(Message),
    /// `localStorage.setItem(key, value)` (ignore failures).
    StorageWrite { key: &'static str, value: String },
    /// `localStorage.removeItem(key)` (ignore failures).
    StorageRemove { key: &'static str },
    /// Call [`Node::timer`] at (or after) wall-clock time `at`; replaces any earlier timer.
    SetTimer { at: u64 },
    /// Forget the timer.
    ClearTimer,
    /// Engine sink 1: request `id` was granted.
    Granted(u64),
    /// Engine sink 2: `ifAvailable` request `id` was not grantable.
    NotAvailable(u64),
    /// Engine sink 3: held lock `id` was taken away.
    Stolen { id: u64, reason: LossReason },
    /// Engine sink 4: the answer to query `query`.
    Snapshot { query: u64, snapshot: Snapshot },
    /// A newer protocol version runs in this origin: this context no longer grants anything (say so
    /// once in the console; a reload picks up the new version).
    Incompatible { version: u32 },
    /// This context just pinged `message.sender`: ask that member's deputy, if it has one, to post
    /// `message` (a `Vouch` answering the ping) on the channel. The deputy listens on a channel of its
    /// own, named after the member's client id (docs/PROTOCOL.md, "the deputy").
    WakeDeputy(Message),
    /// Log transport: start reading the log (open it if it is closed): find its last key and call
    /// [`Node::log_started`] with it. The read must be made before the `Post`s that follow this effect
    /// are appended, so that it sees none of them.
    OpenLog,
    /// Log transport: read the entries after key `after`, call [`Node::log_entry`] for each and then
    /// [`Node::log_read_done`] with the log's floor.
    ReadLog { after: u64 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RequestState {
    /// Not sent yet (the node is joining, or lost its membership and will resend it).
    Queued,
    /// Sent; waiting for its outcome in the replica.
    Posted,
    /// Granted and not released.
    Held,
}

#[derive(Clone, Debug)]
pub(super) struct LocalRequest {
    pub name: Rc<str>,
    pub mode: LockMode,
    pub if_available: bool,
    pub steal: bool,
    pub state: RequestState,
    /// Position among this context's calls (see [`Node::queries`]).
    pub call: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lifecycle {
    Running,
    Frozen,
    /// In the back/forward cache: channel closed, nothing held.
    Hidden,
    /// Closed or terminated.
    Gone,
    /// Saw a newer protocol version.
    Retired,
}

pub(super) enum Phase {
    /// Not in the protocol (never needed it yet, or hidden).
    Detached,
    Joining(Box<Joining>),
    Synced(Box<Synced>),
}

/// One context of the origin.
pub struct Node {
    pub(super) config: Config,
    pub(super) version: u32,
    pub(super) client: Rc<str>,
    pub(super) incarnation: u32,
    /// Sequence number of the last message posted.
    pub(super) seq: u64,
    /// Sequence number of the last own message seen back on the channel.
    pub(super) echoed_seq: u64,
    pub(super) lifecycle: Lifecycle,
    pub(super) phase: Phase,
    pub(super) requests: SequenceMap<u64, LocalRequest>,
    /// Queries waiting for the replica to include every message this context posted before them.
    /// Queries waiting for the replica: (query id, watermark, call). The watermark is the sequence
    /// number of this context's last message posted before the query (known once every request made
    /// before the query is posted); `call` orders the query among this context's calls.
    pub(super) queries: Vec<(u64, Option<u64>, u64)>,
    /// Counts this context's request and query calls, to keep a query after the requests made before it.
    pub(super) calls: u64,
    /// The storage hint as last read or written.
    pub(super) live_until: Option<u64>,
    /// When this context last called `query()`.
    pub(super) queried_at: Option<u64>,
    /// Another member's request was applied since this context last had anything to do: if it is
    /// idle, it makes way (see [`Node::make_way`]).
    pub(super) saw_request: bool,
    /// This context wrote the storage hint and has not removed it since.
    pub(super) wrote_hint: bool,
    /// The messages this context decided alone without posting them (the lone member, see
    /// [`Node::post`]), kept only when [`Node::record_decisions`] asked for them (the simulation's
    /// observer must apply them too; nothing else reads them).
    pub(super) decided: Option<Vec<Message>>,
    /// Log transport: the order of the log's entries, restored.
    log: LogOrder,
    /// Log transport: since when an entry has waited behind a missing key.
    hole_since: Option<u64>,
    /// Log transport: a poke asked for a read.
    read_wanted: bool,
    /// Log transport without a carrier: when to read the log next.
    next_poll: Option<u64>,
    /// Since when this context has had nothing held, pending or queried (kept where it polls the log:
    /// it leaves the protocol after `query_linger` of it).
    idle_since: Option<u64>,
    timer: Option<u64>,
    out: Vec<Effect>,
}

impl Node {
    pub fn new(client_id: &str, config: Config) -> Node {
        Self::with_version(client_id, config, PROTOCOL_VERSION)
    }

    /// A node speaking protocol `version` (tests simulate a deploy with two versions).
    pub fn with_version(client_id: &str, config: Config, version: u32) -> Node {
        Node {
            config,
            version,
            client: client_id.into(),
            incarnation: 0,
            seq: 0,
            echoed_seq: 0,
            lifecycle: Lifecycle::Running,
            phase: Phase::Detached,
            requests: SequenceMap::new(),
            queries: Vec::new(),
            calls: 0,
            live_until: None,
            queried_at: None,
            saw_request: false,
            wrote_hint: false,
            decided: None,
            log: LogOrder::new(),
            hole_since: None,
            read_wanted: false,
            next_poll: None,
            idle_since: None,
            timer: None,
            out: Vec::new(),
        }
    }

    /// From now on, keep every message this context decides alone without posting it (see
    /// [`Node::take_decided`]). For observers that must see every decision (the simulation).
    pub fn record_decisions(&mut self) {
        self.decided.get_or_insert_with(Vec::new);
    }

    /// The messages decided alone, unposted, since the last call, in order (empty unless
    /// [`Node::record_decisions`] was called). Each took effect where this context applied it: between
    /// the messages of the channel it had applied and the next one.
    pub fn take_decided(&mut self) -> Vec<Message> {
        self.decided
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The effects produced since the last call, in order.
    pub fn drain(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.out)
    }

    pub fn client_id(&self) -> &str {
        &self.client
    }

    /// This context's current membership.
    pub fn member_key(&self) -> MemberKey {
        MemberKey {
            client: self.client.clone(),
            incarnation: self.incarnation,
        }
    }

    /// The Leave that closing this context would post, for an edge that must send it without running
    /// the node: Firefox can cut a closing tab's `pagehide` listener short as soon as it calls into
    /// wasm, and over the log a closing page's own append may die with it, so the edge keeps this
    /// message ready and posts it from plain JS first (docs/PROTOCOL.md, "the farewell"). `None` when
    /// there is nobody to tell (never joined, left, gone, retired). Its sequence number is 0, like a
    /// deputy's `Vouch`: it may be posted long after it was made and beside the node's own `Leave`, so
    /// it takes no position and anchors no state transfer, and a second `Leave` is void.
    pub fn farewell(&self) -> Option<Message> {
        let leaves = matches!(self.lifecycle, Lifecycle::Running | Lifecycle::Frozen)
            && !matches!(self.phase, Phase::Detached);
        leaves.then(|| Message {
            sender: self.member_key(),
            seq: 0,
            body: Body::Leave,
        })
    }

    /// What this context's deputy should post to announce itself for the current membership (a
    /// `Vouch` of sequence number 0 that answers no ping), once this context is an active member;
    /// `None` otherwise. The edge hands it to the deputy whenever it changes.
    pub fn deputy_announcement(&self) -> Option<Message> {
        if !self.is_active_member() {
            return None;
        }
        let me = self.member_key();
        Some(Message {
            sender: me.clone(),
            seq: 0,
            body: Body::Vouch {
                ping: MessageId { sender: me, seq: 0 },
            },
        })
    }

    /// The protocol version this node speaks.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The node's replica, once it has a complete one (for tests and diagnostics).
    pub fn replica(&self) -> Option<&super::replica::Replica> {
        match &self.phase {
            Phase::Synced(s) => Some(&s.replica),
            _ => None,
        }
    }

    /// True while nothing is held, pending, queued or queried here and no timer is set.
    pub fn is_quiet(&self) -> bool {
        self.requests.is_empty() && self.queries.is_empty() && self.timer.is_none()
    }

    // ---- the Engine contract ----------------------------------------------------------------------

    /// Spec 4.1 step 3 for request `id` (ids are never reused by a context).
    pub fn request(
        &mut self,
        now: u64,
        id: u64,
        name: &str,
        mode: LockMode,
        if_available: bool,
        steal: bool,
    ) {
        if self.requests.contains_key(&id)
            || matches!(self.lifecycle, Lifecycle::Gone | Lifecycle::Hidden)
        {
            return;
        }
        // A retired context grants nothing. A local miss (docs/PROTOCOL.md §5) is decided here,
        // without the channel's round trip.
        if if_available
            && (self.lifecycle == Lifecycle::Retired
                || (!steal && self.holds_conflicting(name, mode)))
        {
            self.emit(Effect::NotAvailable(id));
            return;
        }
        self.requests.insert(
            id,
            LocalRequest {
                name: name.into(),
                mode,
                if_available,
                steal,
                state: RequestState::Queued,
                call: {
                    self.calls += 1;
                    self.calls
                },
            },
        );
        self.attach(now);
        // Earlier queued requests exist only while this context is not an active member, and then
        // nothing is posted: sending just this one keeps call order and a bulk of calls linear.
        self.post_request(id, None);
        self.after(now);
    }

    /// Whether this context holds a lock on `name` that a request in `mode` conflicts with and has not
    /// released it. Costs a pass over this context's requests, only for `ifAvailable` calls.
    fn holds_conflicting(&self, name: &str, mode: LockMode) -> bool {
        self.requests.values().any(|r| {
            r.state == RequestState::Held
                && *r.name == *name
                && (r.mode == LockMode::Exclusive || mode == LockMode::Exclusive)
        })
    }

    /// Spec 4.2: lock `id`'s waiting promise settled. A lock that is not held (stolen) is a no-op.
    pub fn release(&mut self, now: u64, id: u64) {
        if self
            .requests
            .get(&id)
            .is_some_and(|r| r.state == RequestState::Held)
        {
            self.requests.remove(&id);
            self.post(Body::Release { id });
        }
        self.after(now);
    }

    /// Spec 4.3: request `id`'s signal fired. Returns true if it was still pending here (JS rejects the
    /// request); false if it was granted (or unknown). If the grant is already decided in the origin
    /// but not yet seen here, the origin releases it when it applies the abort.
    pub fn abort(&mut self, now: u64, id: u64) -> bool {
        let state = self.requests.get(&id).map(|r| r.state);
        let aborted = match state {
            Some(RequestState::Queued) => true,
            Some(RequestState::Posted) => {
                self.post(Body::Abort { id });
                true
            }
            Some(RequestState::Held) | None => false,
        };
        if aborted {
            self.requests.remove(&id);
        }
        self.after(now);
        aborted
    }

    /// Spec 4.5: the snapshot arrives as [`Effect::Snapshot`] once the replica has applied every message
    /// this context posted before the query.
    pub fn query(&mut self, now: u64, query: u64) {
        if matches!(self.lifecycle, Lifecycle::Retired | Lifecycle::Gone) {
            let snapshot = self.local_snapshot();
            self.emit(Effect::Snapshot { query, snapshot });
            return;
        }
        self.calls += 1;
        self.queried_at = Some(now);
        // Where the context reads the log only when poked or polled, the answer must include what the
        // origin did before the call: it waits for an `Alive` of its own to come back.
        if !self.config.transport.prompt() && self.is_active_member() {
            self.post(Body::Alive);
        }
        self.queries.push((query, None, self.calls));
        self.attach(now);
        self.after(now);
    }

    // ---- I/O events -------------------------------------------------------------------------------

    /// A message arrived on the channel (including this context's own, seen through its second channel
    /// object). Anything that does not decode is ignored.
    pub fn deliver(&mut self, now: u64, values: &[Value]) {
        self.apply_values(now, values);
        self.after(now);
    }

    /// Applies one channel message (a message or a batch) at the next place of the sequence.
    fn apply_values(&mut self, now: u64, values: &[Value]) {
        if matches!(
            self.lifecycle,
            Lifecycle::Hidden | Lifecycle::Gone | Lifecycle::Retired
        ) {
            return;
        }
        match split_batch(values, self.version) {
            Some(parts) => {
                for part in parts {
                    if let Some(decoded) = decode_versioned(part, self.version) {
                        self.receive(now, decoded);
                    }
                }
            }
            None => {
                if let Some(decoded) = decode_versioned(values, self.version) {
                    self.receive(now, decoded);
                }
            }
        }
    }

    // ---- the log transport (docs/PROTOCOL.md §12) -------------------------------------------------

    /// The answer to [`Effect::OpenLog`]: the log's last key before this context started reading it.
    pub fn log_started(&mut self, now: u64, last: u64) {
        self.log.start(last);
        self.follow_log(now);
        self.after(now);
    }

    /// An entry of the log arrived: from this context's own append once committed, from the carrier,
    /// or from a read. Entries are applied in key order, each once, whatever order they come in.
    pub fn log_entry(&mut self, now: u64, key: u64, values: &[Value]) {
        if self.log_is_followed() {
            if let Some(values) = self.log.arrive(key, values.to_vec()) {
                self.apply_values(now, &values);
            }
            self.follow_log(now);
        }
        self.after(now);
    }

    /// The read of [`Effect::ReadLog`] ended (its entries came through [`Node::log_entry`]); `floor` is
    /// the greatest key the log has deleted. A floor past the position means this context missed
    /// messages (it fell behind a trim): it steps out and rejoins (see [`Node::missed_messages`]).
    pub fn log_read_done(&mut self, now: u64, floor: u64) {
        if self.log.read_done(floor) == ReadEnd::Trimmed && self.log_is_followed() {
            self.missed_messages(now);
            return;
        }
        self.follow_log(now);
        self.after(now);
    }

    /// Another document appended to the log (a localStorage poke, where there is no carrier).
    pub fn log_poked(&mut self, now: u64) {
        self.read_wanted = true;
        self.after(now);
    }

    /// Log transport: a message arrived on the log's carrier (a BroadcastChannel), or a farewell through
    /// a `storage` event where there is no carrier. A carrier frame ([`wire::decode_entry`]) is an
    /// entry of the log. A `Leave` of sequence number 0 is another context's farewell (docs/PROTOCOL.md
    /// §8), which its own append may not outlive: any active member appends it for its sender. It is
    /// exactly what its sender would have posted, and its sender believes in no lock any more (it is
    /// gone, or stepped out as it entered the back/forward cache); it takes no position, so where in the
    /// log a copy lands, and how many copies do, changes nothing (a second `Leave` is void). An older
    /// version's `Join` is answered as on the broadcast transport.
    pub fn carried(&mut self, now: u64, values: &[Value]) {
        if let Some((key, data)) = wire::decode_entry(values, self.version) {
            self.log_entry(now, key, data);
            return;
        }
        if let Some(decoded) = decode_versioned(values, self.version) {
            match decoded {
                Decoded::Ours(m)
                    if self.is_active_member()
                        && m.body == Body::Leave
                        && m.seq == 0
                        && m.sender.client != self.client =>
                {
                    self.emit(Effect::Post(m));
                }
                Decoded::Foreign { version, .. } if version > self.version => self.retire(version),
                Decoded::Foreign { version, kind, .. }
                    if version < self.version && kind == KIND_JOIN && self.log_is_followed() =>
                {
                    self.post(Body::Alive);
                }
                _ => {}
            }
        }
        self.after(now);
    }

    /// The position of this context in the log (every key up to it applied), for the simulation.
    pub fn log_position(&self) -> Option<u64> {
        self.log.position()
    }

    /// Whether the log's entries are for this context now: it is in the protocol over the log.
    fn log_is_followed(&self) -> bool {
        matches!(self.config.transport, Transport::Log(_))
            && !matches!(self.phase, Phase::Detached)
            && matches!(self.lifecycle, Lifecycle::Running | Lifecycle::Frozen)
    }

    /// Applies the log's entries that are next in key order, and notes a missing key.
    fn follow_log(&mut self, now: u64) {
        while let Some(values) = self.log.next() {
            self.apply_values(now, &values);
        }
        if self.log.has_hole() {
            self.hole_since.get_or_insert(now);
        } else {
            self.hole_since = None;
        }
    }

    /// Starts the reads of the log the transport needs: behind a missing key (at once without a
    /// carrier, after `log_hole_wait` with one), after a poke, and every `log_poll` without a carrier
    /// while the context waits for something (with polls only: while it is in the protocol). Returns
    /// when to look again.
    fn log_policy(&mut self, now: u64) -> Option<u64> {
        let Transport::Log(wake) = self.config.transport else {
            return None;
        };
        if !self.log_is_followed() {
            self.next_poll = None;
            return None;
        }
        let mut read = std::mem::take(&mut self.read_wanted) || self.log.wants_read();
        let mut next = None;
        if let Some(since) = self.hole_since {
            let due = if wake == Wake::Carrier {
                since + self.config.log_hole_wait
            } else {
                since
            };
            read |= now >= due;
            next = Some(due).filter(|&d| d > now);
        }
        let polls = match wake {
            Wake::Carrier => false,
            Wake::Pokes => {
                self.has_interest()
                    || !self.queries.is_empty()
                    || matches!(self.phase, Phase::Joining(_))
            }
            Wake::Polls => true,
        };
        if polls {
            let due = *self.next_poll.get_or_insert(now + self.config.log_poll);
            if now >= due {
                read = true;
                self.next_poll = Some(now + self.config.log_poll);
            }
            next = earliest(next, self.next_poll);
        } else {
            self.next_poll = None;
        }
        if read && let Some(after) = self.log.read_from() {
            self.emit(Effect::ReadLog { after });
        }
        next
    }

    /// The timer set by [`Effect::SetTimer`] fired.
    pub fn timer(&mut self, now: u64) {
        self.timer = None;
        self.after(now);
    }

    /// A storage key changed in another context (or its value at start-up). Only [`super::LIVE_KEY`]
    /// matters; corrupt values count as absent.
    pub fn storage_changed(&mut self, now: u64, key: &str, value: Option<&str>) {
        if key == live_record::LIVE_KEY {
            self.live_until = live_record::parse(value);
            self.after(now);
        }
    }

    // ---- lifecycle --------------------------------------------------------------------------------

    /// The page is being frozen: announce it, so the others keep this context's locks for
    /// `freeze_grace`.
    pub fn freeze(&mut self, now: u64) {
        if self.lifecycle != Lifecycle::Running {
            return;
        }
        if self.is_active_member() {
            let until = now + self.config.freeze_grace;
            self.post(Body::Freeze { until });
            if self.has_interest() && self.live_until.is_none_or(|u| u < until) {
                self.write_live(until);
            }
        }
        self.lifecycle = Lifecycle::Frozen;
    }

    /// The page was resumed from freezing.
    pub fn resume(&mut self, now: u64) {
        if self.lifecycle != Lifecycle::Frozen {
            return;
        }
        self.lifecycle = Lifecycle::Running;
        if self.is_active_member() {
            self.post(Body::Alive);
        }
        self.after(now);
    }

    /// `pagehide`: leave at once. With `persisted` (entering the back/forward cache) the held locks are
    /// lost (reported stolen) and the pending requests wait, to be sent again on `pageshow`.
    pub fn pagehide(&mut self, now: u64, persisted: bool) {
        if !persisted {
            self.terminate(now);
            return;
        }
        if matches!(
            self.lifecycle,
            Lifecycle::Gone | Lifecycle::Retired | Lifecycle::Hidden
        ) {
            return;
        }
        self.step_out(LossReason::Hidden);
        self.lifecycle = Lifecycle::Hidden;
        self.set_timer(None);
        let _ = now;
    }

    /// `pageshow` after the back/forward cache: rejoin if anything is waiting.
    pub fn pageshow(&mut self, now: u64, persisted: bool) {
        if persisted && matches!(self.lifecycle, Lifecycle::Running | Lifecycle::Frozen) {
            // Back from the cache without this node having seen its `pagehide` (the listener was cut
            // short), while the edge's farewell told the origin it left: catch up before rejoining.
            self.pagehide(now, true);
        }
        if !persisted || self.lifecycle != Lifecycle::Hidden {
            return;
        }
        self.lifecycle = Lifecycle::Running;
        if !self.requests.is_empty() || !self.queries.is_empty() {
            self.attach(now);
        }
        self.after(now);
    }

    /// The transport lost messages of the order this context was following (a log it reads from was
    /// trimmed past its position, or a post of its own failed): its replica can no longer be trusted.
    /// It steps out as on entering the back/forward cache (its held locks reported lost, as after a
    /// reset; its Leave releases them wherever the origin still counts them) and, if it still waits
    /// or queries, joins again with a state transfer.
    pub fn missed_messages(&mut self, now: u64) {
        if !matches!(self.lifecycle, Lifecycle::Running | Lifecycle::Frozen)
            || matches!(self.phase, Phase::Detached)
        {
            return;
        }
        self.step_out(LossReason::Reset);
        if !self.requests.is_empty() || !self.queries.is_empty() {
            self.attach(now);
        }
        self.after(now);
    }

    /// The context closes (unload, `pagehide` without `persisted`, a worker's end): leave at once.
    pub fn terminate(&mut self, _now: u64) {
        if matches!(self.lifecycle, Lifecycle::Gone) {
            return;
        }
        if self.lifecycle != Lifecycle::Retired {
            self.leave();
        }
        self.lifecycle = Lifecycle::Gone;
        self.set_timer(None);
    }

    // ---- internals shared by the phases -----------------------------------------------------------

    pub(super) fn emit(&mut self, effect: Effect) {
        self.out.push(effect);
    }

    /// Leaves the protocol with its held locks lost (for `reason`) and its requests queued, to be
    /// posted again when it rejoins.
    fn step_out(&mut self, reason: LossReason) {
        self.leave();
        self.lose_membership(reason);
    }

    /// This context's membership is gone (for `reason`): every lock it holds is gone too (forgotten,
    /// and JS told, as after a steal), and its other requests go back to the queue, to be posted again
    /// once it is an active member again (and the queries wait for them to be sent again).
    pub(super) fn lose_membership(&mut self, reason: LossReason) {
        for id in self.request_ids(|r| r.state == RequestState::Held) {
            self.requests.remove(&id);
            self.emit(Effect::Stolen { id, reason });
        }
        for r in self.requests.values_mut() {
            r.state = RequestState::Queued;
        }
        for q in &mut self.queries {
            q.1 = None;
        }
    }

    /// The ids of this context's requests that `pick` selects, in id order. A loop and a function
    /// pointer: one small function in the wasm, where each `filter().map().collect()` chain was its own.
    fn request_ids(&self, pick: fn(&LocalRequest) -> bool) -> Vec<u64> {
        let mut ids = Vec::new();
        for (id, r) in self.requests.iter() {
            if pick(r) {
                ids.push(*id);
            }
        }
        ids
    }

    /// Sends `body`, or, for the lone member's own lock messages, applies it at once and may decide it
    /// alone without sending it (docs/PROTOCOL.md, "the lone member": nobody else can be told anything
    /// a later `State` would not tell them).
    pub(super) fn post(&mut self, body: Body) {
        let alone = self.applies_alone(&body);
        let unposted = alone == Some(true);
        if !unposted {
            self.seq += 1;
        }
        let me = self.member_key();
        let message = Message {
            sender: me.clone(),
            seq: self.seq,
            body,
        };
        let mut outcomes = Vec::new();
        if let Phase::Synced(s) = &mut self.phase
            && alone.is_some()
        {
            s.replica.apply_ahead(&message, &mut outcomes);
            if !unposted {
                s.applied_ahead = message.seq;
            }
        }
        if !unposted {
            self.out.push(Effect::Post(message));
        } else if let Some(decided) = &mut self.decided {
            decided.push(message);
        }
        self.handle_outcomes(&me, outcomes);
    }

    pub(super) fn write_live(&mut self, until: u64) {
        self.live_until = Some(until);
        self.emit(Effect::StorageWrite {
            key: live_record::LIVE_KEY,
            value: live_record::format(until),
        });
    }

    pub(super) fn has_interest(&self) -> bool {
        !self.requests.is_empty()
    }

    fn is_active_member(&self) -> bool {
        matches!(&self.phase, Phase::Synced(s) if s.active)
    }

    /// Enters the protocol if this context is not in it yet. Over the log, it starts reading it anew:
    /// out of the protocol it followed nothing, and what it missed comes with the state transfer.
    fn attach(&mut self, now: u64) {
        if matches!(self.phase, Phase::Detached) && self.lifecycle == Lifecycle::Running {
            if matches!(self.config.transport, Transport::Log(_)) {
                self.log = LogOrder::new();
                self.hole_since = None;
                self.read_wanted = false;
                self.emit(Effect::OpenLog);
            }
            self.start_joining(now);
        }
    }

    /// Leaves the protocol: tells the others (if it ever joined) and forgets the replica. The storage
    /// hint it wrote goes too if nobody else holds or waits for anything (so that the next page of a
    /// lone tab does not wait for it).
    fn leave(&mut self) {
        if let Phase::Synced(s) = &self.phase
            && self.wrote_hint
        {
            let me = self.member_key();
            let snapshot = s.replica.snapshot();
            let mut only_mine = true;
            for locks in [&snapshot.held, &snapshot.pending] {
                for l in locks {
                    only_mine &= l.client_id == me.client;
                }
            }
            if only_mine {
                self.wrote_hint = false;
                self.live_until = None;
                self.emit(Effect::StorageRemove {
                    key: live_record::LIVE_KEY,
                });
            }
        }
        if !matches!(self.phase, Phase::Detached) {
            self.post(Body::Leave);
        }
        self.phase = Phase::Detached;
        // Messages posted before leaving will not come back on the closed channel.
        self.echoed_seq = self.seq;
        for q in &mut self.queries {
            q.1 = None;
        }
    }

    /// Sends the queued requests, in call order, once this context is an active member.
    pub(super) fn post_queued(&mut self) {
        let mut queued: Vec<(u64, u64)> = Vec::new();
        for (id, r) in self.requests.iter() {
            if r.state == RequestState::Queued {
                queued.push((r.call, *id));
            }
        }
        queued.sort_unstable();
        for k in 0..queued.len() {
            if k == 0 && !self.queries.is_empty() {
                // Queries made before every queued request see none of them.
                self.settle_watermarks_before(Some(queued[0].0));
                self.answer_queries();
            }
            let next_queued = queued.get(k + 1).map(|q| q.0);
            self.post_request(queued[k].1, next_queued);
        }
    }

    /// Posts queued request `id` if this context is an active member, then gives a watermark to the
    /// queries it no longer precedes. `next_queued` is the call of the first request still queued
    /// after it (an active member posts every request as it is made, so a new request has none).
    fn post_request(&mut self, id: u64, next_queued: Option<u64>) {
        if !self.is_active_member() || self.lifecycle == Lifecycle::Retired {
            return;
        }
        let Some(r) = self
            .requests
            .get_mut(&id)
            .filter(|r| r.state == RequestState::Queued)
        else {
            return;
        };
        r.state = RequestState::Posted;
        let body = Body::Request {
            id,
            name: r.name.clone(),
            mode: r.mode,
            if_available: r.if_available,
            steal: r.steal,
        };
        self.post(body);
        self.settle_watermarks_before(next_queued);
        if !self.queries.is_empty() {
            // A query whose earlier calls are all applied ahead is answered now, before the next
            // queued request is applied ahead too.
            self.answer_queries();
        }
    }

    /// Gives a watermark to each query that no unposted request of this context precedes: the snapshot
    /// must include exactly this context's calls made before the query, not those made after it.
    fn settle_watermarks(&mut self) {
        if self.queries.iter().all(|q| q.1.is_some()) {
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

    /// [`Node::settle_watermarks`] given the call of the first request still queued.
    fn settle_watermarks_before(&mut self, first_queued: Option<u64>) {
        let seq = self.seq;
        for q in &mut self.queries {
            if q.1.is_none() && first_queued.is_none_or(|c| c > q.2) {
                q.1 = Some(seq);
            }
        }
    }

    fn receive(&mut self, now: u64, decoded: Decoded) {
        if let Decoded::Ours(m) = &decoded
            && m.sender.client == self.client
            && m.seq != 0
        {
            self.echoed_seq = self.echoed_seq.max(m.seq);
        }
        if let Decoded::Foreign { version, .. } = &decoded
            && *version > self.version
        {
            self.retire(*version);
            return;
        }
        match &self.phase {
            Phase::Detached => {}
            Phase::Joining(_) => self.joining_receive(now, decoded),
            Phase::Synced(_) => self.synced_receive(now, decoded),
        }
    }

    /// A newer protocol version is running: give up every lock and grant nothing any more.
    fn retire(&mut self, version: u32) {
        self.emit(Effect::Incompatible { version });
        self.lose_membership(LossReason::Retired);
        for id in self.request_ids(|r| r.if_available) {
            self.requests.remove(&id);
            self.emit(Effect::NotAvailable(id));
        }
        self.phase = Phase::Detached;
        self.lifecycle = Lifecycle::Retired;
        let queries = std::mem::take(&mut self.queries);
        for (query, _, _) in queries {
            let snapshot = self.local_snapshot();
            self.emit(Effect::Snapshot { query, snapshot });
        }
        self.set_timer(None);
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

    /// Runs after every event: the phase's policies (which may post), the queries, the storage hint,
    /// and the timer for the earliest next deadline.
    fn after(&mut self, now: u64) {
        if self.lifecycle != Lifecycle::Running {
            if matches!(
                self.lifecycle,
                Lifecycle::Gone | Lifecycle::Hidden | Lifecycle::Retired
            ) {
                self.set_timer(None);
            }
            return;
        }
        let mut next: Option<u64> = self.make_way(now);
        match &self.phase {
            Phase::Detached => {}
            Phase::Joining(_) => next = earliest(next, self.joining_policies(now)),
            Phase::Synced(_) => next = earliest(next, self.synced_policies(now)),
        }
        self.answer_queries();
        let hint = self.live_policy(now);
        next = earliest(next, hint);
        let log = self.log_policy(now);
        next = earliest(next, log);
        self.set_timer(next);
    }

    /// An idle member that saw another member's request leaves the protocol, so that the busy one may
    /// become the lone member and decide alone (docs/PROTOCOL.md, "making way"); it joins again, with a
    /// state transfer, when it next needs a lock. Not while another member could not carry the history on
    /// without it, nor for `query_linger` after this context's last `query()`. Driven by messages only:
    /// an idle origin stays quiet. A member that must poll the log to hear anything (`Wake::Polls`)
    /// also leaves once idle for `query_linger`, so that it stops polling. Returns when to look again.
    fn make_way(&mut self, now: u64) -> Option<u64> {
        let idle = !self.has_interest() && self.queries.is_empty();
        let lingering = self
            .queried_at
            .is_some_and(|t| now < t + self.config.query_linger);
        let polls = self.config.transport == Transport::Log(Wake::Polls)
            && matches!(self.phase, Phase::Synced(_));
        let idle_since = if idle && polls {
            *self.idle_since.get_or_insert(now)
        } else {
            self.idle_since = None;
            now
        };
        let linger_end = (idle_since + self.config.query_linger)
            .max(self.queried_at.map_or(0, |t| t + self.config.query_linger));
        let saw_request = std::mem::take(&mut self.saw_request);
        if !idle || lingering {
            return (idle && polls).then_some(linger_end);
        }
        let me = self.member_key();
        let mut others = false;
        let mut pending = false;
        if let Phase::Synced(s) = &self.phase
            && s.active
        {
            for (k, m) in s.replica.members() {
                others |= *k != me && !m.pending;
                pending |= m.pending;
            }
        }
        if saw_request && others {
            self.leave();
        } else if polls && !pending {
            if now < linger_end {
                return Some(linger_end);
            }
            self.leave();
        }
        None
    }

    /// Answers the queries whose context's own earlier messages are all applied.
    fn answer_queries(&mut self) {
        if self.queries.is_empty() || !self.is_active_member() {
            return;
        }
        self.settle_watermarks();
        // Own messages applied ahead count as seen: the query is then answered at once, before a
        // later call of this context is applied ahead too (and would show in its snapshot).
        let Phase::Synced(s) = &self.phase else {
            unreachable!("checked above")
        };
        let echoed = self.echoed_seq.max(s.applied_ahead);
        // The queries answered leave in order, the others stay in order (a loop, not `partition`).
        let mut waiting = Vec::new();
        for q in std::mem::take(&mut self.queries) {
            if q.1.is_some_and(|a| a <= echoed) {
                let snapshot = s.replica.snapshot();
                self.out.push(Effect::Snapshot {
                    query: q.0,
                    snapshot,
                });
            } else {
                waiting.push(q);
            }
        }
        self.queries = waiting;
    }

    /// Keeps the storage hint fresh while this context is a member with something held or pending;
    /// once it is not, the hint expires by itself (and goes when the context leaves, see `leave`).
    /// Returns when to renew.
    fn live_policy(&mut self, now: u64) -> Option<u64> {
        let interest = self.has_interest() && self.is_active_member();
        let half = self.config.live_ttl / 2;
        if interest {
            if self.live_until.is_none_or(|u| u <= now + half) {
                self.write_live(now + self.config.live_ttl);
            }
            self.wrote_hint = true;
            return self.live_until.map(|u| u - half);
        }
        // Idle: the hint is left to expire, not removed (a lone tab's lock cycle would otherwise write
        // storage twice, each a cross-process write and an event in every other tab); leaving removes it.
        None
    }

    fn set_timer(&mut self, at: Option<u64>) {
        if at == self.timer {
            return;
        }
        self.timer = at;
        self.emit(match at {
            Some(at) => Effect::SetTimer { at },
            None => Effect::ClearTimer,
        });
    }
}

#[cfg(test)]
mod tests;
