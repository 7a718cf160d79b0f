//! The participant's handlers, one behaviour at a time, on the simulator's ideal origin (one order,
//! every delivery at once, timers on time, every effect recorded, every check of checks.rs active):
//! each test drives contexts through the world's clients, faults and direct calls and looks at the
//! effects they carried out.

use std::rc::Rc;

use weblocks::protocol::wire::{
    self, Body, Decoded, KIND_JOIN, MemberKey, Message, PROTOCOL_VERSION, Value, encode_versioned,
};
use weblocks::protocol::{
    BackForwardCache, Config, Effect, LossReason, Participant, Transport, Wake,
};
use weblocks::scheduler::{LockMode, LockOptions};

use super::world::{Action, Fault, ReqState, World};

fn config() -> Config {
    Config::default()
}

/// As WebKit's pages: stepping out on entering the back/forward cache.
fn releasing() -> Config {
    Config {
        back_forward_cache: BackForwardCache::Release,
        ..Config::default()
    }
}

/// An exclusive request for `name`, held until released.
fn request(name: &str) -> Action {
    Action::Request {
        name: Rc::from(name),
        options: LockOptions::default(),
        hold: u64::MAX,
        abort_after: None,
    }
}

fn if_available(name: &str) -> Action {
    Action::Request {
        name: Rc::from(name),
        options: LockOptions {
            if_available: true,
            ..LockOptions::default()
        },
        hold: u64::MAX,
        abort_after: None,
    }
}

/// The messages the effects transmit, in order.
fn posts(effects: &[Effect]) -> Vec<Body> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Transmit(messages) => Some(messages.iter().map(|m| m.body.clone())),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The effects that reach the Engine's sink.
fn engine_effects(effects: &[Effect]) -> Vec<Effect> {
    effects
        .iter()
        .filter(|e| {
            matches!(
                e,
                Effect::Granted(_)
                    | Effect::NotAvailable(_)
                    | Effect::Stolen { .. }
                    | Effect::Snapshot { .. }
            )
        })
        .cloned()
        .collect()
}

/// Long enough for every context that asked to join to be synced.
fn settle(w: &mut World) {
    w.advance(1_000);
}

fn ok(w: &World) {
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

fn is_member(w: &World, observer: usize, i: usize) -> bool {
    let key = w.contexts[i].participant.member_key();
    w.contexts[observer]
        .participant
        .replica()
        .expect("synced")
        .member(&key)
        .is_some()
}

fn is_pending(w: &World, observer: usize, i: usize, id: u64) -> bool {
    let key = w.contexts[i].participant.member_key();
    w.contexts[observer]
        .participant
        .replica()
        .expect("synced")
        .is_pending(&key, id)
}

#[test]
fn a_first_request_opens_its_liveness_database_joins_and_starts_a_history_once_the_census_is_empty()
{
    let mut w = World::ideal(1, config());
    let fx = w.act(0, request("x"));
    assert_eq!(posts(&fx), [], "the Join waits for its liveness database");
    assert!(fx.contains(&Effect::OpenAlive));
    assert!(
        fx.iter().position(|e| *e == Effect::OpenChannels)
            < fx.iter().position(|e| *e == Effect::OpenAlive),
        "the channels open before the Join goes out"
    );
    w.advance(20);
    // Its database opened, its Join came back, the census listed nobody else: no wait for silence.
    let posted = posts(&w.contexts[0].recorded);
    assert!(
        matches!(posted[..], [Body::Join { watch }, Body::Genesis] if watch != 0),
        "{posted:?}"
    );
    assert!(w.contexts[0].recorded.contains(&Effect::Census));
    // The Genesis made it the lone member: it decides its request alone and posts nothing more.
    assert_eq!(
        engine_effects(&w.contexts[0].recorded),
        [Effect::Granted(1)]
    );
    ok(&w);
}

#[test]
fn a_lone_member_decides_alone_and_its_decisions_are_seen_by_the_observer() {
    let mut w = World::ideal(1, config());
    w.act(0, request("x"));
    settle(&mut w);
    let decided = w.stat("decided alone");
    let fx = w.act(0, request("x"));
    let fx2 = w.act(0, Action::Release(1));
    let (aborted, _) = w.call(0, |p, now| p.handle_abort(now, 99));
    assert!(!aborted, "unknown request");
    w.act(
        0,
        Action::Request {
            name: Rc::from("y"),
            options: LockOptions {
                mode: LockMode::Shared,
                ..LockOptions::default()
            },
            hold: u64::MAX,
            abort_after: None,
        },
    );
    w.act(0, request("y"));
    w.act(0, Action::Abort(4));
    assert_eq!(w.contexts[0].requests[&4].state, ReqState::Aborted);
    assert_eq!(posts(&fx), []);
    assert_eq!(posts(&fx2), []);
    assert_eq!(engine_effects(&fx2), [Effect::Granted(2)]);
    // Request x, Release 1, Request y, Request y, Abort 4: decided without a message, each applied by
    // the observer where the context applied it (the checks compare their outcomes).
    assert_eq!(w.stat("decided alone") - decided, 5);
    assert_eq!(w.log.len(), 2, "only the Join and the Genesis were posted");
    let replica = w.contexts[0].participant.replica().unwrap().snapshot();
    assert_eq!(replica.held.len(), 2, "x by #2 and y by #3");
    assert!(replica.pending.is_empty());
    w.pump();
    ok(&w);
}

#[test]
fn a_second_context_gets_a_state_transfer_and_queues_behind() {
    let mut w = World::ideal(2, config());
    w.act(0, request("x"));
    settle(&mut w);
    w.act(1, request("x"));
    w.pump();
    // Context 0 answered at once (rank 0) with a State; context 1 is synced and its request queued.
    assert!(
        posts(&w.contexts[0].recorded)
            .iter()
            .any(|b| matches!(b, Body::State(_)))
    );
    assert!(!posts(&w.contexts[1].recorded).contains(&Body::Genesis));
    assert!(is_pending(&w, 1, 1, 1));
    w.act(0, Action::Release(1));
    w.pump();
    assert_eq!(
        engine_effects(&w.contexts[1].recorded),
        [Effect::Granted(1)]
    );
    ok(&w);
}

#[test]
fn abort_answers_from_the_local_state() {
    let mut w = World::ideal(2, config());
    w.act(0, request("x"));
    settle(&mut w);
    // Queued (not sent yet): removed without a message.
    let fx = w.act(1, request("x"));
    assert_eq!(posts(&fx), [], "its Join waits for its liveness database");
    let fx = w.act(1, Action::Abort(1));
    assert_eq!(w.contexts[1].requests[&1].state, ReqState::Aborted);
    assert_eq!(posts(&fx), []);
    w.act(1, request("x"));
    w.pump();
    // Sent and pending: an Abort message.
    let fx = w.act(1, Action::Abort(2));
    assert_eq!(w.contexts[1].requests[&2].state, ReqState::Aborted);
    assert_eq!(posts(&fx), [Body::Abort { id: 2 }]);
    // Held: false. Unknown: false. (The world's client checks what abort returned.)
    w.act(0, Action::Abort(1));
    assert_eq!(w.contexts[0].requests[&1].state, ReqState::Held);
    let (aborted, _) = w.call(0, |p, now| p.handle_abort(now, 42));
    assert!(!aborted);
    w.pump();
    assert!(
        w.contexts[0]
            .participant
            .replica()
            .unwrap()
            .snapshot()
            .pending
            .is_empty()
    );
    ok(&w);
}

#[test]
fn an_idle_member_makes_way_for_a_busy_one_which_then_decides_alone() {
    let mut w = World::ideal(3, config());
    w.act(0, request("x"));
    settle(&mut w);
    w.act(1, request("y"));
    w.act(2, Action::Query);
    settle(&mut w);
    // All three are members; 1 and 2 are idle (1 released, 2 only queried).
    w.act(1, Action::Release(1));
    w.act(0, Action::Release(1));
    w.pump();
    assert!(is_member(&w, 0, 1) && is_member(&w, 0, 2));
    // 0 requests: 1 sees it while idle and leaves; 2 asked query() a moment ago and stays.
    w.act(0, request("x"));
    w.pump();
    assert!(!is_member(&w, 0, 1), "the idle member left");
    assert!(posts(&w.contexts[1].recorded).contains(&Body::Leave));
    assert!(
        w.contexts[1].recorded.ends_with(&[
            Effect::CloseChannels,
            Effect::CloseAlive,
            Effect::ArmFarewell(None)
        ]),
        "out of the protocol, it closes its channels: {:?}",
        w.contexts[1].recorded
    );
    assert!(
        is_member(&w, 0, 2),
        "a member that queried lately keeps its replica"
    );
    // Once 2's query is old, the next request makes it leave too, and 0 decides alone.
    w.advance(config().query_linger);
    w.act(0, Action::Release(2));
    w.act(0, request("x"));
    w.pump();
    assert!(!is_member(&w, 0, 2));
    let before = w.log.len();
    let fx = w.act(0, Action::Release(3));
    w.act(0, request("x"));
    assert_eq!(posts(&fx), []);
    assert_eq!(w.log.len(), before, "lone again: nothing posted");
    // 1 comes back: it joins with a state transfer and queues behind 0.
    w.act(1, request("x"));
    w.pump();
    assert!(is_member(&w, 0, 1));
    assert!(is_pending(&w, 1, 1, 2));
    ok(&w);
}

#[test]
fn a_busy_member_does_not_make_way() {
    let mut w = World::ideal(2, config());
    w.act(0, request("x"));
    settle(&mut w);
    w.act(1, request("x"));
    settle(&mut w);
    // 1 waits for x: 0's next request reaches it while it is busy.
    w.act(0, request("y"));
    w.pump();
    assert!(!posts(&w.contexts[1].recorded).contains(&Body::Leave));
    // It gets x when 0 releases it.
    w.act(0, Action::Release(1));
    w.pump();
    assert_eq!(
        engine_effects(&w.contexts[1].recorded),
        [Effect::Granted(1)]
    );
    ok(&w);
}

#[test]
fn what_a_task_sends_goes_as_one_batch_applied_as_its_messages_in_order() {
    let mut w = World::ideal(2, config());
    w.act(0, request("x"));
    settle(&mut w);
    w.act(1, request("y"));
    settle(&mut w);
    // Context 1 requests x (queued behind context 0) and releases y in one task: one transmission.
    let from = w.log.len();
    let fx = w.act(1, Action::Batch(vec![request("x"), Action::Release(1)]));
    assert_eq!(
        fx.iter().filter(|e| **e == Effect::FlushSoon).count(),
        1,
        "one flush asked for"
    );
    w.pump();
    assert_eq!(w.log.len(), from + 1, "one channel message");
    let parts = wire::split_batch(&w.log[from], PROTOCOL_VERSION).expect("a batch");
    let bodies: Vec<Body> = parts
        .iter()
        .map(|part| match wire::decode(part) {
            Some(Decoded::Ours(m)) => m.body,
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(matches!(
        &bodies[..],
        [Body::Request { id: 2, .. }, Body::Release { id: 1 }]
    ));
    let snapshot = |i: usize| w.contexts[i].participant.replica().unwrap().snapshot();
    assert_eq!(snapshot(0), snapshot(1));
    assert_eq!(
        snapshot(0).pending.len(),
        1,
        "context 1's request for x waits"
    );
    assert!(
        snapshot(0).held.iter().all(|l| &*l.name == "x"),
        "y was released"
    );
    ok(&w);
}

#[test]
fn releasing_a_lock_not_held_sends_nothing() {
    let mut w = World::ideal(2, config());
    w.act(0, request("x"));
    settle(&mut w);
    w.act(1, request("y"));
    settle(&mut w);
    assert_eq!(
        engine_effects(&w.contexts[1].recorded),
        [Effect::Granted(1)]
    );
    let (_, fx) = w.call(0, |p, now| p.handle_release(now, 7));
    assert_eq!(posts(&fx), []);
    assert_eq!(
        posts(&w.act(0, Action::Release(1))),
        [Body::Release { id: 1 }]
    );
    let (_, fx) = w.call(0, |p, now| p.handle_release(now, 1));
    assert_eq!(posts(&fx), []);
    ok(&w);
}

#[test]
fn garbage_on_the_channel_changes_nothing() {
    let mut w = World::ideal(1, config());
    w.act(0, request("x"));
    settle(&mut w);
    let before = w.contexts[0].recorded.len();
    for junk in [
        vec![],
        vec![Value::Str("weblocks".into())],
        vec![Value::Num(f64::NAN); 9],
        vec![Value::Str("not ours".into()), Value::Num(1.0)],
    ] {
        w.inject(junk);
    }
    w.pump();
    assert_eq!(w.contexts[0].recorded.len(), before);
    ok(&w);
}

#[test]
fn a_frozen_member_keeps_its_locks_and_sends_nothing_and_an_idle_one_leaves() {
    let mut w = World::ideal(2, config());
    w.act(0, request("x"));
    settle(&mut w);
    w.act(1, request("y"));
    w.pump();
    w.act(1, Action::Release(1));
    w.pump();
    // Busy (it holds x): its liveness database stays open, so nothing need be said.
    let (_, fx) = w.call(0, |p, now| p.handle_freeze(now));
    assert_eq!(posts(&fx), []);
    // Idle: it leaves, so that joiners, who wait for every member that lives, do not wait for it.
    let (_, fx) = w.call(1, |p, now| p.handle_freeze(now));
    assert_eq!(posts(&fx), [Body::Leave]);
    assert!(fx.contains(&Effect::CloseAlive));
    w.pump();
    let (_, fx) = w.call(0, |p, now| p.handle_resume(now));
    assert_eq!(posts(&fx), []);
    assert!(engine_effects(&fx).is_empty(), "it kept its lock");
    ok(&w);
}

#[test]
fn the_farewell_is_the_leave_of_the_current_membership_and_frees_the_locks_alone() {
    let mut w = World::ideal(2, config());
    assert_eq!(
        w.contexts[0].farewell, None,
        "nobody to tell before joining"
    );
    w.act(0, request("x"));
    settle(&mut w);
    w.act(1, request("x"));
    w.pump();
    let farewell = w.contexts[0]
        .farewell
        .clone()
        .expect("a member says goodbye");
    assert_eq!(farewell.sender, w.contexts[0].participant.member_key());
    assert_eq!(farewell.body, Body::Leave);
    // Context 0's page closes and its `pagehide` listener is cut short: only the farewell goes out.
    w.fault_at(w.now, 0, Fault::CutClose);
    w.pump();
    assert_eq!(
        engine_effects(&w.contexts[1].recorded),
        [Effect::Granted(1)]
    );
    // Had the participant's own Leave followed, it would change nothing.
    let (_, fx) = w.call(0, |p, now| p.handle_close(now));
    assert_eq!(posts(&fx), [Body::Leave]);
    assert!(fx.contains(&Effect::ArmFarewell(None)), "gone: no farewell");
    w.pump();
    assert_eq!(
        engine_effects(&w.contexts[1].recorded),
        [Effect::Granted(1)]
    );
    ok(&w);
}

#[test]
fn a_pageshow_catches_up_on_a_pagehide_the_participant_never_saw() {
    let mut w = World::ideal(1, releasing());
    w.act(0, request("x"));
    settle(&mut w);
    // The page enters the back/forward cache and its `pagehide` listener is cut short: only the
    // farewell went out. It is shown again after 100 ms.
    w.fault_at(w.now, 0, Fault::CutHide(100));
    w.pump();
    let mark = w.contexts[0].recorded.len();
    w.advance(100);
    let fx = &w.contexts[0].recorded[mark..];
    assert!(fx.contains(&Effect::Stolen {
        id: 1,
        reason: LossReason::Hidden
    }));
    assert_eq!(posts(fx), [Body::Leave]);
    ok(&w);
}

#[test]
fn the_back_forward_cache_gives_up_locks_and_requests_again_on_return() {
    let mut w = World::ideal(1, releasing());
    w.act(0, request("x"));
    settle(&mut w);
    // Queued behind #1 (a lone member grants a free name at once).
    w.act(0, request("x"));
    let mark = w.contexts[0].recorded.len();
    w.fault_at(w.now, 0, Fault::Hide(1_000));
    w.pump();
    let fx = w.contexts[0].recorded[mark..].to_vec();
    assert_eq!(posts(&fx), [Body::Leave]);
    assert!(fx.contains(&Effect::Stolen {
        id: 1,
        reason: LossReason::Hidden
    }));
    assert_eq!(
        w.contexts[0].edge.timer(),
        None,
        "the edge cancelled its timer"
    );
    assert!(fx.ends_with(&[Effect::ArmFarewell(None)]), "{fx:?}");
    assert!(
        fx.iter().position(|e| matches!(e, Effect::Transmit(_)))
            < fx.iter().position(|e| *e == Effect::CloseChannels),
        "the Leave goes out before the channels close"
    );
    let mark = w.contexts[0].recorded.len();
    w.advance(1_000);
    settle(&mut w);
    assert!(
        matches!(
            posts(&w.contexts[0].recorded[mark..])[..],
            [Body::Join { .. }, ..]
        ),
        "shown again, it joins again"
    );
    assert!(w.contexts[0].recorded.contains(&Effect::Granted(2)));
    ok(&w);
}

#[test]
fn a_member_stays_in_the_back_forward_cache_with_its_locks_and_carries_on_when_shown() {
    let mut w = World::ideal(1, config());
    w.act(0, request("x"));
    settle(&mut w);
    w.act(0, request("x"));
    let mark = w.contexts[0].recorded.len();
    let (_, fx) = w.call(0, |p, now| p.handle_pagehide(now, true));
    // Nothing is lost, nothing is closed: the browser's eviction is its farewell. What goes out is a
    // message the others ignore, which evicts the page where a message reaching a cached page does.
    assert_eq!(posts(&fx), [Body::Alive]);
    assert!(
        !fx.iter().any(|e| matches!(
            e,
            Effect::Stolen { .. }
                | Effect::CloseChannels
                | Effect::CloseAlive
                | Effect::ArmFarewell(_)
        )),
        "{fx:?}"
    );
    let (_, fx) = w.call(0, |p, now| p.handle_pageshow(now, true));
    assert_eq!(
        posts(&fx),
        [] as [Body; 0],
        "shown again, it is the member it was"
    );
    w.act(0, Action::Release(1));
    settle(&mut w);
    let fx = &w.contexts[0].recorded[mark..];
    assert!(fx.contains(&Effect::Granted(2)));
    assert!(!fx.iter().any(|e| matches!(e, Effect::Stolen { .. })));
    ok(&w);
}

#[test]
fn an_idle_member_leaves_on_entering_the_back_forward_cache() {
    let mut w = World::ideal(1, config());
    w.act(0, request("x"));
    settle(&mut w);
    w.act(0, Action::Release(1));
    settle(&mut w);
    let (_, fx) = w.call(0, |p, now| p.handle_pagehide(now, true));
    assert_eq!(posts(&fx), [Body::Leave]);
    assert!(fx.contains(&Effect::CloseAlive), "{fx:?}");
    ok(&w);
}

#[test]
fn a_newer_version_retires_this_context() {
    let mut w = World::ideal(1, config());
    w.act(0, request("x"));
    settle(&mut w);
    w.act(0, if_available("x"));
    w.act(0, request("x"));
    // Request 2 was not available; now a context of the next version speaks.
    let newer = Message {
        sender: MemberKey::new("future", 1),
        seq: 1,
        body: Body::Join { watch: 0 },
    };
    let mark = w.contexts[0].recorded.len();
    w.inject(encode_versioned(&newer, PROTOCOL_VERSION + 1));
    w.pump();
    let fx = w.contexts[0].recorded[mark..].to_vec();
    assert_eq!(
        fx[0],
        Effect::Incompatible {
            version: PROTOCOL_VERSION + 1
        }
    );
    assert!(fx.contains(&Effect::Stolen {
        id: 1,
        reason: LossReason::Retired
    }));
    // Afterwards: ifAvailable is never available, other requests wait forever, the channel is ignored.
    let fx = w.act(0, if_available("z"));
    assert_eq!(fx, [Effect::NotAvailable(4)]);
    w.pump();
    assert!(!engine_effects(&w.contexts[0].recorded).contains(&Effect::Granted(3)));
    ok(&w);
}

#[test]
fn an_older_version_joining_hears_that_a_newer_one_runs() {
    let mut w = World::ideal(1, config());
    w.act(0, request("x"));
    settle(&mut w);
    let older = Message {
        sender: MemberKey::new("past", 1),
        seq: 1,
        body: Body::Join { watch: 0 },
    };
    let mark = w.contexts[0].recorded.len();
    w.inject(encode_versioned(&older, PROTOCOL_VERSION - 1));
    w.pump();
    assert_eq!(posts(&w.contexts[0].recorded[mark..]), [Body::Alive]);
    assert_eq!(
        wire::decode(&encode_versioned(&older, 0)).map(|d| matches!(
            d,
            Decoded::Foreign {
                kind: KIND_JOIN,
                ..
            }
        )),
        Some(true)
    );
    ok(&w);
}

#[test]
fn a_query_waits_for_the_requests_made_before_it() {
    let mut w = World::ideal(1, config());
    w.act(0, request("x"));
    w.act(0, Action::Query);
    assert!(
        engine_effects(&w.contexts[0].recorded).is_empty(),
        "not while joining"
    );
    settle(&mut w);
    assert_eq!(w.contexts[0].queries_answered.len(), 1);
    let snapshot = &w.contexts[0].queries_answered[0];
    assert_eq!(snapshot.held.len(), 1);
    assert_eq!(&*snapshot.held[0].client_id, "ctx0");
    ok(&w);
}

#[test]
fn a_busy_holder_keeps_its_lock_however_long_and_a_crashed_one_is_found_gone() {
    let mut w = World::ideal(2, config());
    w.act(0, request("x"));
    settle(&mut w);
    w.act(1, request("x"));
    w.pump();
    // Context 0's page runs a long task: context 1 watches its liveness database, which stays open.
    w.fault_at(w.now, 0, Fault::Stall(5_000));
    w.advance(5_000);
    assert!(
        w.contexts[1]
            .recorded
            .iter()
            .any(|e| matches!(e, Effect::Watch { .. }))
    );
    w.pump();
    assert!(!w.contexts[1].recorded.contains(&Effect::Granted(1)));
    assert!(
        !engine_effects(&w.contexts[0].recorded)
            .iter()
            .any(|e| matches!(e, Effect::Stolen { .. })),
        "no silence takes its lock"
    );
    // Its process ends: its database loses its last connection, and context 1 says so and gets x.
    w.fault_at(w.now, 0, Fault::Crash);
    settle(&mut w);
    assert!(
        posts(&w.contexts[1].recorded)
            .iter()
            .any(|b| matches!(b, Body::Gone { .. }))
    );
    assert!(w.contexts[1].recorded.contains(&Effect::Granted(1)));
    ok(&w);
}

#[test]
fn a_context_that_missed_messages_steps_out_gives_up_its_locks_and_rejoins() {
    let mut w = World::ideal(2, config());
    w.act(0, request("x"));
    settle(&mut w);
    w.act(0, request("x"));
    w.act(1, request("y"));
    settle(&mut w);
    assert!(w.contexts[1].recorded.contains(&Effect::Granted(1)));
    let me0 = w.contexts[0].participant.member_key();
    // Context 0's transport loses context 1's next request: context 0 never applies it, and is told.
    w.fault_at(w.now, 0, Fault::Gap(20));
    w.pump();
    w.act(1, request("x"));
    let mark = w.contexts[0].recorded.len();
    w.advance(20);
    let fx = w.contexts[0].recorded[mark..].to_vec();
    assert!(
        posts(&fx).starts_with(&[Body::Leave]) && fx.contains(&Effect::OpenAlive),
        "it leaves its membership and opens a new liveness database to join again: {fx:?}"
    );
    assert!(fx.contains(&Effect::Stolen {
        id: 1,
        reason: LossReason::Reset
    }));
    settle(&mut w);

    // Its Leave released #1 where the origin still counted it: context 1 holds x, and context 0's
    // queued request waits behind it under the new membership.
    assert!(w.contexts[1].recorded.contains(&Effect::Granted(2)));
    assert_eq!(
        w.contexts[0].participant.member_key().incarnation,
        me0.incarnation + 1
    );
    assert!(is_pending(&w, 1, 0, 2));
    assert!(!engine_effects(&w.contexts[0].recorded).contains(&Effect::Granted(2)));
    ok(&w);
    // Nothing happens to a context that is not following the order.
    let mut detached = Participant::new("d", config());
    detached.handle_missed_messages(w.now);
    assert!(detached.poll_effect().is_none());
}

#[test]
fn over_a_transport_read_on_demand_a_query_waits_for_an_alive_of_its_own_to_come_back() {
    let mut w = queried_over_the_log(Wake::Pokes);
    // From now on no storage event wakes context 1: it reads the log only when it needs to.
    w.env.storage = false;
    // Context 0 takes another lock (its Request is in the log); context 1 has not read it yet when it
    // is asked.
    w.act(0, request("y"));
    w.advance(5);
    assert_eq!(w.contexts[0].requests[&2].state, ReqState::Held);
    a_query_waits_for_an_alive_of_its_own(&mut w);
}

#[test]
fn over_the_carried_log_a_query_waits_for_an_alive_of_its_own_to_come_back() {
    let mut w = queried_over_the_log(Wake::Carrier);
    // Context 0 takes another lock: its Request is in the log, but the carrier's frame of it never
    // leaves context 0 (as when a page ends between its append and its post).
    w.contexts[0].loses_next_post = true;
    w.act(0, request("y"));
    w.advance(5);
    assert_eq!(w.contexts[0].requests[&2].state, ReqState::Held);
    assert!(!w.contexts[0].loses_next_post, "the frame was lost");
    a_query_waits_for_an_alive_of_its_own(&mut w);
}

#[test]
fn over_the_carried_log_the_sole_member_answers_a_query_at_once() {
    let mut w = World::ideal(
        1,
        Config {
            transport: Transport::Log(Wake::Carrier),
            ..config()
        },
    );
    w.act(0, request("x"));
    settle(&mut w);
    let fx = w.act(0, Action::Query);
    assert!(posts(&fx).is_empty(), "{fx:?}");
    let answered: Vec<Effect> = engine_effects(&fx);
    assert!(
        matches!(answered.as_slice(), [Effect::Snapshot { snapshot, .. }] if snapshot.held.len() == 1),
        "{answered:?}"
    );
    ok(&w);
}

/// Two contexts over the log woken by `wake`: context 0 holds "x", and context 1 has asked `query()`
/// once and been answered.
fn queried_over_the_log(wake: Wake) -> World {
    let mut w = World::ideal(
        2,
        Config {
            transport: Transport::Log(wake),
            ..config()
        },
    );
    w.act(0, request("x"));
    settle(&mut w);
    w.act(1, Action::Query);
    settle(&mut w);
    w
}

/// Context 1, asked for `query()` while it has not heard of context 0's lock on "y" (context 0 also
/// holds "x"): it posts an `Alive`, answers only once that has come back, and the answer shows both.
fn a_query_waits_for_an_alive_of_its_own(w: &mut World) {
    let fx = w.act(1, Action::Query);
    assert_eq!(posts(&fx), [Body::Alive]);
    assert!(
        engine_effects(&fx).is_empty(),
        "not answered from what it has heard so far"
    );
    settle(w);
    let held: Vec<String> = w.contexts[1].queries_answered[1]
        .held
        .iter()
        .map(|l| l.name.to_string())
        .collect();
    assert_eq!(
        held,
        ["x", "y"],
        "the answer includes what the origin did before the call"
    );
    ok(w);
}
