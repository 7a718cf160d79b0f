//! How long the log grows (docs/PROTOCOL.md §12, "Trimming"): the members' own trims
//! (`Effect::TrimLog`) while contexts come and go, and while members never rest.

use std::rc::Rc;

use weblocks::protocol::wire::PROTOCOL_VERSION;
use weblocks::protocol::{Config, Transport, Wake};
use weblocks::scheduler::LockOptions;

use super::world::{Action, Delivery, Env, World};

/// How long the churn runs (`WEBLOCKS_SIM_CHURN_MS`, for the hour's figure: 3,600,000).
fn churn_ms() -> u64 {
    std::env::var("WEBLOCKS_SIM_CHURN_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60_000)
}

/// The log transport carried as WebKit delivers, with the checks of every run; members that are not
/// alone keep `keep` entries.
fn world(seed: u64, keep: u64) -> World {
    let env = Env {
        send_max: 2,
        delivery_max: 5,
        storage_lag_max: 5,
        storage: true,
        delivery: Delivery::OwnProcessFirst,
        config: Config {
            transport: Transport::Log(Wake::Carrier),
            log_keep: keep,
            ..Config::default()
        },
        reask_on_versionchange: false,
    };
    let mut w = World::new(seed, env, &[PROTOCOL_VERSION]);
    w.max_steps = u64::MAX;
    w
}

fn request(hold: u64) -> Action {
    Action::Request {
        name: Rc::from("x"),
        options: LockOptions::default(),
        hold,
        abort_after: None,
    }
}

/// A context takes `x` for 10 ms every 50 ms; four others take turns to come every 150–550 ms, take
/// `x` once or twice, and go idle, so that they make way and leave the protocol (as workers that end
/// after 2 s idle do, and contexts that make way): memberships come and go all hour, and no membership
/// lives long. The log stays short: once the busy context is the history's sole member again, it trims
/// what it applied.
#[test]
fn an_hour_of_contexts_coming_and_going_keeps_the_log_short() {
    let mut w = world(11, Config::default().log_keep);
    let until = churn_ms();
    // The per-step checks cost more the longer a run has been going: runs longer than ten minutes (the
    // hour's figure) skip them, the families check every step of theirs.
    w.checking = until <= 600_000;
    let busy = w.add_context(0, PROTOCOL_VERSION, 1);
    let visitors: Vec<usize> = (0..4)
        .map(|k| w.add_context(500 + 700 * k, PROTOCOL_VERSION, 1))
        .collect();
    let mut t = 10;
    while t < until {
        w.client_at(t, busy, request(10));
        t += 50;
    }
    let mut t = 1_000;
    let mut k = 0;
    while t < until {
        let v = visitors[k % visitors.len()];
        w.client_at(t, v, request(20));
        if k % 3 == 0 {
            w.client_at(t + 5, v, request(5));
        }
        t += 150 + 100 * (k as u64 % 5);
        k += 1;
    }
    let started = std::time::Instant::now();
    w.run_until(until);
    let appended = w.log_len() + w.floor();
    eprintln!(
        "{} s of churn: {appended} entries appended, {} at the end, at most {} at once ({:?})",
        until / 1000,
        w.log_len(),
        w.longest_log,
        started.elapsed()
    );
    assert!(w.violations.is_empty(), "{:?}", w.violations);
    assert!(
        appended > 10 * w.longest_log,
        "churn: {appended} appended, {} at most",
        w.longest_log
    );
    assert!(
        w.longest_log <= 1_000,
        "the log held {} entries at once",
        w.longest_log
    );
}

/// Two contexts that never go idle: neither is ever the sole member, and each keeps the last
/// `log_keep` entries it applied (a thousand here, for a short run). The log stops growing there.
#[test]
fn members_that_are_never_alone_keep_a_bounded_log() {
    const KEEP: u64 = 1_000;
    let mut w = world(12, KEEP);
    let a = w.add_context(0, PROTOCOL_VERSION, 1);
    let b = w.add_context(0, PROTOCOL_VERSION, 1);
    let until = 10_000;
    let mut t = 10;
    while t < until {
        w.client_at(t, a, request(2));
        w.client_at(t + 3, b, request(2));
        t += 10;
    }
    w.run_until(until);
    let appended = w.log_len() + w.floor();
    eprintln!(
        "two busy members: {appended} entries appended, at most {} at once",
        w.longest_log
    );
    assert!(w.violations.is_empty(), "{:?}", w.violations);
    assert!(appended > 2 * KEEP, "{appended} appended");
    assert!(
        w.longest_log <= KEEP + 2 * weblocks::protocol::TRIM_STEP,
        "the log held {} entries at once",
        w.longest_log
    );
}
