//! The participant's handlers, driven by hand: each test feeds events and looks at the effects. `Bus`
//! is a minimal edge and channel (one order, delivered to every participant including the sender when
//! `pump` is called); the simulation (tests/protocol_sim) drives them over realistic transports.

use super::*;
use crate::protocol::LIVE_KEY;
use crate::protocol::wire::{self, Body, KIND_JOIN, MessageId, encode, encode_versioned};

fn config() -> Config {
    Config::default()
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

struct Bus {
    nodes: Vec<Participant>,
    log: Vec<Vec<Value>>,
    seen: Vec<usize>,
    /// Participants over the log transport that asked to open it, and the log's length then (its last
    /// key).
    opened: Vec<Option<usize>>,
    /// Every effect of each participant, in order.
    effects: Vec<Vec<Effect>>,
    /// The farewell each one's edge keeps armed.
    farewells: Vec<Option<Message>>,
    now: u64,
}

impl Bus {
    fn new(n: usize) -> Bus {
        Bus {
            nodes: (0..n)
                .map(|i| Participant::new(&format!("n{i}"), config()))
                .collect(),
            log: Vec::new(),
            seen: vec![0; n],
            opened: vec![None; n],
            effects: vec![Vec::new(); n],
            farewells: vec![None; n],
            now: 1_000,
        }
    }

    /// Carries out participant `i`'s effects as an edge does, the task ending at once (a `FlushSoon`
    /// flushes after the other effects), and returns them.
    fn collect(&mut self, i: usize) -> Vec<Effect> {
        let mut fx = Vec::new();
        loop {
            let mut flush = false;
            while let Some(e) = self.nodes[i].poll_effect() {
                match &e {
                    Effect::FlushSoon => flush = true,
                    Effect::Transmit(messages) => {
                        let version = self.nodes[i].version();
                        self.log.push(wire::encode_transmit(messages, version));
                    }
                    Effect::OpenChannels
                        if matches!(self.nodes[i].core.config.transport, Transport::Log(_)) =>
                    {
                        self.opened[i] = Some(self.log.len())
                    }
                    Effect::ArmFarewell(farewell) => self.farewells[i] = farewell.clone(),
                    _ => {}
                }
                fx.push(e);
            }
            if !flush {
                break;
            }
            self.nodes[i].handle_flush();
        }
        self.effects[i].extend(fx.iter().cloned());
        fx
    }

    fn call(&mut self, i: usize, f: impl FnOnce(&mut Participant, u64)) -> Vec<Effect> {
        let now = self.now;
        f(&mut self.nodes[i], now);
        self.collect(i)
    }

    /// Delivers everything posted so far to every participant, until nothing new is posted. One over
    /// the log gets the log's entries (keys from 1), from the last key when it opened the log.
    fn pump(&mut self) {
        loop {
            let mut progressed = false;
            for i in 0..self.nodes.len() {
                let now = self.now;
                if let Some(last) = self.opened[i].take() {
                    self.seen[i] = last;
                    self.nodes[i].handle_log_started(now, last as u64);
                    self.collect(i);
                    progressed = true;
                }
                let over_log = matches!(self.nodes[i].core.config.transport, Transport::Log(_));
                while self.seen[i] < self.log.len() {
                    let m = self.log[self.seen[i]].clone();
                    self.seen[i] += 1;
                    if over_log {
                        self.nodes[i].handle_log_entry(now, self.seen[i] as u64, &m);
                    } else {
                        self.nodes[i].handle_message(now, &m);
                    }
                    self.collect(i);
                    progressed = true;
                }
            }
            if !progressed {
                return;
            }
        }
    }

    /// Advances the clock and fires every timer that is due, then pumps.
    fn advance(&mut self, ms: u64) {
        self.now += ms;
        for i in 0..self.nodes.len() {
            let due = self.effects[i].iter().rev().find_map(|e| match e {
                Effect::SetTimer { at } => Some(Some(*at)),
                Effect::ClearTimer => Some(None),
                _ => None,
            });
            if let Some(Some(at)) = due
                && at <= self.now
            {
                let now = self.now;
                self.nodes[i].handle_timeout(now);
                self.collect(i);
            }
        }
        self.pump();
    }

    /// Runs the bus for 20 join waits: long enough for every participant that asked to join to be
    /// synced.
    fn settle(&mut self) {
        for _ in 0..20 {
            self.advance(config().join_wait);
        }
    }
}

fn request(id: u64, name: &str) -> impl FnOnce(&mut Participant, u64) {
    let name = name.to_owned();
    move |n, now| n.handle_request(now, id, &name, LockMode::Exclusive, false, false)
}

#[test]
fn a_first_request_joins_waits_for_an_answer_then_starts_a_history_and_is_granted() {
    let mut bus = Bus::new(1);
    let fx = bus.call(0, request(1, "x"));
    assert_eq!(posts(&fx), [Body::Join]);
    bus.pump();
    // The Join came back: a timer for the join wait.
    let at = bus.now + config().join_wait;
    assert!(bus.effects[0].contains(&Effect::SetTimer { at }));
    bus.advance(config().join_wait - 1);
    assert!(
        !posts(&bus.effects[0]).contains(&Body::Genesis),
        "not before the wait"
    );
    bus.advance(1);
    // The Genesis made it the lone member: it decides its request alone and posts nothing more.
    assert_eq!(posts(&bus.effects[0]), [Body::Join, Body::Genesis]);
    assert_eq!(engine_effects(&bus.effects[0]), [Effect::Granted(1)]);
}

#[test]
fn a_lone_member_decides_alone_and_records_what_it_decided() {
    let mut bus = Bus::new(1);
    bus.nodes[0].record_decisions();
    bus.call(0, request(1, "x"));
    bus.settle();
    bus.nodes[0].poll_decided();
    let fx = bus.call(0, request(2, "x"));
    let fx2 = bus.call(0, |n, now| n.handle_release(now, 1));
    let aborted = bus.nodes[0].handle_abort(bus.now, 3);
    bus.call(0, |n, now| {
        n.handle_request(now, 3, "y", LockMode::Shared, false, false);
        n.handle_request(now, 4, "y", LockMode::Exclusive, false, false);
        assert!(n.handle_abort(now, 4), "pending here: aborted");
    });
    assert!(!aborted, "unknown request");
    assert_eq!(posts(&fx), []);
    assert_eq!(posts(&fx2), []);
    assert_eq!(engine_effects(&fx2), [Effect::Granted(2)]);
    let decided: Vec<Body> = bus.nodes[0]
        .poll_decided()
        .into_iter()
        .map(|m| m.body)
        .collect();
    assert_eq!(decided.len(), 5, "{decided:?}");
    assert!(matches!(decided[0], Body::Request { id: 2, .. }));
    assert_eq!(decided[1], Body::Release { id: 1 });
    assert_eq!(decided[4], Body::Abort { id: 4 });
    assert!(
        bus.log.len() == 2,
        "only the Join and the Genesis were posted"
    );
    let replica = bus.nodes[0].replica().unwrap().snapshot();
    assert_eq!(replica.held.len(), 2, "x by #2 and y by #3");
    assert!(replica.pending.is_empty());
}

#[test]
fn a_lone_member_posts_while_its_own_messages_are_on_the_way() {
    let mut bus = Bus::new(1);
    bus.call(0, request(1, "x"));
    bus.settle();
    bus.call(0, |n, now| {
        n.handle_freeze(now);
        n.handle_resume(now);
    });
    // Freeze and Alive have not come back: a request now takes its place after them on the channel
    // and is decided there.
    let fx = bus.call(0, request(2, "y"));
    assert!(matches!(posts(&fx)[..], [Body::Request { id: 2, .. }]));
    assert_eq!(engine_effects(&fx), []);
    bus.pump();
    assert_eq!(
        engine_effects(&bus.effects[0]).last(),
        Some(&Effect::Granted(2))
    );
    let fx = bus.call(0, request(3, "z"));
    assert_eq!(posts(&fx), []);
    assert_eq!(engine_effects(&fx), [Effect::Granted(3)]);
}

#[test]
fn a_second_context_gets_a_state_transfer_and_queues_behind() {
    let mut bus = Bus::new(2);
    bus.call(0, request(1, "x"));
    bus.settle();
    bus.call(1, request(1, "x"));
    bus.pump();
    // Node 0 answered at once (rank 0) with a State; node 1 is synced and its request queued.
    assert!(
        posts(&bus.effects[0])
            .iter()
            .any(|b| matches!(b, Body::State(_)))
    );
    assert!(!posts(&bus.effects[1]).contains(&Body::Genesis));
    assert!(
        bus.nodes[1]
            .replica()
            .unwrap()
            .is_pending(&bus.nodes[1].member_key(), 1)
    );
    bus.call(0, |n, now| n.handle_release(now, 1));
    bus.pump();
    assert_eq!(engine_effects(&bus.effects[1]), [Effect::Granted(1)]);
}

#[test]
fn abort_answers_from_the_local_state() {
    let mut bus = Bus::new(2);
    bus.call(0, request(1, "x"));
    bus.settle();
    // Queued (not sent yet): removed without a message.
    let fx = bus.call(1, request(1, "x"));
    assert_eq!(posts(&fx), [Body::Join]);
    let mut aborted = false;
    bus.call(1, |n, now| aborted = n.handle_abort(now, 1));
    assert!(aborted);
    bus.call(1, request(2, "x"));
    bus.pump();
    // Sent and pending: an Abort message.
    let fx = bus.call(1, |n, now| aborted = n.handle_abort(now, 2));
    assert!(aborted);
    assert_eq!(posts(&fx), [Body::Abort { id: 2 }]);
    // Held: false. Unknown: false.
    bus.call(0, |n, now| aborted = n.handle_abort(now, 1));
    assert!(!aborted);
    bus.call(0, |n, now| aborted = n.handle_abort(now, 42));
    assert!(!aborted);
    bus.pump();
    assert!(
        bus.nodes[0]
            .replica()
            .unwrap()
            .snapshot()
            .pending
            .is_empty()
    );
}

#[test]
fn an_idle_member_makes_way_for_a_busy_one_which_then_decides_alone() {
    let mut bus = Bus::new(3);
    bus.call(0, request(1, "x"));
    bus.settle();
    bus.call(1, request(1, "y"));
    bus.call(2, |n, now| n.handle_query(now, 1));
    bus.settle();
    // All three are members; 1 and 2 are idle (1 released, 2 only queried).
    bus.call(1, |n, now| n.handle_release(now, 1));
    bus.call(0, |n, now| n.handle_release(now, 1));
    bus.pump();
    let member = |bus: &Bus, i: usize| {
        let key = bus.nodes[i].member_key();
        bus.nodes[0].replica().unwrap().member(&key).is_some()
    };
    assert!(member(&bus, 1) && member(&bus, 2));
    // 0 requests: 1 sees it while idle and leaves; 2 asked query() a moment ago and stays.
    bus.call(0, request(2, "x"));
    bus.pump();
    assert!(!member(&bus, 1), "the idle member left");
    assert!(posts(&bus.effects[1]).contains(&Body::Leave));
    assert!(
        member(&bus, 2),
        "a member that queried lately keeps its replica"
    );
    // Once 2's query is old, the next request makes it leave too, and 0 decides alone.
    bus.now += config().query_linger;
    bus.call(0, |n, now| n.handle_release(now, 2));
    bus.call(0, request(3, "x"));
    bus.pump();
    assert!(!member(&bus, 2));
    let before = bus.log.len();
    let fx = bus.call(0, |n, now| n.handle_release(now, 3));
    bus.call(0, request(4, "x"));
    assert_eq!(posts(&fx), []);
    assert_eq!(bus.log.len(), before, "lone again: nothing posted");
    // 1 comes back: it joins with a state transfer and queues behind 0.
    bus.call(1, request(2, "x"));
    bus.pump();
    assert!(member(&bus, 1));
    assert!(
        bus.nodes[1]
            .replica()
            .unwrap()
            .is_pending(&bus.nodes[1].member_key(), 2)
    );
}

#[test]
fn a_busy_member_does_not_make_way() {
    let mut bus = Bus::new(2);
    bus.call(0, request(1, "x"));
    bus.settle();
    bus.call(1, request(1, "x"));
    bus.settle();
    // 1 waits for x: 0's next request reaches it while it is busy.
    bus.call(0, request(2, "y"));
    bus.pump();
    assert!(!posts(&bus.effects[1]).contains(&Body::Leave));
    // It gets x when 0 releases it.
    bus.call(0, |n, now| n.handle_release(now, 1));
    bus.pump();
    assert_eq!(engine_effects(&bus.effects[1]), [Effect::Granted(1)]);
}

#[test]
fn a_batch_is_applied_as_its_messages_in_order() {
    let mut bus = Bus::new(2);
    bus.call(0, request(1, "x"));
    bus.settle();
    bus.call(1, request(1, "y"));
    bus.settle();
    // Node 1 requests x (queued behind node 0) and releases y: node 0 gets both as one batch.
    let from = bus.log.len();
    bus.call(1, request(2, "x"));
    bus.call(1, |n, now| n.handle_release(now, 1));
    let messages: Vec<Message> = bus.log[from..]
        .iter()
        .map(|v| match wire::decode(v) {
            Some(wire::Decoded::Ours(m)) => m,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(messages.len(), 2);
    let now = bus.now;
    bus.nodes[0].handle_message(now, &wire::encode_batch(&messages));
    bus.seen[0] = bus.log.len();
    bus.pump();
    let snapshot = |i: usize| bus.nodes[i].replica().unwrap().snapshot();
    assert_eq!(snapshot(0), snapshot(1));
    assert_eq!(snapshot(0).pending.len(), 1, "node 1's request for x waits");
    assert!(
        snapshot(0).held.iter().all(|l| &*l.name == "x"),
        "y was released"
    );
}

#[test]
fn releasing_a_lock_not_held_sends_nothing() {
    let mut bus = Bus::new(2);
    bus.call(0, request(1, "x"));
    bus.settle();
    bus.call(1, request(1, "y"));
    bus.settle();
    assert_eq!(engine_effects(&bus.effects[1]), [Effect::Granted(1)]);
    assert_eq!(posts(&bus.call(0, |n, now| n.handle_release(now, 7))), []);
    assert_eq!(
        posts(&bus.call(0, |n, now| n.handle_release(now, 1))),
        [Body::Release { id: 1 }]
    );
    assert_eq!(posts(&bus.call(0, |n, now| n.handle_release(now, 1))), []);
}

#[test]
fn a_ping_is_answered_from_the_message_handler() {
    let mut bus = Bus::new(2);
    bus.call(0, request(1, "x"));
    bus.settle();
    bus.call(1, request(1, "x"));
    bus.pump();
    // Node 1 waits behind node 0, which stays silent: after ping_interval node 1 pings it and node 0,
    // handling the message, answers at once.
    bus.effects[0].clear();
    bus.advance(config().ping_interval);
    assert!(posts(&bus.effects[1]).contains(&Body::Ping {
        target: bus.nodes[0].member_key()
    }));
    assert_eq!(posts(&bus.effects[0]), [Body::Alive]);
    assert!(
        engine_effects(&bus.effects[0]).is_empty(),
        "it keeps its lock"
    );
}

#[test]
fn garbage_on_the_channel_changes_nothing() {
    let mut bus = Bus::new(1);
    bus.call(0, request(1, "x"));
    bus.settle();
    let before = bus.effects[0].len();
    for junk in [
        vec![],
        vec![Value::Str("weblocks".into())],
        vec![Value::Num(f64::NAN); 9],
        vec![Value::Str("not ours".into()), Value::Num(1.0)],
    ] {
        bus.nodes[0].handle_message(bus.now, &junk);
        bus.collect(0);
    }
    assert_eq!(bus.effects[0].len(), before);
}

#[test]
fn the_storage_hint_is_kept_while_busy_left_to_expire_when_idle_and_removed_on_leaving() {
    let mut bus = Bus::new(1);
    // A corrupt value counts as absent (no wait for it).
    bus.call(0, |n, now| n.handle_storage(now, LIVE_KEY, Some("garbage")));
    bus.call(0, request(1, "x"));
    bus.settle();
    let writes = |fx: &[Effect]| {
        fx.iter()
            .filter(|e| {
                matches!(
                    e,
                    Effect::StorageWrite { .. } | Effect::StorageRemove { .. }
                )
            })
            .count()
    };
    assert_eq!(writes(&bus.effects[0]), 1);
    // Renewed at half its life.
    bus.advance(config().live_ttl / 2);
    assert_eq!(writes(&bus.effects[0]), 2);
    bus.call(0, |n, now| n.handle_release(now, 1));
    bus.pump();
    assert_eq!(writes(&bus.effects[0]), 2, "idle: no storage write");
    assert!(bus.nodes[0].is_quiet(), "no timer once idle");
    // Busy again while the hint is still fresh: no write either.
    bus.call(0, request(2, "x"));
    bus.pump();
    assert!(bus.effects[0].contains(&Effect::Granted(2)));
    assert_eq!(writes(&bus.effects[0]), 2);
    bus.call(0, |n, now| n.handle_release(now, 2));
    bus.pump();
    // Leaving removes it, so the next page of this tab does not wait for it.
    let fx = bus.call(0, |n, now| n.handle_close(now));
    assert!(fx.contains(&Effect::StorageRemove { key: LIVE_KEY }));
}

#[test]
fn freezing_announces_a_deadline_and_resuming_shows_life() {
    let mut bus = Bus::new(1);
    bus.call(0, request(1, "x"));
    bus.settle();
    let now = bus.now;
    let fx = bus.call(0, |n, now| n.handle_freeze(now));
    assert_eq!(
        posts(&fx),
        [Body::Freeze {
            until: now + config().freeze_grace
        }]
    );
    assert!(fx.contains(&Effect::StorageWrite {
        key: LIVE_KEY,
        value: (now + config().freeze_grace).to_string()
    }));
    assert_eq!(
        posts(&bus.call(0, |n, now| n.handle_resume(now))),
        [Body::Alive]
    );
}

#[test]
fn the_farewell_is_the_leave_of_the_current_membership_and_frees_the_locks_alone() {
    let mut bus = Bus::new(2);
    assert_eq!(
        bus.farewells[0].clone(),
        None,
        "nobody to tell before joining"
    );
    bus.call(0, request(1, "x"));
    bus.settle();
    bus.call(1, request(1, "x"));
    bus.pump();
    let farewell = bus.farewells[0].clone().expect("a member says goodbye");
    assert_eq!(farewell.sender, bus.nodes[0].member_key());
    assert_eq!(farewell.body, Body::Leave);
    // Node 0's page closes and its `pagehide` listener is cut short: only the farewell goes out.
    bus.log.push(encode(&farewell));
    bus.pump();
    assert_eq!(engine_effects(&bus.effects[1]), [Effect::Granted(1)]);
    // Had the node's own Leave followed, it would change nothing.
    let fx = bus.call(0, |n, now| n.handle_close(now));
    assert_eq!(posts(&fx), [Body::Leave]);
    bus.pump();
    assert_eq!(engine_effects(&bus.effects[1]), [Effect::Granted(1)]);
    assert_eq!(bus.farewells[0].clone(), None, "gone");
}

#[test]
fn a_pageshow_catches_up_on_a_pagehide_the_node_never_saw() {
    let mut bus = Bus::new(1);
    bus.call(0, request(1, "x"));
    bus.settle();
    let farewell = bus.farewells[0].clone().unwrap();
    bus.log.push(encode(&farewell));
    bus.seen[0] = bus.log.len(); // the page is in the cache: it hears nothing
    let fx = bus.call(0, |n, now| n.handle_pageshow(now, true));
    assert!(fx.contains(&Effect::Stolen {
        id: 1,
        reason: LossReason::Hidden
    }));
    assert_eq!(posts(&fx), [Body::Leave]);
}

#[test]
fn the_back_forward_cache_gives_up_locks_and_requests_again_on_return() {
    let mut bus = Bus::new(1);
    bus.call(0, request(1, "x"));
    bus.settle();
    // Queued behind #1 (a lone member grants a free name at once).
    bus.call(0, request(2, "x"));
    let fx = bus.call(0, |n, now| n.handle_pagehide(now, true));
    assert_eq!(posts(&fx), [Body::Leave]);
    assert!(fx.contains(&Effect::Stolen {
        id: 1,
        reason: LossReason::Hidden
    }));
    assert!(fx.contains(&Effect::ClearTimer));
    assert_eq!(
        fx.last(),
        Some(&Effect::ArmFarewell(None)),
        "out of the protocol: no farewell to post"
    );
    // While hidden, the channel is ignored.
    let leave = bus.log.last().unwrap().clone();
    bus.nodes[0].handle_message(bus.now, &leave);
    assert!(bus.nodes[0].poll_effect().is_none());
    bus.seen[0] = bus.log.len();
    let fx = bus.call(0, |n, now| n.handle_pageshow(now, true));
    assert_eq!(posts(&fx), [Body::Join]);
    bus.settle();
    assert!(bus.effects[0].contains(&Effect::Granted(2)));
}

#[test]
fn a_newer_version_retires_this_context() {
    let mut bus = Bus::new(1);
    bus.call(0, request(1, "x"));
    bus.settle();
    bus.call(0, |n, now| {
        n.handle_request(now, 2, "x", LockMode::Exclusive, true, false)
    });
    bus.call(0, request(3, "x"));
    // request 2 was not available; now a version-2 context speaks.
    let newer = Message {
        sender: MemberKey::new("future", 1),
        seq: 1,
        body: Body::Join,
    };
    bus.nodes[0].handle_message(bus.now, &encode_versioned(&newer, PROTOCOL_VERSION + 1));
    let fx = bus.collect(0);
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
    let fx = bus.call(0, |n, now| {
        n.handle_request(now, 4, "z", LockMode::Exclusive, true, false)
    });
    assert_eq!(fx, [Effect::NotAvailable(4)]);
    bus.pump();
    assert!(!engine_effects(&bus.effects[0]).contains(&Effect::Granted(3)));
}

#[test]
fn an_older_version_joining_hears_that_a_newer_one_runs() {
    let mut bus = Bus::new(1);
    bus.call(0, request(1, "x"));
    bus.settle();
    let older = Message {
        sender: MemberKey::new("past", 1),
        seq: 1,
        body: Body::Join,
    };
    bus.nodes[0].handle_message(bus.now, &encode_versioned(&older, PROTOCOL_VERSION - 1));
    assert_eq!(posts(&bus.collect(0)), [Body::Alive]);
    assert_eq!(
        wire::decode(&encode_versioned(&older, 0)).map(|d| matches!(
            d,
            wire::Decoded::Foreign {
                kind: KIND_JOIN,
                ..
            }
        )),
        Some(true)
    );
}

#[test]
fn a_query_waits_for_the_requests_made_before_it() {
    let mut bus = Bus::new(1);
    bus.call(0, request(1, "x"));
    bus.call(0, |n, now| n.handle_query(now, 9));
    assert!(
        engine_effects(&bus.effects[0]).is_empty(),
        "not while joining"
    );
    bus.settle();
    let snapshots: Vec<crate::scheduler::Snapshot> = bus.effects[0]
        .iter()
        .filter_map(|e| match e {
            Effect::Snapshot { query: 9, snapshot } => Some(snapshot.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(snapshots.len(), 1);
    assert_eq!(snapshots[0].held.len(), 1);
    assert_eq!(&*snapshots[0].held[0].client_id, "n0");
}

#[test]
fn an_evicted_context_learns_it_and_sends_its_requests_again() {
    let mut bus = Bus::new(2);
    bus.call(0, request(1, "x"));
    bus.settle();
    bus.call(0, request(2, "x"));
    bus.call(1, request(1, "x"));
    bus.pump();
    // Node 1 evicts node 0 (as if it had not answered a ping).
    let me0 = bus.nodes[0].member_key();
    bus.call(1, |n, _| {
        n.core.send(Body::Ping {
            target: me0.clone(),
        });
        let ping = MessageId {
            sender: n.member_key(),
            seq: n.core.seq,
        };
        n.core.send(Body::Evict {
            target: me0.clone(),
            ping: Box::new(ping),
            ts: 0,
        });
    });
    // Node 0 does not answer before the eviction is sequenced: deliver to node 0 last.
    let seen0 = bus.seen[0];
    bus.seen[0] = bus.log.len();
    bus.pump();
    bus.seen[0] = seen0;
    bus.pump();
    assert!(bus.effects[0].contains(&Effect::Stolen {
        id: 1,
        reason: LossReason::Evicted
    }));
    // It rejoined, with a state transfer (its replica could lack what a lone member decided without
    // posting), and asked again for what it was waiting for.
    assert_eq!(bus.nodes[0].member_key().incarnation, me0.incarnation + 1);
    let joins = posts(&bus.effects[0])
        .into_iter()
        .filter(|b| *b == Body::Join)
        .count();
    assert_eq!(joins, 2, "the first join and the rejoin");
    assert!(
        posts(&bus.effects[1])
            .iter()
            .any(|b| matches!(b, Body::State(_))),
        "node 1 answered the rejoin"
    );
    assert!(
        bus.nodes[1]
            .replica()
            .unwrap()
            .is_pending(&bus.nodes[0].member_key(), 2)
    );
}

#[test]
fn a_context_that_missed_messages_steps_out_gives_up_its_locks_and_rejoins() {
    let mut bus = Bus::new(2);
    bus.call(0, request(1, "x"));
    bus.settle();
    bus.call(0, request(2, "x"));
    bus.call(1, request(1, "y"));
    bus.settle();
    assert!(bus.effects[1].contains(&Effect::Granted(1)));
    let me0 = bus.nodes[0].member_key();
    // Node 0's transport loses node 1's next request: node 0 never applies it.
    bus.call(1, request(2, "x"));
    bus.seen[0] = bus.log.len();
    bus.pump();
    let fx = bus.call(0, |n, now| n.handle_missed_messages(now));
    assert_eq!(
        posts(&fx),
        [Body::Leave, Body::Join],
        "it leaves its membership and joins again"
    );
    assert!(fx.contains(&Effect::Stolen {
        id: 1,
        reason: LossReason::Reset
    }));
    bus.settle();
    // Its Leave released #1 where the origin still counted it: node 1 holds x, and node 0's queued
    // request waits behind it under the new membership.
    assert!(bus.effects[1].contains(&Effect::Granted(2)));
    assert_eq!(bus.nodes[0].member_key().incarnation, me0.incarnation + 1);
    assert!(
        bus.nodes[1]
            .replica()
            .unwrap()
            .is_pending(&bus.nodes[0].member_key(), 2)
    );
    assert!(!engine_effects(&bus.effects[0]).contains(&Effect::Granted(2)));
    // Nothing happens to a context that is not following the order.
    let mut detached = Participant::new("d", config());
    detached.handle_missed_messages(bus.now);
    assert!(detached.poll_effect().is_none());
}

#[test]
fn every_busy_context_that_sees_a_member_go_silent_wakes_its_deputy_for_that_ping() {
    let mut bus = Bus::new(4);
    bus.call(0, request(1, "x"));
    bus.settle();
    bus.call(1, request(1, "x"));
    bus.call(2, request(1, "x"));
    bus.call(3, request(1, "y"));
    bus.settle();
    bus.call(3, |n, now| n.handle_release(now, 1));
    bus.pump();
    let me0 = bus.nodes[0].member_key();
    for e in &mut bus.effects {
        e.clear();
    }
    // Node 1 pings node 0; node 0's page is busy (it applies nothing meanwhile).
    bus.call(1, |n, _| {
        n.core.send(Body::Ping {
            target: me0.clone(),
        })
    });
    let ping = MessageId {
        sender: bus.nodes[1].member_key(),
        seq: bus.nodes[1].core.seq,
    };
    bus.seen[0] = bus.log.len();
    bus.pump();
    let woken = |effects: &[Effect]| {
        effects.iter().any(|e| {
            matches!(e, Effect::WakeDeputy(v)
            if v.sender == me0 && v.body == Body::Vouch { ping: ping.clone() })
        })
    };
    assert!(woken(&bus.effects[1]), "the pinger wakes node 0's deputy");
    assert!(
        woken(&bus.effects[2]),
        "so does node 2, which waits too: the pinger may stall or crash before it applies its ping"
    );
    assert!(!woken(&bus.effects[3]), "an idle context does not");
}

#[test]
fn a_vouch_takes_no_position_and_anchors_no_state_transfer() {
    let mut bus = Bus::new(2);
    bus.call(0, request(1, "x"));
    bus.settle();
    let me0 = bus.nodes[0].member_key();
    let before = bus.nodes[0].replica().unwrap().pos();
    // Two vouches of node 0 (its deputy's announcement and an answer): one id for both.
    for _ in 0..2 {
        let vouch = Message {
            sender: me0.clone(),
            seq: 0,
            body: Body::Vouch {
                ping: MessageId {
                    sender: me0.clone(),
                    seq: 0,
                },
            },
        };
        bus.log.push(encode(&vouch));
    }
    bus.pump();
    assert_eq!(bus.nodes[0].replica().unwrap().pos(), before);
    // A joiner with both vouches in its buffer gets a State as of a message with an id of its own.
    bus.call(1, request(1, "x"));
    bus.settle();
    let state = bus.effects[0].iter().find_map(|e| match e {
        Effect::Transmit(messages) => messages.iter().find_map(|m| match &m.body {
            Body::State(st) => Some(st.as_of.clone()),
            _ => None,
        }),
        _ => None,
    });
    assert!(state.is_some_and(|as_of| as_of.seq != 0));
    assert!(
        bus.nodes[1]
            .replica()
            .unwrap()
            .is_pending(&bus.nodes[1].member_key(), 1)
    );
}

#[test]
fn over_a_transport_read_on_demand_a_query_waits_for_an_alive_of_its_own_to_come_back() {
    let mut bus = Bus::new(2);
    bus.nodes[1] = Participant::new(
        "n1",
        Config {
            transport: Transport::Log(Wake::Pokes),
            ..config()
        },
    );
    bus.call(0, request(1, "x"));
    bus.settle();
    bus.call(1, |n, now| n.handle_query(now, 7));
    bus.settle();
    bus.effects[1].clear();
    // Node 0 takes another lock; node 1 has not read it yet when it is asked.
    bus.call(0, request(2, "y"));
    let fx = bus.call(1, |n, now| n.handle_query(now, 8));
    assert_eq!(posts(&fx), [Body::Alive]);
    assert!(
        engine_effects(&fx).is_empty(),
        "not answered from what it has read so far"
    );
    bus.pump();
    let snapshot = bus.effects[1].iter().find_map(|e| match e {
        Effect::Snapshot { query: 8, snapshot } => Some(snapshot.clone()),
        _ => None,
    });
    let held: Vec<String> = snapshot
        .expect("answered")
        .held
        .iter()
        .map(|l| l.name.to_string())
        .collect();
    assert_eq!(
        held,
        ["x", "y"],
        "the answer includes what the origin did before the call"
    );
}
