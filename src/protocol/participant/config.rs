//! The participant's configuration: its timings and what orders the origin's messages.

/// The protocol's timings, in ms, and its transport. docs/PROTOCOL.md §7 explains each timing and the
/// bounds the defaults meet. No timing decides who is gone or who is alone: the edge gives evidence of
/// life and death (docs/PROTOCOL.md §7, "evidence": `Effect::OpenAlive`, `Effect::Census`,
/// `Effect::Watch`), and an edge that cannot give it must not run a participant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// How long a joiner whose `Join` was followed by a `Genesis` or `State` it could not use waits for
    /// a state transfer before it joins again; and how long it waits for a census before it asks again.
    pub join_patience: u64,
    /// Delay between the members that answer a joiner (by rank), to avoid duplicate state transfers.
    pub state_stagger: u64,
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
    /// Over the log: how many entries behind its position a member that is not the history's sole
    /// member keeps (docs/PROTOCOL.md §12, "Trimming"): one further behind, which cannot have read the
    /// log for that many entries, steps out and rejoins when it next reads.
    pub log_keep: u64,
    /// What a page that holds or waits for a lock does on entering the back/forward cache
    /// (docs/PROTOCOL.md §8).
    pub back_forward_cache: BackForwardCache,
}

/// What a page that holds, waits for or queries a lock does on entering the back/forward cache
/// (`pagehide` with `persisted`). An idle page leaves the protocol in either case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackForwardCache {
    /// It stays a member, as through a freeze: its locks, requests, channels and liveness database
    /// stay, and its farewell is not posted. The engines where this is the default (Blink, Gecko) evict
    /// a cached page when another context opens a database it keeps open at a newer version (a
    /// watch), and when a message reaches its BroadcastChannel; evicted, its connections close and the
    /// others take its locks on that evidence (docs/PROTOCOL.md §7). Restored, it carries on as a
    /// member: no other context held its locks meanwhile, so its callbacks never overlap another's.
    /// Where an engine kept it cached despite a watch, its waiters wait for it, never overlap.
    Stay,
    /// It steps out: its held locks are reported lost (reason "hidden") and its requests wait to be
    /// sent again on `pageshow`, as WebKit's own implementation releases a page's locks on entry
    /// (a restored callback then runs on beside the next holder's, as natively in WebKit).
    Release,
}

impl BackForwardCache {
    /// The policy of the JavaScript engine `family` (`engineFamily()` of js/transport_choice.js, told
    /// by evidence a page script cannot alter, docs/PROTOCOL.md §2): `Release` for JavaScriptCore
    /// (WebKit, which releases natively), `Stay` for every other engine, the one that never overlaps.
    pub fn of_engine_family(family: &str) -> BackForwardCache {
        if family == "javascriptcore" {
            BackForwardCache::Release
        } else {
            BackForwardCache::Stay
        }
    }
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
    /// in any order ([`crate::protocol::log_order`] restores the log's): a context hears the origin as promptly
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
    pub(crate) fn prompt(self) -> bool {
        matches!(self, Transport::Broadcast | Transport::Log(Wake::Carrier))
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            join_patience: 1000,
            state_stagger: 5,
            buffer_limit: 100_000,
            query_linger: 2_000,
            transport: Transport::Broadcast,
            log_hole_wait: 20,
            log_poll: 40,
            log_keep: 20_000,
            back_forward_cache: BackForwardCache::Stay,
        }
    }
}
