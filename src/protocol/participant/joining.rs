//! The joining state: the context has queued its `Join` and waits until it has a complete replica,
//! either from a state transfer (a `State` whose as-of message it has seen: it rebuilds the state and
//! replays what came after) or from a valid `Genesis` (its own, if nobody answered in time, or a later
//! joiner's that it can judge). Until then it buffers the order and runs a partial replica, which knows
//! only the members that joined after it (docs/PROTOCOL.md §5, "Joining").

use std::rc::Rc;

use crate::protocol::replica::Replica;
use crate::protocol::wire::{Body, Decoded, KIND_JOIN, Message, MessageId, StatePart};

use super::core::Core;
use super::effect::Effect;

pub(super) struct Joining {
    replica: Replica,
    /// Every message since this context's Join came back, for replay after a state transfer.
    buffer: Vec<Decoded>,
    /// The Join came back: from here on the order is this context's to follow.
    started: bool,
    /// Sequence number of the latest Join this context queued.
    join_seq: u64,
    /// That Join came back.
    echoed: bool,
    /// When this context's latest Join was first followed by a Genesis or State (its own Genesis would
    /// be void; it waits for a state transfer, then joins again).
    tainted_at: Option<u64>,
    genesis_sent: bool,
    /// The Join waits for this context's liveness database to open: a context is announced only with
    /// the database that shows it alive.
    deferred: bool,
    /// The liveness databases of the other contexts, listed after the Join came back, and
    /// when they were asked for.
    census: Option<Vec<(Rc<str>, u64)>>,
    census_asked: Option<u64>,
    /// The liveness databases found without a connection (their contexts are gone).
    gone: Vec<(Rc<str>, u64)>,
    /// The contexts whose `Leave` came after this context's `Join`: at that place they are members no
    /// more, and a membership of theirs after it begins with a `Join` after this one's.
    left: Vec<Rc<str>>,
}

/// What a message or a deadline made of a joining context.
pub(super) enum Joined {
    /// Still joining.
    Waiting,
    /// The replica is complete, `last` the message it applied last: the context is synced.
    Complete {
        replica: Box<Replica>,
        last: MessageId,
    },
    /// Too much buffered, or an inconsistent state transfer: join again with a new incarnation.
    Restart,
}

fn id_of(d: &Decoded) -> MessageId {
    match d {
        Decoded::Ours(m) => m.id(),
        Decoded::Foreign { id, .. } => id.clone(),
    }
}

impl Joining {
    /// Queues a `Join` of a new incarnation and waits for it to come back.
    pub fn start(core: &mut Core) -> Joining {
        let mut joining = Joining {
            replica: Replica::partial(core.version()),
            buffer: Vec::new(),
            started: false,
            join_seq: 0,
            echoed: false,
            tainted_at: None,
            genesis_sent: false,
            deferred: false,
            census: None,
            census_asked: None,
            gone: Vec::new(),
            left: Vec::new(),
        };
        joining.post_join(core);
        joining
    }

    /// Queues the Join of a new incarnation, announcing this context's liveness database; with no
    /// database open yet, asks for one and waits ([`Joining::alive`]).
    fn post_join(&mut self, core: &mut Core) {
        if core.watch() == 0 {
            core.open_alive();
            self.deferred = true;
            return;
        }
        self.deferred = false;
        self.join_seq = core.send_join();
    }

    /// This context's liveness database is open (`Core::watch`): the deferred Join goes.
    pub fn alive(&mut self, core: &mut Core) {
        if self.deferred {
            self.post_join(core);
        }
    }

    /// The other contexts' liveness databases, as listed after this context's Join came back.
    pub fn census(&mut self, core: &Core, listed: Vec<(Rc<str>, u64)>) {
        let others = listed
            .into_iter()
            .filter(|(client, _)| client != core.client())
            .collect();
        self.census = Some(others);
    }

    /// The liveness database `watch` of `client` lost its last connection.
    pub fn gone(&mut self, client: Rc<str>, watch: u64) {
        self.gone.push((client, watch));
    }

    /// Whether every context listed in the census that could be a member of a live history
    /// is known gone. A listed context whose Join came after this one's is not such a member: it can
    /// become one only through a `State` or `Genesis` after this context's Join, which taints it (its
    /// own Genesis is then void). Nor is one whose `Leave` came after this one's Join: a membership of
    /// it after that begins with a Join after this one's, as messages keep their sender's order. Every
    /// member of a live history opened its database before posting its Join, so one whose Join came
    /// before this context's is listed (docs/PROTOCOL.md §7).
    fn alone(&self) -> Option<bool> {
        let census = self.census.as_ref()?;
        Some(census.iter().all(|(client, watch)| {
            self.gone.iter().any(|(c, w)| c == client && w == watch)
                || self.left.contains(client)
                || self
                    .replica
                    .members()
                    .any(|(k, m)| k.client == *client && m.state.watch == *watch)
        }))
    }

    /// Queues a new Join (a new incarnation), keeping what was buffered.
    fn rejoin(&mut self, core: &mut Core) {
        self.post_join(core);
        self.census = None;
        self.census_asked = None;
        self.echoed = false;
        self.tainted_at = None;
        self.genesis_sent = false;
    }

    /// The next message of the order.
    pub fn receive(&mut self, core: &mut Core, now: u64, decoded: Decoded) -> Joined {
        if let Decoded::Foreign { version, kind, .. } = &decoded
            && *version < core.version()
            && *kind == KIND_JOIN
        {
            // An older version's context joins: show it that this version runs here, so it stays out.
            core.send(Body::Alive);
        }
        let me = core.member_key();
        let own_join = matches!(&decoded, Decoded::Ours(m)
            if m.sender == me && m.seq == self.join_seq && !self.deferred && matches!(m.body, Body::Join { .. }));
        if !self.started {
            if !own_join {
                return Joined::Waiting; // before this context's Join: the state transfer will include it
            }
            self.started = true;
        }
        if self.buffer.len() >= core.config().buffer_limit {
            return Joined::Restart;
        }
        // Buffered first and read back from the buffer: a copy would clone whole state transfers.
        self.buffer.push(decoded);
        let decoded = self.buffer.last().expect("just buffered");
        if let Decoded::Ours(m) = decoded
            && let Body::State(st) = &m.body
            && let Some(at) = self.buffer.iter().rposition(|d| id_of(d) == st.as_of)
        {
            return self.install(at);
        }
        if let Decoded::Ours(m) = decoded
            && m.body == Body::Leave
        {
            self.left.push(m.sender.client.clone());
        }
        if own_join {
            // Listed after the Join has its place: every member whose Join came before it had its
            // database open by then.
            self.echoed = true;
            self.left.clear();
            self.census = None;
            self.census_asked = Some(now);
            core.emit(Effect::Census);
        }
        self.replica.apply_decoded(decoded, &mut Vec::new());
        if self.replica.is_complete() {
            let last = id_of(decoded);
            let replica = std::mem::replace(&mut self.replica, Replica::partial(core.version()));
            return Joined::Complete {
                replica: Box::new(replica),
                last,
            };
        }
        if self.echoed && self.replica.member(&me).is_none_or(|m| m.state.tainted) {
            self.tainted_at.get_or_insert(now);
        }
        Joined::Waiting
    }

    /// Builds the replica from the State just received, whose as-of message is `buffer[at]`, and replays
    /// the messages after it (the State itself last). An inconsistent State makes this context join
    /// again.
    fn install(&mut self, at: usize) -> Joined {
        let Some(Decoded::Ours(state)) = self.buffer.last() else {
            return Joined::Restart;
        };
        let Body::State(st) = &state.body else {
            return Joined::Restart;
        };
        let Some(parts) = self.parts_of(state, st.parts) else {
            return Joined::Restart;
        };
        let Some(mut replica) = Replica::import(st, &parts, self.replica.version()) else {
            return Joined::Restart;
        };
        let mut ignored = Vec::new();
        for d in &self.buffer[at + 1..] {
            replica.apply_decoded(d, &mut ignored);
        }
        let last = id_of(self.buffer.last().expect("non-empty"));
        Joined::Complete {
            replica: Box::new(replica),
            last,
        }
    }

    /// The `count` parts sent before `state` (`wire::state_messages`), in order: its sender's messages
    /// right before it, which came after its as-of message and so are in the buffer. `None` if they are
    /// not all there.
    fn parts_of(&self, state: &Message, count: u64) -> Option<Vec<&StatePart>> {
        let mut parts = Vec::new();
        let mut k = self.buffer.len() - 1;
        while (parts.len() as u64) < count && k > 0 {
            k -= 1;
            let Decoded::Ours(m) = &self.buffer[k] else {
                continue;
            };
            if m.sender != state.sender {
                continue;
            }
            match &m.body {
                Body::StatePart(p) if m.seq + 1 + parts.len() as u64 == state.seq => {
                    parts.push(&**p)
                }
                _ => return None,
            }
        }
        if (parts.len() as u64) < count {
            return None;
        }
        parts.reverse();
        Some(parts)
    }

    /// Queues a Genesis once no context that could be a member of a live history lives (evidence
    /// decides, not a wait; a census that never came is asked for again), or a new Join after waiting
    /// in vain for a State. Returns the next deadline.
    pub fn policies(&mut self, core: &mut Core, now: u64) -> Option<u64> {
        let me = core.member_key();
        let patience = core.config().join_patience;
        if !self.echoed {
            return None;
        }
        let clean = self
            .replica
            .member(&me)
            .is_some_and(|m| m.state.pending && !m.state.tainted);
        if clean {
            if self.genesis_sent {
                return None; // its echo decides
            }
            return match self.alone() {
                Some(true) => {
                    core.send(Body::Genesis);
                    self.genesis_sent = true;
                    None
                }
                // A census that never came, or one that lists a context not known gone, is asked for
                // again: a member listed then may have left since (its entry is no member's any more),
                // and a context that has left believes it holds nothing. Any census read after this
                // context's Join came back lists every member whose Join came before it.
                _ => {
                    let again = self.census_asked.unwrap_or(now) + patience;
                    if now < again {
                        return Some(again);
                    }
                    self.census_asked = Some(now);
                    core.emit(Effect::Census);
                    Some(now + patience)
                }
            };
        }
        let deadline = self.tainted_at? + patience;
        if now < deadline {
            return Some(deadline);
        }
        self.rejoin(core);
        None
    }
}
