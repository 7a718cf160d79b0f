//! Host tests of the lock manager (spec sections 2 and 4): examples, then properties over random programs.
#![cfg(not(target_arch = "wasm32"))]

use std::collections::HashMap;

use proptest::prelude::*;
use weblocks::scheduler::{Decision, LockManager, LockMode, LockOptions, RequestError, RequestId};

/// Request `id` of `client` on `name`, made on `m` with `options`.
fn request(
    m: &mut LockManager,
    id: RequestId,
    client: &str,
    name: &str,
    options: LockOptions,
) -> Result<Vec<Decision>, RequestError> {
    m.request_lock(id, client.into(), name.into(), options)
}

/// The options of a request in `mode` that waits its turn.
fn waits(mode: LockMode) -> LockOptions {
    LockOptions {
        mode,
        ..LockOptions::default()
    }
}

/// The options of a request in `mode` granted now or not at all.
fn if_available(mode: LockMode) -> LockOptions {
    LockOptions {
        mode,
        if_available: true,
        steal: false,
    }
}

/// The options of a request that steals.
fn steals() -> LockOptions {
    LockOptions {
        steal: true,
        ..LockOptions::default()
    }
}

use LockMode::{Exclusive as X, Shared as S};

#[test]
fn exclusive_is_granted_when_free_and_blocks_the_next() {
    let mut m = LockManager::new();
    assert_eq!(
        request(&mut m, 1, "a", "n", waits(X)).unwrap(),
        vec![Decision::Granted(1)]
    );
    assert_eq!(request(&mut m, 2, "a", "n", waits(X)).unwrap(), vec![]);
    assert!(m.is_pending(2));
    assert_eq!(m.release_lock(1), vec![Decision::Granted(2)]);
    assert_eq!(m.release_lock(2), vec![]);
    assert!(m.is_idle());
}

#[test]
fn shared_holders_coexist_and_an_exclusive_waits_for_all_of_them() {
    let mut m = LockManager::new();
    for id in 1..=3 {
        assert_eq!(
            request(&mut m, id, "a", "n", waits(S)).unwrap(),
            vec![Decision::Granted(id)]
        );
    }
    assert_eq!(request(&mut m, 4, "a", "n", waits(X)).unwrap(), vec![]);
    // A shared request behind a queued exclusive waits too (grantable step 7: not first in queue).
    assert_eq!(request(&mut m, 5, "a", "n", waits(S)).unwrap(), vec![]);
    assert_eq!(m.release_lock(1), vec![]);
    assert_eq!(m.release_lock(3), vec![]);
    assert_eq!(m.release_lock(2), vec![Decision::Granted(4)]);
    assert_eq!(m.release_lock(4), vec![Decision::Granted(5)]);
}

#[test]
fn releasing_an_exclusive_grants_every_shared_request_at_the_head() {
    let mut m = LockManager::new();
    request(&mut m, 1, "a", "n", waits(X)).unwrap();
    for id in 2..=4 {
        request(&mut m, id, "a", "n", waits(S)).unwrap();
    }
    request(&mut m, 5, "a", "n", waits(X)).unwrap();
    request(&mut m, 6, "a", "n", waits(S)).unwrap();
    assert_eq!(
        m.release_lock(1),
        vec![
            Decision::Granted(2),
            Decision::Granted(3),
            Decision::Granted(4)
        ]
    );
}

#[test]
fn names_are_independent() {
    let mut m = LockManager::new();
    assert_eq!(
        request(&mut m, 1, "a", "n1", waits(X)).unwrap(),
        vec![Decision::Granted(1)]
    );
    assert_eq!(
        request(&mut m, 2, "a", "n2", waits(X)).unwrap(),
        vec![Decision::Granted(2)]
    );
}

#[test]
fn if_available_is_granted_when_free_and_not_available_when_held_or_queued() {
    let mut m = LockManager::new();
    assert_eq!(
        request(&mut m, 1, "a", "n", if_available(S)).unwrap(),
        vec![Decision::Granted(1)]
    );
    assert_eq!(
        request(&mut m, 2, "a", "n", if_available(S)).unwrap(),
        vec![Decision::Granted(2)]
    );
    assert_eq!(
        request(&mut m, 3, "a", "n", if_available(X)).unwrap(),
        vec![Decision::NotAvailable(3)]
    );
    request(&mut m, 4, "a", "n", waits(X)).unwrap();
    // Shared would be compatible with the holders, but the queue is not empty.
    assert_eq!(
        request(&mut m, 5, "a", "n", if_available(S)).unwrap(),
        vec![Decision::NotAvailable(5)]
    );
    assert!(!m.is_pending(3) && !m.is_pending(5));
}

#[test]
fn if_available_miss_leaves_no_trace() {
    let mut m = LockManager::new();
    request(&mut m, 1, "a", "n", waits(X)).unwrap();
    request(&mut m, 2, "a", "n", if_available(X)).unwrap();
    assert_eq!(m.release_lock(1), vec![]);
    assert!(m.is_idle());
    assert_eq!(m.snapshot_lock_state().held.len(), 0);
}

#[test]
fn steal_releases_every_holder_and_jumps_the_queue() {
    let mut m = LockManager::new();
    request(&mut m, 1, "a", "n", waits(S)).unwrap();
    request(&mut m, 2, "b", "n", waits(S)).unwrap();
    request(&mut m, 3, "c", "n", waits(X)).unwrap();
    request(&mut m, 9, "z", "other", waits(X)).unwrap();
    let d = request(&mut m, 4, "d", "n", steals()).unwrap();
    assert_eq!(
        d,
        vec![
            Decision::Stolen(1),
            Decision::Stolen(2),
            Decision::Granted(4)
        ]
    );
    // The robbed holders' later releases are no-ops; the queued request still waits for the thief.
    assert_eq!(m.release_lock(1), vec![]);
    assert_eq!(m.release_lock(2), vec![]);
    assert!(m.is_pending(3));
    assert_eq!(m.release_lock(4), vec![Decision::Granted(3)]);
    assert!(m.held_lock(9).is_some(), "other names are untouched");
}

#[test]
fn abort_removes_a_pending_request_and_unblocks_followers() {
    let mut m = LockManager::new();
    request(&mut m, 1, "a", "n", waits(S)).unwrap();
    request(&mut m, 2, "a", "n", waits(X)).unwrap();
    request(&mut m, 3, "a", "n", waits(S)).unwrap();
    assert_eq!(m.abort_request(2), Some(vec![Decision::Granted(3)]));
    assert_eq!(m.abort_request(2), None, "a second abort finds nothing");
    assert_eq!(
        m.abort_request(1),
        None,
        "a granted request cannot be aborted"
    );
}

#[test]
fn snapshot_lists_pending_in_queue_map_order_and_held_in_grant_order() {
    let mut m = LockManager::new();
    request(&mut m, 1, "a", "n2", waits(X)).unwrap();
    request(&mut m, 2, "b", "n1", waits(S)).unwrap();
    request(&mut m, 3, "c", "n1", waits(X)).unwrap();
    request(&mut m, 4, "c", "n2", waits(S)).unwrap();
    request(&mut m, 5, "d", "n1", waits(S)).unwrap();
    let s = m.snapshot_lock_state();
    let held: Vec<_> = s
        .held
        .iter()
        .map(|i| (&*i.name, i.mode, &*i.client_id))
        .collect();
    assert_eq!(held, vec![("n2", X, "a"), ("n1", S, "b")]);
    let pending: Vec<_> = s
        .pending
        .iter()
        .map(|i| (&*i.name, i.mode, &*i.client_id))
        .collect();
    assert_eq!(
        pending,
        vec![("n2", S, "c"), ("n1", X, "c"), ("n1", S, "d")]
    );
}

#[test]
fn terminate_client_aborts_its_requests_then_releases_its_locks() {
    let mut m = LockManager::new();
    request(&mut m, 1, "gone", "n", waits(X)).unwrap();
    request(&mut m, 2, "gone", "n", waits(X)).unwrap();
    request(&mut m, 3, "live", "n", waits(X)).unwrap();
    assert_eq!(m.terminate_client("gone"), vec![Decision::Granted(3)]);
    assert!(!m.is_pending(2));
}

#[test]
fn duplicate_ids_are_refused() {
    let mut m = LockManager::new();
    request(&mut m, 1, "a", "n", waits(X)).unwrap();
    assert!(request(&mut m, 1, "a", "m", waits(X)).is_err());
}

// ---- properties over random programs ----

#[derive(Clone, Debug)]
enum Op {
    Request {
        name: u8,
        shared: bool,
        if_available: bool,
        steal: bool,
    },
    Release(usize),
    Abort(usize),
    Terminate(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..3, any::<bool>(), prop::bool::weighted(0.2), prop::bool::weighted(0.1)).prop_map(
            |(name, shared, if_available, steal)| Op::Request { name, shared, if_available, steal }
        ),
        3 => any::<usize>().prop_map(Op::Release),
        1 => any::<usize>().prop_map(Op::Abort),
        1 => (0u8..4).prop_map(Op::Terminate),
    ]
}

/// A model of what each request is, kept beside the manager to check its decisions.
#[derive(Default)]
struct Truth {
    info: HashMap<RequestId, (String, LockMode, String)>,
    held: Vec<RequestId>,
    pending: HashMap<String, Vec<RequestId>>,
    granted_order: HashMap<String, Vec<RequestId>>,
}

impl Truth {
    fn apply(&mut self, decisions: &[Decision], thief: Option<RequestId>) {
        for d in decisions {
            match *d {
                Decision::Granted(id) => {
                    let name = self.info[&id].0.clone();
                    let queue = self.pending.get_mut(&name).unwrap();
                    // Per-name FIFO: a grant always takes the head of the queue (a thief is put there).
                    assert_eq!(
                        queue.first(),
                        Some(&id),
                        "grant out of FIFO order on {name}"
                    );
                    queue.remove(0);
                    self.held.push(id);
                    self.granted_order.entry(name).or_default().push(id);
                }
                Decision::Stolen(id) => {
                    assert!(thief.is_some(), "only a steal may rob a holder");
                    self.held.retain(|h| *h != id);
                }
                Decision::NotAvailable(_) => {}
            }
        }
    }

    fn check_exclusion(&self) {
        let mut by_name: HashMap<&str, Vec<LockMode>> = HashMap::new();
        for id in &self.held {
            let (name, mode, _) = &self.info[id];
            by_name.entry(name).or_default().push(*mode);
        }
        for (name, modes) in by_name {
            if modes.contains(&LockMode::Exclusive) {
                assert_eq!(modes.len(), 1, "exclusive beside another holder of {name}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_over_random_programs(ops in prop::collection::vec(op(), 1..60)) {
        let mut m = LockManager::new();
        let mut t = Truth::default();
        let mut next_id: RequestId = 1;
        let clients = ["c0", "c1", "c2", "c3"];
        for op in ops {
            match op {
                Op::Request { name, shared, if_available, steal } => {
                    let id = next_id;
                    next_id += 1;
                    let name = format!("n{name}");
                    let mode = if shared && !steal { LockMode::Shared } else { LockMode::Exclusive };
                    let if_available = if_available && !steal;
                    let client = clients[(id % 4) as usize];
                    t.info.insert(id, (name.clone(), mode, client.to_string()));
                    let queue = t.pending.entry(name.clone()).or_default();
                    if steal { queue.insert(0, id) } else { queue.push(id) }
                    let blocked_before = !queue.is_empty() && queue[0] != id
                        || t.held.iter().any(|h| t.info[h].0 == name
                            && (mode == LockMode::Exclusive || t.info[h].1 == LockMode::Exclusive));
                    let d = request(&mut m, id, client, &name, LockOptions { mode, if_available, steal }).unwrap();
                    if if_available && d == vec![Decision::NotAvailable(id)] {
                        prop_assert!(blocked_before, "ifAvailable refused a grantable request");
                        t.pending.get_mut(&name).unwrap().retain(|p| *p != id);
                    } else if if_available {
                        prop_assert!(!blocked_before);
                    }
                    t.apply(&d, steal.then_some(id));
                    if steal {
                        // A steal always wins: the thief holds the lock at once.
                        prop_assert!(m.held_lock(id).is_some());
                        prop_assert!(t.held.contains(&id));
                    }
                }
                Op::Release(i) => {
                    if t.held.is_empty() { continue; }
                    let id = t.held[i % t.held.len()];
                    t.held.retain(|h| *h != id);
                    let d = m.release_lock(id);
                    t.apply(&d, None);
                }
                Op::Abort(i) => {
                    let all: Vec<RequestId> = t.pending.values().flatten().copied().collect();
                    if all.is_empty() { continue; }
                    let id = all[i % all.len()];
                    let name = t.info[&id].0.clone();
                    t.pending.get_mut(&name).unwrap().retain(|p| *p != id);
                    let d = m.abort_request(id);
                    prop_assert!(d.is_some(), "a pending request must be abortable");
                    t.apply(&d.unwrap(), None);
                }
                Op::Terminate(c) => {
                    let client = clients[c as usize];
                    for q in t.pending.values_mut() {
                        q.retain(|p| t.info[p].2 != client);
                    }
                    t.held.retain(|h| t.info[h].2 != client);
                    let d = m.terminate_client(client);
                    t.apply(&d, None);
                }
            }
            t.check_exclusion();
            // Nothing granted is lost from a snapshot, nothing pending either; and orders match.
            let s = m.snapshot_lock_state();
            let held_names: Vec<String> = t.held.iter().map(|h| t.info[h].0.clone()).collect();
            let snap_held: Vec<String> = s.held.iter().map(|i| i.name.to_string()).collect();
            prop_assert_eq!(snap_held, held_names);
            prop_assert_eq!(m.held_count(), t.held.len());
            let pending_total: usize = t.pending.values().map(Vec::len).sum();
            prop_assert_eq!(s.pending.len(), pending_total);
            for (name, q) in &t.pending {
                let snap: Vec<(LockMode, String)> = s.pending.iter().filter(|i| &*i.name == name)
                    .map(|i| (i.mode, i.client_id.to_string())).collect();
                let want: Vec<(LockMode, String)> = q.iter().map(|p| (t.info[p].1, t.info[p].2.clone())).collect();
                prop_assert_eq!(snap, want);
            }
            // Shared holders coexist: a shared request is never left waiting behind only shared holders
            // when it is at the head of its queue.
            for (name, q) in &t.pending {
                if let Some(head) = q.first() {
                    let holders: Vec<LockMode> = t.held.iter().filter(|h| &t.info[*h].0 == name)
                        .map(|h| t.info[h].1).collect();
                    let compatible = match t.info[head].1 {
                        LockMode::Exclusive => holders.is_empty(),
                        LockMode::Shared => !holders.contains(&LockMode::Exclusive),
                    };
                    prop_assert!(!compatible, "head of {} is grantable but was left waiting", name);
                }
            }
        }
        // Draining: releasing everything grants every remaining request.
        let mut guard = 0;
        while !t.held.is_empty() {
            let id = t.held[0];
            t.held.remove(0);
            let d = m.release_lock(id);
            t.apply(&d, None);
            guard += 1;
            prop_assert!(guard < 10_000);
        }
        prop_assert!(t.pending.values().all(Vec::is_empty), "requests stranded after every release");
        prop_assert!(m.is_idle());
    }
}
