//! The synced state: the context holds a complete replica and follows the order. It turns the
//! replica's outcomes for its own requests into effects, keeps (or regains) its membership, answers
//! joiners with state transfers, and watches the members that block its requests (docs/PROTOCOL.md §5
//! and §7). The rules that need the replica live here too: sending its requests once active (the lone
//! member deciding its own), answering queries, and making way.

use std::rc::Rc;

use crate::protocol::replica::Replica;
use crate::protocol::wire::{self, Body, Decoded, KIND_GENESIS, KIND_JOIN, MemberKey, MessageId};
use crate::sorted_vec::{SortedMap, SortedSet};

use super::config::{Config, Transport, Wake};
use super::core::{Core, RequestState, earliest};
use super::effect::Effect;

pub(super) struct Synced {
    replica: Replica,
    /// The last message applied (a state transfer is "as of" it).
    last_applied: MessageId,
    /// This context is a member (not pending) of the current history and may send requests.
    active: bool,
    /// When this member answers the pending joiners (its rank's turn).
    respond_at: Option<u64>,
    /// What this context did about each member's liveness, and whether it answered the member's join.
    liveness: SortedMap<MemberKey, Liveness>,
    /// The member list may have changed since `liveness` was last pruned.
    members_changed: bool,
    /// The check of its blockers (see [`Synced::check_blockers`]): what it last saw (this context's
    /// sequence number and the last applied message), when it ran, and the events with changes it has
    /// not looked at yet.
    checked: Option<(u64, MessageId)>,
    checked_at: u64,
    unchecked: usize,
    /// Sequence number of the last own message applied ahead of its echo (the lone member); the
    /// echoes of those messages only advance the position.
    applied_ahead: u64,
}

/// What this context did about one member's liveness; all empty is the same as no entry.
#[derive(Default)]
struct Liveness {
    /// This context posted the member's `Gone`.
    gone_posted: bool,
    /// This context asked its edge to watch the member's liveness database.
    watched: bool,
    /// This pending member was answered with a State (meaningless once it is not pending: a member
    /// never becomes pending again under the same key).
    answered: bool,
}

/// Where one of this context's own lock messages takes effect, as [`Synced::place_own`] decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OwnPlace {
    /// At its place in the order: it is queued and applied when it comes back, as every member's.
    InOrder,
    /// Here, and queued: applied now, and its echo only advances the position.
    HereAndSent,
    /// Here, and never sent: it takes no place in the order.
    HereUnsent,
}

/// Whether this context is still a member of the history it follows.
pub(super) enum Membership {
    Active {
        /// It became active with the message just applied: it may send what it queued.
        just_became: bool,
    },
    /// Found gone, or a new history began without it: it joins again (its held locks went with the
    /// membership, if it was an active member).
    Lost { was_active: bool },
}

/// What an idle member decided about making way (see [`Synced::make_way`]).
pub(super) enum MakeWay {
    /// It stays a member; `look_again` is when to decide again.
    Stay { look_again: Option<u64> },
    /// It leaves the protocol.
    Leave,
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
            checked_at: 0,
            unchecked: 0,
            applied_ahead: 0,
        }
    }

    /// The complete replica.
    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// This context is a member (not pending) of the history it follows, and may send requests.
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Sends one of this context's own lock messages (`Request`, `Release`, `Abort`, `Leave`), taking
    /// effect where [`Synced::place_own`] puts it.
    pub fn send_lock_message(&mut self, core: &mut Core, body: Body) {
        let place = self.place_own(core, &body);
        if place == OwnPlace::InOrder {
            core.send(body);
            return;
        }
        let message = if place == OwnPlace::HereUnsent {
            // No place in the order: the sequence number does not move.
            core.unsent_message(body)
        } else {
            core.next_message(body)
        };
        let mut outcomes = Vec::new();
        self.replica.apply_ahead(&message, &mut outcomes);
        if place == OwnPlace::HereUnsent {
            core.emit(Effect::Decided(message));
        } else {
            self.applied_ahead = message.seq;
            core.queue(message);
        }
        core.handle_outcomes(outcomes);
    }

    /// Sends the queued requests, in call order, once this context is an active member.
    pub fn send_queued(&mut self, core: &mut Core) {
        let queued = core.queued_in_call_order();
        for k in 0..queued.len() {
            if k == 0 && core.has_queries() {
                // Queries made before every queued request see none of them.
                core.settle_watermarks_before(Some(queued[0].0));
                self.answer_queries(core);
            }
            let next_queued = queued.get(k + 1).map(|q| q.0);
            self.send_request(core, queued[k].1, next_queued);
        }
    }

    /// Sends queued request `id` if this context is an active member, then gives a watermark to the
    /// queries it no longer precedes. `next_queued` is the call of the first request still queued
    /// after it (an active member sends every request as it is made, so a new request has none).
    pub fn send_request(&mut self, core: &mut Core, id: u64, next_queued: Option<u64>) {
        if !self.active {
            return;
        }
        let Some(body) = core.post_request(id) else {
            return;
        };
        self.send_lock_message(core, body);
        core.settle_watermarks_before(next_queued);
        if core.has_queries() {
            // A query whose earlier calls are all applied ahead is answered now, before the next
            // queued request is applied ahead too.
            self.answer_queries(core);
        }
    }

    /// Answers the queries whose context's own earlier messages are all applied.
    pub fn answer_queries(&self, core: &mut Core) {
        if !core.has_queries() || !self.active {
            return;
        }
        // Own messages applied ahead count as seen: the query is then answered at once, before a
        // later call of this context is applied ahead too (and would show in its snapshot).
        let echoed = core.echoed_seq().max(self.applied_ahead);
        core.answer_queries(echoed, || self.replica.snapshot());
    }

    /// An idle member that saw another member's request leaves the protocol, so that the busy one may
    /// become the lone member and decide alone (docs/PROTOCOL.md, "making way"); it joins again, with a
    /// state transfer, when it next needs a lock. Not while another member could not carry the history
    /// on without it, nor for `query_linger` after this context's last `query()`. Driven by messages
    /// only: an idle origin stays quiet. A member that must poll the log to hear anything
    /// (`Wake::Polls`) also leaves once idle for `query_linger`, so that it stops polling.
    /// `idle_since` is since when it has been idle while it polls.
    pub fn make_way(&self, core: &mut Core, idle_since: &mut Option<u64>, now: u64) -> MakeWay {
        let idle = core.is_idle();
        let Config {
            query_linger: linger,
            transport,
            ..
        } = *core.config();
        let queried_until = core.query_linger_end();
        let lingering = queried_until.is_some_and(|end| now < end);
        // Over the log without a carrier, an idle member hears a worker's Join only at its next poll,
        // and it polls only while busy: such a joiner waits for every member that lives, so an idle
        // document leaves too, as a worker does.
        let polls = matches!(transport, Transport::Log(Wake::Polls | Wake::Pokes));
        let since = if idle && polls {
            *idle_since.get_or_insert(now)
        } else {
            *idle_since = None;
            now
        };
        let linger_end = (since + linger).max(queried_until.unwrap_or(0));
        let saw_request = core.take_saw_request();
        if !idle || lingering {
            // A query answered after this (in the same event) leaves it idle: look again then.
            let look_again = (polls && !core.has_interest()).then_some(linger_end);
            return MakeWay::Stay { look_again };
        }
        let me = core.member_key();
        let mut others = false;
        let mut pending = false;
        if self.active {
            for (k, m) in self.replica.members() {
                others |= *k != me && !m.state.pending;
                pending |= m.state.pending;
            }
        }
        if saw_request && others {
            return MakeWay::Leave;
        }
        if polls && !pending {
            if now < linger_end {
                return MakeWay::Stay {
                    look_again: Some(linger_end),
                };
            }
            return MakeWay::Leave;
        }
        MakeWay::Stay { look_again: None }
    }

    /// The next message of the order. Outcomes for this context's requests become effects, and an
    /// older version's `Join` is answered. The caller checks the membership after.
    pub fn receive(&mut self, core: &mut Core, decoded: Decoded) {
        let me = core.member_key();
        let mut outcomes = Vec::new();
        let mut beacon = false;
        match &decoded {
            Decoded::Ours(m) => {
                // A message of sequence number 0 is never an echo of this context's own.
                if m.sender.client == me.client && m.seq != 0 && m.seq <= self.applied_ahead {
                    self.replica.count_echo();
                } else {
                    self.replica.apply(m, &mut outcomes);
                }
                if m.seq != 0 {
                    // Messages of sequence number 0 share ids: a state transfer is "as of" the last
                    // message with its own.
                    self.last_applied = m.id();
                }
                self.members_changed |= matches!(
                    m.body,
                    Body::Join { .. }
                        | Body::Genesis
                        | Body::State(_)
                        | Body::Leave
                        | Body::Gone { .. }
                );
                // Another member's request reaching an idle context: it may make way. Messages arrive
                // in tasks, never between a release and the next request of a loop, so a busy context
                // is not idle here.
                if matches!(m.body, Body::Request { .. }) && m.sender.client != me.client {
                    core.saw_request();
                }
            }
            Decoded::Foreign { version, kind, id } => {
                self.replica
                    .apply_foreign(*version, *kind, id, &mut outcomes);
                self.members_changed = true;
                if *kind == KIND_GENESIS {
                    self.last_applied = id.clone();
                }
                beacon = *kind == KIND_JOIN && self.active;
            }
        }
        core.handle_outcomes(outcomes);
        if beacon {
            core.send(Body::Alive);
        }
    }

    /// Whether this context is the only member of its history, as its replica has it.
    pub fn is_sole_member(&self, core: &Core) -> bool {
        self.replica.is_sole_member(&core.member_key())
    }

    /// Where `body`, one of this context's own lock messages, takes effect: here, as it is sent, when
    /// this context is the lone member (docs/PROTOCOL.md §5, "the lone member"), and at its place in the
    /// order otherwise.
    ///
    /// The lone member applies its own `Request`, `Release` or `Abort` here, and its replica then holds
    /// what the order would hold with the message placed where it applied it (§6, claim 3), because:
    /// - it is the only member of its history, active, with nobody pending, so every message the order
    ///   can place before this one comes from a context that is not an active member: such a message
    ///   changes no lock, or starts a new history in which this decision is void and this context's
    ///   locks are reported reset;
    /// - its transport tells it every message within a hop (`Transport::prompt`), so no joiner's `Join`
    ///   (nor a `Genesis` after it) has gone unheard when it decides; a joiner becomes a member only
    ///   through a `State`, which this context sends after applying the message, and which carries it;
    /// - every message it queued before is applied already, so its own keep their order.
    ///
    /// It is never sent when every message this context posted has come back as well: a `State` it
    /// sent earlier (to a joiner that then left) is then placed before the decision it does not
    /// carry. Otherwise it is sent, and its echo only advances the position.
    fn place_own(&self, core: &Core, body: &Body) -> OwnPlace {
        let here = matches!(
            body,
            Body::Request { .. } | Body::Release { .. } | Body::Abort { .. }
        ) && core.config().transport.prompt()
            && self.active
            && core.echoed_seq().max(self.applied_ahead) == core.seq()
            && self.is_sole_member(core);
        match (here, core.all_echoed()) {
            (false, _) => OwnPlace::InOrder,
            (true, true) => OwnPlace::HereUnsent,
            (true, false) => OwnPlace::HereAndSent,
        }
    }

    /// After every applied message: is this incarnation still an active member? A member that lost its
    /// membership (evicted, or a new history began) joins afresh, with a state transfer: a replica it
    /// kept could lack what a lone member decided without sending it.
    pub fn membership(&mut self, core: &Core) -> Membership {
        if self
            .replica
            .member(&core.member_key())
            .is_some_and(|m| !m.state.pending)
        {
            let just_became = !self.active;
            self.active = true;
            return Membership::Active { just_became };
        }
        Membership::Lost {
            was_active: self.active,
        }
    }

    /// Answers pending joiners and checks the members that block this context's requests. Returns the
    /// next deadline.
    pub fn policies(&mut self, core: &mut Core, now: u64) -> Option<u64> {
        let me = core.member_key();
        let stagger = core.config().state_stagger;
        // A state transfer must be as of a place in the order: not while own messages applied ahead
        // are still to come back (their echoes, which follow every joiner's Join, end this at once).
        let catching_up = self.applied_ahead > core.echoed_seq();
        if !self.active {
            return None;
        }
        let mut next: Option<u64> = None;

        // Joiners: one State answers every pending member up to now. Members rank by join position, so
        // the longest-standing one answers first and the others only if it stays silent.
        let mut unanswered = false;
        for (k, m) in self.replica.members() {
            if m.state.pending && *k != me {
                unanswered |= !self.liveness.entry(k.clone()).or_default().answered;
            }
        }
        if std::mem::take(&mut self.members_changed) {
            let replica = &self.replica;
            self.liveness.retain_keys(&|k| replica.member(k).is_some());
        }
        if unanswered && catching_up {
            // Answered once the echoes are back.
        } else if unanswered {
            // This member's rank among the active ones by (join position, key), 0 if it is none of
            // them.
            let mine = self
                .replica
                .member(&me)
                .filter(|m| !m.state.pending)
                .map(|m| (m.state.join_pos, &me));
            let mut rank: u64 = 0;
            for (k, m) in self.replica.members() {
                if !m.state.pending && mine.is_some_and(|p| (m.state.join_pos, k) < p) {
                    rank += 1;
                }
            }
            let at = *self.respond_at.get_or_insert(now + stagger * rank.min(3));
            if now >= at {
                let transfer = self.replica.export(self.last_applied.clone());
                for (k, m) in self.replica.members() {
                    if m.state.pending {
                        self.liveness.entry(k.clone()).or_default().answered = true;
                    }
                }
                self.respond_at = None;
                for body in wire::state_messages(transfer) {
                    core.send(body);
                }
            } else {
                next = Some(at);
            }
        } else {
            self.respond_at = None;
        }
        let liveness = self.check_blockers(core, now);
        earliest(next, liveness)
    }

    /// Evidence: the liveness database `watch` of `client` lost its last connection. If it is that of a
    /// member of the history, the context is gone: say so, once, for every replica to remove it.
    pub fn gone(&mut self, core: &mut Core, client: &str, watch: u64) {
        let Some(key) = self
            .replica
            .members()
            .find(|(k, m)| *k.client == *client && m.state.watch == watch && watch != 0)
            .map(|(k, _)| k.clone())
        else {
            return;
        };
        let l = self.liveness.entry(key).or_default();
        if !l.gone_posted {
            l.gone_posted = true;
            core.send(Body::Gone {
                client: client.into(),
                watch,
            });
        }
    }

    /// Liveness. Every blocker is watched (`Effect::Watch`), once, and is removed only on the evidence
    /// that comes of it ([`Synced::gone`]): however long it stays silent, it may be busy, throttled or
    /// suspended. A member that keeps no liveness database (`watch` 0: none of this version's contexts)
    /// is never removed but by its own `Leave`. Returns the next deadline.
    ///
    /// Finding the blockers costs a pass over this context's requests and the held locks, so it is not
    /// redone after every event of a bulk: only when the origin's state or this context's requests
    /// changed and either as many changes as a quarter of that pass piled up or [`CHECK_PACE`] went by
    /// since the last pass. Each event thus costs O(1) amortized, and a new blocker is watched at most
    /// [`CHECK_PACE`] late, which delays the evidence of its death by that much, never hastens it.
    fn check_blockers(&mut self, core: &mut Core, now: u64) -> Option<u64> {
        let me = core.member_key();
        let seq = core.seq();
        let size = core.request_count();
        let changed = self
            .checked
            .as_ref()
            .is_none_or(|(at, id)| *at != seq || *id != self.last_applied);
        if changed {
            self.unchecked += 1;
        }
        let throttle_end = self.checked_at + CHECK_PACE;
        let run = changed
            && (self.checked.is_none()
                || now >= throttle_end
                || self.unchecked * 4 >= size + self.replica.held_count());
        if !run {
            return changed.then_some(throttle_end);
        }
        let mut waiting_for: SortedSet<Rc<str>> = SortedSet::new();
        let mut last: Option<&Rc<str>> = None;
        for r in core.requests() {
            // Bulks of one name are common: skip the set lookup for a repeat.
            if r.state == RequestState::Posted && last.is_none_or(|l| **l != *r.name) {
                waiting_for.insert(r.name.clone());
                last = Some(&r.name);
            }
        }
        let blockers = self.replica.blockers_of(&me, &waiting_for);
        // The longest-standing member watches every other one, so that one gone while nobody waits for
        // it leaves the history too (and a lone survivor decides alone again).
        let first = self.active && self.replica.is_first_member(&me);
        for (k, m) in self.replica.members() {
            if *k == me || m.state.watch == 0 || !(first || blockers.contains(k)) {
                continue;
            }
            let l = self.liveness.entry(k.clone()).or_default();
            if !l.watched {
                l.watched = true;
                core.emit(Effect::Watch {
                    client: k.client.clone(),
                    watch: m.state.watch,
                });
            }
        }
        self.checked_at = now;
        self.unchecked = 0;
        self.checked = Some((core.seq(), self.last_applied.clone()));
        None
    }
}

/// How long a change may wait before [`Synced::check_blockers`] looks at it, in ms.
const CHECK_PACE: u64 = 37;
