//! The evidence machine's decisions, one rule a test: each drives the machine by hand, answering its
//! storage operations as a browser's backend would in the case the test sets up.

use super::*;

fn machine(ahead: Option<u64>) -> Evidence {
    let mut e = Evidence::new("me", 1, ahead);
    // Its first job, the look for databases to collect: the origin's databases are listed, then the
    // register the edge opened ahead (handle 1) opens and is read; both find nothing.
    assert_eq!(ops(&mut e), [StorageOp::List]);
    e.handle_storage(0, StorageEvent::Databases(Some(Vec::new())));
    e.handle_storage(0, StorageEvent::Opened { handle: 1 });
    assert_eq!(ops(&mut e), [StorageOp::Read { handle: 1, tx: 3 }]);
    e.handle_storage(
        0,
        StorageEvent::Listed {
            tx: 3,
            entries: Some(Vec::new()),
        },
    );
    e
}

fn ops(e: &mut Evidence) -> Vec<StorageOp> {
    std::iter::from_fn(|| e.poll_op()).collect()
}

fn findings(e: &mut Evidence) -> Vec<Finding> {
    std::iter::from_fn(|| e.poll_finding()).collect()
}

fn member(client: &str, key: u64) -> Entry {
    Entry::Member {
        client: client.into(),
        key,
    }
}

fn ahead(client: &str, key: u64) -> Entry {
    Entry::Ahead {
        client: client.into(),
        key,
    }
}

/// The key and transaction of the one write of an entry opened ahead in `ops`.
fn ahead_write(ops: &[StorageOp]) -> (u64, u32) {
    match ops {
        [
            StorageOp::Write {
                tx,
                remove: None,
                put: Some(Entry::Ahead { key, .. }),
                ..
            },
        ] => (*key, *tx),
        other => panic!("one write of an entry opened ahead: {other:?}"),
    }
}

/// Opens this context's database the way a browser answers: entry first, then the database, then the
/// member's entry. Returns the key and the connection.
fn open_alive(e: &mut Evidence) -> (u64, u32) {
    e.open_own(0);
    let (key, tx) = ahead_write(&ops(e));
    e.handle_storage(0, StorageEvent::Written { tx, ok: true });
    let handle = match ops(e).as_slice() {
        [
            StorageOp::Open {
                handle,
                database: Database::Alive { key: k, .. },
                version: 1,
                hides,
            },
        ] if *k == key && *hides == e.hides => *handle,
        other => panic!("the database opened after its entry: {other:?}"),
    };
    e.handle_storage(0, StorageEvent::Opened { handle });
    let tx = match ops(e).as_slice() {
        [
            StorageOp::Write {
                tx,
                remove: Some(r),
                put: Some(p),
                ..
            },
        ] if *r == ahead("me", key) && *p == member("me", key) => *tx,
        other => panic!("its member's entry in place of the one opened ahead: {other:?}"),
    };
    assert!(
        findings(e).is_empty(),
        "not announced before its entry is in"
    );
    e.handle_storage(0, StorageEvent::Written { tx, ok: true });
    assert_eq!(findings(e), [Finding::Alive(key)]);
    (key, handle)
}

#[test]
fn a_context_is_announced_only_once_its_database_is_open_and_a_members_entry() {
    let mut e = machine(None);
    open_alive(&mut e);
}

#[test]
fn its_entry_is_in_the_register_before_its_database_exists() {
    // So whenever the context ends, what it made is listed: nothing is left that no one collects.
    let mut e = machine(None);
    e.open_own(0);
    let (_, tx) = ahead_write(&ops(&mut e));
    assert_eq!(
        ops(&mut e),
        [],
        "nothing opened before the entry is written"
    );
    e.handle_storage(0, StorageEvent::Written { tx, ok: true });
    assert!(matches!(
        ops(&mut e).as_slice(),
        [StorageOp::Open { version: 1, .. }]
    ));
}

#[test]
fn a_failed_open_is_tried_again_after_each_wait_and_only_then_refused() {
    let mut e = machine(None);
    e.open_own(0);
    let mut now = 0;
    for (attempt, wait) in OPEN_BACKOFF_MS.iter().enumerate() {
        if attempt > 0 {
            assert_eq!(e.poll_timeout(), Some(now + wait));
            now += wait;
            e.handle_timeout(now);
        }
        let (key, tx) = ahead_write(&ops(&mut e));
        e.handle_storage(now, StorageEvent::Written { tx, ok: true });
        let handle = match ops(&mut e).as_slice() {
            [StorageOp::Open { handle, .. }] => *handle,
            other => panic!("{other:?}"),
        };
        e.handle_storage(now, StorageEvent::OpenFailed { handle });
        // Its entry goes with the attempt, and the database it may have made.
        let cleanup = ops(&mut e);
        assert!(cleanup.contains(&StorageOp::Delete {
            database: Database::Alive {
                client: "me".into(),
                key
            }
        }));
        assert!(cleanup.iter().any(
            |op| matches!(op, StorageOp::Write { remove: Some(r), .. } if *r == ahead("me", key))
        ));
        let told = findings(&mut e);
        if attempt + 1 < OPEN_BACKOFF_MS.len() {
            assert_eq!(told, [], "attempt {attempt}: not yet");
        } else {
            assert_eq!(told, [Finding::Unreachable]);
            assert!(!e.storage_lost(), "its storage was never given");
            assert_eq!(e.poll_timeout(), None);
        }
    }
}

#[test]
fn a_context_that_leaves_keeps_its_database_and_rejoins_with_one_write() {
    let mut e = machine(None);
    let (key, _) = open_alive(&mut e);
    e.leave_own();
    let leave = ops(&mut e);
    assert!(
        matches!(leave.as_slice(), [StorageOp::Write { remove: Some(r), put: Some(p), .. }]
            if *r == member("me", key) && *p == ahead("me", key)),
        "no member's entry any more, nothing closed: {leave:?}"
    );
    e.open_own(0);
    let tx = match ops(&mut e).as_slice() {
        [
            StorageOp::Write {
                tx, put: Some(p), ..
            },
        ] if *p == member("me", key) => *tx,
        other => panic!("one write, the same database: {other:?}"),
    };
    e.handle_storage(0, StorageEvent::Written { tx, ok: true });
    assert_eq!(findings(&mut e), [Finding::Alive(key)]);
}

#[test]
fn a_context_that_ends_closes_deletes_and_unlists_its_database() {
    let mut e = machine(None);
    let (key, handle) = open_alive(&mut e);
    e.end_own();
    assert_eq!(
        ops(&mut e),
        [
            StorageOp::Close { handle },
            StorageOp::Delete {
                database: Database::Alive {
                    client: "me".into(),
                    key
                }
            },
            StorageOp::Write {
                handle: 1,
                tx: 6,
                remove: Some(member("me", key)),
                put: None
            },
        ]
    );
    // Nothing it asks for afterwards is made.
    e.open_own(0);
    assert_eq!(ops(&mut e), []);
}

#[test]
fn a_database_opened_ahead_is_entered_with_one_write_and_dropped_if_never_asked_for() {
    let mut e = machine(Some(9));
    e.handle_storage(0, StorageEvent::Written { tx: 1, ok: true });
    e.handle_storage(0, StorageEvent::Opened { handle: 2 });
    // Its entry is written again: a context may have collected it while the open waited.
    assert!(matches!(ops(&mut e).as_slice(),
        [StorageOp::Write { put: Some(p), remove: None, .. }] if *p == ahead("me", 9)));
    let mut dropped = Evidence::new("me", 1, Some(9));
    dropped.handle_storage(0, StorageEvent::Opened { handle: 2 });
    dropped.end_own();
    assert!(ops(&mut dropped).contains(&StorageOp::Close { handle: 2 }));
    e.open_own(0);
    let tx = match ops(&mut e).as_slice() {
        [
            StorageOp::Write {
                tx,
                put: Some(p),
                remove: Some(r),
                ..
            },
        ] if *p == member("me", 9) && *r == ahead("me", 9) => *tx,
        other => panic!("{other:?}"),
    };
    e.handle_storage(0, StorageEvent::Written { tx, ok: true });
    assert_eq!(findings(&mut e), [Finding::Alive(9)]);
}

#[test]
fn a_watch_tells_once_when_the_database_has_no_connection_and_collects_it() {
    let mut e = machine(None);
    e.watch("other".into(), 5);
    let handle = match ops(&mut e).as_slice() {
        [
            StorageOp::Open {
                handle, version: 2, ..
            },
        ] => *handle,
        other => panic!("{other:?}"),
    };
    assert_eq!(e.watch_count(), 1);
    e.handle_storage(0, StorageEvent::Upgrading { handle });
    assert_eq!(findings(&mut e), [Finding::Gone("other".into(), 5)]);
    let collect = ops(&mut e);
    assert!(collect.contains(&StorageOp::Delete {
        database: Database::Alive {
            client: "other".into(),
            key: 5
        }
    }));
    e.handle_storage(0, StorageEvent::Opened { handle });
    assert_eq!(findings(&mut e), [], "told once");
    assert!(ops(&mut e).contains(&StorageOp::Close { handle }));
    assert_eq!(e.watch_count(), 0, "a watch ends with its evidence");
}

#[test]
fn a_missing_database_is_evidence_for_a_member_only() {
    let mut e = machine(None);
    e.watch("gone".into(), 5);
    let handle = match ops(&mut e).as_slice() {
        [StorageOp::Open { handle, .. }] => *handle,
        other => panic!("{other:?}"),
    };
    e.handle_storage(0, StorageEvent::Missing { handle });
    e.handle_storage(0, StorageEvent::OpenFailed { handle });
    assert_eq!(findings(&mut e), [Finding::Gone("gone".into(), 5)]);
    ops(&mut e);
    // One opened ahead may not exist yet: its owner writes its entry first.
    e.census(0);
    let tx = match ops(&mut e).as_slice() {
        [StorageOp::Read { tx, .. }] => *tx,
        other => panic!("{other:?}"),
    };
    e.handle_storage(
        0,
        StorageEvent::Listed {
            tx,
            entries: Some(vec![ahead("slow", 6), member("me", 1)]),
        },
    );
    assert_eq!(findings(&mut e), [Finding::Census(vec![("me".into(), 1)])]);
    let handle = match ops(&mut e).as_slice() {
        [StorageOp::Open { handle, .. }] => *handle,
        other => panic!("its own is not watched: {other:?}"),
    };
    e.handle_storage(0, StorageEvent::Missing { handle });
    e.handle_storage(0, StorageEvent::OpenFailed { handle });
    assert_eq!(findings(&mut e), [], "no evidence");
    assert_eq!(
        ops(&mut e),
        [],
        "its entry stays while its owner may still make it"
    );
    assert_eq!(
        e.poll_timeout(),
        None,
        "no timer: an idle context stays quiet"
    );
    assert_eq!(e.watch_count(), 0);
    // A read of the register before it has been missing long enough keeps it (and watches it no more);
    // one after takes it out.
    for (now, taken) in [(COLLECT_AFTER_MS - 1, false), (COLLECT_AFTER_MS, true)] {
        e.census(now);
        let tx = match ops(&mut e).as_slice() {
            [StorageOp::Read { tx, .. }] => *tx,
            other => panic!("{other:?}"),
        };
        e.handle_storage(
            now,
            StorageEvent::Listed {
                tx,
                entries: Some(vec![ahead("slow", 6)]),
            },
        );
        let after = ops(&mut e);
        if taken {
            assert!(matches!(after.as_slice(),
                [StorageOp::Write { remove: Some(r), put: None, .. }] if *r == ahead("slow", 6)));
        } else {
            assert_eq!(after, [], "at {now} ms");
        }
        findings(&mut e);
    }
}

#[test]
fn a_watch_whose_open_failed_is_made_again_later_and_is_no_evidence() {
    let mut e = machine(None);
    e.watch("other".into(), 5);
    let handle = match ops(&mut e).as_slice() {
        [StorageOp::Open { handle, .. }] => *handle,
        other => panic!("{other:?}"),
    };
    e.handle_storage(10, StorageEvent::OpenFailed { handle });
    assert_eq!(findings(&mut e), []);
    assert_eq!(e.poll_timeout(), Some(10 + WATCH_RETRY_MS));
    e.watch("other".into(), 5);
    assert_eq!(ops(&mut e), [], "one watch per database");
    e.handle_timeout(10 + WATCH_RETRY_MS);
    assert!(matches!(
        ops(&mut e).as_slice(),
        [StorageOp::Open { version: 2, .. }]
    ));
}

#[test]
fn a_database_closed_as_the_page_is_cached_goes_and_a_wanted_one_is_made_anew() {
    let mut e = machine(None);
    let (key, handle) = open_alive(&mut e);
    e.handle_storage(0, StorageEvent::Hidden { handle });
    let after = ops(&mut e);
    assert!(after.contains(&StorageOp::Delete {
        database: Database::Alive {
            client: "me".into(),
            key
        }
    }));
    // The participant has not left yet (its `pagehide` comes after the edge's): a new database.
    assert!(
        matches!(after.last(), Some(StorageOp::Write { put: Some(Entry::Ahead { key: k, .. }), .. }) if *k != key)
    );
    assert_eq!(findings(&mut e), [], "the participant learns of it itself");
}

#[test]
fn the_browser_closing_its_database_is_told_and_it_goes() {
    let mut e = machine(None);
    let (_, handle) = open_alive(&mut e);
    e.handle_storage(0, StorageEvent::Closed { handle });
    assert_eq!(findings(&mut e), [Finding::Lost]);
    e.open_own(0);
    ahead_write(
        &ops(&mut e)
            .into_iter()
            .filter(|op| matches!(op, StorageOp::Write { put: Some(_), .. }))
            .collect::<Vec<_>>(),
    );
}

#[test]
fn a_register_closed_by_the_browser_is_opened_again_for_the_next_transaction() {
    let mut e = machine(None);
    e.handle_storage(0, StorageEvent::Closed { handle: 1 });
    e.census(0);
    let handle = match ops(&mut e).as_slice() {
        [
            StorageOp::Open {
                handle,
                database: Database::Register,
                ..
            },
        ] => *handle,
        other => panic!("{other:?}"),
    };
    e.handle_storage(0, StorageEvent::Opened { handle });
    assert!(matches!(ops(&mut e).as_slice(), [StorageOp::Read { handle: h, .. }] if *h == handle));
}

#[test]
fn a_register_that_does_not_open_is_said_once_to_wait() {
    // Its open waits behind a page's deletion of it (logout code), which waits for every context that
    // has it open: never a silent wait.
    let mut e = Evidence::new("me", 1, None);
    e.census(100);
    assert_eq!(e.poll_timeout(), Some(100 + REGISTER_WAIT_MS));
    e.handle_timeout(100 + REGISTER_WAIT_MS - 1);
    assert_eq!(findings(&mut e), []);
    e.handle_timeout(100 + REGISTER_WAIT_MS);
    assert_eq!(findings(&mut e), [Finding::RegisterWaits]);
    assert_eq!(e.poll_timeout(), None, "said once");
    e.handle_storage(9_000, StorageEvent::Opened { handle: 1 });
    assert!(matches!(
        ops(&mut e).as_slice(),
        [StorageOp::List, StorageOp::Read { .. }]
    ));
}

#[test]
fn no_register_transaction_begins_while_the_page_is_in_the_back_forward_cache() {
    // WebKitGTK leaves one begun in the `pagehide` that enters the cache unfinished, and the origin's
    // later ones wait behind it: the member that leaves there closes and deletes its database, and
    // unlists it only once shown again.
    let mut e = machine(None);
    let (key, handle) = open_alive(&mut e);
    e.handle_storage(0, StorageEvent::PageHidden);
    assert_eq!(ops(&mut e), [], "a member: the participant decides");
    e.leave_own();
    e.census(0);
    let database = Database::Alive {
        client: "me".into(),
        key,
    };
    assert_eq!(
        ops(&mut e),
        [
            StorageOp::Close { handle },
            StorageOp::Delete {
                database: database.clone()
            }
        ],
        "nothing on the register"
    );
    e.handle_storage(0, StorageEvent::PageShown);
    let shown = ops(&mut e);
    assert!(
        matches!(shown.as_slice(), [StorageOp::Write { remove: Some(r), put: None, .. }, StorageOp::Read { .. }]
            if *r == member("me", key)),
        "its writes and reads, in order, once shown: {shown:?}"
    );
}

#[test]
fn a_member_that_stays_in_the_back_forward_cache_keeps_its_database_open() {
    let mut e = machine(None);
    e.set_back_forward_cache(BackForwardCache::Stay);
    assert!(
        !e.hides,
        "opened without `hides`: the browser evicts the page once another context watches it"
    );
    open_alive(&mut e);
    e.handle_storage(0, StorageEvent::PageHidden);
    assert_eq!(ops(&mut e), [], "still a member: its evidence stays");
    // One opened ahead, which nobody waits for, goes as an idle page enters the cache: a watch
    // would evict the page for nothing.
    let mut idle = machine(Some(9));
    idle.set_back_forward_cache(BackForwardCache::Stay);
    idle.handle_storage(0, StorageEvent::Written { tx: 1, ok: true });
    idle.handle_storage(0, StorageEvent::Opened { handle: 2 });
    let _ = ops(&mut idle);
    idle.handle_storage(0, StorageEvent::PageHidden);
    assert_eq!(
        ops(&mut idle),
        [
            StorageOp::Close { handle: 2 },
            StorageOp::Delete {
                database: Database::Alive {
                    client: "me".into(),
                    key: 9
                }
            }
        ]
    );
}

#[test]
fn a_register_whose_opens_fail_is_not_said_to_wait() {
    // WebKit after its storage process ended: every open fails at once. That is no deletion waiting,
    // and the page is told why it refuses instead (`storage_lost`), not that a deletion holds it.
    let mut e = Evidence::new("me", 1, None);
    let mut now = 100;
    e.census(now);
    e.handle_storage(now, StorageEvent::OpenFailed { handle: 1 });
    while now < 100 + 3 * REGISTER_WAIT_MS {
        now += 500;
        e.census(now);
        for op in ops(&mut e) {
            if let StorageOp::Open { handle, .. } = op {
                e.handle_storage(now, StorageEvent::OpenFailed { handle });
            }
        }
        e.handle_timeout(now);
        assert!(
            !findings(&mut e).contains(&Finding::RegisterWaits),
            "at {now}"
        );
    }
}

#[test]
fn storage_taken_from_a_live_context_is_told_apart_from_storage_never_given() {
    // Never given: every attempt fails from the start.
    let mut never = Evidence::new("me", 1, None);
    never.open_own(0);
    // The register's open, closed before it succeeded: it was never open.
    never.handle_storage(0, StorageEvent::Closed { handle: 1 });
    assert!(!never.storage_lost());
    // Taken: its database was open, the browser closed it, and then nothing opens.
    let mut taken = machine(None);
    let (_, handle) = open_alive(&mut taken);
    assert!(!taken.storage_lost());
    taken.handle_storage(0, StorageEvent::Closed { handle });
    assert!(taken.storage_lost());
    assert_eq!(findings(&mut taken), [Finding::Lost]);
    // The register's open connection, closed by the browser, is a loss too.
    let mut register = machine(None);
    register.handle_storage(0, StorageEvent::Closed { handle: 1 });
    assert!(register.storage_lost());
}

#[test]
fn an_ended_context_makes_no_failed_watch_again() {
    // A context that refuses after its storage was taken ends its evidence: a watch of its that
    // fails is not made again every second for as long as the page lives.
    let mut e = machine(None);
    e.watch("other".into(), 7);
    let handle = match ops(&mut e).as_slice() {
        [StorageOp::Open { handle, .. }] => *handle,
        other => panic!("{other:?}"),
    };
    e.end_own();
    e.handle_storage(0, StorageEvent::OpenFailed { handle });
    assert_eq!(e.watch_count(), 0);
    assert_eq!(e.poll_timeout(), None, "quiet");
}

#[test]
fn an_idle_context_whose_storage_was_taken_gives_up_its_watches_after_the_waits() {
    let mut e = machine(None);
    let (_, own) = open_alive(&mut e);
    e.watch("other".into(), 7);
    let mut handle = match ops(&mut e).as_slice() {
        [StorageOp::Open { handle, .. }] => *handle,
        other => panic!("{other:?}"),
    };
    e.leave_own();
    e.handle_storage(0, StorageEvent::Closed { handle: own });
    let _ = (ops(&mut e), findings(&mut e));
    let mut now = 0;
    for wait in &OPEN_BACKOFF_MS[1..] {
        e.handle_storage(now, StorageEvent::OpenFailed { handle });
        assert_eq!(findings(&mut e), []);
        assert_eq!(e.poll_timeout(), Some(now + wait));
        now += wait;
        e.handle_timeout(now);
        handle = match ops(&mut e).as_slice() {
            [StorageOp::Open { handle, .. }] => *handle,
            other => panic!("{other:?}"),
        };
    }
    e.handle_storage(now, StorageEvent::OpenFailed { handle });
    assert_eq!(findings(&mut e), [Finding::Unreachable]);
    assert_eq!(e.watch_count(), 0);
    assert_eq!(e.poll_timeout(), None, "quiet");
}

#[test]
fn a_watch_whose_opens_keep_failing_is_given_up_after_its_tries_without_a_finding() {
    // A context whose storage went while none of its connections was open is not told: its watches
    // fail, are made again a second apart, and go after the last try (the next census lists them).
    let mut e = machine(None);
    e.watch("other".into(), 5);
    let mut now = 0;
    for _ in 0..=WATCH_TRIES {
        let handle = match ops(&mut e).as_slice() {
            [StorageOp::Open { handle, .. }] => *handle,
            other => panic!("{other:?}"),
        };
        assert_eq!(e.watch_count(), 1);
        e.handle_storage(now, StorageEvent::OpenFailed { handle });
        now += WATCH_RETRY_MS;
        e.handle_timeout(now);
    }
    assert_eq!(ops(&mut e), []);
    assert_eq!(findings(&mut e), [], "a failed open is no evidence");
    assert_eq!(e.watch_count(), 0);
    assert_eq!(e.poll_timeout(), None, "quiet");
    e.watch("other".into(), 5);
    assert!(
        matches!(ops(&mut e).as_slice(), [StorageOp::Open { .. }]),
        "watched again when listed"
    );
}

/// A context that starts, whose listing answers `databases`: its register opens, and the read that
/// follows the listing is under way. Returns it and that read's transaction.
fn started(databases: Option<Vec<(Rc<str>, u64, u32)>>) -> (Evidence, u32) {
    let mut e = Evidence::new("me", 1, None);
    assert_eq!(ops(&mut e), [StorageOp::List]);
    e.handle_storage(0, StorageEvent::Databases(databases));
    e.handle_storage(0, StorageEvent::Opened { handle: 1 });
    let tx = match ops(&mut e).as_slice() {
        [StorageOp::Read { handle: 1, tx }] => *tx,
        other => panic!("the register read after the listing: {other:?}"),
    };
    (e, tx)
}

#[test]
fn a_database_no_entry_names_is_collected_by_a_context_that_starts_deleted_at_version_0_else_watched()
 {
    // A browser killed as a watch aborted its upgrade leaves a database at version 0; one killed as it
    // collected leaves one without its entry. Both are found by the listing a starting context makes
    // before it reads the register; what an entry of that read names is left to the entries' rules.
    let (mut e, tx) = started(Some(vec![
        ("left".into(), 1, 0),
        ("unlisted".into(), 2, 2),
        ("owner".into(), 3, 0),
        ("member".into(), 4, 1),
        ("me".into(), 5, 0),
    ]));
    e.handle_storage(
        0,
        StorageEvent::Listed {
            tx,
            entries: Some(vec![ahead("owner", 3), member("member", 4)]),
        },
    );
    let ops = ops(&mut e);
    let database = |client: &str, key| Database::Alive {
        client: client.into(),
        key,
    };
    assert!(ops.contains(&StorageOp::Delete {
        database: database("left", 1)
    }));
    let watched: Vec<_> = ops
        .iter()
        .filter_map(|op| match op {
            StorageOp::Open {
                database,
                version: 2,
                ..
            } => Some(database.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        watched,
        [
            database("unlisted", 2),
            database("owner", 3),
            database("member", 4)
        ],
        "the unlisted one, and every entry as always"
    );
    let deleted = ops
        .iter()
        .filter(|op| matches!(op, StorageOp::Delete { .. }));
    assert_eq!(
        deleted.count(),
        1,
        "what an entry names, and its own, are not deleted: {ops:?}"
    );
}

#[test]
fn a_listing_that_fails_collects_only_what_the_register_lists() {
    let (mut e, tx) = started(None);
    e.handle_storage(
        0,
        StorageEvent::Listed {
            tx,
            entries: Some(vec![member("member", 4)]),
        },
    );
    let watched = ops(&mut e);
    let [StorageOp::Open { version: 2, .. }] = watched.as_slice() else {
        panic!("the listed member watched, nothing else: {watched:?}");
    };
}

#[test]
fn a_watch_that_finds_missing_a_database_whose_owner_is_gone_deletes_what_its_open_made() {
    // WebKit keeps the database an aborted upgrade made, at version 0. A member's entry: its owner
    // is gone. One opened ahead: only once this context found the owner gone (its member's watch);
    // before that the owner may be about to make it.
    let mut e = machine(None);
    let watch = |e: &mut Evidence, entry: Entry| {
        e.watch_entry(entry);
        match ops(e).as_slice() {
            [StorageOp::Open { handle, .. }] => *handle,
            other => panic!("{other:?}"),
        }
    };
    let deletes = |ops: &[StorageOp]| {
        ops.iter()
            .filter(|op| matches!(op, StorageOp::Delete { .. }))
            .count()
    };
    let early = watch(&mut e, ahead("slow", 1));
    e.handle_storage(0, StorageEvent::Missing { handle: early });
    assert_eq!(deletes(&ops(&mut e)), 0, "the owner may make it yet");
    let gone = watch(&mut e, member("ended", 2));
    e.handle_storage(0, StorageEvent::Missing { handle: gone });
    assert_eq!(deletes(&ops(&mut e)), 1, "a member's: its owner is gone");
    let collected = watch(&mut e, member("crashed", 3));
    e.handle_storage(0, StorageEvent::Upgrading { handle: collected });
    assert_eq!(deletes(&ops(&mut e)), 1, "collected as gone");
    let other = watch(&mut e, ahead("crashed", 3));
    e.handle_storage(0, StorageEvent::Missing { handle: other });
    assert_eq!(
        deletes(&ops(&mut e)),
        1,
        "its other entry, whose owner it found gone"
    );
}
