//! The synced phase: the context holds a complete replica and follows the channel. It turns outcomes
//! for its own requests into Engine effects, keeps (or regains) its membership, answers joiners with
//! state transfers, answers pings, and checks the liveness of the members that block its requests.

use std::rc::Rc;

use crate::sorted_vec::{SortedMap, SortedSet};

use super::node::{Config, Effect, LossReason, Node, Phase, RequestState, earliest};
use super::replica::{Outcome, Replica};
use super::wire::{Body, Decoded, KIND_GENESIS, KIND_JOIN, MemberKey, Message, MessageId};

pub(super) struct Synced {
    pub replica: Replica,
    /// The last message applied (a state transfer is "as of" it).
    pub last_applied: MessageId,
    /// This context is a member (not pending) of the current history and may send requests.
    pub active: bool,
    respond_at: Option<u64>,
    /// What this context knows of each member's liveness, and whether it answered the member's join
    /// (one map, where six maps and sets each brought their own search, insert and prune code into the
    /// wasm).
    liveness: SortedMap<MemberKey, Liveness>,
    /// The member list may have changed since the per-member maps above were last pruned.
    members_changed: bool,
    /// The liveness check (see [`Node::check_blockers`]): what it last saw (this context's sequence
    /// number and the last applied message), when it ran, the earliest deadline it found, and the
    /// events with changes it has not looked at yet.
    checked: Option<(u64, MessageId)>,
    /// Sequence number of the last own message applied ahead of its echo (the lone member's fast
    /// path); the echoes of those messages only advance the position.
    pub applied_ahead: u64,
    checked_at: u64,
    liveness_at: Option<u64>,
    unchecked: usize,
}

/// One member's liveness as this context sees it; all empty is the same as no entry.
#[derive(Default)]
struct Liveness {
    /// When a message of the member was last applied here.
    last_heard: Option<u64>,
    /// When the ping the member left unanswered was applied here (the wait before evicting starts then).
    silent_since: Option<(MessageId, u64)>,
    /// When a ping of the member (by anyone) was last applied: one pinger is enough.
    last_ping: Option<u64>,
    /// A ping or an eviction of the member that this context posted has not taken effect yet.
    ping_posted: bool,
    evict_posted: bool,
    /// This pending member was answered with a State (meaningless once it is not pending: a member
    /// never becomes pending again under the same key).
    answered: bool,
}

impl Synced {
    pub fn new(replica: Replica, last_applied: MessageId) -> Self {
        Synced {
            replica,
            last_applied,
            active: false,
            respond_at: None,
            liveness: SortedMap::new(),
            members_changed: false,
            checked: None,
            applied_ahead: 0,
            checked_at: 0,
            liveness_at: None,
            unchecked: 0,
        }
    }
}

/// The messages a lone member may apply before (or instead of) their place on the channel: its own lock
/// requests, releases and aborts (docs/PROTOCOL.md, "the lone member").
fn decided_by_its_sender(body: &Body) -> bool {
    matches!(
        body,
        Body::Request { .. } | Body::Release { .. } | Body::Abort { .. }
    )
}

fn synced(phase: &mut Phase) -> &mut Synced {
    match phase {
        Phase::Synced(s) => s,
        _ => unreachable!("synced"),
    }
}

impl Node {
    pub(super) fn synced_receive(&mut self, now: u64, decoded: Decoded) {
        let me = self.member_key();
        let echoed_all = self.echoed_seq == self.seq;
        let s = synced(&mut self.phase);
        let mut outcomes = Vec::new();
        let mut answer_ping = false;
        let mut beacon = false;
        let mut wake = None;
        let mut saw_request = false;
        let idle = self.requests.is_empty() && self.queries.is_empty();
        match &decoded {
            Decoded::Ours(m) => {
                let sender = s.liveness.entry(m.sender.clone()).or_default();
                sender.last_heard = Some(now);
                sender.silent_since = None;
                sender.ping_posted = false;
                sender.evict_posted = false;
                let was_silent = match &m.body {
                    Body::Ping { target } => s.replica.member(target).map(|t| t.silent.is_some()),
                    _ => None,
                };
                // A deputy's Vouch (sequence number 0) is never an echo of this context's own message.
                if m.sender.client == me.client && m.seq != 0 && m.seq <= s.applied_ahead {
                    s.replica.count_echo();
                } else {
                    s.replica.apply(m, &mut outcomes);
                }
                if m.seq != 0 {
                    // Messages of sequence number 0 share ids: a state transfer is "as of" the last
                    // message with its own.
                    s.last_applied = m.id();
                }
                s.members_changed |= matches!(
                    m.body,
                    Body::Join { .. }
                        | Body::Genesis
                        | Body::State(_)
                        | Body::Leave
                        | Body::Evict { .. }
                );
                // Another member's request reaching an idle context: it may make way (see
                // `Node::make_way`). Messages arrive in tasks, never between a release and the next
                // request of a loop, so a busy context is not idle here.
                if matches!(m.body, Body::Request { .. }) && m.sender.client != me.client {
                    saw_request = idle;
                }
                if let Body::Ping { target } = &m.body {
                    let silenced = was_silent == Some(false)
                        && s.replica.member(target).is_some_and(|t| t.silent.is_some());
                    let pinged = s.liveness.entry(target.clone()).or_default();
                    pinged.ping_posted = false;
                    pinged.last_ping = Some(now);
                    if silenced {
                        pinged.silent_since = Some((m.id(), now));
                    }
                    answer_ping = *target == me && echoed_all && s.active;
                    if m.sender == me || (silenced && !idle && *target != me) {
                        // A ping has its place: the pinged member's deputy may answer now (an answer
                        // placed before the ping would answer nothing). Woken by the pinger, and by
                        // every busy context that may evict the member on this silence: the pinger may
                        // crash or stall before it applies its ping. The vouch names the ping the member
                        // is silent on, which may be another's (a vouch for a later ping ends nothing).
                        wake =
                            s.replica
                                .member(target)
                                .and_then(|t| t.silent.clone())
                                .map(|ping| Message {
                                    sender: target.clone(),
                                    seq: 0,
                                    body: Body::Vouch { ping },
                                });
                    }
                }
            }
            Decoded::Foreign { version, kind, id } => {
                s.replica.apply_foreign(*version, *kind, id, &mut outcomes);
                s.members_changed = true;
                if *kind == KIND_GENESIS {
                    s.last_applied = id.clone();
                }
                beacon = *kind == KIND_JOIN && s.active;
            }
        }
        self.handle_outcomes(&me, outcomes);
        self.saw_request |= saw_request;
        if let Some(vouch) = wake {
            self.emit(Effect::WakeDeputy(vouch));
        }
        if answer_ping || beacon {
            self.post(Body::Alive);
        }
        self.check_membership(now);
    }

    /// The lone member (docs/PROTOCOL.md, "the lone member"): while this context is the only member of
    /// the history, active, with nobody pending, its own `Request`, `Release` and `Abort` are applied
    /// as it sends them, without waiting for their echo, provided every message it posted before is
    /// applied already (so its messages keep their order). `None`: `body` waits for its echo as usual;
    /// `Some(unposted)`: applied now, and if every message it posted has come back, never posted at
    /// all (`unposted`: no other context can be told of it before a `State`, which this context sends
    /// after applying it); otherwise posted, and its echo only advances the position.
    pub(super) fn applies_alone(&self, body: &Body) -> Option<bool> {
        let Phase::Synced(s) = &self.phase else {
            return None;
        };
        let lone = decided_by_its_sender(body)
            && self.config.transport.prompt()
            && s.active
            && self.echoed_seq.max(s.applied_ahead) == self.seq
            && s.replica.is_sole_member(&self.member_key());
        lone.then_some(self.echoed_seq == self.seq)
    }

    /// Turns the outcomes of one applied message for this incarnation's requests into effects.
    pub(super) fn handle_outcomes(&mut self, me: &MemberKey, outcomes: Vec<Outcome>) {
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
                _ if member != me => continue,
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

    /// After every applied message: is this incarnation still an active member? If it lost its
    /// membership (evicted, or a new history began) its requests go back to the queue and it joins
    /// afresh, with a state transfer: a replica it kept could lack what a lone member decided without
    /// posting (docs/PROTOCOL.md, "the lone member"). Once active it sends what is queued.
    pub(super) fn check_membership(&mut self, now: u64) {
        let me = self.member_key();
        let s = synced(&mut self.phase);
        if s.replica.member(&me).is_some_and(|m| !m.pending) {
            if !s.active {
                s.active = true;
                self.post_queued();
            }
            return;
        }
        if s.active {
            // Locks whose revocation the replica reported are gone already; any other held lock went
            // with the membership.
            self.lose_membership(LossReason::Evicted);
        }
        self.start_joining(now);
        // The history was alive a moment ago: give its members `join_patience` to answer.
        self.saw_evidence(now);
    }

    /// Answers pending joiners and checks the members that block this context's requests. Returns the
    /// next deadline.
    pub(super) fn synced_policies(&mut self, now: u64) -> Option<u64> {
        let me = self.member_key();
        let stagger = self.config.state_stagger;
        let echoed = self.echoed_seq;
        let s = synced(&mut self.phase);
        // A state transfer must be as of a place in the sequence: not while own messages applied ahead
        // are still to come back (their echoes, which follow every joiner's Join, end this at once).
        let catching_up = s.applied_ahead > echoed;
        if !s.active {
            return None;
        }
        let mut next: Option<u64> = None;

        // Joiners: one State answers every pending member up to now. Members rank by join position, so
        // the longest-standing one answers first and the others only if it stays silent.
        let mut unanswered = false;
        for (k, m) in s.replica.members() {
            if m.pending && *k != me {
                unanswered |= !s.liveness.entry(k.clone()).or_default().answered;
            }
        }
        if std::mem::take(&mut s.members_changed) {
            let replica = &s.replica;
            s.liveness.retain_keys(&|k| replica.member(k).is_some());
        }
        if unanswered && catching_up {
            // Answered once the echoes are back.
        } else if unanswered {
            // This member's rank among the active ones by (join position, key), 0 if it is none of
            // them: a count, where sorting them cost a sort instantiation of its own.
            let mine = s
                .replica
                .member(&me)
                .filter(|m| !m.pending)
                .map(|m| (m.join_pos, &me));
            let mut rank: u64 = 0;
            for (k, m) in s.replica.members() {
                if !m.pending && mine.is_some_and(|p| (m.join_pos, k) < p) {
                    rank += 1;
                }
            }
            let at = *s.respond_at.get_or_insert(now + stagger * rank.min(3));
            if now >= at {
                let transfer = s.replica.export(s.last_applied.clone());
                for (k, m) in s.replica.members() {
                    if m.pending {
                        s.liveness.entry(k.clone()).or_default().answered = true;
                    }
                }
                s.respond_at = None;
                self.post(Body::State(Box::new(transfer)));
            } else {
                next = Some(at);
            }
        } else {
            s.respond_at = None;
        }
        let liveness = self.check_blockers(now);
        earliest(next, liveness)
    }

    /// Liveness: pings a blocker silent for `ping_interval` and evicts it if the ping goes unanswered
    /// for `evict_after` (and its announced freeze, if any, is over). Returns the next deadline.
    ///
    /// Finding the blockers costs a pass over this context's requests and the held locks, so it is not
    /// redone after every event of a bulk: only when the origin's state or this context's requests
    /// changed and either as many changes as a quarter of that pass piled up or `ping_interval / 4` went by
    /// since the last pass (or a deadline it found is due). Each event thus costs O(1) amortized, and
    /// a new blocker is noticed at most `ping_interval / 4` late, which delays a ping, never hastens an
    /// eviction.
    fn check_blockers(&mut self, now: u64) -> Option<u64> {
        let me = self.member_key();
        let Config {
            ping_interval,
            evict_after,
            evict_after_deputy,
            ..
        } = self.config;
        let seq = self.seq;
        let size = self.requests.len();
        let s = synced(&mut self.phase);
        let changed = s
            .checked
            .as_ref()
            .is_none_or(|(at, id)| *at != seq || *id != s.last_applied);
        if changed {
            s.unchecked += 1;
        }
        let throttle_end = s.checked_at + ping_interval / 4;
        let run = s.liveness_at.is_some_and(|at| now >= at)
            || (changed
                && (s.checked.is_none()
                    || now >= throttle_end
                    || s.unchecked * 4 >= size + s.replica.held_count()));
        if !run {
            let pending = changed.then_some(throttle_end);
            return earliest(s.liveness_at, pending);
        }
        let mut next: Option<u64> = None;
        let mut waiting_for: SortedSet<Rc<str>> = SortedSet::new();
        let mut last: Option<&Rc<str>> = None;
        for r in self.requests.values() {
            // Bulks of one name are common: skip the set lookup for a repeat.
            if r.state == RequestState::Posted && last.is_none_or(|l| **l != *r.name) {
                waiting_for.insert(r.name.clone());
                last = Some(&r.name);
            }
        }
        let blockers = s.replica.blockers_of(&me, &waiting_for);
        for b in blockers.iter() {
            let s = synced(&mut self.phase);
            let Some(m) = s.replica.member(b) else {
                continue;
            };
            let l = s.liveness.entry(b.clone()).or_default();
            let due = if let Some(ping) = &m.silent {
                if l.evict_posted {
                    continue;
                }
                let since = match &l.silent_since {
                    Some((id, at)) if id == ping => *at,
                    _ => {
                        // Silent on a ping applied before this replica was built: the wait starts now.
                        l.silent_since = Some((ping.clone(), now));
                        now
                    }
                };
                let wait = if m.deputy {
                    evict_after_deputy
                } else {
                    evict_after
                };
                (since + wait).max(m.frozen_until.unwrap_or(0))
            } else {
                if l.ping_posted {
                    continue;
                }
                let heard = *l.last_heard.get_or_insert(now);
                heard.max(l.last_ping.unwrap_or(0)) + ping_interval
            };
            if now < due {
                next = earliest(next, Some(due));
                continue;
            }
            let body = if let Some(ping) = m.silent.clone() {
                l.evict_posted = true;
                Body::Evict {
                    target: b.clone(),
                    ping: Box::new(ping),
                    ts: now,
                }
            } else {
                l.ping_posted = true;
                Body::Ping { target: b.clone() }
            };
            self.post(body);
        }
        let s = synced(&mut self.phase);
        s.liveness_at = next;
        s.checked_at = now;
        s.unchecked = 0;
        s.checked = Some((self.seq, s.last_applied.clone()));
        next
    }
}
