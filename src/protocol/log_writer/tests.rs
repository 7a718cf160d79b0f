//! The log writer's decisions, each against the backend's answers a browser gives.

use super::*;

fn writer(wake: Wake) -> LogWriter {
    LogWriter::new(wake, vec![Value::Num(7.0)], 1)
}

fn ops(w: &mut LogWriter) -> Vec<LogOp> {
    std::iter::from_fn(|| w.poll_op()).collect()
}

fn found(w: &mut LogWriter) -> Vec<Found> {
    std::iter::from_fn(|| w.poll_found()).collect()
}

fn data(n: f64) -> Vec<Value> {
    vec![Value::Num(n)]
}

/// The writer with its connection open (handle 1) and an object (1) whose start read answered
/// (transaction 1), the log of identity 5 empty.
fn started(wake: Wake) -> LogWriter {
    let mut w = writer(wake);
    assert_eq!(ops(&mut w), [LogOp::Open { handle: 1 }]);
    w.open_object();
    w.handle_event(0, LogEvent::Opened { handle: 1 });
    assert_eq!(
        ops(&mut w),
        [
            LogOp::Listen { object: 1 },
            LogOp::Start { handle: 1, tx: 1 }
        ]
    );
    w.handle_event(
        0,
        LogEvent::Started {
            tx: 1,
            identity: 5,
            last: 0,
        },
    );
    assert_eq!(found(&mut w), [Found::Identity(5), Found::Started(0)]);
    w
}

/// The transaction of the next append op, and whether it looks for the identity.
fn next_append(w: &mut LogWriter) -> (u32, bool) {
    loop {
        match w.poll_op() {
            Some(LogOp::Append { tx, identify, .. }) => return (tx, identify != 0),
            Some(_) => {}
            None => panic!("no append"),
        }
    }
}

#[test]
fn an_open_that_keeps_failing_is_tried_after_each_wait_of_the_table_then_the_log_is_unreachable() {
    let mut w = writer(Wake::Carrier);
    w.open_object();
    let mut now = 0;
    let mut handle = 1;
    assert_eq!(ops(&mut w)[0], LogOp::Open { handle: 1 });
    for wait in &OPEN_BACKOFF_MS[1..] {
        w.handle_event(now, LogEvent::OpenFailed { handle });
        assert_eq!(w.poll_timeout(), Some(now + wait));
        w.handle_timeout(now + wait - 1);
        assert_eq!(ops(&mut w), []);
        now += wait;
        w.handle_timeout(now);
        handle += 1;
        assert_eq!(ops(&mut w), [LogOp::Open { handle }]);
        assert_eq!(found(&mut w), []);
    }
    w.handle_event(now, LogEvent::OpenFailed { handle });
    assert_eq!(w.poll_timeout(), None);
    // Told once by the log, and once by its start read waiting for it.
    assert_eq!(found(&mut w), [Found::Unreachable, Found::Unreachable]);
    w.append(data(1.0));
    assert_eq!(found(&mut w), [Found::Unreachable]);
}

#[test]
fn the_first_append_looks_for_the_identity_and_the_entry_goes_on_the_carrier() {
    let mut w = started(Wake::Carrier);
    w.append(data(1.0));
    w.append(data(2.0));
    let first = next_append(&mut w);
    let second = next_append(&mut w);
    assert!(!first.1 && !second.1, "the start read found identity 5");
    w.handle_event(
        1,
        LogEvent::Appended {
            tx: first.0,
            key: 1,
            identity: 0,
        },
    );
    assert_eq!(found(&mut w), [Found::Entry(1, Rc::new(data(1.0)))]);
    assert_eq!(
        ops(&mut w),
        [LogOp::Carry {
            object: 1,
            key: 1,
            identity: 5,
            frame: vec![
                Value::Num(7.0),
                Value::Num(1.0),
                Value::Num(5.0),
                Value::Num(1.0)
            ],
        }]
    );
}

#[test]
fn an_object_that_knows_no_identity_tells_the_one_its_append_found_before_the_entry() {
    let mut w = writer(Wake::Pokes);
    w.open_object();
    w.handle_event(0, LogEvent::Opened { handle: 1 });
    ops(&mut w);
    // Its start read found none (an older version's log).
    w.handle_event(
        0,
        LogEvent::Started {
            tx: 1,
            identity: 0,
            last: 3,
        },
    );
    found(&mut w);
    w.append(data(1.0));
    let (tx, identify) = next_append(&mut w);
    assert!(identify);
    w.handle_event(
        0,
        LogEvent::Appended {
            tx,
            key: 4,
            identity: 9,
        },
    );
    assert_eq!(
        found(&mut w),
        [Found::Identity(9), Found::Entry(4, Rc::new(data(1.0)))]
    );
    assert_eq!(ops(&mut w), [LogOp::Poke { key: 4 }]);
}

#[test]
fn a_full_quota_is_tried_again_after_doubling_waits_and_the_appends_made_meanwhile_wait_behind_it()
{
    let mut w = started(Wake::Polls);
    w.append(data(1.0));
    let (tx, _) = next_append(&mut w);
    let mut now = 10;
    w.handle_event(
        now,
        LogEvent::AppendAborted {
            tx,
            why: Abort::Quota,
        },
    );
    w.append(data(2.0));
    assert_eq!(ops(&mut w), [], "held behind the one tried again");
    let mut tx = tx;
    for t in 0..QUOTA_TRIES {
        let at = now + (QUOTA_WAIT_MS << t);
        assert_eq!(w.poll_timeout(), Some(at));
        now = at;
        w.handle_timeout(now);
        let (again, _) = next_append(&mut w);
        assert_eq!(ops(&mut w), []);
        tx = again;
        if t + 1 < QUOTA_TRIES {
            w.handle_event(
                now,
                LogEvent::AppendAborted {
                    tx,
                    why: Abort::Quota,
                },
            );
        }
    }
    w.handle_event(
        now,
        LogEvent::Appended {
            tx,
            key: 1,
            identity: 0,
        },
    );
    assert_eq!(found(&mut w), [Found::Entry(1, Rc::new(data(1.0)))]);
    let (held, _) = next_append(&mut w);
    assert!(
        held > tx,
        "the held append goes once the one tried again committed"
    );
}

#[test]
fn after_the_last_try_a_full_quota_is_a_gap_and_what_waits_behind_it_is_dropped() {
    let mut w = started(Wake::Polls);
    w.append(data(1.0));
    let (mut tx, _) = next_append(&mut w);
    for t in 0..QUOTA_TRIES {
        w.handle_event(
            0,
            LogEvent::AppendAborted {
                tx,
                why: Abort::Quota,
            },
        );
        if t == 0 {
            w.append(data(2.0));
        }
        w.handle_timeout(u64::MAX / 2);
        tx = next_append(&mut w).0;
    }
    w.handle_event(
        0,
        LogEvent::AppendAborted {
            tx,
            why: Abort::Quota,
        },
    );
    assert_eq!(found(&mut w), [Found::Gap]);
    assert_eq!(ops(&mut w), [], "the held append is dropped");
    assert_eq!(w.poll_timeout(), None);
}

#[test]
fn a_full_quota_with_a_later_append_under_way_is_a_gap_at_once() {
    let mut w = started(Wake::Polls);
    w.append(data(1.0));
    w.append(data(2.0));
    let (first, _) = next_append(&mut w);
    w.handle_event(
        0,
        LogEvent::AppendAborted {
            tx: first,
            why: Abort::Quota,
        },
    );
    assert_eq!(found(&mut w), [Found::Gap]);
    assert_eq!(w.poll_timeout(), None);
}

#[test]
fn a_closed_connection_is_a_gap_the_object_then_tells_nothing_and_the_database_is_opened_again() {
    let mut w = started(Wake::Carrier);
    w.append(data(1.0));
    let (tx, _) = next_append(&mut w);
    // A version change (a page deletes the database) changes nothing: the connection stays.
    w.handle_event(
        0,
        LogEvent::VersionChange {
            handle: 1,
            new_version: None,
        },
    );
    assert_eq!(ops(&mut w), []);
    w.handle_event(5, LogEvent::Closed { handle: 1 });
    assert_eq!(found(&mut w), [Found::Gap]);
    assert_eq!(ops(&mut w), [LogOp::Close { handle: 1 }]);
    // The start read's transaction completed: the waits start over, at none.
    assert_eq!(w.poll_timeout(), Some(5));
    w.handle_timeout(5);
    assert_eq!(ops(&mut w), [LogOp::Open { handle: 2 }]);
    w.handle_event(
        6,
        LogEvent::Appended {
            tx,
            key: 1,
            identity: 0,
        },
    );
    assert_eq!(found(&mut w), [], "nothing more of the ended connection");
    // The entry that committed is still handed on, under the identity of its log.
    assert!(matches!(
        ops(&mut w)[..],
        [LogOp::Carry {
            key: 1,
            identity: 5,
            ..
        }]
    ));
    w.read(0);
    assert_eq!(ops(&mut w), []);
    // Its participant's Leave goes on the next connection, which it looks up the identity of.
    w.append(data(2.0));
    w.close_object();
    w.open_object();
    w.handle_event(7, LogEvent::Opened { handle: 2 });
    let after = ops(&mut w);
    assert!(matches!(
        after[..2],
        [LogOp::Unlisten { object: 1 }, LogOp::Listen { object: 2 }]
    ));
    assert!(matches!(after[2], LogOp::Append { handle: 2, identify, .. } if identify != 0));
    assert!(after.contains(&LogOp::Start { handle: 2, tx: 4 }));
}

#[test]
fn a_closed_object_hears_nothing_and_its_carrier_closes_after_its_last_append() {
    let mut w = started(Wake::Carrier);
    w.append(data(1.0));
    let (tx, _) = next_append(&mut w);
    w.close_object();
    assert_eq!(ops(&mut w), [LogOp::Unlisten { object: 1 }]);
    w.handle_event(
        0,
        LogEvent::Carried {
            object: 1,
            data: data(4.0),
        },
    );
    w.handle_event(
        0,
        LogEvent::Appended {
            tx,
            key: 1,
            identity: 0,
        },
    );
    assert_eq!(found(&mut w), []);
    let after: Vec<_> = ops(&mut w);
    assert!(
        matches!(after[0], LogOp::Carry { key: 1, .. }),
        "the others still learn of it"
    );
    assert_eq!(after[1], LogOp::CloseCarrier { object: 1 });
}

#[test]
fn a_read_that_fails_is_a_gap_and_a_trim_waits_for_the_identity() {
    let mut w = writer(Wake::Carrier);
    w.open_object();
    w.handle_event(0, LogEvent::Opened { handle: 1 });
    ops(&mut w);
    w.trim(3);
    assert_eq!(ops(&mut w), [], "no identity known yet");
    w.handle_event(
        0,
        LogEvent::Started {
            tx: 1,
            identity: 5,
            last: 4,
        },
    );
    w.trim(3);
    assert_eq!(
        ops(&mut w),
        [LogOp::Trim {
            handle: 1,
            upto: 3,
            identity: 5
        }]
    );
    w.read(3);
    assert_eq!(
        ops(&mut w),
        [LogOp::Read {
            handle: 1,
            tx: 2,
            after: 3
        }]
    );
    found(&mut w);
    w.handle_event(
        0,
        LogEvent::ReadFailed {
            tx: 2,
            unusable: false,
        },
    );
    assert_eq!(found(&mut w), [Found::Gap]);
}
