//! The writer of the log transport (docs/PROTOCOL.md §12): this context's connection to the log's
//! database, its appends, reads, start reads and trims, and what hands the committed entries on. A
//! sans-I/O state machine in the manner of the participant and its evidence: the edge loop
//! ([`crate::protocol::edge`]) hands it what the participant asks for (a `Transmit` is an append,
//! `ReadLog`, `TrimLog`, and `OpenChannels`/`CloseChannels` open and close this context's log object)
//! and what the storage backend answers ([`LogWriter::handle_event`]); it gives the operations to carry
//! out ([`LogWriter::poll_op`]), what it learnt for the participant ([`LogWriter::poll_finding`]) and
//! its next deadline ([`LogWriter::poll_timeout`]). The edge's JS (`js/log_channel.js`) only runs the
//! IndexedDB, BroadcastChannel and localStorage calls and forwards their events, so that every decision
//! here (when to open and try again, when an append is tried again, when a connection's end is a gap
//! or the log cannot be reached, which identity the participant is told, what hands an entry on) runs
//! in the simulation as in a browser.
//!
//! # Guarantees
//!
//! - **An entry is told only once committed, with the identity of the log it is in.** [`Found::Entry`]
//!   comes from a completed transaction of the connection that made it; [`Found::Identity`] comes
//!   before the first entry, start or floor of each log this context meets, so the participant takes
//!   frames of that log only. Keys name entries only within one database; the identity, a random
//!   number kept in `meta`, names the database: an append that finds none makes one in its own
//!   transaction, so every context agrees on it.
//! - **Nothing missing goes untold.** An append that aborts (but for a full quota, tried again first),
//!   a read that fails, and a connection that ends are a [`Found::Gap`]: the participant steps out and
//!   rejoins. Once this object's connection ended, it tells nothing more: a later answer may not be
//!   in order with what a new connection shows. Its appends still go, on the next connection: the
//!   `Leave` its participant posts as it steps out must reach the others, or they would wait for the
//!   locks its membership held for as long as the context lives.
//! - **Appends keep their writer's order.** An append tried again after a full quota is tried only
//!   where no later append of this object is under way (it could commit first, out of order); the
//!   appends made meanwhile wait behind it, and go once it committed, or are dropped with its gap.
//! - **It gives up only after trying.** The database is opened with the waits of
//!   [`OPEN_BACKOFF_MS`] (the evidence's table), and once more after a connection that worked ended;
//!   only after the last failure does the participant learn that the log cannot be reached
//!   ([`Found::Unreachable`]: the context refuses rather than decide without its order).
//! - **The connection is not given up on `versionchange`.** A page's deletion of the database (logout
//!   code deleting every database) waits until every context that has it open is gone, and a context
//!   that starts meanwhile waits behind it, so a log is never made anew under a context that still
//!   runs on the old one ([`LogWriter::handle_event`] decides so in one place).

use std::collections::VecDeque;
use std::rc::Rc;

use super::evidence::{OPEN_BACKOFF_MS, fresh_key};
use super::participant::Wake;
use super::wire::Value;

/// An append that finds the storage quota full is tried again after this wait, in ms, doubling.
pub const QUOTA_WAIT_MS: u64 = 50;
/// How many times an append that finds the quota full is tried again; then it is a gap.
pub const QUOTA_TRIES: u32 = 8;

/// One operation for the edge's log storage object. Each answers with [`LogEvent`]s, in a later task or
/// microtask, never within the call that made it.
#[derive(Clone, Debug, PartialEq)]
pub enum LogOp {
    /// Open the log's database (version 1; its upgrade makes the stores `log` and `meta`) as
    /// connection `handle`. Answers `Opened` or `OpenFailed`; later `Closed` if the browser closes it,
    /// and `VersionChange` for each `versionchange` event on it.
    Open { handle: u32 },
    /// Close connection `handle` (no answer).
    Close { handle: u32 },
    /// On `handle`, one read/write transaction `tx` over `log` and `meta`: add the entry `data`; with
    /// `identify` other than 0, read the log's identity (the value of `meta`'s greatest key) or, where
    /// it is none, write `identify` as it (under the greatest key, or 0); without, commit at once.
    /// Answers `Appended` or `AppendAborted`.
    Append {
        handle: u32,
        tx: u32,
        data: Rc<Vec<Value>>,
        identify: u64,
    },
    /// On `handle`, a read-only transaction `tx`: the log's identity and its last key. Answers
    /// `Started` or `ReadFailed`.
    Start { handle: u32, tx: u32 },
    /// On `handle`, a read-only transaction `tx`: the log's identity and floor, and the entries after
    /// key `after`. Answers `Read` or `ReadFailed`.
    Read { handle: u32, tx: u32, after: u64 },
    /// On `handle`, one read/write transaction: delete the entries up to key `upto`, write `identity`
    /// under key `upto` of `meta` (the floor) and delete the lower keys of `meta`. No answer: a trim
    /// that fails only leaves the log longer.
    Trim {
        handle: u32,
        upto: u64,
        identity: u64,
    },
    /// Log object `object` listens for the others' entries: on the carrier (a BroadcastChannel), or
    /// without one, for pokes and farewells in `storage` events. Answers `Carried` and `Poked`.
    Listen { object: u32 },
    /// Log object `object` stops listening (its carrier stays open for its appends under way).
    Unlisten { object: u32 },
    /// Close log object `object`'s carrier: nothing more goes on it.
    CloseCarrier { object: u32 },
    /// Post `frame`, the carrier frame of the entry of key `key` in the log of identity `identity`, on
    /// log object `object`'s carrier.
    Carry {
        object: u32,
        key: u64,
        identity: u64,
        frame: Vec<Value>,
    },
    /// Poke the other documents of the origin (a localStorage write they get as a `storage` event): the
    /// log has the entry of key `key`.
    Poke { key: u64 },
}

/// Why an append's transaction aborted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Abort {
    /// The storage quota is full (`QuotaExceededError`).
    Quota,
    /// Any other abort, or a request that could not be made on it.
    Other,
    /// The transaction could not be made: the connection is unusable.
    Unusable,
}

/// What the storage backend (or the carrier) answered.
#[derive(Clone, Debug, PartialEq)]
pub enum LogEvent {
    /// Open `handle` succeeded.
    Opened { handle: u32 },
    /// Open `handle` failed, or could not be made.
    OpenFailed { handle: u32 },
    /// The browser closed connection `handle` (site data cleared, its storage process lost).
    Closed { handle: u32 },
    /// A `versionchange` event on connection `handle`: another connection asks to open version
    /// `new_version`, or (`None`) to delete the database.
    VersionChange {
        handle: u32,
        new_version: Option<u32>,
    },
    /// Append `tx` committed as key `key`; `identity`: the identity it found or made (0 where it did
    /// not look).
    Appended { tx: u32, key: u64, identity: u64 },
    /// Append `tx` aborted.
    AppendAborted { tx: u32, why: Abort },
    /// Start read `tx`: the log's identity (0: none) and its last key (0: empty).
    Started { tx: u32, identity: u64, last: u64 },
    /// Read `tx`: the log's identity (0: none), its floor, and the entries after the key asked for, in
    /// key order (`None`: its data did not decode; its key still takes its place).
    Read {
        tx: u32,
        identity: u64,
        floor: u64,
        entries: Vec<(u64, Option<Vec<Value>>)>,
    },
    /// Read or start read `tx` failed; `unusable`: it could not be made on its connection.
    ReadFailed { tx: u32, unusable: bool },
    /// Log object `object` heard a message on its carrier, or a farewell in a `storage` event.
    Carried { object: u32, data: Vec<Value> },
    /// Log object `object` was poked.
    Poked { object: u32 },
}

/// What the writer tells the participant, in order: the one input of the log transport
/// ([`crate::protocol::Participant::handle_log`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Found {
    /// The identity of the log this context reads.
    Identity(u64),
    /// The last key before this object's first append.
    Started(u64),
    /// A committed entry; no data where it did not decode.
    Entry(u64, Rc<Vec<Value>>),
    /// A read ended with this floor.
    Read(u64),
    /// A message for the participant to take in.
    Carried(Vec<Value>),
    /// Another document appended.
    Poke,
    /// Messages were lost ([`crate::protocol::Participant::handle_missed_messages`]).
    Gap,
    /// The log cannot be reached: the context refuses.
    Unreachable,
}

/// The connection to the log's database, shared by this context's log objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Connection {
    Opening(u32),
    Open(u32),
    /// Waiting until `.0` to try again.
    Backoff(u64),
    /// The last attempt failed: the log cannot be reached.
    Failed,
}

/// Work that waits for the connection.
#[derive(Debug)]
enum Deferred {
    Append(u32, Rc<Vec<Value>>),
    Read(u32, u64),
    Start(u32),
    Trim(u32, u64),
}

/// A transaction under way: the object it is for, and what it is.
#[derive(Debug)]
enum Tx {
    Append {
        object: u32,
        handle: u32,
        data: Rc<Vec<Value>>,
        /// The identity known when it was made (0: it looks).
        identity: u64,
    },
    Read {
        object: u32,
        handle: u32,
    },
}

/// One log object: a membership's view of the log, from `OpenChannels` to `CloseChannels`.
#[derive(Debug)]
struct Object {
    id: u32,
    closed: bool,
    /// Its connection ended: it tells nothing more (the gap that said so was the last).
    lost: bool,
    /// The log's identity, as its last transaction found it (0: none yet), and as it last told it.
    known: u64,
    reported: u64,
    /// Appends under way, and those not yet settled (under way, waiting, held): a closed object's
    /// carrier closes once none is left.
    writing: u32,
    inflight: u32,
    /// An append that found the quota full, tried again at `retry_at` (`None` once made again), the
    /// `tries`-th time; and the appends made since, which wait behind it.
    retrying: Option<Rc<Vec<Value>>>,
    retry_at: Option<u64>,
    tries: u32,
    held: VecDeque<Rc<Vec<Value>>>,
}

/// One context's log writer: see the module docs.
pub struct LogWriter {
    wake: Wake,
    /// The first slots of this context's carrier frames (`wire::entry_header`).
    header: Vec<Value>,
    /// The state of the generator of new identities.
    seed: u64,
    connection: Connection,
    /// The index in [`OPEN_BACKOFF_MS`] of the next wait.
    attempt: usize,
    next_handle: u32,
    next_tx: u32,
    next_object: u32,
    waiting: VecDeque<Deferred>,
    running: Vec<(u32, Tx)>,
    /// The open object last, after the closed ones whose appends are still under way.
    objects: Vec<Object>,
    ops: VecDeque<LogOp>,
    found: VecDeque<Found>,
}

impl LogWriter {
    /// The writer of a context woken as `wake`, whose carrier frames begin with `header`, its new
    /// identities drawn from `seed`. It opens the database at once (its first wait is none), so that
    /// the first lock does not wait for it.
    pub fn new(wake: Wake, header: Vec<Value>, seed: u64) -> LogWriter {
        let mut writer = LogWriter {
            wake,
            header,
            seed,
            connection: Connection::Failed,
            attempt: 1,
            next_handle: 1,
            next_tx: 1,
            next_object: 1,
            waiting: VecDeque::new(),
            running: Vec::new(),
            objects: Vec::new(),
            ops: VecDeque::new(),
            found: VecDeque::new(),
        };
        writer.open();
        writer
    }

    /// The next operation to carry out, in order.
    #[must_use]
    pub fn poll_op(&mut self) -> Option<LogOp> {
        self.ops.pop_front()
    }

    /// The next finding for the participant, in order.
    #[must_use]
    pub fn poll_found(&mut self) -> Option<Found> {
        self.found.pop_front()
    }

    /// When [`LogWriter::handle_timeout`] is due (`None`: nothing waits).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<u64> {
        let backoff = match self.connection {
            Connection::Backoff(at) => Some(at),
            _ => None,
        };
        self.objects
            .iter()
            .filter_map(|o| o.retry_at)
            .chain(backoff)
            .min()
    }

    /// The open log object, if any (the edge arms its farewell on its carrier).
    pub fn object(&self) -> Option<u32> {
        self.objects.last().filter(|o| !o.closed).map(|o| o.id)
    }

    /// `OpenChannels`: a new log object listens, and finds the log's last key before any append of it
    /// (the participant's `Join` comes after).
    pub fn open_object(&mut self) {
        let id = self.next_object;
        self.next_object += 1;
        self.objects.push(Object {
            id,
            closed: false,
            lost: false,
            known: 0,
            reported: 0,
            writing: 0,
            inflight: 0,
            retrying: None,
            retry_at: None,
            tries: 0,
            held: VecDeque::new(),
        });
        self.ops.push_back(LogOp::Listen { object: id });
        self.when(Deferred::Start(id));
    }

    /// `CloseChannels`: the open object tells nothing more; its carrier closes after its last append.
    pub fn close_object(&mut self) {
        let Some(o) = self.objects.last_mut().filter(|o| !o.closed) else {
            return;
        };
        o.closed = true;
        let id = o.id;
        self.found.clear();
        self.ops.push_back(LogOp::Unlisten { object: id });
        self.settled(id, 0);
    }

    /// A `Transmit` of the open object: appends `data`, told as an entry once committed, else as a
    /// gap (its message is not in the log).
    pub fn append(&mut self, data: Vec<Value>) {
        let Some(o) = self.objects.last_mut().filter(|o| !o.closed) else {
            return;
        };
        o.inflight += 1;
        let (id, data) = (o.id, Rc::new(data));
        if o.retrying.is_some() {
            o.held.push_back(data);
        } else {
            self.when(Deferred::Append(id, data));
        }
    }

    /// `ReadLog`: reads the entries after key `after`, then the floor.
    pub fn read(&mut self, after: u64) {
        if let Some(id) = self.object() {
            self.when(Deferred::Read(id, after));
        }
    }

    /// `TrimLog`: deletes the entries up to key `upto` and raises the floor to it.
    pub fn trim(&mut self, upto: u64) {
        if let Some(id) = self.object() {
            self.when(Deferred::Trim(id, upto));
        }
    }

    /// An answer of the backend or the carrier.
    pub fn handle_event(&mut self, now: u64, event: LogEvent) {
        match event {
            LogEvent::Opened { handle } => {
                if self.connection == Connection::Opening(handle) {
                    self.connection = Connection::Open(handle);
                    self.ready();
                } else {
                    self.ops.push_back(LogOp::Close { handle });
                }
            }
            LogEvent::OpenFailed { handle } => {
                if self.connection == Connection::Opening(handle) {
                    self.retry(now);
                }
            }
            LogEvent::Closed { handle } => self.lost(handle, now),
            // Kept open: a deletion waits for this context (see the module docs).
            LogEvent::VersionChange { .. } => {}
            LogEvent::Appended { tx, key, identity } => self.appended(tx, key, identity),
            LogEvent::AppendAborted { tx, why } => self.aborted(tx, why, now),
            LogEvent::Started { tx, identity, last } => {
                if let Some(o) = self.read_done(tx, identity) {
                    self.tell(o, Found::Started(last));
                }
            }
            LogEvent::Read {
                tx,
                identity,
                floor,
                entries,
            } => {
                if let Some(o) = self.read_done(tx, identity) {
                    for (key, data) in entries {
                        self.tell(o, Found::Entry(key, Rc::new(data.unwrap_or_default())));
                    }
                    self.tell(o, Found::Read(floor));
                }
            }
            LogEvent::ReadFailed { tx, unusable } => {
                if let Some(Tx::Read { object, handle }) = self.take(tx) {
                    if unusable {
                        self.lost(handle, now);
                    } else {
                        self.tell(object, Found::Gap);
                    }
                }
            }
            LogEvent::Carried { object, data } => self.tell(object, Found::Carried(data)),
            LogEvent::Poked { object } => self.tell(object, Found::Poke),
        }
    }

    /// The deadline [`LogWriter::poll_timeout`] gave has come: an open or an append due is made again.
    pub fn handle_timeout(&mut self, now: u64) {
        if let Connection::Backoff(at) = self.connection
            && at <= now
        {
            self.open();
        }
        for o in 0..self.objects.len() {
            if self.objects[o].retry_at.is_some_and(|at| at <= now) {
                self.objects[o].retry_at = None;
                let id = self.objects[o].id;
                if let Some(data) = self.objects[o].retrying.clone() {
                    self.when(Deferred::Append(id, data));
                }
            }
        }
    }

    // ---- internals ------------------------------------------------------------------------------------

    fn open(&mut self) {
        let handle = self.next_handle;
        self.next_handle += 1;
        self.connection = Connection::Opening(handle);
        self.ops.push_back(LogOp::Open { handle });
    }

    /// An open failed, or a connection ended: try again after the next wait, or give up.
    fn retry(&mut self, now: u64) {
        if let Some(wait) = OPEN_BACKOFF_MS.get(self.attempt) {
            self.attempt += 1;
            self.connection = Connection::Backoff(now + wait);
            return;
        }
        self.connection = Connection::Failed;
        for o in 0..self.objects.len() {
            let id = self.objects[o].id;
            self.tell(id, Found::Unreachable);
        }
        self.ready();
    }

    /// Connection `handle` ended (the browser closed it, or a transaction could not be made on it):
    /// every object's log has ended (a gap), and the database is opened again.
    fn lost(&mut self, handle: u32, now: u64) {
        if self.connection != Connection::Open(handle) {
            return;
        }
        self.ops.push_back(LogOp::Close { handle });
        for o in 0..self.objects.len() {
            if !self.objects[o].closed {
                let id = self.objects[o].id;
                self.gap(id);
                // Its next appends go on the next connection, whose log may be another.
                self.objects[o].lost = true;
                self.objects[o].known = 0;
            }
        }
        self.retry(now);
    }

    /// Runs `work` once the connection is open, or has failed for good; in call order.
    fn when(&mut self, work: Deferred) {
        match self.connection {
            Connection::Open(_) | Connection::Failed => self.run(work),
            _ => self.waiting.push_back(work),
        }
    }

    fn ready(&mut self) {
        while let Some(work) = self.waiting.pop_front() {
            self.run(work);
        }
    }

    fn run(&mut self, work: Deferred) {
        let handle = match self.connection {
            Connection::Open(handle) => Some(handle),
            _ => None,
        };
        match work {
            // An object whose connection ended still appends, on the next connection (its
            // participant's `Leave` after the gap must reach the others), but tells nothing of it.
            Deferred::Append(object, data) => {
                let Some(o) = self.index(object) else { return };
                let Some(handle) = handle else {
                    self.tell(object, Found::Unreachable);
                    return self.settled(object, 1);
                };
                let tx = self.tx();
                let o = &mut self.objects[o];
                o.writing += 1;
                // Where the object knows no identity yet, the append reads the log's or makes one.
                // Once known, it holds as long as the connection: a database cannot be deleted or
                // made anew under an open connection.
                let identity = o.known;
                let identify = if identity == 0 {
                    fresh_key(&mut self.seed)
                } else {
                    0
                };
                self.running.push((
                    tx,
                    Tx::Append {
                        object,
                        handle,
                        data: data.clone(),
                        identity,
                    },
                ));
                self.ops.push_back(LogOp::Append {
                    handle,
                    tx,
                    data,
                    identify,
                });
            }
            Deferred::Read(object, _) | Deferred::Start(object) if handle.is_none() => {
                self.tell(object, Found::Unreachable);
            }
            Deferred::Read(object, after) => {
                if let Some(handle) = handle.filter(|_| self.alive(object)) {
                    let tx = self.tx();
                    self.running.push((tx, Tx::Read { object, handle }));
                    self.ops.push_back(LogOp::Read { handle, tx, after });
                }
            }
            Deferred::Start(object) => {
                if let Some(handle) = handle.filter(|_| self.alive(object)) {
                    let tx = self.tx();
                    self.running.push((tx, Tx::Read { object, handle }));
                    self.ops.push_back(LogOp::Start { handle, tx });
                }
            }
            // Not before the object knows the identity: it never writes another log's.
            Deferred::Trim(object, upto) => {
                if let (Some(handle), Some(o)) = (handle, self.index(object))
                    && !self.objects[o].lost
                    && self.objects[o].known != 0
                {
                    let identity = self.objects[o].known;
                    self.ops.push_back(LogOp::Trim {
                        handle,
                        upto,
                        identity,
                    });
                }
            }
        }
    }

    fn appended(&mut self, tx: u32, key: u64, found: u64) {
        let Some(Tx::Append {
            object,
            handle,
            data,
            identity,
        }) = self.take(tx)
        else {
            return;
        };
        // A transaction completed: the connection works, and a later loss starts the waits over.
        self.attempt = 0;
        let Some(o) = self.index(object) else { return };
        self.objects[o].writing -= 1;
        let identity = if identity == 0 { found } else { identity };
        if identity == 0 {
            // An append that looked found no identity: the backend broke its contract; the entry is
            // of no log this context can name.
            self.gap(object);
            return self.settled(object, 1);
        }
        // The identity of the current connection's log only (one that ended may have been another's).
        if self.connection == Connection::Open(handle) {
            self.objects[o].known = identity;
        }
        self.tell(object, Found::Entry(key, data.clone()));
        match self.wake {
            Wake::Carrier => {
                let mut frame = self.header.clone();
                frame.push(Value::from(key));
                frame.push(Value::from(identity));
                frame.extend_from_slice(&data);
                self.ops.push_back(LogOp::Carry {
                    object,
                    key,
                    identity,
                    frame,
                });
            }
            Wake::Pokes => self.ops.push_back(LogOp::Poke { key }),
            Wake::Polls => {}
        }
        let o = &mut self.objects[o];
        if o.retrying.as_ref().is_some_and(|r| Rc::ptr_eq(r, &data)) {
            o.retrying = None;
            o.tries = 0;
            let held: Vec<_> = o.held.drain(..).collect();
            for next in held {
                self.when(Deferred::Append(object, next));
            }
        }
        self.settled(object, 1);
    }

    fn aborted(&mut self, tx: u32, why: Abort, now: u64) {
        let Some(Tx::Append {
            object,
            handle,
            data,
            ..
        }) = self.take(tx)
        else {
            return;
        };
        let Some(o) = self.index(object) else { return };
        self.objects[o].writing -= 1;
        if why == Abort::Unusable {
            self.lost(handle, now);
            return self.settled(object, 1);
        }
        let o = &mut self.objects[o];
        // Tried again, later, only where no later append of this object is under way (it could
        // commit first, out of order): the appends made meanwhile wait behind it.
        if why == Abort::Quota && !o.lost && o.writing == 0 && o.tries < QUOTA_TRIES {
            o.retry_at = Some(now + (QUOTA_WAIT_MS << o.tries));
            o.tries += 1;
            o.retrying = Some(data);
            return;
        }
        o.retrying = None;
        self.gap(object);
        self.settled(object, 1);
    }

    /// A read or start read answered: the identity it found is the one known, and told.
    fn read_done(&mut self, tx: u32, identity: u64) -> Option<u32> {
        let Some(Tx::Read { object, .. }) = self.take(tx) else {
            return None;
        };
        self.attempt = 0;
        let o = self.index(object)?;
        self.objects[o].known = identity;
        self.tell(object, Found::Identity(identity));
        Some(object)
    }

    /// Tells the participant `found` of `object`: only of the open object, until its connection ended.
    /// An entry's identity is told first where it is not the one last told.
    fn tell(&mut self, object: u32, found: Found) {
        let Some(o) = self.objects.last_mut().filter(|o| o.id == object) else {
            return;
        };
        if o.closed || o.lost {
            return;
        }
        match found {
            Found::Identity(identity) => o.reported = identity,
            Found::Entry(..) if o.reported != o.known => {
                o.reported = o.known;
                self.found.push_back(Found::Identity(o.known));
            }
            _ => {}
        }
        self.found.push_back(found);
    }

    /// A gap of `object`: the appends waiting behind one that failed are dropped (its context steps
    /// out, and its messages after a missing one are not for the log).
    fn gap(&mut self, object: u32) {
        self.tell(object, Found::Gap);
        if let Some(o) = self.index(object) {
            let held = self.objects[o].held.len() as u32;
            self.objects[o].held.clear();
            self.settled(object, held);
        }
    }

    /// `n` appends of `object` are done; a closed object goes after its last one, and its carrier
    /// closes.
    fn settled(&mut self, object: u32, n: u32) {
        let Some(o) = self.index(object) else { return };
        let obj = &mut self.objects[o];
        obj.inflight -= n;
        if obj.closed && obj.inflight == 0 {
            self.objects.remove(o);
            if self.wake == Wake::Carrier {
                self.ops.push_back(LogOp::CloseCarrier { object });
            }
        }
    }

    fn alive(&self, object: u32) -> bool {
        self.index(object).is_some_and(|o| !self.objects[o].lost)
    }

    fn index(&self, object: u32) -> Option<usize> {
        self.objects.iter().position(|o| o.id == object)
    }

    fn take(&mut self, tx: u32) -> Option<Tx> {
        let at = self.running.iter().position(|(t, _)| *t == tx)?;
        Some(self.running.swap_remove(at).1)
    }

    fn tx(&mut self) -> u32 {
        self.next_tx += 1;
        self.next_tx - 1
    }
}

#[cfg(test)]
mod tests;
