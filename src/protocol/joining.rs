//! The joining phase: a context posts Join and waits until it has a complete replica, either from a
//! state transfer (a State whose as-of message it has seen: it rebuilds the state and replays what came
//! after) or from a valid Genesis (its own, if nobody answered in time, or another joiner's that it
//! can judge). Until then it buffers the channel and runs a partial replica, which knows only the
//! members that joined after it.

use super::node::{Node, Phase, Transport, Wake};
use super::replica::Replica;
use super::synced::Synced;
use super::wire::{Body, Decoded, KIND_JOIN, Message, MessageId};

pub(super) struct Joining {
    pub replica: Replica,
    /// Every message since this context's first Join came back, for replay after a state transfer.
    pub buffer: Vec<Decoded>,
    /// The first Join came back: from here on the channel is this context's to follow.
    pub started: bool,
    /// Sequence number of the latest Join this context posted.
    pub join_seq: u64,
    /// When that Join came back.
    pub echo_at: Option<u64>,
    /// When a message of a live member (not a Join or Genesis) was last seen.
    pub evidence_at: Option<u64>,
    /// When this context's latest Join was first followed by a Genesis or State (its own Genesis would
    /// be void; it waits for a state transfer, then rejoins).
    pub tainted_at: Option<u64>,
    pub genesis_sent: bool,
}

fn id_of(d: &Decoded) -> MessageId {
    match d {
        Decoded::Ours(m) => m.id(),
        Decoded::Foreign { id, .. } => id.clone(),
    }
}

impl Node {
    pub(super) fn start_joining(&mut self, _now: u64) {
        self.incarnation += 1;
        self.post(Body::Join { need_state: true });
        self.phase = Phase::Joining(Box::new(Joining {
            replica: Replica::partial(self.version),
            buffer: Vec::new(),
            started: false,
            join_seq: self.seq,
            echo_at: None,
            evidence_at: None,
            tainted_at: None,
            genesis_sent: false,
        }));
    }

    /// Counts as a sign of a live history: a Genesis now waits `join_patience` for a state transfer.
    pub(super) fn saw_evidence(&mut self, now: u64) {
        if let Phase::Joining(j) = &mut self.phase {
            j.evidence_at = Some(now);
        }
    }

    /// Posts a new Join (a new incarnation), keeping what was buffered.
    fn rejoin_while_joining(&mut self) {
        self.incarnation += 1;
        self.post(Body::Join { need_state: true });
        let seq = self.seq;
        let Phase::Joining(j) = &mut self.phase else {
            unreachable!("joining")
        };
        j.join_seq = seq;
        j.echo_at = None;
        j.evidence_at = None;
        j.tainted_at = None;
        j.genesis_sent = false;
    }

    pub(super) fn joining_receive(&mut self, now: u64, decoded: Decoded) {
        if let Decoded::Foreign { version, kind, .. } = &decoded
            && *version < self.version
            && *kind == KIND_JOIN
        {
            // An older version's context joins: show it that this version runs here, so it stays out.
            self.post(Body::Alive);
        }
        let me = self.member_key();
        let limit = self.config.buffer_limit;
        let Phase::Joining(j) = &mut self.phase else {
            unreachable!("joining")
        };
        let own_join = matches!(&decoded, Decoded::Ours(m)
            if m.sender == me && m.seq == j.join_seq && matches!(m.body, Body::Join { .. }));
        if !j.started {
            if !own_join {
                return; // before this context's Join: the state transfer will include it
            }
            j.started = true;
        }
        if j.buffer.len() >= limit {
            self.start_joining(now);
            return;
        }
        // Buffered first and read back from the buffer: a copy would clone whole state transfers.
        j.buffer.push(decoded);
        let Joining {
            buffer,
            replica,
            echo_at,
            evidence_at,
            ..
        } = &mut **j;
        let decoded = buffer.last().expect("just buffered");
        if let Decoded::Ours(m) = decoded {
            if let Body::State(st) = &m.body
                && let Some(at) = buffer.iter().rposition(|d| id_of(d) == st.as_of)
            {
                self.install(now, at);
                return;
            }
            if !matches!(m.body, Body::Join { .. } | Body::Genesis) && m.sender.client != me.client
            {
                *evidence_at = Some(now);
            }
        }
        if own_join {
            *echo_at = Some(now);
        }
        replica.apply_decoded(decoded, &mut Vec::new());
        if replica.is_complete() {
            let last = id_of(decoded);
            self.become_synced(now, last);
            return;
        }
        if j.echo_at.is_some() && j.replica.member(&me).is_none_or(|m| m.tainted) {
            j.tainted_at.get_or_insert(now);
        }
    }

    /// Builds the replica from the State just received, whose as-of message is `buffer[at]`, and replays
    /// the messages after it (the State itself last). An inconsistent State makes this context rejoin.
    fn install(&mut self, now: u64, at: usize) {
        let Phase::Joining(j) = &mut self.phase else {
            unreachable!("joining")
        };
        let Some(Decoded::Ours(Message {
            body: Body::State(st),
            ..
        })) = j.buffer.last()
        else {
            unreachable!("the State was just buffered")
        };
        let Some(mut replica) = Replica::import(st, self.version) else {
            self.start_joining(now);
            return;
        };
        let mut ignored = Vec::new();
        for d in &j.buffer[at + 1..] {
            replica.apply_decoded(d, &mut ignored);
        }
        let last = id_of(j.buffer.last().expect("non-empty"));
        j.replica = replica;
        self.become_synced(now, last);
    }

    fn become_synced(&mut self, now: u64, last_applied: MessageId) {
        let Phase::Joining(j) = std::mem::replace(&mut self.phase, Phase::Detached) else {
            unreachable!("joining")
        };
        self.phase = Phase::Synced(Box::new(Synced::new(j.replica, last_applied)));
        self.check_membership(now);
    }

    /// Posts a Genesis when nobody answered in time, or rejoins after waiting in vain for a State.
    /// Returns the next deadline.
    pub(super) fn joining_policies(&mut self, now: u64) -> Option<u64> {
        let me = self.member_key();
        let config = &self.config;
        let Phase::Joining(j) = &self.phase else {
            unreachable!("joining")
        };
        let echo_at = j.echo_at?;
        let clean = j
            .replica
            .member(&me)
            .is_some_and(|m| m.pending && !m.tainted);
        if clean {
            if j.genesis_sent {
                return None; // its echo decides
            }
            // A live history may answer late: give it until its storage hint expires (bounded), and
            // longer after seeing its traffic.
            let hint = self.live_until.map_or(0, |u| {
                u.min(echo_at + config.freeze_grace + config.live_ttl)
            });
            let evidence = j.evidence_at.map_or(0, |e| e + config.join_patience);
            // Over the log, a member may hear the Join only at its next read, and the joiner the State
            // only at its own: a read behind a missing key (carried), or at a poke or poll. Allow one on
            // each side.
            let wait = config.join_wait
                + match config.transport {
                    Transport::Broadcast => 0,
                    Transport::Log(Wake::Carrier) => 2 * config.log_hole_wait,
                    Transport::Log(_) => 2 * config.log_poll,
                };
            let deadline = (echo_at + wait).max(hint).max(evidence);
            if now < deadline {
                return Some(deadline);
            }
            self.post(Body::Genesis);
            let Phase::Joining(j) = &mut self.phase else {
                unreachable!("joining")
            };
            j.genesis_sent = true;
            return None;
        }
        let deadline = j.tainted_at? + config.join_patience;
        if now < deadline {
            return Some(deadline);
        }
        self.rejoin_while_joining();
        None
    }
}
