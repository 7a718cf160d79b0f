//! Host benchmarks of the protocol core: the cost per request of queue drains and of uncontended
//! cycles, on the simulator's ideal origin (one order, no delays, no JS) with the per-step checks off.
//! They print figures and assert only that every request was served; run them with
//! `cargo test --release --test protocol_sim -- --ignored bench --nocapture`.

use std::rc::Rc;
use std::time::Instant;

use weblocks::protocol::Config;
use weblocks::scheduler::LockOptions;

use super::world::{Action, World};

/// An ideal origin of `count` contexts that have each had one lock (so every one has joined).
fn warm(count: usize) -> World {
    let mut w = World::ideal(count, Config::default());
    w.checking = false;
    w.recording = false;
    w.max_steps = u64::MAX;
    for i in 0..count {
        w.client_at(w.now, i, request("warm", 0, false));
    }
    assert!(
        w.run_until_done(|w| w.stat("releases") == count as u64),
        "warm-up stalled"
    );
    w
}

fn request(name: &str, hold: u64, if_available: bool) -> Action {
    Action::Request {
        name: Rc::from(name),
        options: LockOptions {
            if_available,
            ..LockOptions::default()
        },
        hold,
        abort_after: None,
    }
}

/// `n` requests of context `waiter` queued behind locks held by context 0 over `names` names, then
/// drained: every grant is released at once. Returns µs per request (enqueue + drain).
fn drain(contexts: usize, waiter: usize, n: u64, names: u64) -> f64 {
    let mut w = warm(contexts);
    let first_held = w.contexts[0].next_id;
    for k in 0..names {
        w.client_at(w.now, 0, request(&format!("n{k}"), u64::MAX, false));
    }
    assert!(
        w.run_until_done(|w| w.stat("grants") == (contexts as u64 + names)),
        "the holder was never granted"
    );
    let before = w.stat("releases");
    let start = Instant::now();
    for id in 0..n {
        w.client_at(
            w.now,
            waiter,
            request(&format!("n{}", id % names), 0, false),
        );
    }
    for id in first_held..first_held + names {
        w.client_at(w.now, 0, Action::Release(id));
    }
    let expected = before + n + names;
    assert!(
        w.run_until_done(|w| w.stat("releases") == expected),
        "drain stalled after {} of {n}",
        w.stat("releases") - before
    );
    start.elapsed().as_secs_f64() * 1e6 / n as f64
}

/// `n` sequential uncontended request/release cycles (or `ifAvailable` misses against a held lock) in
/// a lone context. Returns µs per cycle and the transmissions per cycle.
fn lone(n: u64, misses: bool) -> (f64, f64) {
    let mut w = warm(1);
    w.client_at(w.now, 0, request("held", u64::MAX, false));
    assert!(w.run_until_done(|w| w.stat("grants") == 2));
    let transmits = w.stat("transmits");
    let releases = w.stat("releases");
    let start = Instant::now();
    if misses {
        for _ in 0..n {
            w.client_at(w.now, 0, request("held", 0, true));
        }
        assert!(
            w.run_until_done(|w| w.stat("not available") == n),
            "a miss was never reported"
        );
    } else {
        let name = Rc::from("free");
        w.client_at(w.now, 0, Action::Loop { name, rounds: n });
        assert!(
            w.run_until_done(|w| w.stat("releases") == releases + n),
            "the cycles stalled"
        );
    }
    let transmits = w.stat("transmits") - transmits;
    (
        start.elapsed().as_secs_f64() * 1e6 / n as f64,
        transmits as f64 / n as f64,
    )
}

/// `contexts` contexts contending on one name, each re-requesting as soon as it releases (scenario 7
/// without the browser): µs of participant work per message delivered to one context.
fn contention(contexts: usize, rounds: u64) -> f64 {
    let mut w = warm(contexts);
    let deliveries = w.stat("deliveries");
    let releases = w.stat("releases");
    let start = Instant::now();
    for i in 0..contexts {
        let name = Rc::from("L");
        w.client_at(w.now, i, Action::Loop { name, rounds });
    }
    assert!(
        w.run_until_done(|w| w.stat("releases") == releases + rounds * contexts as u64),
        "contention stalled"
    );
    let deliveries = w.stat("deliveries") - deliveries;
    start.elapsed().as_secs_f64() * 1e6 / deliveries as f64
}

/// The fastest of three runs (the machine may be busy with other work).
fn best_of_3(run: impl Fn() -> f64) -> f64 {
    (0..3).map(|_| run()).fold(f64::INFINITY, f64::min)
}

#[test]
#[ignore = "benchmark: run with --release -- --ignored bench --nocapture"]
fn bench_drain() {
    for (label, contexts, waiter) in [("lone context", 1, 0), ("two contexts", 2, 1)] {
        let mut per = Vec::new();
        for n in [1_000, 10_000, 100_000] {
            let us = best_of_3(|| drain(contexts, waiter, n, 1));
            eprintln!("drain, {label}, {n} on one name: {us:.2} µs/request");
            per.push(us);
        }
        eprintln!("drain, {label}: growth 100k/1k = {:.2}", per[2] / per[0]);
        let us = best_of_3(|| drain(contexts, waiter, 10_000, 1_000));
        eprintln!("drain, {label}, 10000 over 1000 names: {us:.2} µs/request");
    }
}

#[test]
#[ignore = "benchmark: run with --release -- --ignored bench --nocapture"]
fn bench_lone() {
    let (us, transmits) = lone(20_000, false);
    eprintln!("lone context, uncontended cycle: {us:.2} µs, {transmits:.1} transmissions");
    let (us, transmits) = lone(20_000, true);
    eprintln!("lone context, ifAvailable miss: {us:.2} µs, {transmits:.1} transmissions");
}

#[test]
#[ignore = "benchmark: run with --release -- --ignored bench --nocapture"]
fn bench_contention() {
    for contexts in [4, 8] {
        let us = best_of_3(|| contention(contexts, 20_000));
        eprintln!("contention, {contexts} contexts: {us:.3} µs per message per context");
    }
}
