//! Host benchmarks of the protocol core: the cost per request of queue drains and of
//! uncontended cycles, with the channel reduced to an in-order loop (no delays, no JS). They print
//! figures and assert only that every request was served; run them with
//! `cargo test --release --test protocol_sim -- --ignored bench --nocapture`.

use std::collections::VecDeque;
use std::time::Instant;

use weblocks::protocol::wire::{self, Value};
use weblocks::protocol::{Config, Effect, Node};
use weblocks::scheduler::LockMode;

/// Contexts on one ideal channel: every message reaches every context (its sender too) in post order.
struct Bus {
    nodes: Vec<Node>,
    channel: VecDeque<Vec<Value>>,
    timers: Vec<Option<u64>>,
    now: u64,
    /// (context, id) of grants and misses not consumed yet by the driver.
    granted: VecDeque<(usize, u64)>,
    missed: usize,
    posts: usize,
    delivered: u64,
}

impl Bus {
    fn new(count: usize) -> Bus {
        Bus {
            nodes: (0..count)
                .map(|i| Node::new(&format!("ctx{i}"), Config::default()))
                .collect(),
            channel: VecDeque::new(),
            timers: vec![None; count],
            now: 1_000_000,
            granted: VecDeque::new(),
            missed: 0,
            posts: 0,
            delivered: 0,
        }
    }

    fn effects(&mut self, i: usize) {
        for e in self.nodes[i].drain() {
            match e {
                Effect::Post(m) => {
                    self.posts += 1;
                    self.channel.push_back(wire::encode(&m));
                }
                Effect::SetTimer { at } => self.timers[i] = Some(at),
                Effect::ClearTimer => self.timers[i] = None,
                Effect::Granted(id) => self.granted.push_back((i, id)),
                Effect::NotAvailable(_) => self.missed += 1,
                _ => {}
            }
        }
    }

    /// Delivers every message in flight; fires the earliest timer when none is (simulated time moves
    /// only then). Returns false when nothing at all is left to do.
    fn step(&mut self) -> bool {
        if let Some(msg) = self.channel.pop_front() {
            // Simulated time moves too, about as fast as a browser delivers messages.
            self.delivered += 1;
            if self.delivered.is_multiple_of(64) {
                self.now += 1;
            }
            for i in 0..self.nodes.len() {
                self.nodes[i].deliver(self.now, &msg);
                self.effects(i);
            }
            return true;
        }
        let next = (0..self.nodes.len())
            .filter_map(|i| self.timers[i].map(|at| (at, i)))
            .min();
        let Some((at, i)) = next else {
            return false;
        };
        self.timers[i] = None;
        if at > self.now {
            self.now = at;
        }
        self.nodes[i].timer(self.now);
        self.effects(i);
        true
    }

    fn request(&mut self, i: usize, id: u64, name: &str, if_available: bool) {
        let now = self.now;
        self.nodes[i].request(now, id, name, LockMode::Exclusive, if_available, false);
        self.effects(i);
    }

    fn release(&mut self, i: usize, id: u64) {
        let now = self.now;
        self.nodes[i].release(now, id);
        self.effects(i);
    }

    /// Runs until `(i, id)` is granted (and consumes that grant).
    fn until_granted(&mut self, i: usize, id: u64) {
        loop {
            if let Some(k) = self.granted.iter().position(|g| *g == (i, id)) {
                self.granted.remove(k);
                return;
            }
            assert!(self.step(), "{id} never granted");
        }
    }
}

/// `n` requests of context `waiter` queued behind a lock held by context 0 over `names` names, then
/// drained: every grant is released at once. Returns µs per request (enqueue + drain).
fn drain(contexts: usize, waiter: usize, n: u64, names: u64) -> f64 {
    let mut bus = Bus::new(contexts);
    for i in 0..contexts {
        bus.request(i, 1_000_000_000, &format!("warm{i}"), false);
        bus.until_granted(i, 1_000_000_000);
        bus.release(i, 1_000_000_000);
    }
    for k in 0..names {
        bus.request(0, 2_000_000_000 + k, &format!("n{k}"), false);
        bus.until_granted(0, 2_000_000_000 + k);
    }
    let start = Instant::now();
    for id in 0..n {
        bus.request(waiter, id, &format!("n{}", id % names), false);
    }
    for k in 0..names {
        bus.release(0, 2_000_000_000 + k);
    }
    let mut served = 0;
    while served < n {
        if let Some((i, id)) = bus.granted.pop_front() {
            bus.release(i, id);
            served += 1;
        } else {
            assert!(bus.step(), "drain stalled after {served} of {n}");
        }
    }
    start.elapsed().as_secs_f64() * 1e6 / n as f64
}

/// `n` sequential uncontended request/release cycles (or `ifAvailable` misses against a held lock) in
/// a lone context. Returns µs per cycle and the messages posted per cycle.
fn lone(n: u64, misses: bool) -> (f64, f64) {
    let mut bus = Bus::new(1);
    bus.request(0, 1_000_000_000, "held", false);
    bus.until_granted(0, 1_000_000_000);
    let posts = bus.posts;
    let start = Instant::now();
    for id in 0..n {
        if misses {
            let before = bus.missed;
            bus.request(0, id, "held", true);
            while bus.missed == before {
                assert!(bus.step(), "miss {id} never reported");
            }
        } else {
            bus.request(0, id, "free", false);
            bus.until_granted(0, id);
            bus.release(0, id);
        }
    }
    (
        start.elapsed().as_secs_f64() * 1e6 / n as f64,
        (bus.posts - posts) as f64 / n as f64,
    )
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
    let (us, posts) = lone(20_000, false);
    eprintln!("lone context, uncontended cycle: {us:.2} µs, {posts:.1} posts");
    let (us, posts) = lone(20_000, true);
    eprintln!("lone context, ifAvailable miss: {us:.2} µs, {posts:.1} posts");
}

/// `contexts` contexts contending on one name, each re-requesting as soon as it releases (scenario 7
/// without the browser): µs of node work per message delivered to one context.
fn contention(contexts: usize, rounds: u64) -> f64 {
    let mut bus = Bus::new(contexts);
    for i in 0..contexts {
        bus.request(i, 1, "L", false);
    }
    let start = Instant::now();
    let delivered = bus.delivered;
    let mut cs = 0;
    while cs < rounds * contexts as u64 {
        if let Some((i, id)) = bus.granted.pop_front() {
            bus.release(i, id);
            bus.request(i, id + 1, "L", false);
            cs += 1;
        } else {
            assert!(bus.step(), "contention stalled");
        }
    }
    start.elapsed().as_secs_f64() * 1e6 / ((bus.delivered - delivered) * contexts as u64) as f64
}

#[test]
#[ignore = "benchmark: run with --release -- --ignored bench --nocapture"]
fn bench_contention() {
    for contexts in [4, 8] {
        let us = best_of_3(|| contention(contexts, 20_000));
        eprintln!("contention, {contexts} contexts: {us:.3} µs per message per context");
    }
}
