//! The replicated lock state: what every context computes from the channel's one sequence of messages.
//!
//! Every context applies the same messages in the same order (the total-order assumption of
//! docs/PROTOCOL.md) to a `Replica`, so every complete replica holds the same state at the same position
//! of the sequence, and the owner of a request learns its grant from its own replica. Nothing here
//! reads a clock or a random number: every decision is a function of the messages alone.
//!
//! A replica is *complete* when it knows the whole state (it was built from a state transfer, or it saw
//! the genesis of the current history). A context that has just joined runs a *partial* replica: it
//! only knows the members that joined after it, which is enough to judge the validity of their
//! Genesis messages, and it learns the rest from a state transfer.

use std::rc::Rc;

use crate::scheduler::{
    Decision, LockManager, LockMode, LockOptions, LockRequest, RequestId, Snapshot,
};
use crate::sequence_map::SequenceMap;
use crate::sorted_vec::{SortedMap, SortedSet};

use super::wire::{
    Body, Decoded, KIND_GENESIS, LockRecord, MemberKey, MemberRecord, MemberState, Message,
    MessageId, StatePart, StateTransfer,
};

/// Why a held lock was taken from its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RevokeReason {
    /// Another request used `steal`.
    Stolen,
    /// The owner was found gone: its liveness database lost its last connection.
    Evicted,
    /// A new history began (a Genesis from a context that found no live one).
    Reset,
    /// A newer protocol version is running in the origin.
    Retired,
}

/// What happened to a member's request, as the result of applying one message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Granted {
        member: MemberKey,
        local_id: u64,
    },
    NotAvailable {
        member: MemberKey,
        local_id: u64,
    },
    Revoked {
        member: MemberKey,
        local_id: u64,
        reason: RevokeReason,
    },
}

/// A member of the current history.
#[derive(Clone, Debug)]
pub struct Member {
    /// Where it stands, as a state transfer carries it.
    pub state: MemberState,
    /// The member's own request ids → their ids in the lock manager ("gids"). Per member, so that a
    /// member's requests go with it, and a map of the same type as the scheduler's (one instantiation).
    gids: SequenceMap<u64, RequestId>,
}

impl Member {
    /// A member standing as `state`, with no requests yet.
    fn new(state: MemberState) -> Self {
        Member {
            state,
            gids: SequenceMap::new(),
        }
    }
}

/// One context's copy of the origin's lock state.
#[derive(Debug)]
pub struct Replica {
    version: u32,
    complete: bool,
    history: MessageId,
    /// Position of the last applied message in the current history (the Genesis is 0).
    pos: u64,
    next_gid: RequestId,
    members: SortedMap<MemberKey, Member>,
    manager: LockManager,
    /// Lock/request id in `manager` ("gid") → its member and the member's own id for it.
    owners: SequenceMap<RequestId, (MemberKey, u64)>,
}

impl Replica {
    fn empty(version: u32, complete: bool) -> Self {
        Replica {
            version,
            complete,
            history: MessageId::origin(),
            pos: 0,
            next_gid: 1,
            members: SortedMap::new(),
            manager: LockManager::new(),
            owners: SequenceMap::new(),
        }
    }

    /// The replica of a context that has just joined (it applies its own Join first).
    pub fn partial(version: u32) -> Self {
        Self::empty(version, false)
    }

    /// A complete replica of the channel before any message: the state an observer that sees the whole
    /// channel from its beginning starts from (used by tests).
    pub fn origin(version: u32) -> Self {
        Self::empty(version, true)
    }

    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// The protocol version whose messages this replica applies.
    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn history(&self) -> &MessageId {
        &self.history
    }

    pub fn pos(&self) -> u64 {
        self.pos
    }

    pub fn member(&self, key: &MemberKey) -> Option<&Member> {
        self.members.get(key)
    }

    pub fn members(&self) -> impl Iterator<Item = (&MemberKey, &Member)> {
        self.members.iter()
    }

    /// True when no lock is held and no request is pending in the origin.
    pub fn is_idle(&self) -> bool {
        self.manager.is_idle()
    }

    /// How many locks are held in the origin.
    pub fn held_count(&self) -> usize {
        self.manager.held_count()
    }

    /// Spec 4.5 over the whole origin.
    pub fn snapshot(&self) -> Snapshot {
        self.manager.snapshot_lock_state()
    }

    /// The lock manager's id for `member`'s request `local_id`, while it is known.
    fn gid(&self, member: &MemberKey, local_id: u64) -> Option<RequestId> {
        self.members.get(member)?.gids.get(&local_id).copied()
    }

    /// Whether `member`'s lock `local_id` is held.
    pub fn holds(&self, member: &MemberKey, local_id: u64) -> bool {
        self.gid(member, local_id)
            .is_some_and(|gid| self.manager.held_lock(gid).is_some())
    }

    /// Whether `member`'s request `local_id` is waiting in a queue.
    pub fn is_pending(&self, member: &MemberKey, local_id: u64) -> bool {
        self.gid(member, local_id)
            .is_some_and(|gid| self.manager.is_pending(gid))
    }

    /// Held locks as (member, local id, name, mode), in held-set order.
    pub fn held_locks(&self) -> Vec<(MemberKey, u64, Rc<str>, LockMode)> {
        self.manager
            .held_requests()
            .into_iter()
            .map(|r| {
                let (m, l) = &self.owners[&r.id];
                (m.clone(), *l, r.name.clone(), r.mode)
            })
            .collect()
    }

    /// The members that stand between `me` and the names it waits for: holders of those names and the
    /// owners of the first requests queued ahead of mine. These are the ones worth checking for
    /// liveness; a dead waiter further back is checked once it moves up.
    pub fn blockers_of(&self, me: &MemberKey, names: &SortedSet<Rc<str>>) -> SortedSet<MemberKey> {
        const AHEAD: usize = 2;
        let mut blockers = SortedSet::new();
        if names.is_empty() {
            return blockers;
        }
        for r in self.manager.held_requests() {
            let owner = &self.owners[&r.id].0;
            if names.contains(&r.name) && owner != me {
                blockers.insert(owner.clone());
            }
        }
        for name in names {
            for r in self.manager.queue(name).take(AHEAD) {
                let owner = &self.owners[&r.id].0;
                if owner == me {
                    break;
                }
                blockers.insert(owner.clone());
            }
        }
        blockers
    }

    /// Applies one message of our version. Outcomes for every member's requests are appended to `out`.
    /// A message of sequence number 0 (a farewell `Leave`) takes no position: all
    /// of a member's share one id, so none may be the "as of" of a state transfer (a joiner would find
    /// the wrong one), and a joiner that replays one its state already includes changes nothing (a
    /// `Leave` of a member already gone is void).
    pub fn apply(&mut self, msg: &Message, out: &mut Vec<Outcome>) {
        if msg.seq != 0 {
            self.pos += 1;
        }
        self.apply_ahead(msg, out);
    }

    /// Applies one of the owner's own messages before its place in the sequence is known (the lone
    /// member's fast path, docs/PROTOCOL.md): everything but the position, which
    /// [`Replica::count_echo`] advances when the message comes back.
    pub fn apply_ahead(&mut self, msg: &Message, out: &mut Vec<Outcome>) {
        let sender = &msg.sender;
        let active = self.members.get(sender).is_some_and(|m| !m.state.pending);
        match &msg.body {
            Body::Join { watch } => self.on_join(sender, *watch, out),
            Body::Genesis => self.on_genesis(msg, out),
            Body::State(st) => self.on_state(st),
            // Only the joiner that installs the State after it reads it.
            Body::StatePart(_) => {}
            Body::Leave => {
                if self.members.contains_key(sender) {
                    self.remove_member(sender, None, out);
                }
            }
            // The others count only from an active member (not a stale incarnation, nor one that
            // joined before a partial replica, nor one still pending).
            _ if !active => {}
            Body::Request { id, name, options } => {
                self.on_request(sender, *id, name, *options, out)
            }
            Body::Release { id } => self.on_release(sender, *id, out),
            Body::Abort { id } => self.on_abort(sender, *id, out),
            // Evidence, not a guess: the context's liveness database has no connection left, which the
            // storage backend allows only once that context closed it or is gone (docs/PROTOCOL.md §2,
            // A5). Valid for the membership that announced that very database.
            Body::Gone { client, watch } => {
                let gone = self
                    .members
                    .keys()
                    .find(|k| *k.client == **client)
                    .filter(|k| *watch != 0 && self.members[*k].state.watch == *watch)
                    .cloned();
                if let Some(target) = gone {
                    self.remove_member(&target, Some(RevokeReason::Evicted), out);
                }
            }
            Body::Alive => {}
        }
    }

    /// Applies one decoded message, of our version or another.
    pub fn apply_decoded(&mut self, decoded: &Decoded, out: &mut Vec<Outcome>) {
        match decoded {
            Decoded::Ours(m) => self.apply(m, out),
            Decoded::Foreign { version, kind, id } => self.apply_foreign(*version, *kind, id, out),
        }
    }

    /// A message applied ahead came back: it takes its place in the sequence.
    pub fn count_echo(&mut self) {
        self.pos += 1;
    }

    /// Whether `member` is the active member that joined first (the one that answers joiners first).
    pub fn is_first_member(&self, member: &MemberKey) -> bool {
        let Some(mine) = self.members.get(member).filter(|m| !m.state.pending) else {
            return false;
        };
        // Members are in key order: one of an equal join position and a smaller key comes first.
        self.members
            .iter()
            .all(|(k, m)| m.state.pending || (m.state.join_pos, k) >= (mine.state.join_pos, member))
    }

    /// Whether `member` is the one member of the history (none pending): no other context can order a
    /// lock message before one of its own without first starting a new history.
    pub fn is_sole_member(&self, member: &MemberKey) -> bool {
        self.members.len() == 1 && self.members.get(member).is_some_and(|m| !m.state.pending)
    }

    /// Applies a message of another protocol version, of which only the header could be read. A newer
    /// version ends the current history: every lock is revoked (the context running this replica
    /// retires: it grants nothing any more). A Genesis of an older version ends it too, since that
    /// version's contexts start their own history there (see docs/PROTOCOL.md, version skew).
    pub fn apply_foreign(
        &mut self,
        version: u32,
        kind: u32,
        id: &MessageId,
        out: &mut Vec<Outcome>,
    ) {
        if version > self.version {
            self.revoke_all(RevokeReason::Retired, out);
            self.start_history(id.clone(), SortedMap::new());
        } else if kind == KIND_GENESIS {
            self.revoke_all(RevokeReason::Reset, out);
            self.start_history(id.clone(), SortedMap::new());
        }
    }

    /// Every joiner is pending until a member's State admits it, even one that rejoins with a complete
    /// replica (it builds its replica from the State all the same). Were a rejoin
    /// active at once, a lone member could not know that nobody else may order a request before its
    /// own (the lone member's fast path, docs/PROTOCOL.md).
    fn on_join(&mut self, sender: &MemberKey, watch: u64, out: &mut Vec<Outcome>) {
        // A context is a member in one incarnation at most (every way in keeps it so: this one, a
        // Genesis keeping members, an import refusing two).
        let mut same_client = None;
        for k in self.members.keys() {
            if k.client == sender.client {
                same_client = Some(k.clone());
            }
        }
        if let Some(k) = same_client {
            self.remove_member(&k, None, out);
        }
        self.members.insert(
            sender.clone(),
            Member::new(MemberState {
                join_pos: self.pos,
                pending: true,
                watch,
                ..MemberState::default()
            }),
        );
    }

    /// A Genesis is valid when its sender is a pending member that no Genesis or State has followed
    /// since its Join: then nobody answered it, and it starts a new, empty history. The members of the
    /// new history are its sender and the contexts that joined after it (still pending: they did not
    /// see the sender's Join, so they could not judge its Genesis). Everyone else rejoins.
    fn on_genesis(&mut self, msg: &Message, out: &mut Vec<Outcome>) {
        let valid = self
            .members
            .get(&msg.sender)
            .filter(|m| m.state.pending && !m.state.tainted)
            .map(|m| (m.state.join_pos, m.state.watch));
        let Some((sender_join, sender_watch)) = valid else {
            self.taint_pending();
            return;
        };
        self.revoke_all(RevokeReason::Reset, out);
        let mut members = SortedMap::new();
        for (k, m) in &self.members {
            if m.state.pending && m.state.join_pos > sender_join {
                members.insert(
                    k.clone(),
                    Member::new(MemberState {
                        pending: true,
                        tainted: true,
                        watch: m.state.watch,
                        ..MemberState::default()
                    }),
                );
            }
        }
        members.insert(
            msg.sender.clone(),
            Member::new(MemberState {
                watch: sender_watch,
                ..MemberState::default()
            }),
        );
        self.start_history(msg.id(), members);
    }

    fn start_history(&mut self, history: MessageId, members: SortedMap<MemberKey, Member>) {
        self.complete = true;
        self.history = history;
        self.pos = 0;
        self.next_gid = 1;
        self.members = members;
        self.manager = LockManager::new();
        self.owners.clear();
    }

    /// A state transfer admits the pending members that joined at or before its position (they build
    /// their replica from it). Any State, even one of an older history, taints the other pending
    /// members: a context that joined cannot tell histories apart, and the rule must be one it can
    /// evaluate.
    fn on_state(&mut self, st: &StateTransfer) {
        if self.complete && st.history == self.history {
            for m in self.members.values_mut() {
                if m.state.pending && m.state.join_pos <= st.as_of_pos {
                    m.state.pending = false;
                    m.state.tainted = false;
                }
            }
        }
        self.taint_pending();
    }

    fn taint_pending(&mut self) {
        for m in self.members.values_mut() {
            if m.state.pending {
                m.state.tainted = true;
            }
        }
    }

    fn on_request(
        &mut self,
        sender: &MemberKey,
        local_id: u64,
        name: &Rc<str>,
        options: LockOptions,
        out: &mut Vec<Outcome>,
    ) {
        let gid = self.next_gid;
        let gids = &mut self.members.get_mut(sender).expect("member").gids;
        if gids.contains_key(&local_id) {
            return; // a duplicate id: the first request stands
        }
        gids.insert(local_id, gid);
        self.next_gid += 1;
        self.owners.insert(gid, (sender.clone(), local_id));
        let decisions = self
            .manager
            .request_lock(gid, sender.client.clone(), name.clone(), options)
            .expect("gids are fresh");
        self.report(decisions, out);
    }

    fn on_release(&mut self, sender: &MemberKey, local_id: u64, out: &mut Vec<Outcome>) {
        if let Some(gid) = self.gid(sender, local_id)
            && self.manager.held_lock(gid).is_some()
        {
            self.forget(gid);
            let decisions = self.manager.release_lock(gid);
            self.report(decisions, out);
        }
    }

    /// An abort that lost the race with a grant releases the lock: its owner already told JS that the
    /// request was aborted, so nobody will ever use that lock.
    fn on_abort(&mut self, sender: &MemberKey, local_id: u64, out: &mut Vec<Outcome>) {
        let Some(gid) = self.gid(sender, local_id) else {
            return;
        };
        if let Some(decisions) = self.manager.abort_request(gid) {
            self.forget(gid);
            self.report(decisions, out);
        } else {
            self.on_release(sender, local_id, out);
        }
    }

    /// Removes a member, dropping its requests and releasing its locks (spec 2.6). With a reason, its
    /// held locks are reported revoked (an eviction); without, it left or rejoined and knows.
    fn remove_member(
        &mut self,
        key: &MemberKey,
        reason: Option<RevokeReason>,
        out: &mut Vec<Outcome>,
    ) {
        let removed = self.members.remove(key);
        // Its held locks, in id order (the owners' order).
        if let Some(reason) = reason {
            for (gid, (m, l)) in self.owners.iter() {
                if m == key && self.manager.held_lock(*gid).is_some() {
                    out.push(Outcome::Revoked {
                        member: m.clone(),
                        local_id: *l,
                        reason,
                    });
                }
            }
        }
        let decisions = self.manager.terminate_client(&key.client);
        // Its requests, which it kept by its own ids.
        if let Some(member) = removed {
            for gid in member.gids.values() {
                self.forget(*gid);
            }
        }
        // Grants made inside terminate_client to the member's own requests were released again there.
        self.report(decisions, out);
    }

    fn revoke_all(&mut self, reason: RevokeReason, out: &mut Vec<Outcome>) {
        for r in self.manager.held_requests() {
            let (m, l) = self.owners[&r.id].clone();
            out.push(Outcome::Revoked {
                member: m,
                local_id: l,
                reason,
            });
        }
        // The caller starts a new history, which empties the lock manager.
    }

    /// Forgets request `gid`; returns its owner and the owner's id for it, if it was known.
    fn forget(&mut self, gid: RequestId) -> Option<(MemberKey, u64)> {
        let owner = self.owners.remove(&gid)?;
        if let Some(m) = self.members.get_mut(&owner.0) {
            m.gids.remove(&owner.1);
        }
        Some(owner)
    }

    fn report(&mut self, decisions: Vec<Decision>, out: &mut Vec<Outcome>) {
        for d in decisions {
            match d {
                Decision::Granted(gid) => {
                    // Absent when terminate_client granted a request of the member being removed.
                    if let Some((m, l)) = self.owners.get(&gid)
                        && self.manager.held_lock(gid).is_some()
                    {
                        out.push(Outcome::Granted {
                            member: m.clone(),
                            local_id: *l,
                        });
                    }
                }
                Decision::NotAvailable(gid) => {
                    if let Some((m, l)) = self.forget(gid) {
                        out.push(Outcome::NotAvailable {
                            member: m,
                            local_id: l,
                        });
                    }
                }
                Decision::Stolen(gid) => {
                    if let Some((m, l)) = self.forget(gid) {
                        out.push(Outcome::Revoked {
                            member: m,
                            local_id: l,
                            reason: RevokeReason::Stolen,
                        });
                    }
                }
            }
        }
    }

    /// The state transfer for pending members, as of message `as_of` (the last one applied).
    pub fn export(&self, as_of: MessageId) -> StateTransfer {
        // A lock's member is its index in the member list, which is in key order.
        let record = |r: &LockRequest| {
            let (m, l) = &self.owners[&r.id];
            LockRecord {
                gid: r.id,
                member: self.members.index_of(m).expect("owner is a member") as u32,
                local_id: *l,
                name: r.name.clone(),
                mode: r.mode,
            }
        };
        let mut st = StateTransfer {
            history: self.history.clone(),
            as_of,
            as_of_pos: self.pos,
            next_gid: self.next_gid,
            members: Vec::new(),
            held: Vec::new(),
            pending: Vec::new(),
            parts: 0,
        };
        for (k, m) in self.members.iter() {
            st.members.push(MemberRecord {
                key: k.clone(),
                state: m.state,
            });
        }
        for r in self.manager.held_requests() {
            st.held.push(record(r));
        }
        for r in self.manager.pending_requests() {
            st.pending.push(record(r));
        }
        st
    }

    /// Builds a complete replica from a state transfer, or `None` if the transfer is inconsistent
    /// (a corrupt or hostile message). The lock manager is rebuilt through its public algorithms:
    /// held locks in held-set order (each must be granted at once), then pending requests in queue
    /// order (none may be granted). Per-name queue order and the held-set order are kept exactly; the
    /// order of names in the queue map may differ from the sender's (it only orders `query()` output).
    /// `parts` are the `StatePart`s sent before `st`, in order: their locks come first.
    pub fn import(st: &StateTransfer, parts: &[&StatePart], version: u32) -> Option<Replica> {
        let mut r = Replica::empty(version, true);
        r.history = st.history.clone();
        r.pos = st.as_of_pos;
        r.next_gid = st.next_gid;
        for m in &st.members {
            if m.state.join_pos > st.as_of_pos
                || r.members
                    .insert(m.key.clone(), Member::new(m.state))
                    .is_some()
            {
                return None;
            }
        }
        // Two incarnations of one context: the members are in key order, so they would be neighbours.
        let mut previous: Option<&MemberKey> = None;
        for k in r.members.keys() {
            if previous.is_some_and(|p| p.client == k.client) {
                return None;
            }
            previous = Some(k);
        }
        // Held locks in order (the parts', then the State's), then pending requests likewise.
        let mut lists: Vec<(&[LockRecord], bool)> = Vec::new();
        for must_grant in [true, false] {
            for p in parts {
                lists.push((if must_grant { &p.held } else { &p.pending }, must_grant));
            }
            lists.push((if must_grant { &st.held } else { &st.pending }, must_grant));
        }
        for (records, must_grant) in lists {
            for l in records {
                let member = st.members.get(l.member as usize)?;
                let gids = &mut r.members.get_mut(&member.key).expect("imported").gids;
                if member.state.pending
                    || l.gid == 0
                    || l.gid >= st.next_gid
                    || r.owners.contains_key(&l.gid)
                    || gids.insert(l.local_id, l.gid).is_some()
                {
                    return None;
                }
                r.owners.insert(l.gid, (member.key.clone(), l.local_id));
                let options = LockOptions {
                    mode: l.mode,
                    ..LockOptions::default()
                };
                let client = member.key.client.clone();
                let decisions = r
                    .manager
                    .request_lock(l.gid, client, l.name.clone(), options)
                    .ok()?;
                let granted = matches!(decisions[..], [Decision::Granted(g)] if g == l.gid);
                if granted != must_grant || (!must_grant && !decisions.is_empty()) {
                    return None;
                }
            }
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests;
