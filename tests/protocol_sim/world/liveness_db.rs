//! The simulated storage of the evidence (docs/PROTOCOL.md §7): the origin's liveness databases and their
//! register, by name, kept by a backend with IndexedDB's rules, under each context's production
//! evidence machine (`weblocks::protocol::evidence`), whose storage operations the host carries out
//! here.
//!
//! - Each database's opens and deletions run one at a time, in the order they were made. An open at a
//!   higher version than the database's, and a deletion, wait until no other connection to it is left
//!   (every connection ignores `versionchange`, as the edge's do); the upgrade then starts
//!   (`Upgrading`, for an open at version 2) and the open succeeds. An open at a lower version fails.
//!   A watch of a database that does not exist makes one at version 0 and the edge aborts its upgrade
//!   (it fails, after `Missing`). Half the time that takes the database away again (Blink, Gecko); else
//!   it is left at version 0 (WebKit, as the standard says). It is left too where the watcher's
//!   process goes before the abort (a browser killed). Such a database holds nothing and no
//!   connection, and an open at version 2 of it finds it missing, as of one that does not exist.
//! - The origin's databases are listed (`indexedDB.databases()`) with their versions, after a delay.
//! - The backend closes every connection of a context that ends (crashed, killed, closed), and drops
//!   its opens not yet run; the opens then unblocked complete after its notice of the end (tens of ms).
//! - The register's transactions run one at a time, in the order they were made, each after a delay.
//!   A crashed context's transactions not yet run abort; a closed one's may commit or abort (engines
//!   differ).
//! - A page entering the back/forward cache has its edge tell its evidence so (`PageHidden`, at once:
//!   a microtask of the edge's capture listener, before the participant's `pagehide`), then close the
//!   connections opened with `hides`. A page kept there as a member is evicted by an open at a higher
//!   version of a database it keeps open (Blink, Gecko), and, half the time, by one already waiting
//!   as it enters (Blink evicts, Gecko keeps it).
//! - A register transaction that a page makes in the `pagehide` that enters the back/forward cache, or
//!   while it is there, never finishes, and every later one of the origin waits behind it (WebKitGTK;
//!   no engine promises otherwise, so every run models it).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

use weblocks::protocol::evidence::{Database, Entry, Evidence, StorageEvent, StorageOp};

use super::{Ev, Status, World};

/// A database's name: the register (`None`), or liveness database (client id, key).
pub(super) type DbName = Option<(Rc<str>, u64)>;

/// An entry of the register: (opened ahead, client id, key).
pub(super) type EntryKey = (bool, Rc<str>, u64);

/// One database, as the backend keeps it.
#[derive(Debug, Default)]
pub(super) struct SimDb {
    /// 0: it does not exist, or (`made`) exists at version 0.
    pub(super) version: u32,
    /// It exists at version 0: left by a watch whose process went as it aborted the upgrade.
    made: bool,
    /// Its open connections: (context, handle, closed by the edge as its page enters the cache).
    pub(super) conns: Vec<(usize, u32, bool)>,
    /// Opens and deletions waiting for their turn, in the order they were made.
    queue: VecDeque<Request>,
}

impl SimDb {
    /// Whether context `i` keeps this database open while another context's open at a higher
    /// version waits for it.
    pub(super) fn watched_while_open_by(&self, i: usize) -> bool {
        self.conns.iter().any(|c| c.0 == i)
            && self.queue.iter().any(
                |r| matches!(*r, Request::Open { ctx, version, .. } if ctx != i && version > self.version),
            )
    }
}

#[derive(Debug)]
enum Request {
    Open {
        ctx: usize,
        handle: u32,
        version: u32,
        hides: bool,
    },
    /// `told`: the connections it waits for were sent `versionchange`.
    Delete { told: bool },
}

/// The origin's storage of the evidence.
#[derive(Debug, Default)]
pub(super) struct LivenessStorage {
    pub(super) dbs: BTreeMap<DbName, SimDb>,
    /// The register's entries.
    pub(super) entries: BTreeSet<EntryKey>,
    /// When the register's last transaction runs: the next runs no earlier.
    last_tx: u64,
    /// The last key a context's database was opened ahead under (keys are never reused).
    pub(super) last_key: u64,
    /// Every answer at once (an ideal world).
    pub(super) prompt: bool,
    /// A register transaction was made by a page entering or in the back/forward cache: it and every
    /// later one never run.
    pub(super) register_stuck: bool,
    /// The contexts whose storage was taken while they ran (`Fault::StorageLost`): every open of
    /// theirs fails, and their deletions do nothing.
    pub(super) lost: BTreeSet<usize>,
    /// Of those, the ones that had no connection open then (out of the protocol for a sweep, say, or
    /// still opening): no `close` can tell their evidence, which finds out only by its opens failing.
    /// Its `close` event is not told either where the context closed the connection itself before the
    /// event came (a watch that had just opened): the connections the browser closed, until then.
    pub(super) lost_unseen: BTreeSet<usize>,
    lost_closing: BTreeSet<(usize, u32)>,
    /// When the answer to each open that succeeded reaches its context, by (context, handle): a
    /// connection the browser closes gets its `close` event after it.
    opened_at: BTreeMap<(usize, u32), u64>,
    /// The watches aborting the upgrade of a database that did not exist, by database and context,
    /// until their `Missing` reaches the context: a database whose watcher's process goes meanwhile
    /// is left at version 0.
    aborting: Vec<(DbName, usize, u64)>,
}

/// A transaction on the register, as the backend runs it.
#[derive(Clone, Debug)]
pub enum RegisterTx {
    Write {
        tx: u32,
        remove: Option<Entry>,
        put: Option<Entry>,
    },
    Read {
        tx: u32,
    },
}

fn name_of(database: &Database) -> DbName {
    match database {
        Database::Register => None,
        Database::Alive { client, key } => Some((client.clone(), *key)),
    }
}

fn key_of(entry: &Entry) -> EntryKey {
    match entry {
        Entry::Member { client, key } => (false, client.clone(), *key),
        Entry::Ahead { client, key } => (true, client.clone(), *key),
    }
}

fn entry_of((ahead, client, key): &EntryKey) -> Entry {
    let (client, key) = (client.clone(), *key);
    if *ahead {
        Entry::Ahead { client, key }
    } else {
        Entry::Member { client, key }
    }
}

impl World {
    /// A new context's evidence machine: half the contexts are windows that open their database ahead
    /// as they load (`Evidence::prepared`).
    pub(super) fn new_evidence(&mut self, i: usize) -> (Evidence, Option<u64>) {
        let ahead = (self.rng.range(0, 2) == 0).then(|| {
            self.storage.last_key += 1;
            self.storage.last_key
        });
        let seed = self.rng.next_u64();
        let mut evidence = Evidence::new(&format!("ctx{i}"), seed, ahead);
        evidence.set_back_forward_cache(self.env.config.back_forward_cache);
        (evidence, ahead)
    }

    /// Context `i` starts: its edge makes the operations its evidence takes as made (once).
    pub(super) fn prepare_evidence(&mut self, i: usize) {
        if std::mem::replace(&mut self.contexts[i].prepared, true) {
            return;
        }
        let client = self.contexts[i].participant.client_id().to_owned();
        let ahead = self.contexts[i].ahead;
        for op in Evidence::prepared(&client, ahead) {
            match op {
                // Made once the entry's transaction completed (`Ev::Storage` of transaction 1).
                StorageOp::Open { handle: 2, .. } => self.contexts[i].prepared_open = Some(op),
                op => self.storage_op(i, op),
            }
        }
    }

    /// Carries out one of context `i`'s storage operations.
    pub(super) fn storage_op(&mut self, i: usize, op: StorageOp) {
        self.note(|| format!("ctx{i} storage op {op:?}"));
        if self.storage.lost.contains(&i) {
            return match op {
                StorageOp::Open { handle, .. } => {
                    self.storage_answer(i, StorageEvent::OpenFailed { handle }, (0, 3))
                }
                // Its transactions fail: it has no connection.
                StorageOp::Write { handle, tx, .. } => self.register_tx(
                    i,
                    handle,
                    RegisterTx::Write {
                        tx,
                        remove: None,
                        put: None,
                    },
                ),
                StorageOp::Read { handle, tx } => {
                    self.register_tx(i, handle, RegisterTx::Read { tx })
                }
                // It reads the record again, and that read fails too.
                StorageOp::ReleaseRecord => self.sweep_release_record(i),
                StorageOp::Close { handle } => {
                    if self.storage.lost_closing.remove(&(i, handle)) {
                        self.storage.lost_unseen.insert(i);
                    }
                }
                StorageOp::Delete { .. } => {}
                StorageOp::List => self.storage_answer(i, StorageEvent::Databases(None), (0, 3)),
            };
        }
        match op {
            StorageOp::Open {
                handle,
                database,
                version,
                hides,
            } => {
                let name = name_of(&database);
                self.storage
                    .dbs
                    .entry(name.clone())
                    .or_default()
                    .queue
                    .push_back(Request::Open {
                        ctx: i,
                        handle,
                        version,
                        hides,
                    });
                self.pump_db(&name, (0, 3));
            }
            StorageOp::Close { handle } => {
                // One still queued is closed as it opens (js/liveness.js), before any task of the
                // context runs: as if it never opened. So is the database opened ahead, not made yet.
                if matches!(self.contexts[i].prepared_open, Some(StorageOp::Open { handle: h, .. }) if h == handle)
                {
                    self.contexts[i].prepared_open = None;
                }
                for db in self.storage.dbs.values_mut() {
                    db.queue.retain(|r| {
                        !matches!(*r, Request::Open { ctx, handle: h, .. } if ctx == i && h == handle)
                    });
                }
                let names: Vec<DbName> = self
                    .storage
                    .dbs
                    .iter()
                    .filter(|(_, db)| db.conns.iter().any(|c| c.0 == i && c.1 == handle))
                    .map(|(n, _)| n.clone())
                    .collect();
                for name in names {
                    let db = self.storage.dbs.get_mut(&name).expect("listed");
                    db.conns.retain(|c| !(c.0 == i && c.1 == handle));
                    self.pump_db(&name, (0, 3));
                }
            }
            StorageOp::Delete { database } => {
                let name = name_of(&database);
                if let Some(db) = self.storage.dbs.get_mut(&name) {
                    db.queue.push_back(Request::Delete { told: false });
                    self.pump_db(&name, (0, 3));
                }
            }
            StorageOp::Write {
                handle,
                tx,
                remove,
                put,
            } => self.register_tx(i, handle, RegisterTx::Write { tx, remove, put }),
            StorageOp::Read { handle, tx } => self.register_tx(i, handle, RegisterTx::Read { tx }),
            StorageOp::ReleaseRecord => self.sweep_release_record(i),
            StorageOp::List => {
                let found = self
                    .storage
                    .dbs
                    .iter()
                    .filter(|(_, db)| db.version > 0 || db.made)
                    .filter_map(|(name, db)| {
                        let (client, key) = name.clone()?;
                        Some((client, key, db.version))
                    })
                    .collect();
                self.storage_answer(i, StorageEvent::Databases(Some(found)), (0, 3));
            }
        }
    }

    /// A transaction on the register's connection `handle` of context `i`: it runs after the ones made
    /// before it; on no open connection it fails at once.
    fn register_tx(&mut self, i: usize, handle: u32, tx: RegisterTx) {
        let open = self
            .storage
            .dbs
            .get(&None)
            .is_some_and(|db| db.conns.iter().any(|c| c.0 == i && c.1 == handle));
        if !open {
            let event = match tx {
                RegisterTx::Write { tx, .. } => StorageEvent::Written { tx, ok: false },
                RegisterTx::Read { tx } => StorageEvent::Listed { tx, entries: None },
            };
            return self.schedule(self.now, i, Ev::Storage(event));
        }
        let hidden = self.hiding == Some(i)
            || matches!(self.contexts[i].status, Status::Hidden | Status::Cached);
        if hidden || self.storage.register_stuck {
            if hidden && !self.storage.register_stuck {
                self.note(|| {
                    format!("ctx{i} made a register transaction in the back/forward cache")
                });
                self.bump("register transactions made in the back/forward cache");
                self.storage.register_stuck = true;
            }
            return;
        }
        let at = (self.now + self.storage_delay((0, 3))).max(self.storage.last_tx);
        self.storage.last_tx = at;
        self.schedule(at, i, Ev::RegisterTx(tx));
    }

    /// The backend runs a transaction of context `i` on the register.
    pub(super) fn run_register_tx(&mut self, i: usize, tx: RegisterTx) {
        let commits = match self.contexts[i].status {
            Status::Crashed | Status::NotStarted => false,
            // Some engines let a closing page's transactions finish, others abort them.
            Status::Closed => self.rng.range(0, 2) == 0,
            _ => true,
        };
        if !commits {
            self.bump("register transactions aborted by their context's end");
            return;
        }
        let event = match tx {
            RegisterTx::Write { tx, remove, put } => {
                if let Some(entry) = remove {
                    self.storage.entries.remove(&key_of(&entry));
                }
                if let Some(entry) = put {
                    self.storage.entries.insert(key_of(&entry));
                }
                StorageEvent::Written { tx, ok: true }
            }
            // A context that skips its census (a must-fail family's mutation) reads it as empty.
            RegisterTx::Read { tx } if self.skips_census.contains(&i) => {
                self.bump("censuses skipped");
                StorageEvent::Listed {
                    tx,
                    entries: Some(Vec::new()),
                }
            }
            RegisterTx::Read { tx } => StorageEvent::Listed {
                tx,
                entries: Some(self.storage.entries.iter().map(entry_of).collect()),
            },
        };
        let delay = self.storage_delay((0, 2));
        self.schedule(self.now + delay, i, Ev::Storage(event));
    }

    /// A delay of the backend, drawn from `range` (none in an ideal world).
    fn storage_delay(&mut self, (lo, hi): (u64, u64)) -> u64 {
        if self.storage.prompt {
            0
        } else {
            self.rng.range(lo, hi)
        }
    }

    /// Runs the requests of database `name` that can run, in order; the answers reach their contexts
    /// after a delay drawn from `delay`.
    fn pump_db(&mut self, name: &DbName, delay: (u64, u64)) {
        let mut evicted: Vec<usize> = Vec::new();
        loop {
            let Some(db) = self.storage.dbs.get_mut(name) else {
                return;
            };
            let Some(front) = db.queue.front() else {
                break;
            };
            match *front {
                Request::Open {
                    ctx,
                    handle,
                    version,
                    hides,
                } => {
                    if matches!(self.contexts[ctx].status, Status::Crashed | Status::Closed) {
                        db.queue.pop_front();
                        continue;
                    }
                    if version < db.version {
                        db.queue.pop_front();
                        self.storage_answer(ctx, StorageEvent::OpenFailed { handle }, delay);
                        continue;
                    }
                    if version > db.version && !db.conns.is_empty() {
                        // Blocked until every connection closes; a page in the back/forward cache
                        // that holds one is evicted.
                        evicted = db
                            .conns
                            .iter()
                            .map(|c| c.0)
                            .filter(|&j| self.contexts[j].status == Status::Cached)
                            .collect();
                        break;
                    }
                    if version > 1 && db.version == 0 {
                        // A watch of a database that does not exist (its owner deleted it, or never
                        // made it): the edge aborts the upgrade, so none is made, unless the
                        // watcher's process goes before it has.
                        db.queue.pop_front();
                        if !db.made && self.rng.range(0, 2) == 0 {
                            db.made = true;
                            self.bump("databases left at version 0 by an aborted upgrade");
                        }
                        let at = self.now + self.storage_delay(delay);
                        let now = self.now;
                        self.storage.aborting.retain(|(_, _, until)| *until > now);
                        self.storage.aborting.push((name.clone(), ctx, at));
                        self.schedule(at, ctx, Ev::Storage(StorageEvent::Missing { handle }));
                        self.schedule(at, ctx, Ev::Storage(StorageEvent::OpenFailed { handle }));
                        continue;
                    }
                    let upgrades = version > db.version;
                    db.version = version;
                    db.made = false;
                    db.conns.push((ctx, handle, hides));
                    db.queue.pop_front();
                    let at = self.now + self.storage_delay(delay);
                    if upgrades && version > 1 {
                        self.schedule(at, ctx, Ev::Storage(StorageEvent::Upgrading { handle }));
                    }
                    self.schedule(at, ctx, Ev::Storage(StorageEvent::Opened { handle }));
                    self.storage.opened_at.insert((ctx, handle), at);
                }
                Request::Delete { told } => {
                    if !db.conns.is_empty() {
                        // `versionchange` to every connection it waits for; the edge forwards it
                        // on version 1 only (a watch's connection at version 2 closes at once).
                        if !told && db.version == 1 {
                            let waiting: BTreeSet<usize> = db.conns.iter().map(|c| c.0).collect();
                            db.queue[0] = Request::Delete { told: true };
                            for ctx in waiting {
                                let at = self.now + self.storage_delay(delay);
                                self.schedule(at, ctx, Ev::Storage(StorageEvent::DeletionWaits));
                            }
                        }
                        break;
                    }
                    db.queue.pop_front();
                    db.version = 0;
                    db.made = false;
                    if name.is_none() {
                        self.storage.entries.clear();
                    }
                }
            }
        }
        for j in evicted {
            if self.contexts[j].status == Status::Cached {
                self.evict(j, "an open at a higher version waits for its database");
            }
        }
        if let Some(db) = self.storage.dbs.get(name)
            && db.version == 0
            && !db.made
            && db.conns.is_empty()
            && db.queue.is_empty()
        {
            self.storage.dbs.remove(name);
        }
    }

    fn storage_answer(&mut self, i: usize, event: StorageEvent, delay: (u64, u64)) {
        let at = self.now + self.storage_delay(delay);
        self.schedule(at, i, Ev::Storage(event));
    }

    /// A page's sweep: a deletion of every liveness database and of the register, each queued behind
    /// the requests made before it.
    pub(super) fn delete_every_liveness_database(&mut self) {
        let names: Vec<DbName> = self.storage.dbs.keys().cloned().collect();
        for name in names {
            // (One deleted meanwhile, by an earlier one's completion, is gone already.)
            let Some(db) = self.storage.dbs.get_mut(&name) else {
                continue;
            };
            db.queue.push_back(Request::Delete { told: false });
            self.pump_db(&name, (0, 3));
        }
    }

    /// Whether a deletion of a liveness database or of the register is still queued.
    pub(super) fn liveness_deletion_waits(&self) -> Vec<String> {
        self.storage
            .dbs
            .iter()
            .filter(|(_, db)| db.queue.iter().any(|r| matches!(r, Request::Delete { .. })))
            .map(|(name, db)| format!("{name:?} (open by {:?})", db.conns))
            .collect()
    }

    /// Context `i` ended (crashed, killed, closed): the backend closes its connections and drops its
    /// opens not yet run. Opens that waited for them complete after the backend's notice.
    pub(super) fn storage_gone(&mut self, i: usize) {
        let names: Vec<DbName> = self
            .storage
            .dbs
            .iter()
            .filter(|(_, db)| db.conns.iter().any(|c| c.0 == i))
            .map(|(n, _)| n.clone())
            .collect();
        let crashed = self.contexts[i].status == Status::Crashed;
        // A watch of its that was aborting an upgrade leaves the database it made, at version 0, if
        // its process went (a crash: the browser killed, say) before the abort reached it.
        let now = self.now;
        let left: Vec<DbName> = self
            .storage
            .aborting
            .iter()
            .filter(|(_, ctx, until)| crashed && *ctx == i && *until > now)
            .map(|(name, _, _)| name.clone())
            .collect();
        self.storage
            .aborting
            .retain(|(_, ctx, until)| *ctx != i && *until > now);
        for name in left {
            let db = self.storage.dbs.entry(name).or_default();
            if db.version == 0 {
                db.made = true;
                self.bump("databases left at version 0 by a watch whose process went");
            }
        }
        for name in names {
            let db = self.storage.dbs.get_mut(&name).expect("listed");
            db.conns.retain(|c| c.0 != i);
            self.pump_db(&name, if crashed { (5, 70) } else { (1, 5) });
        }
    }

    /// The browser takes context `i`'s storage while it runs (`Fault::StorageLost`): each of its
    /// connections is closed, with a `close` event after the answer of its open, its opens not yet
    /// run fail, and so does every open it makes from now on. The opens that waited for its
    /// connections (the others' watches) then run.
    pub(super) fn storage_lost(&mut self, i: usize) {
        self.storage.lost.insert(i);
        // Its connection to the transport's record goes with the rest: a deletion of the record (a
        // page's sweep) no longer waits for it, and a read it asked again fails.
        // Its `close` there makes js/transport_choice.js read the record again, and that read fails.
        let asking = self.implicit_asks(i)
            || self
                .record
                .as_ref()
                .is_some_and(|r| r.queue.contains(&i) || r.open.contains(&i));
        self.release_record(i);
        if asking {
            self.record_refused_later(i);
        }
        let mut closed = Vec::new();
        let mut dropped = Vec::new();
        for (name, db) in &mut self.storage.dbs {
            db.conns.retain(|&(ctx, handle, _)| {
                if ctx == i {
                    closed.push((name.clone(), handle));
                }
                ctx != i
            });
            db.queue.retain(|r| match *r {
                Request::Open { ctx, handle, .. } if ctx == i => {
                    dropped.push((name.clone(), handle));
                    false
                }
                _ => true,
            });
        }
        if closed.is_empty() {
            // (An open that fails tells nothing: storage never given fails it too.)
            self.storage.lost_unseen.insert(i);
        }
        for (name, handle) in closed {
            self.storage.lost_closing.insert((i, handle));
            let after = self
                .storage
                .opened_at
                .get(&(i, handle))
                .copied()
                .unwrap_or(0);
            let at = self.now.max(after) + self.storage_delay((1, 5));
            self.schedule(at, i, Ev::Storage(StorageEvent::Closed { handle }));
            self.pump_db(&name, (5, 70));
        }
        for (name, handle) in dropped {
            self.storage_answer(i, StorageEvent::OpenFailed { handle }, (0, 3));
            self.pump_db(&name, (5, 70));
        }
    }

    /// Context `i` refuses before its engine exists: its edge closes every connection it made ahead and
    /// deletes the database it opened ahead, and that database's entry.
    pub(super) fn storage_end(&mut self, i: usize) {
        self.contexts[i].prepared_open = None;
        self.storage_gone(i);
        if let Some(key) = self.contexts[i].ahead {
            let client: Rc<str> = self.contexts[i].participant.client_id().into();
            self.storage.entries.remove(&(true, client.clone(), key));
            self.storage_op(
                i,
                StorageOp::Delete {
                    database: Database::Alive { client, key },
                },
            );
        }
    }

    /// Context `i`'s page enters the back/forward cache: its edge closes the connections it opened
    /// with `hides`, and tells the evidence so (an event that waits for the page to be shown).
    pub(super) fn storage_hide(&mut self, i: usize) {
        self.edge(i, super::host::Entry::Storage(StorageEvent::PageHidden));
        let mut hidden = Vec::new();
        for (name, db) in &mut self.storage.dbs {
            db.conns.retain(|&(ctx, handle, hides)| {
                if ctx == i && hides {
                    hidden.push((name.clone(), handle));
                }
                !(ctx == i && hides)
            });
        }
        for (name, handle) in hidden {
            self.schedule(self.now, i, Ev::Storage(StorageEvent::Hidden { handle }));
            self.pump_db(&name, (0, 3));
        }
    }

    /// What the edge does with a storage event of context `i` before its evidence hears it: the
    /// database opened ahead is opened once its entry's transaction completed.
    pub(super) fn before_storage_event(&mut self, i: usize, event: &StorageEvent) {
        if let StorageEvent::Written { tx: 1, ok } = *event
            && let Some(open) = self.contexts[i].prepared_open.take()
        {
            if ok {
                self.storage_op(i, open);
            } else {
                self.schedule(
                    self.now,
                    i,
                    Ev::Storage(StorageEvent::OpenFailed { handle: 2 }),
                );
            }
        }
    }

    /// Whether the browser took context `i`'s storage while it ran (`Fault::StorageLost`).
    pub fn storage_taken(&self, i: usize) -> bool {
        self.storage.lost.contains(&i)
    }

    /// The liveness databases and register entries whose context is gone (crashed, closed), left for
    /// another context to collect.
    pub fn uncollected(&self) -> Vec<String> {
        let gone = |client: &Rc<str>| {
            self.context_of_client(client)
                .is_none_or(|j| matches!(self.contexts[j].status, Status::Crashed | Status::Closed))
        };
        let mut left = Vec::new();
        for (name, db) in &self.storage.dbs {
            if let Some(name) = name
                && gone(&name.0)
            {
                left.push(format!(
                    "database {}:{} (version {}, open by {:?}, {} waiting)",
                    name.0,
                    name.1,
                    db.version,
                    db.conns,
                    db.queue.len()
                ));
            }
        }
        for (ahead, client, key) in &self.storage.entries {
            if gone(client) {
                left.push(format!("entry {client}:{key} (ahead: {ahead})"));
            }
        }
        left
    }

    /// Nothing left behind: once the origin is quiet, a new window starts and looks around (its
    /// evidence lists the databases, reads the register and watches every entry), and later another;
    /// then no database or entry of a context
    /// that is gone may be left, and no context may watch more than the entries the databases there
    /// are can have (a member's and one opened ahead each).
    pub fn check_collected(&mut self) {
        // A new window looks around as it starts, and again (a query: its census) once what it then
        // saw missing has been missing long enough: an entry of a database that was never made goes
        // only then.
        let version = self.observers.iter().map(|o| o.version).max().unwrap_or(1);
        let at = self.now;
        let window = self.add_context(at, version, 0);
        let later = at + weblocks::protocol::evidence::COLLECT_AFTER_MS + 1_000;
        self.client_at(later, window, super::Action::Query);
        if !self.run_until(later + 10_000) {
            return self.violation("not quiet after a new window looked around".into());
        }
        // A database at version 0 that an entry then still named (a watch's, killed as it aborted
        // the upgrade, of a database never made) is no entry's now: the next window to start
        // collects it.
        self.add_context(self.now, version, 0);
        if !self.run_until(self.now + 10_000) {
            return self.violation("not quiet after a second new window looked around".into());
        }
        let left = self.uncollected();
        if !left.is_empty() {
            self.violation(format!("left behind by contexts that are gone: {left:?}"));
        }
        let databases = self.storage.dbs.len();
        for (i, n) in self.contexts.iter().enumerate() {
            // (A context that refuses runs its evidence no more: its edge drives nothing.)
            let runs = n.status.alive() && n.admission != super::Admission::Refused;
            if runs && n.evidence.watch_count() > 2 * databases {
                let count = n.evidence.watch_count();
                self.violations.push(format!(
                    "ctx{i} watches {count} databases, of {databases} there are"
                ));
                return;
            }
        }
    }

    fn context_of_client(&self, client: &str) -> Option<usize> {
        client.strip_prefix("ctx")?.parse().ok()
    }
}
