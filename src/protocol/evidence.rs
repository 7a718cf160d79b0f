//! The evidence of life and death as an edge keeps it (docs/PROTOCOL.md §7, "evidence"): this context's
//! own liveness database, the origin's register of them, and the watches of other contexts' databases.
//! A sans-I/O state machine in the manner of the participant: the edge loop ([`crate::protocol::edge`])
//! hands it what the participant asks for ([`Effect::OpenAlive`](super::Effect::OpenAlive),
//! `CloseAlive`, `Census`, `Watch`) and what the storage backend answers
//! ([`Evidence::handle_storage`]); it gives the storage operations to carry out
//! ([`Evidence::poll_op`]), what it found for the participant ([`Evidence::poll_finding`]) and its next
//! deadline ([`Evidence::poll_timeout`]). The edge's JS only runs the IndexedDB calls and forwards their
//! events, so that every decision here (when to open, retry, enter the register, collect, give up) runs
//! in the simulation as in a browser.
//!
//! # Guarantees
//!
//! Each rests on assumption A5 (an IndexedDB connection stays open while its context lives, and the
//! backend closes it when the context is gone) and A1′ (the register's read/write transactions run one
//! at a time):
//! - **A member is announced only with its evidence.** [`Finding::Alive`] comes only once this context's
//!   database is open *and* its entry is in the register, so a joiner's census, read after its `Join`
//!   came back, lists every member whose `Join` came before.
//! - **Nothing but a closed connection is evidence of death.** [`Finding::Gone`] comes only from an open
//!   at version 2 that the backend let start (`upgradeneeded`) or complete, which it allows only once no
//!   connection at version 1 is left. A failed open is no evidence: the watch is made again later.
//! - **Nothing is left behind.** A context writes the entry of its database in the register before it
//!   opens it, keeps that one database for as long as it lives (between memberships too, as one opened
//!   ahead, which nobody waits for), and deletes both when it ends. One a context left behind (it
//!   crashed, was killed, or ended without its last transactions) is in the register: every context
//!   reads the register when it starts and when it joins, watches each entry, and deletes the database
//!   and its entry once the owner is gone. The cost is bounded: one watch per listed database, removed
//!   once it completes.
//! - **Nor what no entry names.** A watch of a database that does not exist makes one at version 0
//!   and aborts its upgrade, which leaves it there in WebKit (as the standard allows), and in Gecko
//!   where the browser is killed meanwhile; a collector killed between taking an entry out and
//!   deleting its database leaves that. A watch that finds missing a database whose owner is known
//!   gone deletes what its open made. And a context starting lists
//!   the origin's databases ([`StorageOp::List`]) and only then reads the register: a liveness database
//!   the listing found that no entry of that read names is collected (deleted at version 0, else
//!   watched). This never touches a live owner's: an owner writes its entry before it makes its
//!   database, so one made before the listing was listed before the read began, and an entry goes only
//!   once its owner ended, or (one opened ahead) once its database stayed missing for
//!   [`COLLECT_AFTER_MS`].
//! - **No transaction on the register while the page is in the back/forward cache.** Between
//!   [`StorageEvent::PageHidden`] and [`StorageEvent::PageShown`] the register's transactions wait
//!   (WebKitGTK leaves one begun in the `pagehide` that enters the cache unfinished, even once the page
//!   is back, and every later one of the origin waits behind it). What this context leaves listed
//!   meanwhile is a member's entry whose database is closed or deleted, which a watcher takes out as
//!   for a crash; if the page is shown again its own writes follow.
//! - **It gives up only after trying.** This context's own database is opened with the waits of
//!   [`OPEN_BACKOFF_MS`]; only after the last does it tell the participant it cannot give evidence
//!   ([`Finding::Unreachable`]), and the context then refuses requests rather than decide without it.
//!   Whether the browser had closed a connection of this context's that was open before
//!   ([`Evidence::storage_lost`]: WebKit's storage process ended, iOS suspended the tab) tells the page
//!   why: in WebKit such a document cannot open IndexedDB again until it is reloaded.

use std::collections::VecDeque;
use std::rc::Rc;

use super::participant::BackForwardCache;

/// The waits before each attempt to open this context's database (the first at once), in ms; after the
/// last failure the context refuses.
pub const OPEN_BACKOFF_MS: [u64; 4] = [0, 100, 400, 1600];
/// The wait before a watch whose open failed is made again, in ms.
pub const WATCH_RETRY_MS: u64 = 1000;
/// How many times a watch whose opens fail is made again, [`WATCH_RETRY_MS`] apart, before it is
/// given up (until the next read of the register lists its entry again).
pub const WATCH_TRIES: usize = 60;
/// How long a database opened ahead may stay missing while its entry is listed before a read of the
/// register takes the entry out: its owner writes the entry before it creates the database, and a live
/// owner that is slow (busy, frozen, in the back/forward cache) opens it later. Only non-members'
/// entries are so taken out, which nobody waits for: the wait decides when garbage goes, never who is
/// gone, and no timer is armed for it.
pub const COLLECT_AFTER_MS: u64 = 60_000;
/// How many of the databases this context collected it remembers ([`Evidence`]'s `collected`).
const COLLECTED_KEPT: usize = 8;
/// How long the register may take to open before the context says why it waits: an open of it waits
/// behind a page's deletion of it, which waits for every context that has it open.
pub const REGISTER_WAIT_MS: u64 = 2000;

/// A random number drawn from `seed` (splitmix64): 52 bits, never 0 (a key of a liveness database, a
/// log's identity).
pub(crate) fn fresh_key(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    1 + (z >> 12) % ((1 << 52) - 1)
}

/// A database of the evidence (docs/PROTOCOL.md §9 fixes their names, versions and shape).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Database {
    /// The origin's register, `weblocks-alive:` at version 1 with one store `alive`, its entries as keys.
    Register,
    /// Liveness database `key` of context `client`, `weblocks-alive:<client>:<key>`: open at version 1
    /// while its owner lives; an open at version 2 waits until it is gone.
    Alive { client: Rc<str>, key: u64 },
}

/// An entry of the register: one liveness database, by its owner's client id and its key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A member's (its name as the key): a joiner waits until it is gone, unless its `Join` came after
    /// the joiner's.
    Member { client: Rc<str>, key: u64 },
    /// One opened ahead, before its context asked for it (its name behind a `~`, which older versions'
    /// census skips): nobody waits for it, but every context watches it, so that one whose context ended
    /// without deleting it is collected.
    Ahead { client: Rc<str>, key: u64 },
}

impl Entry {
    fn database(&self) -> Database {
        let (Entry::Member { client, key } | Entry::Ahead { client, key }) = self;
        Database::Alive {
            client: client.clone(),
            key: *key,
        }
    }

    fn owner(&self) -> &Rc<str> {
        let (Entry::Member { client, .. } | Entry::Ahead { client, .. }) = self;
        client
    }

    fn key(&self) -> u64 {
        let (Entry::Member { key, .. } | Entry::Ahead { key, .. }) = self;
        *key
    }
}

/// One storage operation for the edge to carry out. Each answers with [`StorageEvent`]s of its handle or
/// transaction, in a later task or microtask, never within the call that made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageOp {
    /// Open `database` at `version` as connection `handle`, ignoring `versionchange` on it (a deletion
    /// or another version's open waits for it: for a liveness database, that is what it is for). The
    /// register's upgrade makes its store. Answers `Upgrading` (for an open at version 2: the evidence),
    /// then `Opened` or `OpenFailed`; later `Closed` if the browser closes it. `hides` (this context's
    /// own database, where the context does not stay a member in the back/forward cache): closed by
    /// the edge itself, before any script of ours runs, when the page enters the back/forward cache
    /// (`Hidden`).
    Open {
        handle: u32,
        database: Database,
        version: u32,
        hides: bool,
    },
    /// Close connection `handle` (no answer).
    Close { handle: u32 },
    /// Delete `database` (no answer: it completes once every connection to it is closed).
    Delete { database: Database },
    /// List the origin's databases (`indexedDB.databases()`). Answers `Databases`.
    List,
    /// On the register's connection `handle`, one read/write transaction: delete `remove`, then put
    /// `put`. Answers `Written`.
    Write {
        handle: u32,
        tx: u32,
        remove: Option<Entry>,
        put: Option<Entry>,
    },
    /// On the register's connection `handle`, read every entry in a read-only transaction. Answers
    /// `Listed`.
    Read { handle: u32, tx: u32 },
    /// A page's deletion waits and this context holds and waits for nothing ([`sweep`]): close this
    /// context's other weblocks connections (the origin's transport record, the log's database) and ask
    /// the record again at once, behind the deletion. Answers `RecordAgreed` once the record names the
    /// transport this context uses; where it names another, the context refuses instead.
    ReleaseRecord,
}

/// What the storage backend answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageEvent {
    /// Open `handle` got `upgradeneeded` from version 1: the database exists, and no connection at a
    /// lower version is left.
    Upgrading { handle: u32 },
    /// Open `handle` (at version 2) found no such database: the edge aborted its upgrade, so that none
    /// is made (it then fails).
    Missing { handle: u32 },
    /// Open `handle` succeeded: the connection is open.
    Opened { handle: u32 },
    /// Open `handle` failed, or could not be made.
    OpenFailed { handle: u32 },
    /// The browser closed connection `handle` (site data cleared, its storage process ended), or a
    /// transaction could not be made on it.
    Closed { handle: u32 },
    /// The edge closed connection `handle` (an open with `hides`) as the page entered the back/forward
    /// cache, or as its open completed while the page was there.
    Hidden { handle: u32 },
    /// The page entered the back/forward cache (`pagehide` with `persisted`), told by the edge's own
    /// listener, before any of the connections it closes are told `Hidden` and before the
    /// participant's `pagehide`.
    PageHidden,
    /// The page is shown again after the back/forward cache (`pageshow` with `persisted`).
    PageShown,
    /// Transaction `tx` of a `Write` completed (`ok`) or did not.
    Written { tx: u32, ok: bool },
    /// Transaction `tx` of a `Read`: the register's entries, `None` if it failed.
    Listed {
        tx: u32,
        entries: Option<Vec<Entry>>,
    },
    /// `versionchange` without a new version on one of this context's weblocks connections (any of
    /// them: liveness, register, record, log): a deletion of that database waits for it ([`sweep`]).
    DeletionWaits,
    /// After `ReleaseRecord`: the record, read again, names the transport this context uses.
    RecordAgreed,
    /// The answer to `List`: each liveness database of the origin by its owner's client id, its key
    /// and its version (0: made by an open whose upgrade did not complete); `None` where the listing
    /// failed, or the engine has none.
    Databases(Option<Vec<(Rc<str>, u64, u32)>>),
}

/// What the evidence tells the participant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// This context's database is open under this key, and in the register
    /// ([`crate::protocol::Participant::handle_alive`]).
    Alive(u64),
    /// The browser closed this context's database
    /// ([`crate::protocol::Participant::handle_alive_lost`]).
    Lost,
    /// The members the register lists ([`crate::protocol::Participant::handle_census`]).
    Census(Vec<(Rc<str>, u64)>),
    /// That context's database lost its last connection: it is gone
    /// ([`crate::protocol::Participant::handle_gone`]).
    Gone(Rc<str>, u64),
    /// This context's database cannot be opened: it cannot give evidence, and refuses.
    Unreachable,
    /// The register has not opened for [`REGISTER_WAIT_MS`]: say so, once (a page of the origin is
    /// deleting it, and the deletion waits for every context that has it open). Also said once where
    /// the record, asked again after this context gave its connections up for a deletion
    /// ([`sweep`]), has not answered for as long.
    RegisterWaits,
    /// The record, asked again after this context gave its connections up for a deletion, names the
    /// transport it uses: it may join again ([`crate::protocol::Participant::handle_record_agreed`]).
    RecordAgreed,
}

/// This context's own liveness database. Its entry is in the register before the database exists (as
/// opened ahead), so that whenever this context ends, a database it made is listed, and collected.
#[derive(Debug)]
enum Own {
    None,
    /// Its entry as opened ahead is being written (transaction `tx`); then it is opened.
    Registering {
        key: u64,
        tx: u32,
        attempt: usize,
    },
    /// Being opened (its entry as opened ahead is in the register).
    Opening {
        handle: u32,
        key: u64,
        attempt: usize,
    },
    /// Open, its entry as opened ahead: nobody waits for it. A context keeps it between memberships.
    Ahead {
        handle: u32,
        key: u64,
    },
    /// Open; its member entry is being written in its place (transaction `tx`).
    Entering {
        handle: u32,
        key: u64,
        tx: u32,
        attempt: usize,
    },
    /// Open, a member's entry: the participant was told.
    Open {
        handle: u32,
        key: u64,
    },
    /// Its last attempt failed: the next is due at `at`.
    Waiting {
        attempt: usize,
        at: u64,
    },
    /// Every attempt failed.
    Failed,
}

/// The register's connection.
#[derive(Debug, PartialEq, Eq)]
enum Register {
    Closed,
    Opening(u32),
    Open(u32),
}

/// A transaction on the register, waiting for its connection or under way.
#[derive(Debug)]
enum Job {
    Write {
        remove: Option<Entry>,
        put: Option<Entry>,
    },
    /// A census for the participant (`true`), or a look for databases to collect. `found`: the liveness
    /// databases a listing made before this read found (owner, key, version), collected unless an
    /// entry names them.
    Read {
        census: bool,
        found: Vec<(Rc<str>, u64, u32)>,
    },
}

/// A watch of another context's database.
#[derive(Debug)]
struct Watch {
    entry: Entry,
    /// The open under way (0: none, it is made again at `retry_at`).
    handle: u32,
    retry_at: u64,
    /// Its opens that failed since this context's storage was taken ([`Evidence::storage_lost`]).
    failed: usize,
    /// Its upgrade started: the context is gone (told once).
    told: bool,
}

/// One context's evidence: see the module docs.
pub struct Evidence {
    client: Rc<str>,
    /// The state of the generator of this context's keys (splitmix64).
    seed: u64,
    next_handle: u32,
    next_tx: u32,
    own: Own,
    /// The participant asked for its database (`OpenAlive`) and has not left since.
    wanted: bool,
    /// The context ended (`EndAlive`): whatever of it is still under way goes once it completes.
    ended: bool,
    /// Its own databases are opened with `hides` (it does not stay a member in the back/forward cache).
    hides: bool,
    /// The page is in the back/forward cache: the register's transactions wait in `queued`.
    hidden: bool,
    register: Register,
    /// Since when the register has been opening (the first time since its last open failed), and
    /// whether that was told.
    register_since: Option<u64>,
    register_told: bool,
    /// Jobs waiting for the register's connection, and those under way, by transaction.
    queued: Vec<(u32, Job)>,
    running: Vec<(u32, Job)>,
    watches: Vec<Watch>,
    /// Entries opened ahead whose database a watch found missing, and since when: taken out by a read
    /// of the register once missing for [`COLLECT_AFTER_MS`]. Only entries still listed are kept.
    missing: Vec<(Entry, u64)>,
    /// The last [`COLLECTED_KEPT`] databases whose owner this context found gone, by owner and key: a
    /// watch of one of them made since (of its other entry) that finds it missing deletes it again.
    collected: Vec<(Rc<str>, u64)>,
    /// The browser closed a connection of this context's that was open (the register, or its own
    /// database): see [`Evidence::storage_lost`].
    lost: bool,
    ops: VecDeque<StorageOp>,
    findings: VecDeque<Finding>,
    /// A page's deletion of weblocks' databases, as this context takes part in it.
    sweep: sweep::Sweep,
}

impl Evidence {
    /// The evidence of context `client`, its keys drawn from `seed`, once the edge has made the
    /// operations of [`Evidence::prepared`] (a window does while its wasm loads). Its first job is to
    /// list the origin's databases and then read the register for databases to collect.
    pub fn new(client: &str, seed: u64, ahead: Option<u64>) -> Evidence {
        let mut evidence = Evidence {
            client: client.into(),
            seed,
            next_handle: 3,
            next_tx: 3,
            own: Own::None,
            wanted: false,
            ended: false,
            hides: true,
            hidden: false,
            register: Register::Opening(1),
            register_since: None,
            register_told: false,
            queued: Vec::new(),
            running: Vec::new(),
            watches: Vec::new(),
            missing: Vec::new(),
            collected: Vec::new(),
            lost: false,
            ops: VecDeque::from([StorageOp::List]),
            findings: VecDeque::new(),
            sweep: sweep::Sweep::default(),
        };
        if let Some(key) = ahead {
            evidence.own = Own::Opening {
                handle: 2,
                key,
                attempt: 0,
            };
            evidence.running.push((
                1,
                Job::Write {
                    remove: None,
                    put: Some(evidence.ahead_entry(key)),
                },
            ));
        }
        evidence
    }

    /// What this context does in the back/forward cache: where it stays a member there
    /// ([`BackForwardCache::Stay`]), its own database is not opened with `hides`, so that it stays
    /// open through a `pagehide` with `persisted` while the participant is a member (the browser
    /// evicts the page once another context watches it); it is closed there only where the
    /// participant is not, or leaves then.
    pub fn set_back_forward_cache(&mut self, cache: BackForwardCache) {
        self.hides = cache == BackForwardCache::Release;
    }

    /// What an edge makes before this machine exists, in order: it opens the register as handle 1
    /// and, with `ahead`, writes there this context's entry as opened ahead (transaction 1) and, once
    /// that completed, opens this context's database under that key as handle 2 (answering
    /// `OpenFailed` for it if the transaction did not complete).
    pub fn prepared(client: &str, ahead: Option<u64>) -> Vec<StorageOp> {
        let mut ops = vec![StorageOp::Open {
            handle: 1,
            database: Database::Register,
            version: 1,
            hides: false,
        }];
        if let Some(key) = ahead {
            let client: Rc<str> = client.into();
            ops.push(StorageOp::Write {
                handle: 1,
                tx: 1,
                remove: None,
                put: Some(Entry::Ahead {
                    client: client.clone(),
                    key,
                }),
            });
            // Not `hides`: what the context does in the back/forward cache is not known yet; this
            // machine closes it there unless the participant stays a member.
            ops.push(StorageOp::Open {
                handle: 2,
                database: Database::Alive { client, key },
                version: 1,
                hides: false,
            });
        }
        ops
    }

    /// The next storage operation to carry out, in order.
    #[must_use]
    pub fn poll_op(&mut self) -> Option<StorageOp> {
        self.ops.pop_front()
    }

    /// The next finding for the participant, in order.
    #[must_use]
    pub fn poll_finding(&mut self) -> Option<Finding> {
        self.findings.pop_front()
    }

    /// When [`Evidence::handle_timeout`] is due (`None`: nothing waits).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<u64> {
        let own = match self.own {
            Own::Waiting { at, .. } => Some(at),
            _ => None,
        };
        let watch = self
            .watches
            .iter()
            .filter(|w| w.handle == 0)
            .map(|w| w.retry_at)
            .min();
        let register = match (self.register_since, &self.register) {
            (Some(since), Register::Opening(_)) if !self.register_told => {
                Some(since + REGISTER_WAIT_MS)
            }
            _ => None,
        };
        [own, watch, register, self.sweep_deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Whether the browser closed a connection of this context's that was open (a `Closed` of the
    /// register or of its own database): once its attempts then fail too ([`Finding::Unreachable`]),
    /// its storage was taken from it while it lives, rather than never given.
    pub fn storage_lost(&self) -> bool {
        self.lost
    }

    /// How many watches are under way or wait to be made again: at most one per database listed or
    /// asked for, each gone once its database is.
    pub fn watch_count(&self) -> usize {
        self.watches.len()
    }

    // ---- what the participant asks for ----------------------------------------------------------------

    /// `Effect::OpenAlive`: this context's database, open and a member's in the register
    /// ([`Finding::Alive`]).
    pub fn open_own(&mut self, now: u64) {
        self.note_time(now);
        if self.ended {
            return;
        }
        self.wanted = true;
        match self.own {
            Own::Ahead { handle, key } => self.enter(handle, key, 0),
            Own::None | Own::Failed => self.start_new(0),
            Own::Open { key, .. } => self.findings.push_back(Finding::Alive(key)),
            // Entered once it opens, or at its next attempt.
            Own::Registering { .. }
            | Own::Opening { .. }
            | Own::Waiting { .. }
            | Own::Entering { .. } => {}
        }
    }

    /// `Effect::CloseAlive`: the context left the protocol (after its `Leave`). Its database stays
    /// open for its next membership, its entry back to one opened ahead: nobody waits for it.
    pub fn leave_own(&mut self) {
        self.wanted = false;
        if self.hidden {
            // Leaving as the page enters the back/forward cache: its database goes too, or a
            // watcher's open would evict the page for nothing.
            return self.hide_own();
        }
        if let Own::Entering { handle, key, .. } | Own::Open { handle, key } = self.own {
            self.run(Job::Write {
                remove: Some(self.member_entry(key)),
                put: Some(self.ahead_entry(key)),
            });
            self.own = Own::Ahead { handle, key };
        }
    }

    /// `Effect::EndAlive`: the context ends. Its database is closed, deleted and out of the register;
    /// one still being made goes once it is.
    pub fn end_own(&mut self) {
        self.wanted = false;
        self.ended = true;
        match std::mem::replace(&mut self.own, Own::None) {
            Own::Ahead { handle, key } => self.drop_own(handle, key, false),
            Own::Entering { handle, key, .. } | Own::Open { handle, key } => {
                self.drop_own(handle, key, true)
            }
            own @ (Own::Registering { .. } | Own::Opening { .. }) => self.own = own,
            Own::None | Own::Waiting { .. } | Own::Failed => {}
        }
    }

    /// `Effect::Census`: read the register ([`Finding::Census`]) and watch every database it lists.
    pub fn census(&mut self, now: u64) {
        self.note_time(now);
        self.run(Job::Read {
            census: true,
            found: Vec::new(),
        });
    }

    /// `Effect::Watch`: watch member `client`'s database `key` ([`Finding::Gone`] once it is gone).
    pub fn watch(&mut self, client: Rc<str>, key: u64) {
        self.watch_entry(Entry::Member { client, key });
    }

    // ---- what the storage backend answers --------------------------------------------------------------

    /// An answer to one of the operations.
    pub fn handle_storage(&mut self, now: u64, event: StorageEvent) {
        self.note_time(now);
        match event {
            StorageEvent::Upgrading { handle } => {
                if let Some(w) = self.watches.iter().position(|w| w.handle == handle) {
                    self.gone(w);
                }
            }
            StorageEvent::Missing { handle } => {
                if let Some(w) = self.watches.iter().position(|w| w.handle == handle) {
                    self.missing(w, now);
                }
            }
            StorageEvent::Opened { handle } => self.opened(handle),
            StorageEvent::OpenFailed { handle } => self.open_failed(handle, now),
            StorageEvent::Closed { handle } => self.closed(handle, now),
            StorageEvent::Hidden { handle } => self.hidden(handle),
            StorageEvent::PageHidden => {
                self.hidden = true;
                if !self.wanted {
                    self.hide_own();
                }
            }
            StorageEvent::PageShown => {
                self.hidden = false;
                if let Register::Open(handle) = self.register {
                    self.start_queued(handle);
                }
            }
            StorageEvent::Written { tx, ok } => self.written(tx, ok, now),
            StorageEvent::Listed { tx, entries } => self.listed(tx, entries, now),
            StorageEvent::DeletionWaits => self.deletion_waits(),
            StorageEvent::RecordAgreed => self.record_agreed(),
            StorageEvent::Databases(found) => {
                let mut found = found.unwrap_or_default();
                found.retain(|(client, _, _)| *client != self.client);
                self.run(Job::Read {
                    census: false,
                    found,
                });
            }
        }
    }

    /// The deadline [`Evidence::poll_timeout`] gave has come: attempts and watches due are made again.
    pub fn handle_timeout(&mut self, now: u64) {
        self.note_time(now);
        if let (Some(since), Register::Opening(_)) = (self.register_since, &self.register)
            && !self.register_told
            && now >= since + REGISTER_WAIT_MS
        {
            self.register_told = true;
            self.findings.push_back(Finding::RegisterWaits);
        }
        self.sweep_timeout(now);
        if let Own::Waiting { attempt, at } = self.own
            && at <= now
        {
            self.start_new(attempt);
        }
        for w in 0..self.watches.len() {
            if self.watches[w].handle == 0 && self.watches[w].retry_at <= now {
                self.open_watch(w);
            }
        }
    }

    // ---- internals ------------------------------------------------------------------------------------

    /// Notes when the register began opening, the first time this machine learns the time while it
    /// opens (it is told the time by every call that can change it).
    fn note_time(&mut self, now: u64) {
        if matches!(self.register, Register::Opening(_)) && self.register_since.is_none() {
            self.register_since = Some(now);
        }
    }

    fn handle(&mut self) -> u32 {
        self.next_handle += 1;
        self.next_handle - 1
    }

    /// A key this context never used.
    fn fresh_key(&mut self) -> u64 {
        fresh_key(&mut self.seed)
    }

    fn own_database(&self, key: u64) -> Database {
        Database::Alive {
            client: self.client.clone(),
            key,
        }
    }

    fn member_entry(&self, key: u64) -> Entry {
        Entry::Member {
            client: self.client.clone(),
            key,
        }
    }

    fn ahead_entry(&self, key: u64) -> Entry {
        Entry::Ahead {
            client: self.client.clone(),
            key,
        }
    }

    /// Attempt `attempt` at this context's database, under a new key: its entry first.
    fn start_new(&mut self, attempt: usize) {
        let key = self.fresh_key();
        let tx = self.run(Job::Write {
            remove: None,
            put: Some(self.ahead_entry(key)),
        });
        self.own = Own::Registering { key, tx, attempt };
    }

    /// Its member entry takes the place of its entry as opened ahead; the participant is told once it
    /// is there.
    fn enter(&mut self, handle: u32, key: u64, attempt: usize) {
        let tx = self.run(Job::Write {
            remove: Some(self.ahead_entry(key)),
            put: Some(self.member_entry(key)),
        });
        self.own = Own::Entering {
            handle,
            key,
            tx,
            attempt,
        };
    }

    /// Closes and deletes this context's database, and takes its entry (a member's, or one opened
    /// ahead) out of the register.
    fn drop_own(&mut self, handle: u32, key: u64, member: bool) {
        self.ops.push_back(StorageOp::Close { handle });
        self.forget_own(key, member);
    }

    /// This context's database is closed, or never opened: it is deleted, and out of the register.
    fn forget_own(&mut self, key: u64, member: bool) {
        self.ops.push_back(StorageOp::Delete {
            database: self.own_database(key),
        });
        let entry = if member {
            self.member_entry(key)
        } else {
            self.ahead_entry(key)
        };
        self.run(Job::Write {
            remove: Some(entry),
            put: None,
        });
    }

    /// An attempt at this context's database failed: the next after its wait, or none left.
    fn again(&mut self, attempt: usize, now: u64) {
        let next = attempt + 1;
        if self.ended {
            self.own = Own::None;
        } else if next < OPEN_BACKOFF_MS.len() {
            self.own = Own::Waiting {
                attempt: next,
                at: now + OPEN_BACKOFF_MS[next],
            };
        } else {
            self.own = Own::Failed;
            if self.wanted {
                self.findings.push_back(Finding::Unreachable);
            }
        }
    }

    fn open_register(&mut self) {
        if self.register == Register::Closed {
            let handle = self.handle();
            self.ops.push_back(StorageOp::Open {
                handle,
                database: Database::Register,
                version: 1,
                hides: false,
            });
            self.register = Register::Opening(handle);
        }
    }

    /// Runs `job` on the register once it is open; returns its transaction.
    fn run(&mut self, job: Job) -> u32 {
        let tx = self.next_tx;
        self.next_tx += 1;
        match self.register {
            Register::Open(handle) if !self.hidden => self.start(handle, tx, job),
            Register::Open(_) => self.queued.push((tx, job)),
            _ => {
                self.open_register();
                self.queued.push((tx, job));
            }
        }
        tx
    }

    /// Starts the jobs that waited for the register's connection (or for the page to be shown).
    fn start_queued(&mut self, handle: u32) {
        for (tx, job) in std::mem::take(&mut self.queued) {
            self.start(handle, tx, job);
        }
    }

    /// The page is in the back/forward cache and the participant is not a member: this context's
    /// database is closed and deleted (its entry's removal waits for the page to be shown; until then
    /// a watcher finds the database missing, or without a connection, and takes the entry out). Kept
    /// open, a watcher's open at version 2 would make the browser evict the page for nothing. One
    /// still being made goes once it opens.
    fn hide_own(&mut self) {
        match self.own {
            Own::Ahead { handle, key } => {
                self.own = Own::None;
                self.drop_own(handle, key, false);
            }
            Own::Entering { handle, key, .. } | Own::Open { handle, key } => {
                self.own = Own::None;
                self.drop_own(handle, key, true);
            }
            _ => {}
        }
    }

    fn start(&mut self, handle: u32, tx: u32, job: Job) {
        self.ops.push_back(match &job {
            Job::Write { remove, put } => StorageOp::Write {
                handle,
                tx,
                remove: remove.clone(),
                put: put.clone(),
            },
            Job::Read { .. } => StorageOp::Read { handle, tx },
        });
        self.running.push((tx, job));
    }

    /// The key and attempt of this context's database being opened as `handle`, if it is.
    fn opening(&self, handle: u32) -> Option<(u64, usize)> {
        match self.own {
            Own::Opening {
                handle: h,
                key,
                attempt,
            } if h == handle => Some((key, attempt)),
            _ => None,
        }
    }

    fn opened(&mut self, handle: u32) {
        if self.register == Register::Opening(handle) {
            self.register = Register::Open(handle);
            if !self.hidden {
                self.start_queued(handle);
            }
            return;
        }
        if let Some((key, attempt)) = self.opening(handle) {
            // Its entry is written again (as a member's, or as one opened ahead): another context
            // may have collected it while the open waited (the page hidden or busy), taking it for
            // one whose context ended before it made its database.
            if self.ended || (self.hidden && !self.wanted) {
                // (In the back/forward cache, where nobody waits for it: see `hide_own`.)
                self.own = Own::None;
                self.drop_own(handle, key, false);
            } else if self.wanted {
                self.enter(handle, key, attempt);
            } else {
                self.own = Own::Ahead { handle, key };
                self.run(Job::Write {
                    remove: None,
                    put: Some(self.ahead_entry(key)),
                });
            }
            return;
        }
        if let Some(w) = self.watches.iter().position(|w| w.handle == handle) {
            // Its upgrade is done (or another watcher's was, and it got none): the connection at
            // version 2 goes, and so does the watch.
            self.ops.push_back(StorageOp::Close { handle });
            self.gone(w);
            self.watches.swap_remove(w);
        }
    }

    fn open_failed(&mut self, handle: u32, now: u64) {
        if self.register == Register::Opening(handle) {
            // An open that failed is not one that waits (behind a page's deletion): the wait to tell
            // of starts again with the next open.
            self.register = Register::Closed;
            self.register_since = None;
            self.fail_queued(now);
            return;
        }
        if let Some((key, attempt)) = self.opening(handle) {
            self.forget_own(key, false);
            self.again(attempt, now);
            return;
        }
        if let Some(w) = self.watches.iter().position(|w| w.handle == handle) {
            let watch = &mut self.watches[w];
            if watch.told || self.ended {
                // An ended context (closed, or refusing: its storage may be gone for good) makes it
                // no more: nobody would hear its finding, and the others collect that database.
                self.watches.swap_remove(w);
            } else if self.lost {
                // Since the browser took this context's storage, a watch that fails is tried with
                // the waits of its own database; after the last, this context can watch nobody and
                // be watched by nobody: it cannot give evidence, even while idle (it would otherwise
                // try every second for as long as the page lives).
                watch.failed += 1;
                if let Some(wait) = OPEN_BACKOFF_MS.get(watch.failed) {
                    watch.handle = 0;
                    watch.retry_at = now + wait;
                } else {
                    self.watches.swap_remove(w);
                    if !matches!(self.own, Own::Failed) {
                        self.own = Own::Failed;
                        self.findings.push_back(Finding::Unreachable);
                    }
                }
            } else if watch.failed < WATCH_TRIES {
                // Made again later: an open that failed is no evidence.
                watch.failed += 1;
                watch.handle = 0;
                watch.retry_at = now + WATCH_RETRY_MS;
            } else {
                // Given up: a context whose storage went while none of its connections was open
                // cannot tell, and would try for as long as it lives. The entry is watched again at
                // the next read of the register (a joiner's census is asked again while a member it
                // lists is not known gone).
                self.watches.swap_remove(w);
            }
        }
    }

    /// The register could not be opened: its queued jobs fail as their transactions would.
    fn fail_queued(&mut self, now: u64) {
        for (tx, job) in std::mem::take(&mut self.queued) {
            let read = matches!(job, Job::Read { .. });
            self.running.push((tx, job));
            if read {
                self.listed(tx, None, now);
            } else {
                self.written(tx, false, now);
            }
        }
    }

    fn closed(&mut self, handle: u32, now: u64) {
        if self.register == Register::Open(handle) || self.register == Register::Opening(handle) {
            // Opened again at the next use.
            self.lost |= self.register == Register::Open(handle);
            self.register = Register::Closed;
            if !self.queued.is_empty() {
                self.open_register();
            }
            return;
        }
        self.lost |= matches!(self.own,
            Own::Open { handle: h, .. } | Own::Entering { handle: h, .. } | Own::Ahead { handle: h, .. }
                if h == handle);
        match self.own {
            Own::Open { handle: h, key } if h == handle => {
                self.own = Own::None;
                self.forget_own(key, true);
                self.findings.push_back(Finding::Lost);
            }
            Own::Entering {
                handle: h,
                key,
                attempt,
                ..
            } if h == handle => {
                self.forget_own(key, true);
                self.again(attempt, now);
            }
            Own::Ahead { handle: h, key } if h == handle => {
                self.own = Own::None;
                self.forget_own(key, false);
            }
            _ => {}
        }
    }

    /// The edge closed this context's database as the page entered the back/forward cache. The
    /// participant learns of that from its own `pagehide` (it leaves), or, where that listener was cut
    /// short, as the page is shown again; the database goes. One the participant asked for again
    /// meanwhile (this event waits for the page to run again) is a new one.
    fn hidden(&mut self, handle: u32) {
        let (key, member) = match self.own {
            Own::Opening { handle: h, key, .. } | Own::Ahead { handle: h, key } if h == handle => {
                (key, false)
            }
            Own::Entering { handle: h, key, .. } | Own::Open { handle: h, key } if h == handle => {
                (key, true)
            }
            _ => return,
        };
        self.own = Own::None;
        self.forget_own(key, member);
        if self.wanted {
            self.start_new(0);
        }
    }

    fn take_job(&mut self, tx: u32) -> Option<Job> {
        let at = self.running.iter().position(|(t, _)| *t == tx)?;
        Some(self.running.swap_remove(at).1)
    }

    fn written(&mut self, tx: u32, ok: bool, now: u64) {
        self.take_job(tx);
        match self.own {
            Own::Registering {
                key,
                tx: t,
                attempt,
            } if t == tx => {
                if !ok {
                    return self.again(attempt, now);
                }
                if self.ended {
                    self.own = Own::None;
                    return self.forget_own(key, false);
                }
                let handle = self.handle();
                self.ops.push_back(StorageOp::Open {
                    handle,
                    database: self.own_database(key),
                    version: 1,
                    hides: self.hides,
                });
                self.own = Own::Opening {
                    handle,
                    key,
                    attempt,
                };
            }
            Own::Entering {
                handle,
                key,
                tx: t,
                attempt,
            } if t == tx => {
                if ok {
                    self.own = Own::Open { handle, key };
                    self.findings.push_back(Finding::Alive(key));
                } else {
                    self.drop_own(handle, key, false);
                    self.again(attempt, now);
                }
            }
            _ => {}
        }
    }

    fn listed(&mut self, tx: u32, entries: Option<Vec<Entry>>, now: u64) {
        let Some(Job::Read { census, found }) = self.take_job(tx) else {
            return;
        };
        let Some(entries) = entries else {
            return; // no census: the participant asks again
        };
        // What the listing before this read found and no entry names: a version 0 one holds no
        // connection and nothing (deleted); another is watched as one opened ahead would be, which
        // collects it once it has no connection and tells the participant nothing.
        for (client, key, version) in found {
            if entries
                .iter()
                .any(|e| *e.owner() == client && e.key() == key)
            {
                continue;
            }
            let entry = Entry::Ahead { client, key };
            if version == 0 {
                self.ops.push_back(StorageOp::Delete {
                    database: entry.database(),
                });
            } else {
                self.watch_entry(entry);
            }
        }
        let mut members = Vec::new();
        let mut missing = Vec::new();
        for entry in entries {
            if let Entry::Member { client, key } = &entry {
                members.push((client.clone(), *key));
            }
            if let Some(&(_, since)) = self.missing.iter().find(|(e, _)| *e == entry) {
                if now >= since + COLLECT_AFTER_MS {
                    self.run(Job::Write {
                        remove: Some(entry),
                        put: None,
                    });
                } else {
                    missing.push((entry, since));
                }
            } else if *entry.owner() != self.client {
                self.watch_entry(entry);
            }
        }
        self.missing = missing;
        if census {
            self.findings.push_back(Finding::Census(members));
        }
    }

    /// Watches the database of `entry`, unless a watch for that entry is under way. A member's and
    /// one opened ahead are watched apart: what a watch of one opened ahead observed before its owner
    /// opened it is no evidence for the member that owner became since.
    fn watch_entry(&mut self, entry: Entry) {
        if self.watches.iter().any(|w| w.entry == entry) {
            return;
        }
        self.watches.push(Watch {
            entry,
            handle: 0,
            retry_at: 0,
            failed: 0,
            told: false,
        });
        self.open_watch(self.watches.len() - 1);
    }

    fn open_watch(&mut self, w: usize) {
        let handle = self.handle();
        self.watches[w].handle = handle;
        self.ops.push_back(StorageOp::Open {
            handle,
            database: self.watches[w].entry.database(),
            version: 2,
            hides: false,
        });
    }

    /// Watch `w` has its evidence: the database exists and no connection to it is left, so its
    /// context is gone (a context closes its database only as it ends). Told once, for a member's;
    /// the database and its entries go (the deletion waits for this watch's own connection, closed
    /// once its open completes).
    fn gone(&mut self, w: usize) {
        let watch = &mut self.watches[w];
        if watch.told {
            return;
        }
        watch.told = true;
        let entry = watch.entry.clone();
        self.ops.push_back(StorageOp::Delete {
            database: entry.database(),
        });
        self.collect(entry);
    }

    /// Watch `w` found no such database. For a member's entry that is evidence too: a member's entry
    /// is written only once its database is open, and the database is deleted only once its context
    /// closed it. For one opened ahead it is none: its owner writes the entry before it opens the
    /// database, and may not have opened it yet: nothing is told, and the entry goes only once a read of
    /// the register finds it still listed after it has been missing for [`COLLECT_AFTER_MS`].
    /// The watch's open made the database at version 0 and aborted its upgrade, which WebKit keeps
    /// (as the standard allows): where the owner is known gone (a member's, or one this context
    /// collected), it is deleted again; else the next context to start collects it once no entry
    /// names it.
    fn missing(&mut self, w: usize, now: u64) {
        let watch = &mut self.watches[w];
        if watch.told {
            return;
        }
        watch.told = true;
        let entry = watch.entry.clone();
        let (client, key) = (entry.owner(), entry.key());
        let member = matches!(entry, Entry::Member { .. });
        if member || self.collected.iter().any(|(c, k)| c == client && *k == key) {
            self.ops.push_back(StorageOp::Delete {
                database: entry.database(),
            });
        }
        if member {
            return self.collect(entry);
        }
        // No timer: a later read of the register (this context's census, or its next start) takes
        // it out if it is still listed then, and has been missing long enough.
        if !self.missing.iter().any(|(e, _)| *e == entry) {
            self.missing.push((entry, now));
        }
    }

    /// The context of `entry` is gone: told (for a member's entry), and its entries leave the register.
    fn collect(&mut self, entry: Entry) {
        let member = matches!(entry, Entry::Member { .. });
        let (Entry::Member { client, key } | Entry::Ahead { client, key }) = entry;
        if member {
            self.findings.push_back(Finding::Gone(client.clone(), key));
        }
        if self.collected.len() == COLLECTED_KEPT {
            self.collected.remove(0);
        }
        self.collected.push((client.clone(), key));
        // Its entry as a member's, and as one opened ahead: which one the register holds now, this
        // watch cannot tell.
        self.run(Job::Write {
            remove: Some(Entry::Member {
                client: client.clone(),
                key,
            }),
            put: None,
        });
        self.run(Job::Write {
            remove: Some(Entry::Ahead { client, key }),
            put: None,
        });
    }
}

pub mod sweep;
#[cfg(test)]
mod tests;
