//! One test per rule of the replicated state machine.

use std::rc::Rc;

use super::*;
use crate::protocol::wire::{Body, KIND_GENESIS, KIND_JOIN, MemberKey, Message, PROTOCOL_VERSION};

const V: u32 = PROTOCOL_VERSION;

fn key(c: &str) -> MemberKey {
    MemberKey::new(c, 1)
}

/// A replica fed by hand: every message gets a fresh sequence number per sender.
struct Feed {
    r: Replica,
    seq: u64,
}

impl Feed {
    fn origin() -> Self {
        Feed {
            r: Replica::origin(V),
            seq: 0,
        }
    }

    fn send(&mut self, sender: &MemberKey, body: Body) -> Vec<Outcome> {
        self.seq += 1;
        let m = Message {
            sender: sender.clone(),
            seq: self.seq,
            body,
        };
        let mut out = Vec::new();
        self.r.apply(&m, &mut out);
        out
    }

    fn last_id(&self, sender: &MemberKey) -> MessageId {
        MessageId {
            sender: sender.clone(),
            seq: self.seq,
        }
    }

    /// A history started by `first` with `others` admitted through a state transfer.
    fn with_members(first: &str, others: &[&str]) -> Self {
        let mut f = Feed::origin();
        f.send(&key(first), Body::Join { watch: 0 });
        f.send(&key(first), Body::Genesis);
        for o in others {
            f.send(&key(o), Body::Join { watch: 0 });
        }
        if !others.is_empty() {
            let st = f.r.export(f.last_id(&key(others[others.len() - 1])));
            f.send(&key(first), Body::State(Box::new(st)));
        }
        f
    }

    fn request(&mut self, who: &str, id: u64, name: &str, mode: LockMode) -> Vec<Outcome> {
        self.send(
            &key(who),
            Body::Request {
                id,
                name: name.into(),
                options: LockOptions {
                    mode,
                    ..LockOptions::default()
                },
            },
        )
    }
}

fn granted(who: &str, id: u64) -> Outcome {
    Outcome::Granted {
        member: key(who),
        local_id: id,
    }
}

fn revoked(who: &str, id: u64, reason: RevokeReason) -> Outcome {
    Outcome::Revoked {
        member: key(who),
        local_id: id,
        reason,
    }
}

#[test]
fn a_genesis_from_an_unanswered_joiner_starts_a_history() {
    let mut f = Feed::origin();
    f.send(&key("a"), Body::Join { watch: 0 });
    assert!(f.r.member(&key("a")).unwrap().state.pending);
    f.send(&key("a"), Body::Genesis);
    assert_eq!(f.r.history(), &f.last_id(&key("a")));
    assert_eq!(f.r.pos(), 0);
    assert!(!f.r.member(&key("a")).unwrap().state.pending);
}

#[test]
fn the_first_genesis_wins_and_later_ones_are_void() {
    let mut f = Feed::origin();
    f.send(&key("b"), Body::Join { watch: 0 });
    f.send(&key("a"), Body::Join { watch: 0 });
    f.send(&key("c"), Body::Join { watch: 0 });
    f.send(&key("a"), Body::Genesis);
    let history = f.r.history().clone();
    // b joined before a: a's history does not know it; c joined after: it waits for a state transfer.
    assert!(f.r.member(&key("b")).is_none());
    let c = f.r.member(&key("c")).unwrap();
    assert!(c.state.pending && c.state.tainted);
    f.request("a", 1, "x", LockMode::Exclusive);
    f.send(&key("c"), Body::Genesis);
    f.send(&key("b"), Body::Genesis);
    assert_eq!(f.r.history(), &history, "void geneses change nothing");
    assert!(f.r.holds(&key("a"), 1));
}

#[test]
fn a_genesis_after_a_state_is_void() {
    let mut f = Feed::with_members("a", &[]);
    f.send(&key("b"), Body::Join { watch: 0 });
    let st = f.r.export(MessageId::origin());
    // A State of the current history admits b; another joiner is only tainted by it.
    f.send(&key("c"), Body::Join { watch: 0 });
    let mut earlier = st.clone();
    earlier.as_of_pos = f.r.member(&key("b")).unwrap().state.join_pos;
    f.send(&key("a"), Body::State(Box::new(earlier)));
    assert!(!f.r.member(&key("b")).unwrap().state.pending);
    let c = f.r.member(&key("c")).unwrap();
    assert!(c.state.pending && c.state.tainted);
    let history = f.r.history().clone();
    f.send(&key("c"), Body::Genesis);
    assert_eq!(f.r.history(), &history);
}

#[test]
fn a_state_of_another_history_only_taints() {
    let mut f = Feed::with_members("a", &[]);
    f.send(&key("b"), Body::Join { watch: 0 });
    let mut st = f.r.export(f.last_id(&key("b")));
    st.history = MessageId {
        sender: key("z"),
        seq: 99,
    };
    f.send(&key("a"), Body::State(Box::new(st)));
    let b = f.r.member(&key("b")).unwrap();
    assert!(b.state.pending && b.state.tainted);
}

#[test]
fn requests_releases_and_queues_follow_the_scheduler() {
    let mut f = Feed::with_members("a", &["b", "c"]);
    assert_eq!(f.request("a", 1, "x", LockMode::Shared), [granted("a", 1)]);
    assert_eq!(f.request("b", 1, "x", LockMode::Shared), [granted("b", 1)]);
    assert_eq!(f.request("c", 7, "x", LockMode::Exclusive), []);
    assert!(f.r.is_pending(&key("c"), 7));
    assert_eq!(f.send(&key("a"), Body::Release { id: 1 }), []);
    assert_eq!(
        f.send(&key("b"), Body::Release { id: 1 }),
        [granted("c", 7)]
    );
    // Releasing twice, or what another member holds, changes nothing.
    assert_eq!(f.send(&key("b"), Body::Release { id: 1 }), []);
    assert_eq!(f.send(&key("a"), Body::Release { id: 7 }), []);
    assert!(f.r.holds(&key("c"), 7));
    let snap = f.r.snapshot();
    assert_eq!(snap.held.len(), 1);
    assert_eq!(&*snap.held[0].client_id, "c");
}

#[test]
fn if_available_and_steal_decide_at_their_place_in_the_sequence() {
    let mut f = Feed::with_members("a", &["b"]);
    f.request("a", 1, "x", LockMode::Exclusive);
    let out = f.send(
        &key("b"),
        Body::Request {
            id: 1,
            name: "x".into(),
            options: LockOptions {
                if_available: true,
                ..LockOptions::default()
            },
        },
    );
    assert_eq!(
        out,
        [Outcome::NotAvailable {
            member: key("b"),
            local_id: 1
        }]
    );
    let out = f.send(
        &key("b"),
        Body::Request {
            id: 2,
            name: "x".into(),
            options: LockOptions {
                steal: true,
                ..LockOptions::default()
            },
        },
    );
    assert_eq!(
        out,
        [revoked("a", 1, RevokeReason::Stolen), granted("b", 2)]
    );
}

#[test]
fn an_abort_removes_a_pending_request_and_releases_one_granted_meanwhile() {
    let mut f = Feed::with_members("a", &["b", "c"]);
    f.request("a", 1, "x", LockMode::Exclusive);
    f.request("b", 1, "x", LockMode::Exclusive);
    f.request("c", 1, "x", LockMode::Exclusive);
    assert_eq!(f.send(&key("b"), Body::Abort { id: 1 }), []);
    assert!(!f.r.is_pending(&key("b"), 1));
    assert_eq!(
        f.send(&key("a"), Body::Release { id: 1 }),
        [granted("c", 1)]
    );
    // c aborted before it saw its grant: the abort releases it.
    f.request("a", 2, "x", LockMode::Exclusive);
    assert_eq!(f.send(&key("c"), Body::Abort { id: 1 }), [granted("a", 2)]);
}

#[test]
fn a_duplicate_request_id_is_ignored() {
    let mut f = Feed::with_members("a", &[]);
    f.request("a", 1, "x", LockMode::Exclusive);
    assert_eq!(f.request("a", 1, "y", LockMode::Exclusive), []);
    assert!(f.r.snapshot().pending.is_empty());
}

#[test]
fn strangers_and_pending_members_cannot_request() {
    let mut f = Feed::with_members("a", &[]);
    assert_eq!(f.request("stranger", 1, "x", LockMode::Exclusive), []);
    f.send(&key("p"), Body::Join { watch: 0 });
    assert_eq!(f.request("p", 1, "x", LockMode::Exclusive), []);
    // A message of an older incarnation of a member is a stranger's too.
    let old = MemberKey::new("a", 0);
    f.seq += 1;
    let mut out = Vec::new();
    f.r.apply(
        &Message {
            sender: old,
            seq: f.seq,
            body: Body::Release { id: 1 },
        },
        &mut out,
    );
    assert!(f.r.is_idle());
}

#[test]
fn a_member_is_found_gone_only_by_the_very_liveness_database_it_announced() {
    let mut f = Feed::origin();
    f.send(&key("a"), Body::Join { watch: 7 });
    f.send(&key("a"), Body::Genesis);
    f.send(&key("b"), Body::Join { watch: 9 });
    let st = f.r.export(f.last_id(&key("b")));
    f.send(&key("a"), Body::State(Box::new(st)));
    f.request("a", 1, "x", LockMode::Exclusive);
    f.request("b", 1, "x", LockMode::Exclusive);
    let gone = |watch| Body::Gone {
        client: "a".into(),
        watch,
    };
    // Another database of a's (an earlier incarnation's), or none: nothing changes.
    assert_eq!(f.send(&key("b"), gone(8)), []);
    assert_eq!(f.send(&key("b"), gone(0)), []);
    assert!(f.r.member(&key("a")).is_some());
    // However long a stays silent, only the database it announced removes it: its lock is revoked
    // and granted on.
    assert_eq!(
        f.send(&key("b"), gone(7)),
        [revoked("a", 1, RevokeReason::Evicted), granted("b", 1)]
    );
    assert!(f.r.member(&key("a")).is_none());
}

#[test]
fn a_leave_releases_at_once_and_a_rejoin_replaces_the_old_incarnation() {
    let mut f = Feed::with_members("a", &["b"]);
    f.request("a", 1, "x", LockMode::Exclusive);
    f.request("b", 1, "x", LockMode::Exclusive);
    assert_eq!(f.send(&key("a"), Body::Leave), [granted("b", 1)]);
    assert!(f.r.member(&key("a")).is_none());
    let b2 = MemberKey::new("b", 2);
    f.send(&b2, Body::Join { watch: 0 });
    assert!(f.r.member(&key("b")).is_none());
    assert!(
        f.r.member(&b2).unwrap().state.pending,
        "even a rejoin with a complete replica waits for a State"
    );
    assert!(f.r.is_idle(), "the old incarnation's lock went with it");
}

#[test]
fn a_newer_version_retires_and_an_older_genesis_resets() {
    let mut f = Feed::with_members("a", &[]);
    f.request("a", 1, "x", LockMode::Exclusive);
    let id = MessageId {
        sender: key("new"),
        seq: 1,
    };
    let mut out = Vec::new();
    f.r.apply_foreign(V + 1, KIND_JOIN, &id, &mut out);
    assert_eq!(out, [revoked("a", 1, RevokeReason::Retired)]);
    assert!(f.r.member(&key("a")).is_none() && f.r.is_idle());

    let mut f = Feed::with_members("a", &[]);
    f.request("a", 1, "x", LockMode::Exclusive);
    let mut out = Vec::new();
    f.r.apply_foreign(V - 1, KIND_JOIN, &id, &mut out);
    assert!(out.is_empty() && f.r.holds(&key("a"), 1));
    f.r.apply_foreign(V - 1, KIND_GENESIS, &id, &mut out);
    assert_eq!(out, [revoked("a", 1, RevokeReason::Reset)]);
    assert_eq!(f.r.history(), &id);
}

#[test]
fn a_partial_replica_knows_only_later_joiners() {
    let mut r = Replica::partial(V);
    let mut out = Vec::new();
    let msg = |c: &str, seq, body| Message {
        sender: key(c),
        seq,
        body,
    };
    r.apply(&msg("me", 1, Body::Join { watch: 0 }), &mut out);
    r.apply(&msg("later", 1, Body::Join { watch: 0 }), &mut out);
    // A Genesis from a context that joined before me: I cannot judge it, it only taints me.
    r.apply(&msg("earlier", 2, Body::Genesis), &mut out);
    assert!(!r.is_complete());
    assert!(r.member(&key("me")).unwrap().state.tainted);
    // A later joiner's Genesis is judged like everyone else judges it (void: tainted too).
    r.apply(&msg("later", 2, Body::Genesis), &mut out);
    assert!(!r.is_complete());
    assert!(out.is_empty());

    let mut r = Replica::partial(V);
    r.apply(&msg("me", 1, Body::Join { watch: 0 }), &mut out);
    r.apply(&msg("later", 1, Body::Join { watch: 0 }), &mut out);
    r.apply(&msg("later", 2, Body::Genesis), &mut out);
    assert!(
        r.is_complete(),
        "a valid Genesis of a later joiner completes the replica"
    );
    assert!(
        r.member(&key("me")).is_none(),
        "I joined before it: I rejoin"
    );
}

#[test]
fn a_state_transfer_round_trips_the_lock_state() {
    let mut f = Feed::with_members("a", &["b", "c"]);
    f.request("a", 1, "x", LockMode::Shared);
    f.request("b", 1, "x", LockMode::Shared);
    f.request("c", 1, "x", LockMode::Exclusive);
    f.request("a", 2, "x", LockMode::Shared);
    f.request("b", 2, "y", LockMode::Exclusive);
    f.send(&key("c"), Body::Alive);
    let st = f.r.export(f.last_id(&key("c")));
    let mut copy = Replica::import(&st, &[], V).expect("consistent");
    assert_eq!(copy.snapshot(), f.r.snapshot());
    assert_eq!(copy.export(st.as_of.clone()), st);
    // Both go on identically.
    for r in [&mut f.r, &mut copy] {
        let mut out = Vec::new();
        let release = |c: &str, id| Message {
            sender: key(c),
            seq: 100,
            body: Body::Release { id },
        };
        r.apply(&release("a", 1), &mut out);
        r.apply(&release("b", 1), &mut out);
        assert_eq!(out, [granted("c", 1)]);
    }
}

#[test]
fn an_inconsistent_state_transfer_is_refused() {
    let mut f = Feed::with_members("a", &["b"]);
    f.request("a", 1, "x", LockMode::Exclusive);
    f.request("b", 1, "x", LockMode::Exclusive);
    let good = f.r.export(f.last_id(&key("b")));
    assert!(Replica::import(&good, &[], V).is_some());
    let mut bad: Vec<StateTransfer> = Vec::new();
    // Two exclusive holders of one name.
    let mut s = good.clone();
    s.held.push(s.pending[0].clone());
    s.pending.clear();
    bad.push(s);
    // A pending request that nothing blocks.
    let mut s = good.clone();
    s.held.clear();
    bad.push(s);
    // A member index out of range, a gid reused or beyond next_gid, an owner still pending.
    let mut s = good.clone();
    s.held[0].member = 9;
    bad.push(s);
    let mut s = good.clone();
    s.pending[0].gid = s.held[0].gid;
    bad.push(s);
    let mut s = good.clone();
    s.pending[0].gid = s.next_gid;
    bad.push(s);
    let mut s = good.clone();
    s.members[1].state.pending = true;
    bad.push(s);
    // A member joined after the state's position, or twice.
    let mut s = good.clone();
    s.members[0].state.join_pos = s.as_of_pos + 1;
    bad.push(s);
    let mut s = good.clone();
    s.members.push(s.members[0].clone());
    bad.push(s);
    for (i, s) in bad.iter().enumerate() {
        assert!(Replica::import(s, &[], V).is_none(), "case {i} accepted");
    }
}

#[test]
fn blockers_are_the_holders_and_the_first_waiters_ahead() {
    let mut f = Feed::with_members("a", &["b", "c", "d", "e"]);
    f.request("a", 1, "x", LockMode::Shared);
    f.request("b", 1, "x", LockMode::Shared);
    f.request("c", 1, "x", LockMode::Exclusive);
    f.request("d", 1, "x", LockMode::Exclusive);
    f.request("e", 1, "x", LockMode::Exclusive);
    let names: SortedSet<Rc<str>> = [Rc::from("x")].into();
    let blockers: Vec<MemberKey> = f.r.blockers_of(&key("e"), &names).into_iter().collect();
    assert_eq!(blockers, [key("a"), key("b"), key("c"), key("d")]);
    let blockers: Vec<MemberKey> = f.r.blockers_of(&key("c"), &names).into_iter().collect();
    assert_eq!(blockers, [key("a"), key("b")]);
    assert!(f.r.blockers_of(&key("a"), &SortedSet::new()).is_empty());
}
