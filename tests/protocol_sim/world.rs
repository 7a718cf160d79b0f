//! The simulated origin: contexts running `protocol::Participant`s, a broadcast channel, an IndexedDB log,
//! liveness databases, localStorage's events (pokes), timers, clients and faults, driven by one event
//! queue in simulated wall-clock time (ms).
//!
//! The transport is the one the participants are configured for (`Config::transport`):
//! - **Broadcast**: every message a context posts reaches the channel's dispatcher after a random
//!   sending delay, in the sender's order, and joins its sequence (the log); the receivers get it as
//!   the [`Delivery`] model says. Under [`Delivery::TotalOrder`] (assumption A1: Chromium, Firefox)
//!   each connected context, the sender included (its echo object), receives the messages in log
//!   order. Under [`Delivery::OwnProcessFirst`] (WebKit) the contexts of the sender's own process
//!   receive a post at once, the other processes in log order. Under [`Delivery::SenderFifo`] (all
//!   the HTML spec promises) each receiver interleaves the senders its own way, each sender's messages
//!   in order.
//! - **Log**: a post is appended to a log in IndexedDB after a random commit delay, in the sender's
//!   order (its transactions run in creation order); the log is the sequence. Once committed, the
//!   writer's own context gets the entry and, if it runs, posts it on the carrier, a channel that
//!   delivers as the [`Delivery`] model says (or, without a carrier, pokes the others through
//!   storage). Contexts read the log when their participant asks; a trim can leave a reader behind.
//!
//! A context that crashes may lose the messages it had not finished sending (and, over the log, a
//! context that closes loses its appends still in flight, as a page's transactions die with it).
//! Storage events (pokes and relayed farewells) reach the other documents after a per-context delay.
//!
//! This module holds the types, the contexts and the per-event dispatch; each context's effects are
//! carried out by the production edge loop (`weblocks::protocol::edge`), whose host the world is
//! (`host`). Each part of the origin has a module of its own: `network` (the channel and its delivery
//! models), `indexed_log` (the log in IndexedDB), `liveness_db` (evidence),
//! `observers` (the reference the checks use), `lifecycle` (faults and the page lifecycle),
//! `transport_record` (the origin's record of its transport, where contexts prefer different ones) and
//! `event_queue` (simulated time).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::rc::Rc;

use weblocks::protocol::edge::EdgeState;
use weblocks::protocol::evidence::{Evidence, StorageEvent};
use weblocks::protocol::log_writer::{LogEvent, LogWriter};
use weblocks::protocol::replica::Replica;
use weblocks::protocol::wire::{MemberKey, Message, Value};
use weblocks::protocol::{Config, Effect, LossReason, Participant, Transport, Wake};
use weblocks::scheduler::{LockOptions, Snapshot};

use super::rng::Rng;

mod event_queue;
mod host;
mod indexed_log;
mod lifecycle;
mod liveness_db;
mod network;
mod observers;
mod sweep;
mod transport_record;

use event_queue::Scheduled;
use host::Entry;
use liveness_db::{LivenessStorage, RegisterTx};
use network::{Payload, edge_decodes, entry_data};
pub use transport_record::Admission;
use transport_record::TransportRecord;
use weblocks::protocol::transport_record::Recorded;

/// The identity of the simulated log's first database (a log's database makes one when it is
/// created); the database made anew after the `g`-th deletion has `LOG + g`.
const LOG: u64 = 1;

/// Bounds of the simulated environment.
#[derive(Clone, Debug)]
pub struct Env {
    pub send_max: u64,
    pub delivery_max: u64,
    pub storage_lag_max: u64,
    /// localStorage exists (else no storage event fires: no poke, no relayed farewell).
    pub storage: bool,
    /// How the channel (the transport, or the log's carrier) orders what it delivers.
    pub delivery: Delivery,
    pub config: Config,
    /// A context closes its connection to the origin's record on `versionchange` and at once asks
    /// again (see `transport_record`): the behaviour the record must not have, which the checks
    /// must catch.
    pub reask_on_versionchange: bool,
}

/// How a BroadcastChannel orders the messages of several senders for each receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// One order for every receiver, each sender's own second object included (A1).
    TotalOrder,
    /// WebKit's: a post reaches the contexts of the sender's own process at once, the other processes
    /// in the order of the network process, which never sends it back to the sender's process.
    OwnProcessFirst,
    /// Per-sender FIFO and nothing more: each receiver interleaves the senders its own way.
    SenderFifo,
}

#[derive(Clone, Debug)]
pub enum Action {
    Request {
        name: Rc<str>,
        options: LockOptions,
        hold: u64,
        abort_after: Option<u64>,
    },
    Release(u64),
    Abort(u64),
    Query,
    /// A loop of `rounds` exclusive cycles on `name`: request, release as soon as granted, request again.
    Loop {
        name: Rc<str>,
        rounds: u64,
    },
    /// These calls in one task of the page: what they send goes out together at its end.
    Batch(Vec<Action>),
}

impl Action {
    /// An exclusive request for `name`, released `hold` ms after it is granted.
    pub fn exclusive(name: &str, hold: u64) -> Action {
        Action::Request {
            name: Rc::from(name),
            options: LockOptions::default(),
            hold,
            abort_after: None,
        }
    }
}

#[derive(Clone, Debug)]
pub enum Fault {
    Crash,
    Stall(u64),
    Freeze(u64),
    Hide(u64),
    Close,
    /// `pagehide` (entering the back/forward cache) cut short before the participant ran: only the
    /// edge's farewell (`Effect::ArmFarewell`, posted without running the participant) went out; shown
    /// again after the time.
    CutHide(u64),
    /// A close whose `pagehide` was cut short the same way (Firefox, tests/e2e/cross_context_firefox).
    CutClose,
    /// The transport loses every message it would deliver to the context for that long (the IndexedDB
    /// log of js/log_channel.js trimmed past a reader that fell behind) while the context keeps
    /// running its calls and timers on a stale replica; then it is told (`Participant::handle_missed_messages`).
    Gap(u64),
    /// The context's edge posts (over the log: appends) something longer than any context decodes
    /// (`wire::MAX_SLOTS`): another library's data, or a post of a build that did not split its
    /// messages. On the broadcast transport every edge drops it; over the log it takes a key, which
    /// every reader must skip alike.
    Undecodable,
    /// Over the log: the context's next append aborts while it lives (quota, a transaction the
    /// database gave up): its key goes back, and its edge tells it of the gap (js/log_channel.js).
    AppendAborts,
    /// Over the log: the browser closes the context's connection to the log's database (WebKit's
    /// "connection to Indexed Database server lost", site data cleared) while the other contexts go
    /// on: its edge handles the `close` event as a `versionchange`, a gap for this context alone.
    ConnectionCloses,
    /// Over the log: the context's next read of the log fails; its edge reports a gap, not a
    /// complete read.
    ReadFails,
    /// Over the log: the context's logout code deletes every database. No context gives its
    /// connection up on `versionchange` (js/log_channel.js), so the deletion waits until every context
    /// that has the log open is gone, while the opens, reads and appends of those that start (or
    /// reopen) meanwhile wait behind it; then the next open makes the log anew: keys restart at 1, a
    /// new identity, a new history.
    LogDeleted,
    /// Over the log: the browser clears the site's data from its settings (or loses its storage
    /// process): it closes every connection to the log's database, each with a `close` event (a gap:
    /// the context steps out, and rejoins where it has requests), and deletes it once all are closed;
    /// then the log is made anew as after `LogDeleted`, under running contexts. Carrier frames of the
    /// old log still in flight arrive late.
    LogCleared,
    /// In a world with the origin's record of its transport: the context's logout code deletes it
    /// (and, over the log, the log's database). The deletion waits until every context holding the
    /// record is gone; contexts that start meanwhile wait behind it (`transport_record`).
    RecordDeleted,
    /// The browser takes the context's storage while it runs (WebKit's storage process ended, iOS
    /// suspended its tab): every IndexedDB connection of its is closed, each with a `close` event,
    /// and every open it makes from then on fails (`liveness_db`); the other contexts and new ones
    /// keep theirs. Its evidence then finds its database unreachable and it refuses, which is the
    /// only decision left to it; the others find it gone. A lock it held is lost while its callback
    /// may still run: the one overlap the checks forgive, for this context alone (docs/PROTOCOL.md
    /// §7, "storage lost").
    StorageLost,
    /// The context's logout code deletes every database of the origin (`indexedDB.databases()`,
    /// then `deleteDatabase` of each): every liveness database and the register, the record if the
    /// world has one, and over the log the log's database. Each deletion waits for the connections
    /// to its database, which are told (`StorageEvent::DeletionWaits`); the production edge decides
    /// what to give up (`world::sweep`).
    Sweep,
}

#[derive(Clone, Debug)]
enum Ev {
    Start,
    /// The context opens the origin's record and makes its transaction on it.
    RecordAsk,
    /// The context gets its transaction's answer: the record's value.
    RecordAnswer(Recorded),
    /// `Env::reask_on_versionchange`: the record's `versionchange` reaches the context.
    RecordVersionChange,
    /// The context's read of the record, asked again after a sweep, failed for good: the browser took
    /// its storage (js/transport_choice.js tries three more times, then refuses).
    RecordUnreachable,
    /// The channel's dispatcher receives a post of the context.
    Dispatch {
        payload: Payload,
        life: u32,
    },
    /// The context receives this on the channel (on the connection of that epoch).
    Deliver {
        payload: Payload,
        epoch: u32,
    },
    /// Log transport: the context's append (transaction `tx` of its log writer), on its connection
    /// to the log of generation `log`, commits (if it was not lost with its context); `identify`: it
    /// looks for the log's identity.
    Append {
        msg: Rc<Vec<Value>>,
        life: u32,
        log: usize,
        tx: u32,
        identify: bool,
    },
    /// Log transport: the context's open of the log's database (connection `handle`) completes on the
    /// log of generation `log` (after a deletion under way: on the new one).
    LogOpen {
        handle: u32,
        log: usize,
    },
    /// Log transport: a read (transaction `tx`) of the log of that generation runs (in the database)
    /// from this key.
    LogRead {
        log: usize,
        after: u64,
        tx: u32,
    },
    /// Log transport: the storage backend (or the carrier) answers the context's log writer.
    LogAnswer(LogEvent),
    /// Log transport without a carrier: another document appended (a storage event).
    Poke,
    /// Log transport without a carrier: a farewell arrives through a storage event.
    StorageRelay(Rc<Vec<Value>>),
    Timer {
        generation: u64,
    },
    Client(Action),
    Fault(Fault),
    EndStall,
    /// The end of a `Fault::Gap`: the context reads the gap.
    EndGap,
    Resume,
    Show,
    /// Evidence: the storage backend answers one of the context's evidence operations.
    Storage(StorageEvent),
    /// Evidence: the backend runs one of the context's transactions on the register.
    RegisterTx(RegisterTx),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    NotStarted,
    Running,
    Stalled,
    Frozen,
    /// In the back/forward cache, having stepped out (`BackForwardCache::Release`).
    Hidden,
    /// In the back/forward cache as a member (`BackForwardCache::Stay`): it runs no task, keeps its
    /// connections, and is evicted (gone, as if closed without `pagehide`) when a message reaches
    /// its channel or a new watch opens its liveness database.
    Cached,
    Crashed,
    Closed,
}

impl Status {
    /// The context exists and its JS may believe it holds locks.
    pub fn alive(self) -> bool {
        matches!(
            self,
            Status::Running | Status::Stalled | Status::Frozen | Status::Cached
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReqState {
    Pending,
    Held,
    Released,
    NotAvailable,
    Aborted,
    Stolen(LossReason),
}

#[derive(Clone, Debug)]
pub struct ReqRecord {
    pub name: Rc<str>,
    pub options: LockOptions,
    pub hold: u64,
    pub state: ReqState,
    /// Incarnation under which the participant last sent it.
    pub posted_as: Option<u32>,
    /// Incarnation under which it was granted.
    pub held_as: Option<u32>,
    pub issued_at: u64,
    pub granted_at: Option<u64>,
}

pub struct SimContext {
    pub participant: Participant,
    pub status: Status,
    deferred: VecDeque<Ev>,
    /// Channel connection (a new one after the back/forward cache); deliveries of an old one are lost.
    epoch: u32,
    /// Bumped by a crash: messages not yet sent may be lost.
    life: u32,
    last_append: u64,
    last_delivery: u64,
    timer_generation: u64,
    pub timer_lateness: u64,
    pub next_id: u64,
    pub requests: BTreeMap<u64, ReqRecord>,
    pub queries_answered: Vec<Snapshot>,
    pub queries_asked: usize,
    /// For each query asked: the next request id at that moment (requests before it must show).
    pub query_cut: BTreeMap<u64, u64>,
    /// The history the origin was in when this context last asked `query()`.
    pub queried_in: Option<weblocks::protocol::wire::MessageId>,
    /// Stalls and freezes (start, end): when this context could not answer.
    pub unresponsive: Vec<(u64, u64, bool)>,
    pub hidden_count: usize,
    /// Until when the transport loses what it would deliver to this context (`Fault::Gap`).
    pub gap_until: u64,
    /// Over the log: the log's length when the gap began (what a trim removes meanwhile).
    gap_floor: u64,
    /// Over the log: its next append aborts (`Fault::AppendAborts`).
    abort_next_append: bool,
    /// Over the log: its next read fails (`Fault::ReadFails`).
    fail_next_read: bool,
    /// Its edge refuses once the current edge call is over (its storage was taken).
    refusing: bool,
    /// Its next channel post never leaves it, as when the context ends between an append and the
    /// carrier's frame of it (set by tests).
    pub loses_next_post: bool,
    /// Over the log: the generation of the log its log writer's latest connection is to
    /// (`World::log_generation`, or an older one until its `close` event comes).
    conn_log: usize,
    /// Over the log: the production log writer (src/protocol/log_writer.rs), made with the first
    /// call of the edge loop over the log; its connections by handle, with the generation of the log
    /// each is to (kept through `versionchange`: only the context's end, or the browser closing it,
    /// ends one); and the log object its carrier (or storage listener) delivers to.
    pub log_writer: Option<LogWriter>,
    log_handles: Vec<(u32, usize)>,
    carrier_object: Option<u32>,
    /// Over the log: the position its applied entries were last checked from, and where a check of
    /// the outcomes is due once the effects are carried out.
    log_checked: Option<u64>,
    check_at: Option<usize>,
    decided: Vec<(u32, u64, Expect)>,
    pub retired: bool,
    /// Outcomes the observer decided for this participant's requests, to be checked once the participant
    /// has applied the same message: (log index, incarnation, local id, outcome kind).
    pub expected: VecDeque<(usize, u32, u64, Expect)>,
    /// Sequence number of this participant's last posted message, and of its last own message it
    /// applied.
    pub posted_seq: u64,
    pub applied_seq: u64,
    /// The browser process the context runs in (a window, its iframes and its dedicated workers
    /// share one; a crash takes them all).
    pub process: usize,
    /// `Delivery::SenderFifo`: when the last message from each sender reaches this context.
    last_from: BTreeMap<usize, u64>,
    /// Over the log without a carrier: whether storage events wake it (a document) or it polls.
    pub wake: Wake,
    /// The farewell its edge keeps armed (`Effect::ArmFarewell`).
    pub farewell: Option<Message>,
    /// Its channels are open (`Effect::OpenChannels` .. `Effect::CloseChannels`): it receives what the
    /// channel delivers.
    connected: bool,
    /// Its reads of the record after giving it up for a sweep, in order, each with the number of releases
    /// it answers (one `RecordAgreed` each, as js/transport_choice.js answers them).
    reasks: std::collections::VecDeque<u32>,
    /// The edge loop's state (its timer, flush hops and channels to deputies, by context index).
    pub edge: EdgeState,
    /// Microtasks the edge loop queued in this event (a flush's hops): they run at its end.
    microtasks: u32,
    /// Requests of `Action::Loop`, by id: the name and how many cycles are left after this one.
    loops: BTreeMap<u64, (Rc<str>, u64)>,
    /// Every effect it carried out, in order, where the world records them (`World::recording`).
    pub recorded: Vec<Effect>,
    /// Whether it runs a participant (in a world with a record: once it has settled).
    pub admission: Admission,
    /// In a world with a record: the transport it prefers, and the one it settled on.
    pub preference: Option<Recorded>,
    pub uses: Option<Recorded>,
    /// A worker: without a carrier, it polls.
    pub worker: bool,
    /// Its client's calls made before it settled.
    awaiting: VecDeque<Action>,
    /// Its evidence of life and death, as its edge keeps it (the production machine).
    pub evidence: Evidence,
    /// The key of the database its edge opened ahead as it loaded (a window), if any.
    ahead: Option<u64>,
    /// Its edge made the operations of `Evidence::prepared`; the open of the database ahead waits for
    /// its entry's transaction.
    prepared: bool,
    prepared_open: Option<weblocks::protocol::evidence::StorageOp>,
    /// Storage events that came before its participant started (a world with a record): its edge
    /// keeps them for the engine.
    early_storage: Vec<StorageEvent>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    Granted,
    NotAvailable,
    Revoked,
}

pub struct Observer {
    pub version: u32,
    pub replica: Replica,
}

pub struct World {
    pub now: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<Scheduled>>,
    pub contexts: Vec<SimContext>,
    /// The sequence: the channel's dispatch order, or the log in IndexedDB (the entry of key k at k - 1).
    pub log: Vec<Rc<Vec<Value>>>,
    /// Log transport: every farewell relayed for its sender to be appended (it reaches the others
    /// before it has a place in the log, and may never have one).
    pub relayed: Vec<Rc<Vec<Value>>>,
    /// Log transport: the greatest key trimmed from the log.
    floor: u64,
    /// The most entries the log held at once (what trimming left).
    pub longest_log: u64,
    pub observers: Vec<Observer>,
    pub rng: Rng,
    pub env: Env,
    /// Set once the workload stops: no new requests or faults.
    pub settling: bool,
    pub violations: Vec<String>,
    pub steps: u64,
    pub trace: Option<Vec<String>>,
    /// Counters for reports.
    pub stats: BTreeMap<&'static str, u64>,
    /// (context, request id) of every lock a context's JS currently believes it holds.
    pub beliefs: std::collections::BTreeSet<(usize, u64)>,
    /// Effects a context reported, waiting for the observer's confirmation: (context, id, kind, the
    /// context's last posted sequence number when it reported it). A lone member applies its own
    /// messages ahead of their place in the log, so the observer may decide them only once that
    /// message is appended: the check waits until the context has applied it back.
    pub unconfirmed: Vec<(usize, u64, Expect, u64)>,
    /// The context inside `pagehide` right now (or inside a `pageshow` that catches up on one).
    pub hiding: Option<usize>,
    /// Something the per-step check depends on changed (a grant, or the observers applied a message).
    pub dirty: bool,
    /// The checks run at every step (off only to measure the participants' own cost: the host bench).
    pub checking: bool,
    /// More events than this in one run is a runaway.
    pub max_steps: u64,
    /// Each context keeps every effect it carries out (`SimContext::recorded`): for the participants'
    /// tests.
    pub recording: bool,
    /// Inside an `Action::Batch`: the microtasks (a flush's hops) wait for the task's end.
    in_task: bool,
    /// Beliefs that the origin's history no longer gives their context (a steal, an eviction, a reset
    /// took them): since when. See [`World::check_stale_beliefs`].
    pub stale: BTreeMap<(usize, u64), u64>,
    /// Reads of the log the contexts made.
    pub reads: u64,
    /// Over the carried log: the keys of committed entries whose writer has not posted their frame (it
    /// has not run since the commit, or never will: it crashed, closed or hid). A carried reader hears
    /// of such an entry only when a later one shows the hole.
    pub unposted: std::collections::BTreeSet<u64>,
    /// The edges drop a log entry they do not decode, key and all, instead of handing its key to the
    /// order: a reader then waits for a key that no read gives it (see `order_first.rs`).
    pub edge_drops_undecodable: bool,
    /// Over the log: how many times its database was deleted and made anew. The log of generation
    /// `g` starts at `log_bases[g]` in `log`: its key `k` is `log[log_bases[g] + k - 1]`.
    pub log_generation: usize,
    log_bases: Vec<usize>,
    /// A deletion of the log under way: it completes once no context has the log open
    /// (`finish_deletion`).
    deleting: bool,
    /// Work on the next log that waits for the deletion (opens, reads and appends of the contexts
    /// that have closed the old one).
    blocked: Vec<(usize, Ev)>,
    /// Evidence: the origin's liveness databases and their register.
    storage: LivenessStorage,
    /// The origin's record of its transport, in a world whose contexts go through it
    /// (`World::with_record`).
    pub record: Option<TransportRecord>,
    /// In a world without the record's model: the record's deletion by a page's sweep, under way.
    implicit_record: Option<sweep::ImplicitRecord>,
    /// The contexts whose census the host answers with an empty list, as if their joining skipped
    /// it (`Joining::alone` deciding without the census): the joiner the checks must catch.
    pub skips_census: std::collections::BTreeSet<usize>,
    /// Each context that met a loss of the origin's messages since it last opened its channels (a
    /// gap of its transport, an append of its own that aborted, a read that failed, its connection
    /// the browser closed, an entry its edge dropped): which one. Only such a context may be reset by
    /// its own participant (`checks.rs`).
    pub met_loss: BTreeMap<usize, &'static str>,
}

impl World {
    pub fn new(seed: u64, env: Env, versions: &[u32]) -> World {
        let mut distinct: Vec<u32> = versions.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        World {
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            contexts: Vec::new(),
            log: Vec::new(),
            relayed: Vec::new(),
            floor: 0,
            longest_log: 0,
            observers: distinct
                .into_iter()
                .map(|version| Observer {
                    version,
                    replica: Replica::origin(version),
                })
                .collect(),
            rng: Rng::new(seed),
            env,
            settling: false,
            violations: Vec::new(),
            steps: 0,
            trace: None,
            stats: BTreeMap::new(),
            beliefs: Default::default(),
            unconfirmed: Vec::new(),
            hiding: None,
            dirty: false,
            checking: true,
            max_steps: 300_000,
            recording: false,
            in_task: false,
            stale: BTreeMap::new(),
            reads: 0,
            unposted: Default::default(),
            edge_drops_undecodable: false,
            log_generation: 0,
            storage: LivenessStorage::default(),
            log_bases: vec![0],
            deleting: false,
            blocked: Vec::new(),
            record: None,
            implicit_record: None,
            skips_census: Default::default(),
            met_loss: BTreeMap::new(),
        }
    }

    /// An origin of `count` contexts over an ideal transport: one order, every delivery, append, read
    /// and storage event at once, timers on time; every effect recorded. The world of the participants'
    /// tests and of the host bench.
    pub fn ideal(count: usize, config: Config) -> World {
        let env = Env {
            send_max: 0,
            delivery_max: 0,
            storage_lag_max: 0,
            storage: true,
            delivery: Delivery::TotalOrder,
            config,
            reask_on_versionchange: false,
        };
        let mut w = World::new(0, env, &[weblocks::protocol::wire::PROTOCOL_VERSION]);
        w.recording = true;
        w.storage.prompt = true;
        for _ in 0..count {
            w.add_context(0, weblocks::protocol::wire::PROTOCOL_VERSION, 0);
        }
        w.run_until(0);
        w
    }

    /// Context `i`'s client does `action` now, as one task; returns the effects carried out in it.
    pub fn act(&mut self, i: usize, action: Action) -> Vec<Effect> {
        let mark = self.contexts[i].recorded.len();
        self.dispatch(i, Ev::Client(action));
        self.contexts[i].recorded[mark..].to_vec()
    }

    /// Runs `f` on context `i`'s participant now, as one task, outside the clients' bookkeeping (for
    /// calls that start or end no request the world follows); returns what `f` returned and the effects
    /// carried out.
    pub fn call<R>(
        &mut self,
        i: usize,
        f: impl FnOnce(&mut Participant, u64) -> R,
    ) -> (R, Vec<Effect>) {
        let mark = self.contexts[i].recorded.len();
        let now = self.now;
        let result = f(&mut self.contexts[i].participant, now);
        self.effects(i);
        (result, self.contexts[i].recorded[mark..].to_vec())
    }

    /// Posts `msg` on the channel from outside the contexts (another version, garbage): it
    /// joins the sequence and reaches every connected context.
    pub fn inject(&mut self, msg: Vec<Value>) {
        let msg = Rc::new(msg);
        let idx = self.log.len();
        self.log.push(msg.clone());
        self.observe(idx, &msg);
        for j in 0..self.contexts.len() {
            let payload = Payload::Message {
                msg: msg.clone(),
                idx: Some(idx),
            };
            if self.receives(usize::MAX, j, &payload) {
                self.deliver_at(j, payload, 0, usize::MAX);
            }
        }
    }

    /// Runs every event due now (over the ideal transport: everything in flight).
    pub fn pump(&mut self) {
        let now = self.now;
        self.run_until(now);
    }

    /// Moves the clock on by `ms`, running every event due by then.
    pub fn advance(&mut self, ms: u64) {
        let until = self.now + ms;
        self.run_until(until);
        // Nothing left to run before then: time passes all the same.
        self.now = self.now.max(until);
    }

    /// A counter of the run (0 if it never moved).
    pub fn stat(&self, stat: &str) -> u64 {
        self.stats.get(stat).copied().unwrap_or(0)
    }

    pub fn bump(&mut self, stat: &'static str) {
        *self.stats.entry(stat).or_insert(0) += 1;
    }

    /// Context `i` meets `what`, a loss of the origin's messages of its own (see `World::met_loss`).
    pub(super) fn meets_loss(&mut self, i: usize, what: &'static str) {
        self.met_loss.insert(i, what);
    }

    /// Adds a context that starts at `at`.
    pub fn add_context(&mut self, at: u64, version: u32, timer_lateness: u64) -> usize {
        let i = self.contexts.len();
        let participant =
            Participant::with_version(&format!("ctx{i}"), self.env.config.clone(), version);
        let (evidence, ahead) = self.new_evidence(i);
        self.contexts.push(SimContext {
            participant,
            status: Status::NotStarted,
            deferred: VecDeque::new(),
            epoch: 0,
            life: 0,
            last_append: 0,
            last_delivery: 0,
            timer_generation: 0,
            timer_lateness,
            next_id: 1,
            requests: BTreeMap::new(),
            queries_answered: Vec::new(),
            queries_asked: 0,
            query_cut: BTreeMap::new(),
            queried_in: None,
            refusing: false,
            unresponsive: Vec::new(),
            hidden_count: 0,
            gap_until: 0,
            gap_floor: 0,
            abort_next_append: false,
            fail_next_read: false,
            loses_next_post: false,
            conn_log: 0,
            log_writer: None,
            log_handles: Vec::new(),
            carrier_object: None,
            log_checked: None,
            check_at: None,
            decided: Vec::new(),
            retired: false,
            expected: VecDeque::new(),
            posted_seq: 0,
            applied_seq: 0,
            process: i,
            last_from: BTreeMap::new(),
            wake: wake_of(self.env.config.transport),
            farewell: None,
            connected: false,
            reasks: std::collections::VecDeque::new(),
            edge: EdgeState::default(),
            microtasks: 0,
            loops: BTreeMap::new(),
            recorded: Vec::new(),
            admission: Admission::Started,
            preference: None,
            uses: None,
            worker: false,
            awaiting: VecDeque::new(),
            evidence,
            ahead,
            prepared: false,
            prepared_open: None,
            early_storage: Vec::new(),
        });
        self.schedule(at, i, Ev::Start);
        i
    }

    fn note(&mut self, f: impl FnOnce() -> String) {
        if let Some(t) = &mut self.trace {
            t.push(format!("{:>7} {}", self.now, f()));
        }
    }

    /// Ends the workload: no more faults; frozen, stalled and hidden contexts come back now. A page's
    /// deletion of the log that still waits completes once the contexts that have it open hold and
    /// wait for nothing: each then gives its connections up (`weblocks::protocol::evidence::sweep`).
    pub fn settle(&mut self) {
        self.settling = true;
        for i in 0..self.contexts.len() {
            match self.contexts[i].status {
                Status::Stalled => self.end_stall(i),
                Status::Frozen => self.resume(i),
                Status::Hidden | Status::Cached => self.show(i),
                _ => {}
            }
        }
        self.finish_deletion();
    }

    fn dispatch(&mut self, i: usize, ev: Ev) {
        match ev {
            Ev::Start if self.record.is_some() && self.contexts[i].preference.is_some() => {
                self.start_at_record(i)
            }
            Ev::Start => self.start_unless_swept(i),
            Ev::Dispatch { payload, life } => self.channel_dispatch(i, payload, life),
            Ev::Append {
                msg,
                life,
                log,
                tx,
                identify,
            } => self.append(i, msg, life, log, tx, identify),
            Ev::LogOpen { handle, log } => {
                // One asked for during a deletion waits for it; one asked for before completes on
                // the log as it is then.
                if log > self.log_generation {
                    self.blocked.push((i, Ev::LogOpen { handle, log }));
                } else {
                    self.log_opened(i, handle);
                }
            }
            Ev::LogRead { log, after, tx } => self.log_read(i, log, after, tx),
            Ev::RegisterTx(tx) => self.run_register_tx(i, tx),
            Ev::Fault(f) => {
                if !self.settling && self.contexts[i].status == Status::Running {
                    self.fault(i, f);
                }
            }
            Ev::EndStall => {
                if self.contexts[i].status == Status::Stalled {
                    self.end_stall(i);
                }
            }
            Ev::Resume => {
                if self.contexts[i].status == Status::Frozen {
                    self.resume(i);
                }
            }
            Ev::Show => {
                if matches!(self.contexts[i].status, Status::Hidden | Status::Cached) {
                    self.show(i);
                }
            }
            Ev::Deliver { .. }
            | Ev::Timer { .. }
            | Ev::Client(_)
            | Ev::EndGap
            | Ev::LogAnswer(_)
            | Ev::Poke
            | Ev::StorageRelay(_)
            | Ev::Storage(_)
            | Ev::RecordAsk
            | Ev::RecordAnswer(_)
            | Ev::RecordUnreachable
            | Ev::RecordVersionChange => match self.contexts[i].status {
                Status::Running => self.run(i, ev),
                Status::Stalled | Status::Frozen => self.contexts[i].deferred.push_back(ev),
                Status::Hidden => match ev {
                    // A page in the back/forward cache runs no task: its calls, its timer and the
                    // answers of IndexedDB wait for it to be shown again.
                    Ev::Client(_)
                    | Ev::Timer { .. }
                    | Ev::Storage(_)
                    | Ev::LogAnswer(_)
                    | Ev::RecordAsk
                    | Ev::RecordAnswer(_)
                    | Ev::RecordUnreachable
                    | Ev::RecordVersionChange => self.contexts[i].deferred.push_back(ev),
                    _ => {}
                },
                // A message that reaches a cached member's channel evicts it (Blink and Gecko);
                // everything else waits for it to be shown again.
                Status::Cached => match ev {
                    Ev::Deliver { .. } => self.evict(i, "a message reached its channel"),
                    _ => self.contexts[i].deferred.push_back(ev),
                },
                Status::NotStarted | Status::Crashed | Status::Closed => {}
            },
        }
    }

    /// Over the log without a carrier, context `i` is a worker: nothing wakes it, it polls.
    pub fn make_worker(&mut self, i: usize) {
        self.configure(i, Transport::Log(Wake::Polls));
    }

    /// Context `i` (not started) gets a participant of its version for `transport`.
    fn configure(&mut self, i: usize, transport: Transport) {
        let config = Config {
            transport,
            ..self.env.config.clone()
        };
        let version = self.contexts[i].participant.version();
        let participant = Participant::with_version(&format!("ctx{i}"), config, version);
        self.contexts[i].participant = participant;
        self.contexts[i].wake = wake_of(transport);
    }

    pub(super) fn start(&mut self, i: usize) {
        self.contexts[i].status = Status::Running;
        self.note(|| format!("ctx{i} starts"));
        self.prepare_evidence(i);
        self.effects(i);
        for event in std::mem::take(&mut self.contexts[i].early_storage) {
            self.edge(i, Entry::Storage(event));
        }
    }

    fn run(&mut self, i: usize, ev: Ev) {
        let now = self.now;
        match ev {
            Ev::RecordAsk => return self.record_ask(i),
            Ev::RecordAnswer(recorded) => return self.record_answer(i, recorded),
            Ev::RecordUnreachable => return self.record_unreachable(i),
            Ev::RecordVersionChange => return self.record_version_change(i),
            Ev::Storage(event) => {
                self.before_storage_event(i, &event);
                if self.contexts[i].admission == Admission::Awaiting {
                    // Its edge keeps them for the engine, which does not exist yet.
                    self.contexts[i].early_storage.push(event);
                } else if self.contexts[i].admission == Admission::Started {
                    self.note(|| format!("ctx{i} storage {event:?}"));
                    self.edge(i, Entry::Storage(event));
                }
                return;
            }
            // A context that runs no participant hears nothing but its client.
            Ev::Client(action) if self.contexts[i].admission != Admission::Started => {
                return self.client(i, action);
            }
            _ if self.contexts[i].admission != Admission::Started => return,
            _ => {}
        }
        match ev {
            Ev::Deliver { payload, epoch } => {
                if epoch != self.contexts[i].epoch {
                    return;
                }
                if self.now < self.contexts[i].gap_until {
                    // Lost: the context never applies it, nor reports what it decided.
                    if let Payload::Message { idx: Some(idx), .. } = payload {
                        self.note(|| format!("ctx{i} misses [{idx}]"));
                        while self.contexts[i]
                            .expected
                            .front()
                            .is_some_and(|e| e.0 <= idx)
                        {
                            self.contexts[i].expected.pop_front();
                        }
                    }
                    return;
                }
                match payload {
                    // The edge drops a channel message it does not decode: every receiver alike.
                    Payload::Message { msg, .. } if !edge_decodes(&msg) => {}
                    Payload::Message { msg, idx } => self.deliver_message(i, &msg, idx),
                    Payload::Entry { log, frame } => {
                        // The carrier frame the writer's log writer posted (of the log it had open:
                        // a frame of a deleted log may arrive late at readers of the new one).
                        if log != self.log_generation {
                            self.bump("late frames of a deleted log");
                        }
                        // The edge drops a frame it does not decode (src/wasm/log_storage.rs).
                        if edge_decodes(&frame) {
                            self.hear_carried(i, frame.to_vec());
                        }
                    }
                    Payload::Relay(msg) => self.hear_carried(i, msg.to_vec()),
                }
            }
            Ev::LogAnswer(event) => {
                if matches!(event, LogEvent::Read { .. }) && self.now < self.contexts[i].gap_until {
                    // Lost with the gap: the context never applies it.
                    return;
                }
                self.log_answer(i, event);
            }
            Ev::Poke => {
                if let Some(object) = self.contexts[i].carrier_object {
                    self.log_answer(i, LogEvent::Poked { object });
                }
            }
            Ev::StorageRelay(msg) => self.hear_carried(i, msg.to_vec()),
            Ev::Timer { generation } => {
                if generation == self.contexts[i].timer_generation {
                    self.note(|| format!("ctx{i} timer"));
                    self.edge(i, Entry::Timeout);
                }
            }
            Ev::Client(action) => self.client(i, action),
            Ev::EndGap => {
                self.note(|| format!("ctx{i} reads a gap"));
                self.meets_loss(i, "a gap");
                if self.over_log() {
                    // The log was trimmed past this context while it read nothing of it: the read it
                    // makes now shows the floor.
                    self.floor = self.floor.max(self.contexts[i].gap_floor);
                    if let Some(position) = self.contexts[i].participant.log_position()
                        && self.contexts[i].conn_log == self.log_generation
                        && let Some(writer) = self.contexts[i].log_writer.as_mut()
                    {
                        writer.read(position);
                        self.effects(i);
                    }
                } else {
                    self.contexts[i].participant.handle_missed_messages(now);
                    self.effects(i);
                }
            }
            _ => unreachable!("participant-side events only"),
        }
    }

    fn client(&mut self, i: usize, action: Action) {
        let now = self.now;
        match self.contexts[i].admission {
            Admission::Started => {}
            Admission::Awaiting => return self.contexts[i].awaiting.push_back(action),
            Admission::Refused => return self.client_refused(i, &action),
        }
        match action {
            Action::Request {
                name,
                options,
                hold,
                abort_after,
            } => {
                let n = &mut self.contexts[i];
                let id = n.next_id;
                n.next_id += 1;
                n.requests.insert(
                    id,
                    ReqRecord {
                        name: name.clone(),
                        options,
                        hold,
                        state: ReqState::Pending,
                        posted_as: None,
                        held_as: None,
                        issued_at: now,
                        granted_at: None,
                    },
                );
                self.note(|| format!("ctx{i} request #{id} {name} {options:?}"));
                self.contexts[i]
                    .participant
                    .handle_request(now, id, &name, options);
                if let Some(after) = abort_after {
                    self.schedule(now + after, i, Ev::Client(Action::Abort(id)));
                }
                self.effects(i);
            }
            Action::Release(id) => {
                if self.contexts[i]
                    .requests
                    .get(&id)
                    .is_some_and(|r| r.state == ReqState::Held)
                {
                    self.contexts[i].requests.get_mut(&id).expect("held").state =
                        ReqState::Released;
                    self.note(|| format!("ctx{i} release #{id}"));
                    self.bump("releases");
                    self.contexts[i].participant.handle_release(now, id);
                    self.effects(i);
                    if let Some((name, rounds)) = self.contexts[i].loops.remove(&id)
                        && rounds > 0
                    {
                        self.client(i, Action::Loop { name, rounds });
                    }
                }
            }
            Action::Batch(actions) => {
                self.in_task = true;
                for action in actions {
                    self.client(i, action);
                }
                self.in_task = false;
                self.effects(i);
            }
            Action::Loop { rounds: 0, .. } => {}
            Action::Loop { name, rounds } => {
                let id = self.contexts[i].next_id;
                self.contexts[i]
                    .loops
                    .insert(id, (name.clone(), rounds - 1));
                self.client(
                    i,
                    Action::Request {
                        name,
                        options: LockOptions::default(),
                        hold: 0,
                        abort_after: None,
                    },
                );
            }
            Action::Abort(id) => {
                let state = self.contexts[i].requests.get(&id).map(|r| r.state);
                if state.is_none() {
                    return;
                }
                let aborted = self.contexts[i].participant.handle_abort(now, id);
                self.note(|| format!("ctx{i} abort #{id} -> {aborted}"));
                if aborted {
                    if state != Some(ReqState::Pending) {
                        self.violation(format!(
                            "ctx{i}: abort of #{id} returned true in state {state:?}"
                        ));
                    }
                    self.contexts[i].requests.get_mut(&id).expect("known").state =
                        ReqState::Aborted;
                } else if state == Some(ReqState::Pending) {
                    self.violation(format!("ctx{i}: abort of pending #{id} returned false"));
                }
                self.effects(i);
            }
            Action::Query => {
                self.contexts[i].queries_asked += 1;
                let q = self.contexts[i].queries_asked as u64;
                let cut = self.contexts[i].next_id;
                self.contexts[i].query_cut.insert(q, cut);
                self.note(|| format!("ctx{i} query #{q}"));
                let version = self.contexts[i].participant.version();
                self.contexts[i].queried_in = Some(self.observer_of(version).history().clone());
                self.contexts[i].participant.handle_query(now, q);
                self.effects(i);
            }
        }
    }

    pub fn context_of(&self, member: &MemberKey) -> Option<usize> {
        member.client.strip_prefix("ctx")?.parse().ok()
    }

    pub fn observer_of(&self, version: u32) -> &Replica {
        &self
            .observers
            .iter()
            .find(|o| o.version == version)
            .expect("observer")
            .replica
    }

    pub fn violation(&mut self, v: String) {
        self.note(|| format!("VIOLATION {v}"));
        self.violations.push(format!("t={} {v}", self.now));
    }

    pub fn schedule_release(&mut self, i: usize, id: u64, hold: u64) {
        if hold != u64::MAX {
            let at = self.now + hold;
            self.schedule(at, i, Ev::Client(Action::Release(id)));
        }
    }
}

/// How a context on `transport` hears of what others append (the broadcast transport: its channel).
fn wake_of(transport: Transport) -> Wake {
    match transport {
        Transport::Log(wake) => wake,
        Transport::Broadcast => Wake::Carrier,
    }
}
