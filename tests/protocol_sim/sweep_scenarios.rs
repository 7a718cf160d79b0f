//! A page's logout sweep (docs/PROTOCOL.md §7, "a page's sweep"), scripted: every check of checks.rs
//! runs at every step, and the end check that no deletion still waits.

use super::scenarios::{env, record as state, run};
use super::world::{Action, Fault, ReqState, World};

fn world(seed: u64, contexts: usize) -> World {
    let mut w = World::new(seed, env(), &[1]);
    for _ in 0..contexts {
        w.add_context(0, 1, 2);
    }
    w
}

/// With no lock held anywhere, the sweep completes at once, and a request made after it is granted.
#[test]
fn with_nothing_held_a_sweep_completes_at_once_and_locks_work_after_it() {
    for seed in 0..20 {
        let mut w = world(seed, 3);
        for i in 0..3 {
            w.client_at(10 + 10 * i as u64, i, Action::exclusive("warm", 5));
        }
        w.fault_at(500, 0, Fault::Sweep);
        run(&mut w, 600);
        assert!(
            w.deletions_waiting().is_empty(),
            "seed {seed}: {:?}",
            w.deletions_waiting()
        );
        w.client_at(700, 1, Action::exclusive("x", 50));
        w.client_at(710, 2, Action::exclusive("x", 50));
        run(&mut w, 2_000);
        let (a, b) = (state(&w, 1, 2), state(&w, 2, 2));
        assert_eq!(
            (a.0, b.0),
            (ReqState::Released, ReqState::Released),
            "seed {seed}"
        );
        assert!(b.1.unwrap() >= a.1.unwrap() + 50, "seed {seed}: exclusion");
        assert_eq!(w.stat("deletion waits told"), 0, "seed {seed}");
    }
}

/// A holder keeps its connections and its lock while the deletion waits (and says so once); a
/// context that only waits steps out, and is granted after the holder's release, once the deletion has
/// completed; so is a newcomer. No lock is stolen (the checks would report it).
#[test]
fn a_sweep_beside_a_holder_waits_for_its_release_and_the_waiters_are_granted_after() {
    for seed in 0..20 {
        let mut w = world(seed, 3);
        let newcomer = w.add_context(1_200, 1, 2);
        w.client_at(10, 0, Action::exclusive("x", 2_000));
        w.client_at(300, 1, Action::exclusive("x", 10));
        w.fault_at(1_000, 2, Fault::Sweep);
        w.client_at(1_300, newcomer, Action::exclusive("x", 10));
        run(&mut w, 1_900);
        assert_eq!(
            state(&w, 0, 1).0,
            ReqState::Held,
            "seed {seed}: the holder keeps it"
        );
        assert!(
            !w.deletions_waiting().is_empty(),
            "seed {seed}: the deletion waits"
        );
        assert_eq!(w.stat("deletion waits told"), 1, "seed {seed}: said once");
        run(&mut w, 4_000);
        assert!(
            w.deletions_waiting().is_empty(),
            "seed {seed}: {:?}",
            w.deletions_waiting()
        );
        let released = state(&w, 0, 1).1.unwrap() + 2_000;
        for (i, id) in [(1, 1), (newcomer, 1)] {
            let (s, at) = state(&w, i, id);
            assert_eq!(s, ReqState::Released, "seed {seed}: ctx{i}");
            assert!(
                at.unwrap() >= released,
                "seed {seed}: ctx{i} granted before the release"
            );
        }
    }
}
