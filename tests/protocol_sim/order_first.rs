//! Scenarios around the cap on what a context decodes (docs/PROTOCOL.md §12, "order first, decode
//! second"): what one context sends in one task is split below it, an entry of the log that nobody
//! decodes still takes its place and is skipped by every reader alike, and a reader that finds a key
//! the log will never give it steps out and joins again instead of waiting and reading for ever.
//! Each runs the production participants in the simulated world, with every check of checks.rs.

use std::rc::Rc;

use weblocks::protocol::wire::PROTOCOL_VERSION;
use weblocks::protocol::{Config, Transport, Wake};
use weblocks::scheduler::{LockMode, LockOptions};

use super::world::{Action, Delivery, Env, Fault, ReqState, World};

fn env(transport: Transport, storage: bool) -> Env {
    Env {
        send_max: 2,
        delivery_max: 5,
        storage_lag_max: 5,
        storage,
        delivery: if transport == Transport::Broadcast {
            Delivery::TotalOrder
        } else {
            Delivery::OwnProcessFirst
        },
        config: Config {
            transport,
            ..Config::default()
        },
        reask_on_versionchange: false,
    }
}

fn request(name: &str, hold: u64) -> Action {
    Action::exclusive(name, hold)
}

/// Two members from the start over `transport`, and a third context that starts at `late_at`.
fn origin(seed: u64, transport: Transport, late_at: u64) -> (World, usize) {
    let mut w = World::new(seed, env(transport, true), &[PROTOCOL_VERSION]);
    w.add_context(0, PROTOCOL_VERSION, 2);
    w.add_context(0, PROTOCOL_VERSION, 2);
    let late = w.add_context(late_at, PROTOCOL_VERSION, 2);
    (w, late)
}

const TRANSPORTS: [Transport; 3] = [
    Transport::Broadcast,
    Transport::Log(Wake::Carrier),
    Transport::Log(Wake::Pokes),
];

/// Runs the workload to `until`, then lets everything settle and checks that every request settled
/// and every context is quiet.
fn finish(w: &mut World, until: u64) {
    w.run_until(until);
    assert!(w.violations.is_empty(), "{:?}", w.violations);
    w.settle();
    let quiet = w.run_until(until + 120_000);
    assert!(w.violations.is_empty(), "{:?}", w.violations);
    assert!(quiet, "not quiet two minutes after the workload");
    w.check_settled();
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// About 9,000 requests made in one task while another member exists: more slots than a context
/// decodes in one post. They go in several posts, in order, and every one of them is decided (here
/// "not available": the other member holds the name, which keeps the run short).
#[test]
fn requests_made_in_one_task_beyond_the_cap_go_in_several_posts_and_all_settle() {
    for transport in TRANSPORTS {
        let mut w = World::new(7, env(transport, true), &[PROTOCOL_VERSION]);
        w.add_context(0, PROTOCOL_VERSION, 2);
        w.add_context(0, PROTOCOL_VERSION, 2);
        w.client_at(0, 0, request("x", 3_000));
        w.client_at(10, 1, request("y", 3_000));
        let mut bulk: Vec<Action> = (0..9_000)
            .map(|_| Action::Request {
                name: Rc::from("x"),
                options: LockOptions {
                    mode: LockMode::Shared,
                    if_available: true,
                    ..LockOptions::default()
                },
                hold: 0,
                abort_after: None,
            })
            .collect();
        bulk.push(request("z", 10));
        w.client_at(1_000, 1, Action::Batch(bulk));
        finish(&mut w, 5_000);
        let requests = &w.contexts[1].requests;
        let missed = requests
            .values()
            .filter(|r| r.state == ReqState::NotAvailable)
            .count();
        assert_eq!(missed, 9_000, "{transport:?}");
        assert!(requests[&9_002].granted_at.is_some(), "{transport:?}");
        assert!(w.stat("transmits") > 2, "{transport:?}");
    }
}

/// A member with about 21,000 requests queued behind a lock it holds, and a newcomer: the state
/// transfer that admits it is longer than a context decodes in one message, so it goes in parts, and
/// the newcomer sees every queued request.
#[test]
fn a_state_transfer_beyond_the_cap_goes_in_parts_and_admits_the_joiner() {
    for transport in TRANSPORTS {
        let mut w = World::new(5, env(transport, true), &[PROTOCOL_VERSION]);
        w.add_context(0, PROTOCOL_VERSION, 2);
        let late = w.add_context(1_000, PROTOCOL_VERSION, 2);
        // Held for the whole run: granting 21,000 requests would only make it long.
        w.client_at(0, 0, request("x", u64::MAX));
        let queued = (0..21_000)
            .map(|_| Action::Request {
                name: Rc::from("x"),
                options: LockOptions {
                    mode: LockMode::Shared,
                    ..LockOptions::default()
                },
                hold: 0,
                abort_after: None,
            })
            .collect();
        w.client_at(500, 0, Action::Batch(queued));
        w.client_at(1_100, late, Action::Query);
        w.client_at(
            1_100,
            late,
            Action::Request {
                name: Rc::from("x"),
                options: LockOptions {
                    if_available: true,
                    ..LockOptions::default()
                },
                hold: 0,
                abort_after: None,
            },
        );
        w.run_until(2_500);
        assert!(w.violations.is_empty(), "{transport:?}: {:?}", w.violations);
        let shown = w.contexts[late]
            .queries_answered
            .first()
            .map(|s| s.pending.len());
        assert_eq!(shown, Some(21_000), "{transport:?}");
        assert_eq!(
            w.contexts[late].requests[&1].state,
            ReqState::NotAvailable,
            "{transport:?}"
        );
    }
}

/// An entry that no context decodes (here, longer than the cap) appended while a member holds a
/// lock: every reader skips it at its key, and goes on; nobody reads the log back to back.
#[test]
fn an_entry_nobody_decodes_takes_its_place_and_every_reader_skips_it() {
    for transport in [Transport::Log(Wake::Carrier), Transport::Log(Wake::Pokes)] {
        let (mut w, late) = origin(11, transport, 1_500);
        w.client_at(0, 0, request("x", 2_000));
        w.client_at(10, 1, request("y", 600));
        w.fault_at(1_000, 1, Fault::Undecodable);
        w.client_at(1_010, 1, request("x", 10));
        w.client_at(1_600, late, request("x", 10));
        w.run_until(1_400);
        let reads = w.reads;
        finish(&mut w, 4_000);
        assert_eq!(w.stat("undecodable posts"), 1);
        // The newcomer waited for the holder: granted after its release, not by a new history.
        let x = &w.contexts[late].requests[&1];
        assert!(
            x.granted_at.is_some_and(|t| t >= 2_000),
            "{transport:?}: {x:?}"
        );
        assert_eq!(w.stat("stolen:reset"), 0, "{transport:?}");
        let contexts = w.contexts.len() as u64;
        assert!(
            w.reads - reads < 200 * contexts,
            "{transport:?}: {} reads",
            w.reads - reads
        );
    }
}

/// An edge that drops a log entry it cannot decode, key and all (the fault the order above rules out,
/// and what a frame of another log's key looks like to a reader): every reader finds a key missing that
/// the log's reads never give it. Each steps out (its locks reported lost) and joins again, instead of
/// waiting behind that key for ever and reading the log back to back while a newcomer starts a history
/// and is granted a lock the stuck member still believes it holds.
#[test]
fn a_key_the_log_never_gives_makes_its_reader_step_out_and_join_again() {
    for transport in [Transport::Log(Wake::Carrier), Transport::Log(Wake::Pokes)] {
        let (mut w, late) = origin(7, transport, 3_000);
        w.edge_drops_undecodable = true;
        w.client_at(0, 0, request("x", 60_000));
        w.client_at(10, 1, request("y", 60_000));
        w.fault_at(1_000, 1, Fault::Undecodable);
        w.client_at(3_100, late, request("x", 100));
        w.run_until(2_000);
        let reads = w.reads;
        w.run_until(20_000);
        assert!(w.violations.is_empty(), "{transport:?}: {:?}", w.violations);
        assert!(
            w.reads - reads < 2_000,
            "{transport:?}: {} reads in 18 s",
            w.reads - reads
        );
        // The members learnt that they lost their locks; the newcomer waits behind the rejoined holder.
        assert_eq!(
            w.contexts[0].requests[&1].state,
            ReqState::Stolen(weblocks::protocol::LossReason::Reset),
            "{transport:?}"
        );
        finish(&mut w, 80_000);
    }
}

/// A context (a worker, or a page with storage) that asks for a lock while the only member, which
/// holds it, is in a 300 ms long task: it finds the holder's liveness database open, waits, and is
/// granted the lock once it is released; it never starts a history over the busy holder.
#[test]
fn a_joiner_waits_for_a_busy_holder() {
    let overlap = |storage: bool| {
        let env = env(Transport::Broadcast, storage);
        let mut w = World::new(42, env, &[PROTOCOL_VERSION]);
        w.add_context(0, PROTOCOL_VERSION, 2);
        let late = w.add_context(1_000, PROTOCOL_VERSION, 2);
        w.client_at(0, 0, request("x", 3_000));
        w.fault_at(1_050, 0, Fault::Stall(300));
        w.client_at(1_100, late, request("x", 1_000));
        let mut overlap = None;
        while w.now < 5_000 {
            w.advance(1);
            let holders = (0..2)
                .filter(|&i| {
                    w.contexts[i].requests.get(&1).map(|r| r.state) == Some(ReqState::Held)
                })
                .count();
            if holders > 1 {
                overlap.get_or_insert(w.now);
            }
        }
        assert_eq!(w.contexts[0].requests[&1].state, ReqState::Released);
        assert_eq!(w.contexts[late].requests[&1].state, ReqState::Released);
        overlap
    };
    for storage in [false, true] {
        assert_eq!(
            overlap(storage),
            None,
            "storage {storage}: both inside their callbacks at once"
        );
    }
}
