//! Deterministic simulation of the coordination protocol (issue 3): seeded runs of 2 to 16 contexts
//! over a simulated BroadcastChannel and localStorage, with crashes, long tasks, freezes, the
//! back/forward cache, closes and a protocol-version skew, checked at every step (see checks.rs).
//!
//! `WEBLOCKS_SIM_RUNS=n` sets the number of random runs per family (default below);
//! `WEBLOCKS_SIM_SEED=s` replays one seed (of any family) with a trace of every event.

mod bench;
mod checks;
mod rng;
mod scenarios;
mod world;

use std::rc::Rc;

use rng::Rng;
use weblocks::protocol::Config;
use weblocks::scheduler::LockMode;
use world::{Action, Env, Fault, World};

/// What a family of random runs may contain.
#[derive(Clone, Copy, Debug)]
struct Family {
    name: &'static str,
    faults: bool,
    lifecycle: bool,
    skew: bool,
    /// Context 0 starts alone and churns locks quickly; the others come later, briefly, and most of
    /// them leave, crash or stall: the lone member's fast path under joins (docs/PROTOCOL.md).
    lone: bool,
    /// Seeds of this family are `base + k`.
    base: u64,
}

const FAMILIES: [Family; 5] = [
    Family {
        name: "calm",
        faults: false,
        lifecycle: false,
        skew: false,
        lone: false,
        base: 1_000_000,
    },
    Family {
        name: "crashes and stalls",
        faults: true,
        lifecycle: false,
        skew: false,
        lone: false,
        base: 2_000_000,
    },
    Family {
        name: "freeze, bfcache, close",
        faults: true,
        lifecycle: true,
        skew: false,
        lone: false,
        base: 3_000_000,
    },
    Family {
        name: "version skew",
        faults: true,
        lifecycle: true,
        skew: true,
        lone: false,
        base: 4_000_000,
    },
    Family {
        name: "lone churner and visitors",
        faults: true,
        lifecycle: true,
        skew: false,
        lone: true,
        base: 5_000_000,
    },
];

const DEFAULT_RUNS: u64 = 500;

fn family_of(seed: u64) -> Family {
    *FAMILIES
        .iter()
        .rev()
        .find(|f| seed >= f.base)
        .unwrap_or(&FAMILIES[0])
}

/// Builds the world of one run from its seed.
fn build(seed: u64) -> (World, u64) {
    let family = family_of(seed);
    let mut rng = Rng::new(seed ^ 0x5eed);
    let env = Env {
        send_max: rng.range(0, 5),
        delivery_max: rng.range(1, 10),
        storage_lag_max: if rng.chance(0.1) {
            rng.range(50, 300)
        } else {
            rng.range(0, 20)
        },
        storage: !rng.chance(0.1),
        config: Config::default(),
    };
    let count = match rng.range(0, 9) {
        0..=4 => rng.range(2, 4),
        5..=7 => rng.range(5, 8),
        _ => rng.range(9, 16),
    } as usize;
    let skew_from = if family.skew {
        rng.range(1, count as u64 - 1) as usize
    } else {
        count
    };
    let versions: Vec<u32> = (0..count)
        .map(|i| if i >= skew_from { 2 } else { 1 })
        .collect();
    let mut world = World::new(seed, env, &versions);
    let active = if family.lone {
        rng.range(500, 1200)
    } else {
        rng.range(800, 2500)
    };
    let together = rng.chance(0.6) && !family.lone;
    // A quarter of the lifecycle runs model the IndexedDB log transport (js/log_channel.js, where there
    // is no BroadcastChannel): no page has a deputy there, and a reader can fall behind a trim of the
    // log. Decided from the seed, not drawn, so that the other runs keep their scenarios.
    let log_transport = family.lifecycle && seed % 4 == 3;
    let names: Vec<Rc<str>> = ["a", "b", "c"][..rng.range(1, 3) as usize]
        .iter()
        .map(|s| Rc::from(*s))
        .collect();
    for (i, version) in versions.iter().enumerate() {
        let start = if together || i == 0 {
            rng.range(0, 30)
        } else if family.lone {
            rng.range(100, active)
        } else {
            rng.range(0, active / 2)
        };
        let start = if *version == 2 {
            start.max(active / 3)
        } else {
            start
        };
        let lateness = if rng.chance(0.3) {
            rng.range(0, 800)
        } else {
            rng.range(0, 4)
        };
        let node = world.add_node(start, *version, lateness);
        // Most pages have a deputy (a worker that answers pings during long tasks); workers and pages
        // whose policy forbids blob workers do not.
        world.nodes[node].deputy = rng.chance(0.6) && !log_transport;
        // The workload.
        // Many contexts share the origin's load, as many tabs of one user would.
        let gap = if family.lone && i == 0 {
            rng.range(1, 15)
        } else {
            rng.range(60, 400) * (count as u64).div_ceil(4)
        };
        let mut t = start + rng.range(0, 40);
        while t < active {
            let action = if rng.chance(0.05) {
                Action::Query
            } else {
                let if_available = rng.chance(0.15);
                let steal = !if_available && rng.chance(0.05);
                Action::Request {
                    name: rng.pick(&names).clone(),
                    mode: if rng.chance(0.35) {
                        LockMode::Shared
                    } else {
                        LockMode::Exclusive
                    },
                    if_available,
                    steal,
                    hold: if rng.chance(0.2) {
                        0
                    } else if family.lone && i == 0 {
                        rng.range(1, 20)
                    } else {
                        rng.range(1, 300)
                    },
                    abort_after: (!steal && rng.chance(0.1)).then(|| rng.range(0, 200)),
                }
            };
            world.client_at(t, i, action);
            t += rng.range(1, 2 * gap);
        }
        // Faults.
        if family.lone && i > 0 && rng.chance(0.7) {
            // A visitor: leaves, crashes, hides or stalls soon after it came.
            let at = start + rng.range(0, 300);
            let fault = match rng.range(0, 3) {
                0 => Fault::Close,
                1 => Fault::Crash,
                2 => Fault::Hide(rng.range(50, 1000)),
                _ => Fault::Stall(rng.range(50, 1000)),
            };
            world.fault_at(at, i, fault);
        } else if family.faults && rng.chance(0.5) {
            let at = rng.range(start, active);
            let fault = match rng.range(0, 9) {
                0 | 1 => Fault::Crash,
                2..=5 => Fault::Stall(match rng.range(0, 2) {
                    0 => rng.range(5, 100),
                    1 => rng.range(100, 500),
                    _ => rng.range(500, 1500),
                }),
                _ if family.lifecycle => match rng.range(0, 4) {
                    0 => Fault::Freeze(if rng.chance(0.5) {
                        rng.range(50, 3000)
                    } else {
                        rng.range(9000, 15000)
                    }),
                    1 => Fault::Hide(rng.range(50, 3000)),
                    2 => Fault::Close,
                    3 => Fault::CutHide(rng.range(50, 3000)),
                    _ if log_transport => Fault::Gap(rng.range(50, 3000)),
                    _ => Fault::CutClose,
                },
                _ => Fault::Stall(rng.range(5, 300)),
            };
            world.fault_at(at, i, fault);
        }
    }
    (world, active)
}

/// Runs one seed to the end; returns the violations (empty when it passed).
fn run_seed(seed: u64, trace: bool) -> (World, Vec<String>) {
    let (mut world, active) = build(seed);
    if trace {
        world.trace = Some(Vec::new());
    }
    world.run_until(active);
    if world.violations.is_empty() {
        world.settle();
        // Long enough for freezes to end, evictions and joins to happen, and everything to be released.
        let quiet = world.run_until(active + 120_000);
        if !quiet {
            world
                .violations
                .push("not quiet two minutes after the workload ended".into());
        }
    }
    if world.violations.is_empty() {
        world.check_settled();
    }
    if world.violations.is_empty() {
        // Twice: a context that asks while not a member joins, and its join may change the origin's
        // state (a crashed holder's locks go with a new history) after others answered.
        for _ in 0..2 {
            for i in 0..world.nodes.len() {
                if world.nodes[i].status == world::Status::Running {
                    let at = world.now;
                    world.client_at(at, i, Action::Query);
                }
            }
            let until = world.now + 10_000;
            world.run_until(until);
        }
        world.check_queries_agree();
    }
    if world.violations.is_empty() {
        let probed = world.probe_stranded();
        if probed.is_some_and(|n| n > 0) {
            let until = world.now + 30_000;
            if !world.run_until(until) {
                world.violations.push("not quiet after the probes".into());
            }
            world.check_settled();
        }
        if probed.is_some() && world.violations.is_empty() {
            world.check_origin_idle();
        }
    }
    let v = world.violations.clone();
    (world, v)
}

fn report_failure(seed: u64, violations: &[String]) -> String {
    let family = family_of(seed);
    format!(
        "simulation failed: family {:?}, seed {seed}\n  {}\nreproduce with: WEBLOCKS_SIM_SEED={seed} cargo test --test protocol_sim -- replay --nocapture",
        family.name,
        violations.join("\n  ")
    )
}

fn runs() -> u64 {
    std::env::var("WEBLOCKS_SIM_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_RUNS)
}

fn run_family(family: Family) {
    let n = runs();
    let mut stats = std::collections::BTreeMap::new();
    let mut steps = 0;
    for k in 0..n {
        let seed = family.base + k;
        let (world, violations) = run_seed(seed, false);
        assert!(
            violations.is_empty(),
            "{}",
            report_failure(seed, &violations)
        );
        if !family.faults {
            // Without faults nobody is ever presumed dead.
            let wrongly = ["stolen:evicted", "stolen:reset"]
                .iter()
                .any(|k| world.stats.contains_key(k));
            assert!(
                !wrongly,
                "{}",
                report_failure(seed, &[format!("{:?}", world.stats)])
            );
        }
        if let Ok(stat) = std::env::var("WEBLOCKS_SIM_SHOW")
            && world.stats.contains_key(stat.as_str())
        {
            eprintln!("seed {seed}: {stat}");
        }
        steps += world.steps;
        for (k, v) in world.stats {
            *stats.entry(k).or_insert(0) += v;
        }
    }
    eprintln!(
        "family {:?}: {n} runs, {steps} steps, {stats:?}",
        family.name
    );
}

#[test]
fn calm_runs() {
    run_family(FAMILIES[0]);
}

#[test]
fn runs_with_crashes_and_stalls() {
    run_family(FAMILIES[1]);
}

#[test]
fn runs_with_freeze_bfcache_and_close() {
    run_family(FAMILIES[2]);
}

#[test]
fn runs_with_a_version_skew() {
    run_family(FAMILIES[3]);
}

#[test]
fn runs_with_a_lone_churner_and_visitors() {
    run_family(FAMILIES[4]);
}

/// `WEBLOCKS_SIM_SEED=s cargo test --test protocol_sim -- replay --nocapture` prints the trace of one
/// run and its violations.
#[test]
fn replay() {
    let Some(seed) = std::env::var("WEBLOCKS_SIM_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    else {
        return;
    };
    let (world, violations) = run_seed(seed, true);
    for line in world.trace.as_deref().unwrap_or_default() {
        println!("{line}");
    }
    assert!(
        violations.is_empty(),
        "{}",
        report_failure(seed, &violations)
    );
}
