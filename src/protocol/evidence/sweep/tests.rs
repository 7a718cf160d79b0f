//! The sweep's rules of the evidence machine, one a test, driven by hand.

use super::super::*;

fn ops(e: &mut Evidence) -> Vec<StorageOp> {
    std::iter::from_fn(|| e.poll_op()).collect()
}

fn findings(e: &mut Evidence) -> Vec<Finding> {
    std::iter::from_fn(|| e.poll_finding()).collect()
}

/// A window's machine whose register (handle 1) and database opened ahead (handle 2, key 7) are open.
fn window() -> Evidence {
    let mut e = Evidence::new("me", 1, Some(7));
    e.handle_storage(0, StorageEvent::Opened { handle: 1 });
    e.handle_storage(0, StorageEvent::Written { tx: 1, ok: true });
    e.handle_storage(0, StorageEvent::Opened { handle: 2 });
    e.handle_storage(
        0,
        StorageEvent::Listed {
            tx: 2,
            entries: Some(Vec::new()),
        },
    );
    ops(&mut e);
    e
}

#[test]
fn a_context_out_of_the_protocol_closes_and_deletes_what_nobody_waits_for_and_asks_the_record_again()
 {
    let mut e = window();
    e.handle_storage(10, StorageEvent::DeletionWaits);
    assert!(e.deletion_waits_here());
    e.release_for_sweep(10);
    assert!(!e.deletion_waits_here());
    assert!(e.record_asking());
    assert_eq!(
        ops(&mut e),
        [
            StorageOp::Close { handle: 1 },
            StorageOp::Close { handle: 2 },
            StorageOp::Delete {
                database: Database::Alive {
                    client: "me".into(),
                    key: 7
                }
            },
            StorageOp::ReleaseRecord,
        ]
    );
    // The register is opened again at its next use, behind the deletion.
    e.census(20);
    assert!(matches!(
        ops(&mut e).as_slice(),
        [StorageOp::Open {
            database: Database::Register,
            ..
        }]
    ));
}

#[test]
fn a_members_database_is_never_closed_for_a_sweep() {
    let mut e = window();
    e.open_own(0);
    let tx = match ops(&mut e).as_slice() {
        [StorageOp::Write { tx, .. }] => *tx,
        other => panic!("its member entry: {other:?}"),
    };
    e.handle_storage(0, StorageEvent::Written { tx, ok: true });
    assert_eq!(findings(&mut e), [Finding::Alive(7)]);
    e.release_for_sweep(10);
    let made = ops(&mut e);
    assert!(
        !made.contains(&StorageOp::Close { handle: 2 }),
        "its evidence stays: {made:?}"
    );
}

#[test]
fn a_database_being_made_goes_too_so_that_none_is_listed_only_in_the_deleted_register() {
    let mut e = Evidence::new("me", 1, None);
    e.handle_storage(0, StorageEvent::Opened { handle: 1 });
    ops(&mut e);
    e.open_own(0);
    let tx = match ops(&mut e).as_slice() {
        [.., StorageOp::Write { tx, .. }] => *tx,
        other => panic!("its entry first: {other:?}"),
    };
    e.release_for_sweep(10);
    ops(&mut e);
    // Its entry's transaction completes: nothing is opened.
    e.handle_storage(11, StorageEvent::Written { tx, ok: true });
    assert_eq!(ops(&mut e), []);
}

#[test]
fn the_record_read_again_lets_the_participant_join_once() {
    let mut e = window();
    e.release_for_sweep(10);
    e.handle_storage(20, StorageEvent::RecordAgreed);
    assert_eq!(findings(&mut e), [Finding::RecordAgreed]);
    assert!(!e.record_asking());
    e.handle_storage(30, StorageEvent::RecordAgreed);
    assert_eq!(findings(&mut e), []);
}

#[test]
fn only_the_answer_to_the_last_release_lets_the_participant_back_in() {
    let mut e = window();
    e.release_for_sweep(10);
    e.release_for_sweep(20);
    // The answer to the first: a read made before the second release, whose connection went too.
    e.handle_storage(21, StorageEvent::RecordAgreed);
    assert_eq!(findings(&mut e), []);
    assert!(e.record_asking());
    e.handle_storage(30, StorageEvent::RecordAgreed);
    assert_eq!(findings(&mut e), [Finding::RecordAgreed]);
}

#[test]
fn a_record_that_does_not_answer_is_told_once_after_the_wait() {
    let mut e = window();
    e.release_for_sweep(10);
    assert_eq!(e.poll_timeout(), Some(10 + REGISTER_WAIT_MS));
    e.handle_timeout(10 + REGISTER_WAIT_MS - 1);
    assert_eq!(findings(&mut e), []);
    e.handle_timeout(10 + REGISTER_WAIT_MS);
    assert_eq!(findings(&mut e), [Finding::RegisterWaits]);
    assert_eq!(e.poll_timeout(), None);
}

#[test]
fn a_holder_is_told_to_say_it_once_per_deletion() {
    let mut e = window();
    e.handle_storage(10, StorageEvent::DeletionWaits);
    assert!(e.take_sweep_told());
    e.handle_storage(11, StorageEvent::DeletionWaits);
    assert!(!e.take_sweep_told());
    e.release_for_sweep(20);
    assert!(!e.take_sweep_told(), "no deletion waits now");
    e.handle_storage(30, StorageEvent::DeletionWaits);
    assert!(e.take_sweep_told(), "a new deletion");
}
