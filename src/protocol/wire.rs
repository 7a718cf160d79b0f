//! The messages of the coordination protocol and their wire form.
//!
//! On the wire a message is a flat array of numbers and strings ([`Value`]), which the JS edge passes to
//! `BroadcastChannel.postMessage` as a plain array (structured clone copies it cheaply) and turns back
//! into `Value`s on receipt. The first six slots are the header and are frozen for every protocol
//! version, so that contexts running different versions of weblocks can at least recognise each other:
//!
//! ```text
//! [ "weblocks", version, kind, senderClientId, senderIncarnation, senderSeq, ...body ]
//! ```
//!
//! The kinds `KIND_JOIN` (1) and `KIND_GENESIS` (2) are frozen too: the version-skew rules
//! (docs/PROTOCOL.md) act on them across versions. Everything after the header belongs to the version.
//! The decoder is strict: any slot of the wrong type, out of range, missing or left over makes the
//! whole message undecodable, and an undecodable message is ignored.

use std::rc::Rc;

use crate::scheduler::{LockMode, LockOptions};

/// The first slot of every message.
pub const MAGIC: &str = "weblocks";
/// The protocol version this build speaks. Contexts of two versions never share a history
/// (docs/PROTOCOL.md §9); a change to what any message means, or to where it takes effect, is a new
/// version.
pub const PROTOCOL_VERSION: u32 = 9;

/// Frozen across versions (see the module docs).
pub const KIND_JOIN: u32 = 1;
/// Frozen across versions (see the module docs).
pub const KIND_GENESIS: u32 = 2;
const KIND_STATE: u32 = 3;
const KIND_REQUEST: u32 = 4;
const KIND_RELEASE: u32 = 5;
const KIND_ABORT: u32 = 6;
// 7 (`Ping`), 9 (`Evict`), 10 (`Freeze`) and 12 (`Vouch`) were kinds of versions before 8, which
// presumed a silent member dead: never used again, so that no version reads another's message as its
// own kind.
const KIND_ALIVE: u32 = 8;
const KIND_LEAVE: u32 = 11;
const KIND_BATCH: u32 = 13;
/// A log entry on its carrier (docs/PROTOCOL.md §12): the writer's header, the entry's key in the
/// `seq` slot, then the entry's slots (a message or a batch). Another version reads the header as a
/// message of this version, and retires.
const KIND_ENTRY: u32 = 14;
const KIND_STATE_PART: u32 = 15;
const KIND_GONE: u32 = 16;

/// The most slots of a channel message or log entry that a context decodes (the edge's cap: a longer
/// channel message is dropped, and a longer log entry is read as one nobody can decode, which keeps
/// its place in the order and is skipped by every reader alike: docs/PROTOCOL.md §12).
pub const MAX_SLOTS: usize = 100_000;

/// The slots a carrier frame puts before its entry: the writer's header, with the key in its `seq` slot,
/// and the log's identity.
const ENTRY_FRAME_SLOTS: usize = 7;

/// The most slots of one post of a context (a message or a batch): the cap less a carrier frame's
/// header, so that the frame carrying its log entry decodes too. [`split_transmit`] keeps every post
/// of an honest context within it.
pub const MAX_TRANSMIT_SLOTS: usize = MAX_SLOTS - ENTRY_FRAME_SLOTS;

/// The most slots any message but a `State` takes (a `Request`: the header and five slots): what lets
/// [`split_transmit`] count instead of measure.
const MAX_PLAIN_SLOTS: usize = 11;

/// Largest integer a JS number holds exactly; every integer slot must be at most this.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// One slot of a message on the wire.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Num(f64),
    Str(String),
}

impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Value::Num(n as f64)
    }
}

impl From<u32> for Value {
    fn from(n: u32) -> Self {
        Value::Num(f64::from(n))
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Num(if b { 1.0 } else { 0.0 })
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_owned())
    }
}

/// A participant of the protocol: a context (its spec client id) in one incarnation. A context takes a
/// new incarnation each time it (re)joins, so that messages of an earlier membership, still in flight,
/// are recognisably stale.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MemberKey {
    pub client: Rc<str>,
    pub incarnation: u32,
}

impl MemberKey {
    pub fn new(client: &str, incarnation: u32) -> Self {
        MemberKey {
            client: client.into(),
            incarnation,
        }
    }
}

/// Names one message: its sender and the sender's sequence number (never reused by a context).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MessageId {
    pub sender: MemberKey,
    pub seq: u64,
}

impl MessageId {
    /// The id of the history that exists before any genesis (used only by an observer that sees the
    /// channel from its very beginning).
    pub fn origin() -> Self {
        MessageId {
            sender: MemberKey::new("", 0),
            seq: 0,
        }
    }
}

/// A member as recorded in a state transfer: its key and where it stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberRecord {
    pub key: MemberKey,
    pub state: MemberState,
}

/// Where a member of the current history stands, as every replica records it
/// ([`crate::protocol::replica::Member`]) and a state transfer carries it ([`MemberRecord`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemberState {
    /// Position (in the current history) of the member's Join.
    pub join_pos: u64,
    /// Joined and waiting for a state transfer (or a genesis); may not request yet.
    pub pending: bool,
    /// A Genesis or State message came after this pending member's Join: its own Genesis is void.
    pub tainted: bool,
    /// The key of the liveness database the member keeps open (its `Join`'s `watch`), 0 for none. A
    /// member is removed only by its own `Leave` or on evidence that that database lost its last
    /// connection (`Gone`), never on silence.
    pub watch: u64,
}

/// A held lock or a pending request in a state transfer. `member` indexes the transfer's member list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockRecord {
    pub gid: u64,
    pub member: u32,
    pub local_id: u64,
    pub name: Rc<str>,
    pub mode: LockMode,
}

/// The replicated state as of one message of the channel, sent to contexts that join.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateTransfer {
    /// The Genesis that started the history this state belongs to.
    pub history: MessageId,
    /// The last message applied to this state, and its position in the history.
    pub as_of: MessageId,
    pub as_of_pos: u64,
    pub next_gid: u64,
    pub members: Vec<MemberRecord>,
    /// Held locks in held-set order, then pending requests in queue-map order: those of the `parts`
    /// [`StatePart`]s that precede this message in its sender's sequence first, then these.
    pub held: Vec<LockRecord>,
    pub pending: Vec<LockRecord>,
    /// How many `StatePart` messages carry the first locks (see [`state_messages`]).
    pub parts: u64,
}

/// The first held locks and pending requests of a state transfer too long for one message: sent
/// just before its `State`, with the sequence numbers right before it ([`state_messages`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatePart {
    pub held: Vec<LockRecord>,
    pub pending: Vec<LockRecord>,
}

/// What a message says, after the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// The sender joins (it becomes a pending member, admitted by a `State` or its own valid `Genesis`).
    /// `watch` names the liveness database the sender keeps open for as long as it lives
    /// (docs/PROTOCOL.md §7, "evidence"). Every context of this version keeps one; a member announced
    /// with 0 is removed only by its own `Leave`.
    Join { watch: u64 },
    /// The sender found no live history and starts a new, empty one (if valid: see the replica).
    Genesis,
    /// A state transfer for pending members.
    State(Box<StateTransfer>),
    /// Locks of the state transfer that follows (it says how many parts precede it).
    StatePart(Box<StatePart>),
    /// Spec 4.1 step 3 for the sender's request `id`.
    Request {
        id: u64,
        name: Rc<str>,
        options: LockOptions,
    },
    /// Spec 4.2 for the sender's lock `id`.
    Release { id: u64 },
    /// Spec 4.3 for the sender's request `id` (releases it if it was granted meanwhile).
    Abort { id: u64 },
    /// Says nothing but that the sender is here: over the log, a query's marker (docs/PROTOCOL.md §12),
    /// and the answer to an older version's `Join` (§9).
    Alive,
    /// The sender leaves: release its locks, drop its requests.
    Leave,
    /// The liveness database `watch` of the context `client` lost its last connection: that context is
    /// gone (its process ended, or it closed the database on leaving). Remove the member it announced.
    Gone { client: Rc<str>, watch: u64 },
}

/// A message of this protocol version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub sender: MemberKey,
    pub seq: u64,
    pub body: Body,
}

impl Message {
    pub fn id(&self) -> MessageId {
        MessageId {
            sender: self.sender.clone(),
            seq: self.seq,
        }
    }
}

/// A decoded wire message.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoded {
    /// A message of our version.
    Ours(Message),
    /// A well-formed header of another protocol version; the body is not ours to read.
    Foreign {
        version: u32,
        kind: u32,
        id: MessageId,
    },
}

fn kind_of(body: &Body) -> u32 {
    match body {
        Body::Join { .. } => KIND_JOIN,
        Body::Genesis => KIND_GENESIS,
        Body::State(_) => KIND_STATE,
        Body::StatePart(_) => KIND_STATE_PART,
        Body::Request { .. } => KIND_REQUEST,
        Body::Release { .. } => KIND_RELEASE,
        Body::Abort { .. } => KIND_ABORT,
        Body::Alive => KIND_ALIVE,
        Body::Leave => KIND_LEAVE,
        Body::Gone { .. } => KIND_GONE,
    }
}

fn mode_code(mode: LockMode) -> u32 {
    match mode {
        LockMode::Exclusive => 0,
        LockMode::Shared => 1,
    }
}

struct Encoder {
    out: Vec<Value>,
}

impl Encoder {
    fn push(&mut self, v: impl Into<Value>) {
        self.out.push(v.into());
    }

    fn member(&mut self, m: &MemberKey) {
        self.push(&*m.client);
        self.push(m.incarnation);
    }

    fn message_id(&mut self, id: &MessageId) {
        self.member(&id.sender);
        self.push(id.seq);
    }

    fn lock(&mut self, l: &LockRecord) {
        self.push(l.gid);
        self.push(l.member);
        self.push(l.local_id);
        self.push(&*l.name);
        self.push(mode_code(l.mode));
    }

    /// Held locks, then pending requests, each list after its length.
    fn locks(&mut self, held: &[LockRecord], pending: &[LockRecord]) {
        for locks in [held, pending] {
            self.push(locks.len() as u64);
            for l in locks {
                self.lock(l);
            }
        }
    }

    /// Appends `message`'s slots as a message of protocol `version`.
    fn message(&mut self, message: &Message, version: u32) {
        self.push(MAGIC);
        self.push(version);
        self.push(kind_of(&message.body));
        self.member(&message.sender);
        self.push(message.seq);
        match &message.body {
            Body::Genesis | Body::Alive | Body::Leave => {}
            Body::Join { watch } => self.push(*watch),
            Body::State(s) => {
                self.message_id(&s.history);
                self.message_id(&s.as_of);
                self.push(s.as_of_pos);
                self.push(s.next_gid);
                self.push(s.members.len() as u64);
                for m in &s.members {
                    let state = &m.state;
                    self.member(&m.key);
                    self.push(state.join_pos);
                    self.push(u32::from(state.pending) | u32::from(state.tainted) << 1);
                    self.push(state.watch);
                }
                self.locks(&s.held, &s.pending);
                self.push(s.parts);
            }
            Body::StatePart(p) => self.locks(&p.held, &p.pending),
            Body::Request { id, name, options } => {
                self.push(*id);
                self.push(&**name);
                self.push(mode_code(options.mode));
                self.push(options.if_available);
                self.push(options.steal);
            }
            Body::Release { id } | Body::Abort { id } => self.push(*id),
            Body::Gone { client, watch } => {
                self.push(&**client);
                self.push(*watch);
            }
        }
    }
}

/// Encodes `message` as a message of protocol `version` (tests use other versions to simulate a skew).
pub fn encode_versioned(message: &Message, version: u32) -> Vec<Value> {
    let mut e = Encoder { out: Vec::new() };
    e.message(message, version);
    e.out
}

/// Encodes `message` in this build's protocol version.
pub fn encode(message: &Message) -> Vec<Value> {
    encode_versioned(message, PROTOCOL_VERSION)
}

/// Several messages of one sender, in order, as one channel message (the edge sends what a context
/// queues within one task at once: one post and one delivery instead of several). A header like a
/// message's (the first one's sender and sequence number, kind `Batch`), so that another version sees a
/// message of this version; then each message's length and slots.
pub fn encode_batch(messages: &[Message]) -> Vec<Value> {
    encode_batch_versioned(messages, PROTOCOL_VERSION)
}

/// [`encode_batch`] for protocol `version` (tests simulate a deploy with two versions).
pub fn encode_batch_versioned(messages: &[Message], version: u32) -> Vec<Value> {
    let first = &messages[0];
    let mut e = Encoder { out: Vec::new() };
    e.push(MAGIC);
    e.push(version);
    e.push(KIND_BATCH);
    e.member(&first.sender);
    e.push(first.seq);
    for m in messages {
        // The message's length goes before it: a slot filled in once its slots are appended.
        let at = e.out.len();
        e.out.push(Value::Num(0.0));
        e.message(m, version);
        e.out[at] = Value::from((e.out.len() - at - 1) as u64);
    }
    e.out
}

/// The channel message of what a context sends in one task: the message itself, or a batch of them.
pub fn encode_transmit(messages: &[Message], version: u32) -> Vec<Value> {
    match messages {
        [one] => encode_versioned(one, version),
        _ => encode_batch_versioned(messages, version),
    }
}

/// What a context sends in one task, as posts of at most [`MAX_TRANSMIT_SLOTS`] slots each, in order
/// (each post is a message or a batch, see [`encode_transmit`]). Several posts of one sender keep their
/// order on every transport (per-sender FIFO; over the log, appends in the order they were made), so
/// each receiver applies the same messages in the same order as from one batch. A message longer than
/// the cap by itself (a `State` of an origin with tens of thousands of locks) goes alone.
pub fn split_transmit(messages: Vec<Message>, version: u32) -> Vec<Vec<Message>> {
    let short = |m: &Message| !matches!(m.body, Body::State(_) | Body::StatePart(_));
    if messages.len() * (1 + MAX_PLAIN_SLOTS) + ENTRY_FRAME_SLOTS <= MAX_TRANSMIT_SLOTS
        && messages.iter().all(short)
    {
        return vec![messages];
    }
    let mut posts = Vec::new();
    let mut post: Vec<Message> = Vec::new();
    // A batch's header, then each message with its length slot.
    let mut slots = ENTRY_FRAME_SLOTS;
    for m in messages {
        let len = 1 + if short(&m) {
            MAX_PLAIN_SLOTS
        } else {
            encode_versioned(&m, version).len()
        };
        if !post.is_empty() && slots + len > MAX_TRANSMIT_SLOTS {
            posts.push(std::mem::take(&mut post));
            slots = ENTRY_FRAME_SLOTS;
        }
        slots += len;
        post.push(m);
    }
    posts.push(post);
    posts
}

/// The slots of a lock record in a state transfer.
const LOCK_SLOTS: usize = 5;

/// The slots of a member record in a state transfer (its key, join position, flags and liveness
/// database).
const MEMBER_SLOTS: usize = 5;

/// The most slots one message of a state transfer may take: it must fit in a post by itself, as a batch
/// of one (a header and its length) if need be.
const MAX_STATE_SLOTS: usize = MAX_TRANSMIT_SLOTS - ENTRY_FRAME_SLOTS - 1;

/// The messages that carry state transfer `st`, in the order they are sent: its first locks in
/// `StatePart`s, then the `State` with the rest, so that none is longer than a post may be (a `State`
/// of some 20,000 locks would be). A joiner rebuilds the state from the `State` and the parts just
/// before it in its sender's sequence; every other context applies the parts as nothing.
pub fn state_messages(mut st: StateTransfer) -> Vec<Body> {
    // The State's slots besides its locks: the header, two message ids, two numbers, the members'
    // count and records, two list lengths and the parts' count.
    let fixed = ENTRY_FRAME_SLOTS + 2 * 3 + 2 + 1 + MEMBER_SLOTS * st.members.len() + 2 + 1;
    let in_state = MAX_STATE_SLOTS.saturating_sub(fixed) / LOCK_SLOTS;
    // A part's slots besides its locks: the header and two list lengths.
    let per_part = (MAX_STATE_SLOTS - ENTRY_FRAME_SLOTS - 2) / LOCK_SLOTS;
    let mut messages = Vec::new();
    while st.held.len() + st.pending.len() > in_state {
        // The first locks go in the part; the rest stay in `st`.
        let held = per_part.min(st.held.len());
        let pending = (per_part - held).min(st.pending.len());
        let rest_held = st.held.split_off(held);
        let rest_pending = st.pending.split_off(pending);
        messages.push(Body::StatePart(Box::new(StatePart {
            held: std::mem::replace(&mut st.held, rest_held),
            pending: std::mem::replace(&mut st.pending, rest_pending),
        })));
    }
    st.parts = messages.len() as u64;
    messages.push(Body::State(Box::new(st)));
    messages
}

/// The first slots of every carrier frame a context of protocol `version` sends (the key, the log's
/// identity and the entry follow): made once and handed to the transport, which completes a frame when
/// its append commits.
pub fn entry_header(writer: &MemberKey, version: u32) -> Vec<Value> {
    let mut e = Encoder { out: Vec::new() };
    e.push(MAGIC);
    e.push(version);
    e.push(KIND_ENTRY);
    e.member(writer);
    e.out
}

/// The carrier frame of the log entry `data` of key `key` in the log of identity `log`, written by
/// `writer` (of protocol `version`).
pub fn encode_entry(
    writer: &MemberKey,
    version: u32,
    key: u64,
    log: u64,
    data: &[Value],
) -> Vec<Value> {
    let mut out = entry_header(writer, version);
    out.push(Value::from(key));
    out.push(Value::from(log));
    out.extend_from_slice(data);
    out
}

/// A carrier frame of protocol `version`: its entry's key, the identity of its log, and the entry;
/// `None` if `values` is not one. (A build that sent frames without the identity had the entry where
/// the identity is: its frames, and this one's to it, fail to decode as entries, and are read from the
/// log instead.)
pub fn decode_entry(values: &[Value], version: u32) -> Option<(u64, u64, &[Value])> {
    let mut c = Cursor::new(values);
    if c.str() != MAGIC || c.u32() != version || c.u32() != KIND_ENTRY {
        return None;
    }
    c.member();
    let key = c.u64();
    let log = c.u64();
    (!c.bad && key > 0).then(|| (key, log, &values[c.at..]))
}

/// The messages of a batch of protocol `version`, in order; `None` if `values` is not one (or is
/// malformed: then the whole batch is ignored, like any undecodable message).
pub fn split_batch(values: &[Value], version: u32) -> Option<Vec<&[Value]>> {
    let mut c = Cursor::new(values);
    if c.str() != MAGIC || c.u32() != version || c.u32() != KIND_BATCH {
        return None;
    }
    c.member();
    c.u64();
    let mut parts = Vec::new();
    while !c.bad && !c.done() {
        let len = c.count(1);
        parts.push(&values[c.at..c.at + len]);
        c.at += len;
    }
    (!c.bad).then_some(parts)
}

/// Reads slots in order. A slot of the wrong type or out of range sets `bad` (for good) and reads as a
/// default value, so that a decoder reads on and checks `bad` once, at the end: one straight path
/// instead of an early return (and a drop of what was decoded so far) at every slot.
struct Cursor<'a> {
    values: &'a [Value],
    at: usize,
    bad: bool,
}

impl<'a> Cursor<'a> {
    fn new(values: &'a [Value]) -> Self {
        Cursor {
            values,
            at: 0,
            bad: false,
        }
    }

    fn next(&mut self) -> Option<&'a Value> {
        let v = self.values.get(self.at)?;
        self.at += 1;
        Some(v)
    }

    /// Marks the message bad; returns the default value that stands for the slot.
    fn fail<T: Default>(&mut self) -> T {
        self.bad = true;
        T::default()
    }

    fn u64(&mut self) -> u64 {
        match self.next() {
            Some(Value::Num(n)) if (0.0..=MAX_SAFE_INTEGER).contains(n) && n.fract() == 0.0 => {
                *n as u64
            }
            _ => self.fail(),
        }
    }

    fn u32(&mut self) -> u32 {
        let n = self.u64();
        u32::try_from(n).unwrap_or_else(|_| self.fail())
    }

    fn bool(&mut self) -> bool {
        match self.u64() {
            0 => false,
            1 => true,
            _ => self.fail(),
        }
    }

    fn str(&mut self) -> &'a str {
        match self.next() {
            Some(Value::Str(s)) => s,
            _ => self.fail(),
        }
    }

    fn member(&mut self) -> MemberKey {
        let client = self.str();
        MemberKey::new(client, self.u32())
    }

    fn message_id(&mut self) -> MessageId {
        let sender = self.member();
        MessageId {
            sender,
            seq: self.u64(),
        }
    }

    fn mode(&mut self) -> LockMode {
        match self.u64() {
            0 => LockMode::Exclusive,
            1 => LockMode::Shared,
            _ => {
                self.bad = true;
                LockMode::Exclusive
            }
        }
    }

    fn name(&mut self) -> Rc<str> {
        self.str().into()
    }

    /// A count of items of `width` slots each, bounded by what is left (so garbage cannot make the
    /// decoder allocate much).
    fn count(&mut self, width: usize) -> usize {
        let n = self.u64();
        match usize::try_from(n).ok().and_then(|n| n.checked_mul(width)) {
            Some(slots) if slots <= self.values.len() - self.at => n as usize,
            _ => self.fail(),
        }
    }

    fn lock(&mut self) -> LockRecord {
        let gid = self.u64();
        let member = self.u32();
        let local_id = self.u64();
        let name = self.name();
        LockRecord {
            gid,
            member,
            local_id,
            name,
            mode: self.mode(),
        }
    }

    /// A count, then that many locks.
    fn locks(&mut self) -> Vec<LockRecord> {
        let n = self.count(5);
        let mut locks = Vec::with_capacity(n);
        for _ in 0..n {
            locks.push(self.lock());
        }
        locks
    }

    fn done(&self) -> bool {
        self.at == self.values.len()
    }
}

fn decode_state(c: &mut Cursor) -> StateTransfer {
    let history = c.message_id();
    let as_of = c.message_id();
    let as_of_pos = c.u64();
    let next_gid = c.u64();
    let n = c.count(5);
    let mut members = Vec::with_capacity(n);
    for _ in 0..n {
        let key = c.member();
        let join_pos = c.u64();
        let flags = c.u64();
        if flags > 3 {
            c.bad = true;
        }
        members.push(MemberRecord {
            key,
            state: MemberState {
                join_pos,
                pending: flags & 1 != 0,
                tainted: flags & 2 != 0,
                watch: c.u64(),
            },
        });
    }
    let held = c.locks();
    let pending = c.locks();
    StateTransfer {
        history,
        as_of,
        as_of_pos,
        next_gid,
        members,
        held,
        pending,
        parts: c.u64(),
    }
}

/// Decodes one wire message; `None` for anything that is not a well-formed message (of any version).
/// `version` is the version the caller speaks (normally [`PROTOCOL_VERSION`]).
pub fn decode_versioned(values: &[Value], version: u32) -> Option<Decoded> {
    let mut c = Cursor::new(values);
    if c.str() != MAGIC {
        return None;
    }
    let their_version = c.u32();
    let kind = c.u32();
    let sender = c.member();
    let seq = c.u64();
    if c.bad {
        return None;
    }
    if their_version != version {
        let id = MessageId { sender, seq };
        return Some(Decoded::Foreign {
            version: their_version,
            kind,
            id,
        });
    }
    let body = match kind {
        KIND_JOIN => Body::Join { watch: c.u64() },
        KIND_GENESIS => Body::Genesis,
        KIND_STATE => Body::State(Box::new(decode_state(&mut c))),
        KIND_STATE_PART => Body::StatePart(Box::new(StatePart {
            held: c.locks(),
            pending: c.locks(),
        })),
        KIND_REQUEST => {
            let id = c.u64();
            let name = c.name();
            let options = LockOptions {
                mode: c.mode(),
                if_available: c.bool(),
                steal: c.bool(),
            };
            // request() rejects this combination; no honest peer sends it
            c.bad |= options.if_available && options.steal;
            Body::Request { id, name, options }
        }
        KIND_RELEASE => Body::Release { id: c.u64() },
        KIND_ABORT => Body::Abort { id: c.u64() },
        KIND_ALIVE => Body::Alive,
        KIND_LEAVE => Body::Leave,
        KIND_GONE => Body::Gone {
            client: c.name(),
            watch: c.u64(),
        },
        _ => return None,
    };
    (c.done() && !c.bad).then_some(Decoded::Ours(Message { sender, seq, body }))
}

/// Decodes one wire message for this build's protocol version.
pub fn decode(values: &[Value]) -> Option<Decoded> {
    decode_versioned(values, PROTOCOL_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log identity as large as the log makes them (below 2^53), for frames of the largest size.
    const LOG_IDENTITY: u64 = (1 << 53) - 1;

    fn member(c: &str, i: u32) -> MemberKey {
        MemberKey::new(c, i)
    }

    fn msg(body: Body) -> Message {
        Message {
            sender: member("client-a", 3),
            seq: 17,
            body,
        }
    }

    fn sample_bodies() -> Vec<Body> {
        let lock = |gid, name: &str, mode| LockRecord {
            gid,
            member: 0,
            local_id: gid + 100,
            name: name.into(),
            mode,
        };
        vec![
            Body::Join { watch: 0 },
            Body::Genesis,
            Body::State(Box::new(StateTransfer {
                history: MessageId {
                    sender: member("g", 1),
                    seq: 4,
                },
                as_of: MessageId {
                    sender: member("h", 2),
                    seq: 9,
                },
                as_of_pos: 12,
                next_gid: 30,
                members: vec![
                    MemberRecord {
                        key: member("client-a", 3),
                        state: MemberState::default(),
                    },
                    MemberRecord {
                        key: member("b", 1),
                        state: MemberState {
                            join_pos: 5,
                            pending: true,
                            tainted: true,
                            watch: 4_294_967_297,
                        },
                    },
                ],
                held: vec![
                    lock(1, "x", LockMode::Shared),
                    lock(2, "x", LockMode::Shared),
                ],
                pending: vec![lock(3, "x", LockMode::Exclusive)],
                parts: 0,
            })),
            Body::StatePart(Box::new(StatePart {
                held: vec![lock(4, "y", LockMode::Shared)],
                pending: vec![lock(5, "y", LockMode::Exclusive)],
            })),
            Body::Request {
                id: 5,
                name: "resource ✓".into(),
                options: LockOptions {
                    mode: LockMode::Shared,
                    if_available: true,
                    steal: false,
                },
            },
            Body::Request {
                id: 6,
                name: "".into(),
                options: LockOptions {
                    mode: LockMode::Exclusive,
                    if_available: false,
                    steal: true,
                },
            },
            Body::Release { id: 7 },
            Body::Abort { id: 8 },
            Body::Alive,
            Body::Leave,
            Body::Join { watch: 12_345 },
            Body::Gone {
                client: "client-a".into(),
                watch: (1 << 53) - 1,
            },
        ]
    }

    #[test]
    fn every_message_round_trips() {
        for body in sample_bodies() {
            let m = msg(body);
            assert_eq!(decode(&encode(&m)), Some(Decoded::Ours(m.clone())), "{m:?}");
        }
    }

    /// A request's slots, as every version of this protocol in the origin reads them: the header, then
    /// id, name, mode (0 exclusive, 1 shared), ifAvailable and steal (0 or 1).
    #[test]
    fn a_request_is_encoded_in_its_fixed_slots() {
        let (s, n) = (|x: &str| Value::Str(x.into()), Value::Num);
        let (version, kind) = (f64::from(PROTOCOL_VERSION), f64::from(KIND_REQUEST));
        let header = [
            s(MAGIC),
            n(version),
            n(kind),
            s("client-a"),
            n(3.0),
            n(17.0),
        ];
        let shared_if_available = Body::Request {
            id: 5,
            name: "x".into(),
            options: LockOptions {
                mode: LockMode::Shared,
                if_available: true,
                steal: false,
            },
        };
        let body = [n(5.0), s("x"), n(1.0), n(1.0), n(0.0)];
        assert_eq!(
            encode(&msg(shared_if_available)),
            [&header[..], &body].concat()
        );
        let exclusive_steal = Body::Request {
            id: 6,
            name: "y".into(),
            options: LockOptions {
                mode: LockMode::Exclusive,
                if_available: false,
                steal: true,
            },
        };
        let body = [n(6.0), s("y"), n(0.0), n(0.0), n(1.0)];
        assert_eq!(encode(&msg(exclusive_steal)), [&header[..], &body].concat());
    }

    #[test]
    fn only_a_state_is_longer_than_the_plain_bound() {
        for body in sample_bodies() {
            let long = matches!(body, Body::State(_) | Body::StatePart(_));
            let len = encode(&msg(body)).len();
            assert!(long || len <= MAX_PLAIN_SLOTS, "{len} slots");
        }
    }

    /// What a context sends in one task goes in posts that every context decodes, with their carrier
    /// frames, in the order it was queued.
    #[test]
    fn a_long_transmit_is_split_below_the_cap_in_order() {
        let request = |id: u64| Message {
            sender: member("a", 1),
            seq: id,
            body: Body::Request {
                id,
                name: format!("n{}", id % 50).into(),
                options: LockOptions::default(),
            },
        };
        let short: Vec<Message> = (1..=100).map(request).collect();
        assert_eq!(split_transmit(short.clone(), PROTOCOL_VERSION), [short]);
        let many: Vec<Message> = (1..=25_000).map(request).collect();
        let posts = split_transmit(many.clone(), PROTOCOL_VERSION);
        assert!(posts.len() > 2, "{} posts", posts.len());
        for post in &posts {
            let frame = encode_entry(
                &member("a", 1),
                PROTOCOL_VERSION,
                1,
                LOG_IDENTITY,
                &encode_transmit(post, PROTOCOL_VERSION),
            );
            assert!(frame.len() <= MAX_SLOTS, "{} slots", frame.len());
        }
        assert_eq!(posts.concat(), many);
        // A long State goes alone, between the messages queued around it.
        let mut state = msg(sample_bodies().swap_remove(2));
        let Body::State(st) = &mut state.body else {
            panic!("the third sample is a State")
        };
        let lock = st.pending[0].clone();
        st.pending = vec![lock; MAX_TRANSMIT_SLOTS / 5];
        let mixed = vec![request(1), state.clone(), request(2)];
        let posts = split_transmit(mixed, PROTOCOL_VERSION);
        assert_eq!(posts, [vec![request(1)], vec![state], vec![request(2)]]);
    }

    /// A state transfer of tens of thousands of locks goes as parts and a `State`, each of which fits
    /// in a post by itself, and whose locks in order are the transfer's.
    #[test]
    fn a_long_state_transfer_is_sent_in_parts_below_the_cap() {
        let Body::State(sample) = sample_bodies().swap_remove(2) else {
            panic!("the third sample is a State")
        };
        let record = |gid: u64| LockRecord {
            gid,
            member: (gid % 2) as u32,
            local_id: gid,
            name: format!("n{gid}").into(),
            mode: LockMode::Shared,
        };
        let mut st = *sample;
        st.held = (1..=12_000).map(record).collect();
        st.pending = (12_001..=45_000).map(record).collect();
        let messages = state_messages(st.clone());
        assert_eq!(messages.len(), 2 + 1, "two parts and the State");
        let (mut held, mut pending) = (Vec::new(), Vec::new());
        for (k, body) in messages.iter().enumerate() {
            let m = Message {
                sender: member("a", 1),
                seq: 10 + k as u64,
                body: body.clone(),
            };
            let batch = encode_batch(std::slice::from_ref(&m));
            let frame = encode_entry(&member("a", 1), PROTOCOL_VERSION, 1, LOG_IDENTITY, &batch);
            assert!(frame.len() <= MAX_SLOTS, "{} slots", frame.len());
            assert_eq!(decode(&encode(&m)), Some(Decoded::Ours(m.clone())));
            match body {
                Body::StatePart(p) => {
                    held.extend_from_slice(&p.held);
                    pending.extend_from_slice(&p.pending);
                }
                Body::State(last) => {
                    assert_eq!(k, messages.len() - 1, "the State comes last");
                    assert_eq!(last.parts, 2);
                    held.extend_from_slice(&last.held);
                    pending.extend_from_slice(&last.pending);
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!((held, pending), (st.held.clone(), st.pending.clone()));
        // A short one is one State, as it was.
        st.held.truncate(10);
        st.pending.truncate(10);
        assert_eq!(state_messages(st.clone()), [Body::State(Box::new(st))]);
    }

    #[test]
    fn a_batch_splits_into_its_messages_and_reads_as_this_version_to_others() {
        let messages: Vec<Message> = sample_bodies().into_iter().map(msg).collect();
        let batch = encode_batch(&messages);
        let parts = split_batch(&batch, PROTOCOL_VERSION).expect("a batch");
        assert_eq!(parts.len(), messages.len());
        for (part, m) in parts.iter().zip(&messages) {
            assert_eq!(decode(part), Some(Decoded::Ours(m.clone())));
        }
        // Not a message of this version (the participant splits it first); another version sees its
        // header.
        assert_eq!(decode(&batch), None);
        assert!(matches!(
            decode_versioned(&batch, PROTOCOL_VERSION - 1),
            Some(Decoded::Foreign {
                version: PROTOCOL_VERSION,
                ..
            })
        ));
        // A single message is not a batch; a truncated batch is nothing.
        assert_eq!(split_batch(&encode(&messages[0]), PROTOCOL_VERSION), None);
        assert_eq!(
            split_batch(&batch[..batch.len() - 1], PROTOCOL_VERSION),
            None
        );
    }

    #[test]
    fn header_layout_is_frozen() {
        let v = encode(&msg(Body::Genesis));
        assert_eq!(
            v,
            vec![
                Value::Str("weblocks".into()),
                Value::Num(f64::from(PROTOCOL_VERSION)),
                Value::Num(2.0),
                Value::Str("client-a".into()),
                Value::Num(3.0),
                Value::Num(17.0),
            ]
        );
        // A Join's body (this version's) follows the frozen header.
        assert_eq!(
            encode(&msg(Body::Join { watch: 5 }))[..3],
            [
                Value::Str("weblocks".into()),
                Value::Num(f64::from(PROTOCOL_VERSION)),
                Value::Num(1.0),
            ]
        );
    }

    #[test]
    fn another_version_decodes_as_foreign_whatever_its_body() {
        let mut v = encode_versioned(&msg(Body::Genesis), PROTOCOL_VERSION + 1);
        v.push(Value::Str("a body we cannot read".into()));
        assert_eq!(
            decode(&v),
            Some(Decoded::Foreign {
                version: PROTOCOL_VERSION + 1,
                kind: KIND_GENESIS,
                id: MessageId {
                    sender: member("client-a", 3),
                    seq: 17
                }
            })
        );
    }

    #[test]
    fn garbage_is_rejected() {
        let good = encode(&msg(Body::Request {
            id: 5,
            name: "n".into(),
            options: LockOptions {
                mode: LockMode::Shared,
                if_available: false,
                steal: false,
            },
        }));
        let s = |x: &str| Value::Str(x.into());
        let n = Value::Num;
        let mut cases: Vec<Vec<Value>> = vec![
            vec![],
            vec![s("weblocks")],
            vec![s("other"), n(1.0), n(4.0), s("a"), n(1.0), n(1.0)],
            vec![n(1.0); 12],
        ];
        // Every truncation of a good message, and one slot too many.
        for len in 0..good.len() {
            cases.push(good[..len].to_vec());
        }
        let mut longer = good.clone();
        longer.push(n(0.0));
        cases.push(longer);
        // Slots 0 (magic), 3 (client id) and 7 (name) are strings; the others are integers.
        for (i, slot) in good.iter().enumerate() {
            let wrong: Vec<Value> = match slot {
                Value::Str(_) => vec![n(0.0), n(1.0)],
                Value::Num(_) => vec![
                    s("1"),
                    n(-3.0),
                    n(0.5),
                    n(f64::NAN),
                    n(f64::INFINITY),
                    n(1e300),
                ],
            };
            for bad in wrong {
                let mut v = good.clone();
                v[i] = bad;
                cases.push(v);
            }
        }
        // An unknown kind, an ifAvailable+steal request, a bad mode, a bad boolean.
        for (slot, value) in [(2, 99.0), (8, 2.0), (9, 2.0)] {
            let mut v = good.clone();
            v[slot] = n(value);
            cases.push(v);
        }
        let mut both = good.clone();
        both[9] = n(1.0);
        both[10] = n(1.0);
        cases.push(both);
        for case in cases {
            assert_eq!(decode(&case), None, "{case:?}");
        }
    }

    #[test]
    fn state_counts_cannot_exceed_the_message() {
        let mut v = encode(&msg(sample_bodies().swap_remove(2)));
        // The member count slot: header (6) + two message ids (6) + as_of_pos + next_gid.
        assert_eq!(v[14], Value::Num(2.0));
        v[14] = Value::Num(1e15);
        assert_eq!(decode(&v), None);
        v[14] = Value::Num(3.0);
        assert_eq!(decode(&v), None);
    }

    #[test]
    fn pseudo_random_garbage_never_panics() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let good = encode(&msg(sample_bodies().swap_remove(3)));
        for _ in 0..20_000 {
            let mut v = good.clone();
            let edits = next() % 4 + 1;
            for _ in 0..edits {
                let i = (next() % v.len() as u64) as usize;
                v[i] = match next() % 5 {
                    0 => Value::Num((next() % 40) as f64),
                    1 => Value::Num(-1.0),
                    2 => Value::Str(format!("s{}", next() % 3)),
                    3 => Value::Num(f64::from_bits(next())),
                    _ => Value::Num(1.0),
                };
            }
            if next() % 3 == 0 {
                let cut = (next() % v.len() as u64) as usize;
                v.truncate(cut);
            }
            let _ = decode(&v);
        }
    }
}
