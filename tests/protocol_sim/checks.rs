//! The invariants the simulation checks.
//!
//! - At every step: no two conflicting locks that contexts believe they hold (alive or frozen ones) are
//!   both still held in the origin's history (the observer's replica); a belief that is no longer held
//!   there was taken by a steal, an eviction, a reset or a retirement, and its context must report it
//!   as stolen once it applies the message that took it.
//! - Each context's effects match the observer: after a context applies log message `idx`, it has
//!   reported every grant, "not available" and revocation the observer decided for it up to `idx`, and
//!   nothing the observer did not decide.
//! - Stolen reasons are justified (a steal on that name; never an eviction: a context that runs,
//!   however busy, stalled or frozen, is never found gone; a reset only by an older version's history
//!   or a loss of messages the reset context met itself, never by another context's crash or loss;
//!   retirement only with a newer version around; hidden only inside pagehide).
//! - A query answers with what its context holds and waits for.
//! - At the end (everything resumed, time passed): every request was settled, every context is quiet,
//!   every live context's query equals the observer's snapshot, and a lock stranded by a crashed
//!   context goes to a new requester.

use std::collections::BTreeMap;
use std::rc::Rc;

use weblocks::protocol::wire::{self, Decoded, MemberKey};
use weblocks::protocol::{LossReason, Transport, Wake};
use weblocks::scheduler::{LockMode, LockOptions, Snapshot};

use super::world::{Action, Admission, Delivery, Expect, ReqRecord, ReqState, Status, World};

impl World {
    pub(crate) fn on_granted(&mut self, i: usize, id: u64) {
        let now = self.now;
        let inc = self.contexts[i].participant.member_key().incarnation;
        let Some(r) = self.contexts[i].requests.get_mut(&id) else {
            return self.violation(format!("ctx{i}: grant of unknown #{id}"));
        };
        if r.state != ReqState::Pending {
            let state = r.state;
            return self.violation(format!("ctx{i}: grant of #{id} in state {state:?}"));
        }
        r.state = ReqState::Held;
        r.held_as = Some(inc);
        r.granted_at = Some(now);
        let hold = r.hold;
        self.note_trace(|| format!("ctx{i} GRANTED #{id}"));
        self.beliefs.insert((i, id));
        self.dirty = true;
        let due = self.contexts[i].posted_seq;
        self.unconfirmed.push((i, id, Expect::Granted, due));
        self.bump("grants");
        self.schedule_release(i, id, hold);
    }

    pub(crate) fn on_not_available(&mut self, i: usize, id: u64) {
        let Some(r) = self.contexts[i].requests.get_mut(&id) else {
            return self.violation(format!("ctx{i}: not-available of unknown #{id}"));
        };
        if r.state != ReqState::Pending || !r.options.if_available {
            let state = r.state;
            return self.violation(format!("ctx{i}: not-available of #{id} in state {state:?}"));
        }
        r.state = ReqState::NotAvailable;
        let (name, mode, never_sent) = (r.name.clone(), r.options.mode, r.posted_as.is_none());
        self.bump("not available");
        self.note_trace(|| format!("ctx{i} NOT AVAILABLE #{id}"));
        if self.contexts[i].retired {
            return;
        }
        if never_sent {
            // Decided without the channel: only right while this context holds a lock the request
            // conflicts with (see docs/PROTOCOL.md, "local misses").
            let conflicting = self.contexts[i].requests.values().any(|h| {
                h.state == ReqState::Held
                    && h.name == name
                    && (h.options.mode == LockMode::Exclusive || mode == LockMode::Exclusive)
            });
            if !conflicting {
                self.violation(format!(
                    "ctx{i}: #{id} on {name} not available without being sent, and nothing here conflicts"
                ));
            }
            self.bump("local misses");
            return;
        }
        let due = self.contexts[i].posted_seq;
        self.unconfirmed.push((i, id, Expect::NotAvailable, due));
    }

    pub(crate) fn on_stolen(&mut self, i: usize, id: u64, reason: LossReason) {
        let Some(r) = self.contexts[i].requests.get_mut(&id) else {
            return self.violation(format!("ctx{i}: stolen unknown #{id}"));
        };
        if r.state != ReqState::Held {
            let state = r.state;
            return self.violation(format!("ctx{i}: stolen #{id} in state {state:?}"));
        }
        r.state = ReqState::Stolen(reason);
        let name = r.name.clone();
        self.beliefs.remove(&(i, id));
        self.note_trace(|| format!("ctx{i} STOLEN #{id} ({reason:?})"));
        let justified = match reason {
            LossReason::Stolen => self.contexts.iter().any(|n| {
                n.requests
                    .values()
                    .any(|r| r.options.steal && r.name == name)
            }),
            // Only a context that is gone loses its membership to the others: one that still runs
            // (busy, stalled, frozen) never does, unless the browser took its storage while it ran
            // (`Fault::StorageLost`: A5 broken for this context alone).
            LossReason::Evicted => self.storage_taken(i),
            // A context that runs is reset only by an older version's context that started its own
            // history (its Genesis is in the sequence), or by a loss of messages that this context
            // met itself since it last joined (a gap of its transport, an append of its own that
            // aborted, a read that failed, its connection closed, the log cleared, an entry its edge
            // dropped: it steps out). Nothing that happened to another context is a cause: a crash,
            // a close, another's gap. With evidence, a joiner starts a history only once every member
            // its census lists is gone, and this context is a member that runs.
            LossReason::Reset => {
                let v = self.contexts[i].participant.version();
                self.met_loss.contains_key(&i)
                    || self.log.iter().any(|m| {
                        matches!(wire::decode_versioned(m, v),
                            Some(Decoded::Foreign { version, kind, .. })
                                if version < v && kind == wire::KIND_GENESIS)
                    })
            }
            // A newer version spoke: on the channel, or in a farewell relayed for it.
            LossReason::Retired => {
                let v = self.contexts[i].participant.version();
                self.log.iter().chain(&self.relayed).any(|m| {
                    matches!(wire::decode_versioned(m, v),
                        Some(Decoded::Foreign { version, .. }) if version > v)
                })
            }
            LossReason::Hidden => self.hiding == Some(i),
        };
        if !justified {
            self.violation(format!(
                "ctx{i}: #{id} on {name} stolen without cause ({reason:?})"
            ));
        }
        self.bump(match reason {
            LossReason::Stolen => "stolen:steal",
            LossReason::Evicted => "stolen:evicted",
            LossReason::Reset => "stolen:reset",
            LossReason::Retired => "stolen:retired",
            LossReason::Hidden => "stolen:hidden",
        });
        if reason != LossReason::Hidden {
            let due = self.contexts[i].posted_seq;
            self.unconfirmed.push((i, id, Expect::Revoked, due));
        }
    }

    /// A query's answer must show exactly the locks its context holds, every request it made before the
    /// query and still waits for, and no request it does not wait for (spec: a query sees the requests
    /// made before it in the same context).
    pub(crate) fn on_snapshot(&mut self, i: usize, query: u64, snapshot: Snapshot) {
        let client = format!("ctx{i}");
        let cut = self.contexts[i].query_cut.get(&query).copied().unwrap_or(0);
        type Counts = BTreeMap<(Rc<str>, bool), usize>;
        let count = |infos: &[weblocks::scheduler::LockInfo]| {
            let mut m: Counts = BTreeMap::new();
            for info in infos.iter().filter(|l| *l.client_id == *client) {
                *m.entry((info.name.clone(), info.mode == LockMode::Shared))
                    .or_default() += 1;
            }
            m
        };
        let (mut held, mut before, mut all, mut ended): (Counts, Counts, Counts, Counts) =
            Default::default();
        for (id, r) in &self.contexts[i].requests {
            let key = (r.name.clone(), r.options.mode == LockMode::Shared);
            match r.state {
                ReqState::Held => *held.entry(key).or_default() += 1,
                ReqState::Pending => {
                    if *id < cut {
                        *before.entry(key.clone()).or_default() += 1;
                    }
                    *all.entry(key).or_default() += 1;
                }
                ReqState::Released | ReqState::Stolen(_) => *ended.entry(key).or_default() += 1,
                // An abort after the query was asked may not show yet: as pending, or as held when the
                // origin granted the request before it applied the abort (which then releases it).
                ReqState::Aborted => {
                    *all.entry(key.clone()).or_default() += 1;
                    *ended.entry(key).or_default() += 1;
                }
                _ => {}
            }
        }
        let shown_held = count(&snapshot.held);
        let shown_pending = count(&snapshot.pending);
        let at_least = |want: &Counts, shown: &Counts| {
            want.iter()
                .all(|(k, n)| shown.get(k).copied().unwrap_or(0) >= *n)
        };
        let pending_ok = at_least(&before, &shown_pending)
            && shown_pending
                .iter()
                .all(|(k, n)| all.get(k).copied().unwrap_or(0) >= *n);
        // A lock released after the query was asked may still show (the query saw an earlier moment).
        let held_ok = at_least(&held, &shown_held)
            && shown_held.iter().all(|(k, n)| {
                held.get(k).copied().unwrap_or(0) + ended.get(k).copied().unwrap_or(0) >= *n
            });
        if !held_ok || !pending_ok {
            self.violation(format!(
                "ctx{i}: query shows held {shown_held:?} pending {shown_pending:?}, the context holds \
                 {held:?} and waits for {before:?} (asked before the query) of {all:?}"
            ));
        }
        self.contexts[i].queries_answered.push(snapshot);
    }

    /// Context `i` applied the message for which the observer decided `expect` for its request `id`
    /// (of incarnation `inc`): log message `at`, or a message it decided alone (`None`). It must have
    /// reported it.
    pub(crate) fn confirm(
        &mut self,
        i: usize,
        inc: u32,
        id: u64,
        expect: Expect,
        at: Option<usize>,
    ) {
        let Some(r) = self.contexts[i].requests.get(&id) else {
            return self.violation(format!(
                "ctx{i}: observer decided {expect:?} for unknown #{id}"
            ));
        };
        if r.posted_as != Some(inc) && r.held_as != Some(inc) {
            return; // about an earlier sending of this request, before a rejoin
        }
        let participant = &self.contexts[i].participant;
        let left = inc < participant.member_key().incarnation || participant.replica().is_none();
        if left && r.state == ReqState::Pending {
            // Sent just before the context left (bfcache) and delivered to its new channel: the
            // world appends a message after its sending delay, so a channel opened meanwhile
            // gets it (a browser's would not). Or the context stepped out and its next Join has not
            // gone yet (it waits for its liveness database). The request waits to be sent again.
            return;
        }
        let ok = match expect {
            Expect::Granted => r.granted_at.is_some() || r.state == ReqState::Aborted,
            Expect::NotAvailable => {
                matches!(r.state, ReqState::NotAvailable | ReqState::Aborted)
            }
            Expect::Revoked => matches!(
                r.state,
                ReqState::Stolen(_) | ReqState::Released | ReqState::Aborted
            ),
        };
        if !ok {
            let state = r.state;
            let at = at.map_or("a message it decided alone".into(), |at| {
                format!("log {at}")
            });
            self.violation(format!(
                "ctx{i}: observer decided {expect:?} for #{id} (incarnation {inc}) at {at}, \
                 the context applied it and reports {state:?}"
            ));
        }
        self.unconfirmed
            .retain(|u| (u.0, u.1, u.2) != (i, id, expect));
    }

    /// After context `i` applied log message `idx`: it reported exactly what the observer decided.
    pub(crate) fn check_expected(&mut self, i: usize, idx: usize) {
        while let Some(&(at, inc, id, expect)) = self.contexts[i].expected.front() {
            if at > idx {
                break;
            }
            self.contexts[i].expected.pop_front();
            self.confirm(i, inc, id, expect, Some(at));
        }
        // Due: reported before this context applied back every message it had posted by then.
        let applied = self.contexts[i].applied_seq;
        let (left, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.unconfirmed)
            .into_iter()
            .partition(|u| u.0 == i && u.3 <= applied);
        self.unconfirmed = kept;
        for (_, id, expect, _) in left {
            // A lone member's decision applied ahead is void if a new history began (or a newer
            // version took over) before its message took its place: the context was no longer a
            // member there, and learns so (its locks reported reset or retired) when it applies it.
            let n = &self.contexts[i];
            let voided = n.requests.get(&id).is_some_and(|r| {
                let incarnation = r.held_as.or(r.posted_as).expect("sent or granted");
                let member = MemberKey {
                    client: n.participant.client_id().into(),
                    incarnation,
                };
                self.observer_of(n.participant.version())
                    .member(&member)
                    .is_none_or(|m| m.state.pending)
            });
            if !voided {
                self.violation(format!(
                    "ctx{i}: reported {expect:?} for #{id} that the observer did not decide"
                ));
            }
        }
    }

    fn effective(&self, i: usize, id: u64, r: &ReqRecord) -> bool {
        let n = &self.contexts[i];
        let member = MemberKey {
            client: n.participant.client_id().into(),
            incarnation: r.held_as.expect("held"),
        };
        let observer = self.observer_of(n.participant.version());
        // A grant applied ahead by a lone member holds from the moment it is reported, as long as
        // the member is one in the observer's history.
        observer.holds(&member, id)
            || (self
                .unconfirmed
                .iter()
                .any(|u| (u.0, u.1, u.2) == (i, id, Expect::Granted))
                && observer.member(&member).is_some_and(|m| !m.state.pending))
    }

    /// Mutual exclusion over beliefs, at every step; and notes the beliefs the origin no longer
    /// gives (see [`World::check_stale_beliefs`]).
    pub(crate) fn check_step(&mut self) {
        let mut by_name: BTreeMap<Rc<str>, Vec<(usize, u64, LockMode)>> = BTreeMap::new();
        let mut stale = Vec::new();
        for &(i, id) in &self.beliefs {
            let n = &self.contexts[i];
            if !n.status.alive() {
                continue;
            }
            let r = &n.requests[&id];
            if r.state == ReqState::Held && !self.effective(i, id, r) {
                stale.push((i, id));
            }
            // A lock its context released, and whose name it has since been granted again ahead of
            // the log (a lone member), is over for that context: its Release precedes the new grant.
            let superseded = r.state == ReqState::Released
                && self.unconfirmed.iter().any(|u| {
                    u.0 == i
                        && u.2 == Expect::Granted
                        && n.requests.get(&u.1).is_some_and(|g| g.name == r.name)
                });
            // A lock of a context whose storage the browser took while it ran: the others found it
            // gone and may grant the lock while its callback still runs (docs/PROTOCOL.md §7,
            // "storage lost"). Forgiven for that context alone; it is still told within the bound
            // (`check_stale_beliefs`), and it refuses from then on (`refuse_from_now` drops its
            // beliefs, and it is granted nothing more).
            let taken = self.storage_taken(i);
            if !superseded && !taken && self.effective(i, id, r) {
                by_name
                    .entry(r.name.clone())
                    .or_default()
                    .push((i, id, r.options.mode));
            }
        }
        let now = self.now;
        self.stale.retain(|k, _| stale.contains(k));
        for k in stale {
            self.stale.entry(k).or_insert(now);
        }
        for (name, holders) in by_name {
            let exclusive = holders
                .iter()
                .filter(|h| h.2 == LockMode::Exclusive)
                .count();
            if exclusive > 1 || (exclusive == 1 && holders.len() > 1) {
                // Whether every one of them is still in its callback (not released yet): what a
                // page's read-modify-write would see as an overlap.
                let in_callbacks = holders
                    .iter()
                    .all(|&(i, id, _)| self.contexts[i].requests[&id].state == ReqState::Held);
                let what = if in_callbacks {
                    "held at once"
                } else {
                    "granted before the origin applied a release"
                };
                self.violation(format!(
                    "mutual exclusion broken on {name:?}: {holders:?} {what}"
                ));
            }
        }
    }

    /// A running context learns within a bound that its lock was taken: it applies the message that
    /// took it (a steal, an eviction, a reset, a retirement) as soon as that message reaches it, and
    /// reports the lock stolen. The bound counts only the time it runs: a stalled, frozen or cut-off
    /// context (a `Fault::Gap`) learns when it runs again. It allows for the transport's delays, a read
    /// of the log behind a missing key or a poll (each a timer, late by up to the context's lateness),
    /// and storage events that wake a reader.
    pub(crate) fn check_stale_beliefs(&mut self) {
        let now = self.now;
        let c = &self.env.config;
        // A sender-FIFO channel spreads each receiver's deliveries over four more delivery delays.
        let spread = match self.env.delivery {
            Delivery::SenderFifo => 4 * self.env.delivery_max,
            Delivery::TotalOrder | Delivery::OwnProcessFirst => 0,
        };
        let transport = 2 * (self.env.send_max + self.env.delivery_max)
            + spread
            + self.env.storage_lag_max
            + 10;
        let reads = 2 * c.log_poll.max(c.log_hole_wait);
        let carried = c.transport == Transport::Log(Wake::Carrier);
        let mut late = Vec::new();
        self.stale.retain(|&(i, id), since| {
            let n = &self.contexts[i];
            let r = &n.requests[&id];
            if !n.status.alive() || r.state != ReqState::Held {
                return false;
            }
            // Over the carried log, an entry whose writer has not posted its frame (it has not run
            // since, or died) shows only when a later one comes: a context behind it is not counted
            // (any context that could take its lock posts first, and that frame shows the hole).
            let unheard = carried
                && n.participant
                    .log_position()
                    .is_some_and(|p| self.unposted.range(p + 1..).next().is_some());
            if unheard {
                // The clock starts when the frame is posted.
                *since = now;
                return true;
            }
            if n.status != Status::Running {
                return true;
            }
            // The clock starts again where the context last could not run.
            let from = n
                .unresponsive
                .iter()
                .map(|&(_, e, _)| e)
                .filter(|&e| e <= now)
                .fold(*since, u64::max)
                .max(n.gap_until.min(now));
            let bound = transport + reads + 2 * n.timer_lateness;
            if now - from > bound {
                late.push(format!(
                    "ctx{i} still believes it holds #{id} on {:?}, stale since t={since} \
                     ({} ms of running since, bound {bound} ms)",
                    r.name,
                    now - from
                ));
                return false;
            }
            true
        });
        for v in late {
            self.violation(v);
        }
    }

    fn note_trace(&mut self, f: impl FnOnce() -> String) {
        if let Some(t) = &mut self.trace {
            t.push(format!("{:>7} {}", self.now, f()));
        }
    }

    /// Once everything has settled: requests settled, contexts quiet.
    pub(crate) fn check_settled(&mut self) {
        for i in 0..self.contexts.len() {
            let n = &self.contexts[i];
            if n.status != Status::Running || n.admission != Admission::Started {
                continue;
            }
            for (id, r) in &n.requests {
                let open = matches!(r.state, ReqState::Pending | ReqState::Held);
                if open && !(n.retired && r.state == ReqState::Pending) {
                    let v = format!(
                        "ctx{i}: request #{id} on {} never settled ({:?})",
                        r.name, r.state
                    );
                    self.violations.push(v);
                    return;
                }
            }
            if !n.retired && !n.participant.is_quiet() {
                let v = format!("ctx{i}: not quiet after settling");
                self.violations.push(v);
                return;
            }
        }
    }

    /// Every live context's query must equal the observer's snapshot (queue order per name; the
    /// order of names may differ after a state transfer, see Replica::import).
    pub(crate) fn check_queries_agree(&mut self) {
        for i in 0..self.contexts.len() {
            let n = &self.contexts[i];
            // A context that refuses answers no query since: its last answer came before.
            let refused = n.admission == Admission::Refused;
            if n.status != Status::Running || n.retired || refused || n.queries_answered.is_empty()
            {
                continue;
            }
            // A new history began after the query was asked (a joiner that found every member gone,
            // or a reader that missed entries of the log): the answer was the origin's state when it
            // was asked.
            if n.queried_in.as_ref() != Some(self.observer_of(n.participant.version()).history()) {
                continue;
            }
            let got = normalize(n.queries_answered.last().expect("answered"));
            let want = normalize(&self.observer_of(n.participant.version()).snapshot());
            if got != want {
                let v = format!("ctx{i}: final query {got:?} differs from the origin's {want:?}");
                self.violations.push(v);
                return;
            }
        }
    }

    /// Asks a live context for every name still held or requested by contexts that are gone. Returns
    /// the number of names asked for, or `None` when no context of the newest version is alive.
    pub(crate) fn probe_stranded(&mut self) -> Option<usize> {
        let version = self.observers.iter().map(|o| o.version).max()?;
        let prober = (0..self.contexts.len()).find(|&i| {
            self.contexts[i].status == Status::Running
                && self.contexts[i].admission == Admission::Started
                && !self.contexts[i].retired
                && self.contexts[i].participant.version() == version
        })?;
        let snapshot = self.observer_of(version).snapshot();
        let mut names: Vec<Rc<str>> = snapshot
            .held
            .iter()
            .chain(snapshot.pending.iter())
            .map(|l| l.name.clone())
            .collect();
        names.sort();
        names.dedup();
        for name in &names {
            let at = self.now;
            self.client_at(
                at,
                prober,
                Action::Request {
                    name: name.clone(),
                    options: LockOptions::default(),
                    hold: 0,
                    abort_after: None,
                },
            );
        }
        Some(names.len())
    }

    /// Every history is idle: nothing stranded. Only the newest version's history is probed; an older
    /// one ended when the newer version appeared (or will when it next speaks).
    pub(crate) fn check_origin_idle(&mut self) {
        let newest = self.observers.iter().map(|o| o.version).max().unwrap_or(0);
        for o in self.observers.iter().filter(|o| o.version == newest) {
            if !o.replica.is_idle() {
                let v = format!(
                    "v{} origin not idle at the end: {:?}",
                    o.version,
                    o.replica.snapshot()
                );
                self.violations.push(v);
                return;
            }
        }
    }
}

type Normal = (
    Vec<(Rc<str>, LockMode, Rc<str>)>,
    BTreeMap<Rc<str>, Vec<(LockMode, Rc<str>)>>,
);

fn normalize(s: &Snapshot) -> Normal {
    let held = s
        .held
        .iter()
        .map(|l| (l.name.clone(), l.mode, l.client_id.clone()))
        .collect();
    let mut pending: BTreeMap<Rc<str>, Vec<(LockMode, Rc<str>)>> = BTreeMap::new();
    for l in &s.pending {
        pending
            .entry(l.name.clone())
            .or_default()
            .push((l.mode, l.client_id.clone()));
    }
    (held, pending)
}
