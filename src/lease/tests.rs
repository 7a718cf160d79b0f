//! Host unit tests of the lease logic, with an injected clock (`now_ms`) and injected token bytes.

use proptest::prelude::*;

use super::key::{MAX_KEY_PART_BYTES, MAX_TTL_MS};
use super::operation::PURGE_EXPIRED_AFTER_MS;
use super::*;

const T0: f64 = 1_700_000_000_000.0;

fn token(n: u8) -> Token {
    Token::from_random_bytes([n; 16])
}

fn leases() -> Leases<MemoryLeaseStore> {
    Leases::new(MemoryLeaseStore::default())
}

fn key(lease_type: &str, id: &str) -> LeaseKey {
    LeaseKey::new(lease_type, id).unwrap()
}

#[test]
fn acquire_returns_a_lock_id_that_checks_until_expiry() {
    let mut l = leases();
    let lock_id = l
        .try_lock("domain.Article", "10", 60_000.0, token(1), T0)
        .unwrap();
    assert_eq!(
        lock_id.to_string(),
        format!("domain.Article/10/{}", "01".repeat(16))
    );
    let info = l.check_lock(&lock_id.to_string(), T0 + 1.0).unwrap();
    assert_eq!(
        info,
        LeaseInfo {
            key: key("domain.Article", "10"),
            expires_at_ms: T0 + 60_000.0
        }
    );
}

#[test]
fn a_second_try_lock_on_a_live_lease_conflicts_and_changes_nothing() {
    let mut l = leases();
    let first = l
        .try_lock("Order", "1", 1000.0, token(1), T0)
        .unwrap()
        .to_string();
    let err = l
        .try_lock("Order", "1", 5000.0, token(2), T0 + 10.0)
        .unwrap_err();
    assert_eq!(
        err,
        LeaseError::AlreadyLocked {
            expires_at_ms: T0 + 1000.0
        }
    );
    assert_eq!(err.code(), "AlreadyLocked");
    assert_eq!(
        l.check_lock(&first, T0 + 999.0).unwrap().expires_at_ms,
        T0 + 1000.0
    );
    assert_eq!(l.store().records().unwrap()[0].token, token(1));
}

#[test]
fn different_keys_do_not_conflict() {
    let mut l = leases();
    l.try_lock("Order", "1", 1000.0, token(1), T0).unwrap();
    l.try_lock("Order", "2", 1000.0, token(2), T0).unwrap();
    l.try_lock("Article", "1", 1000.0, token(3), T0).unwrap();
    assert_eq!(l.list(T0).unwrap().len(), 3);
}

#[test]
fn expiry_is_exclusive_at_the_boundary() {
    let mut l = leases();
    let a = l
        .try_lock("Order", "1", 1000.0, token(1), T0)
        .unwrap()
        .to_string();
    let expiry = T0 + 1000.0;
    // One millisecond before: still live for everyone.
    assert!(l.check_lock(&a, expiry - 1.0).is_ok());
    assert_eq!(
        l.try_lock("Order", "1", 1000.0, token(2), expiry - 1.0)
            .unwrap_err(),
        LeaseError::AlreadyLocked {
            expires_at_ms: expiry
        }
    );
    // Exactly at the expiry: expired, so it can neither be checked nor extended...
    assert_eq!(
        l.check_lock(&a, expiry).unwrap_err(),
        LeaseError::Expired {
            expires_at_ms: expiry
        }
    );
    assert_eq!(
        l.extend_lock_expiration(&a, 500.0, expiry).unwrap_err(),
        LeaseError::Expired {
            expires_at_ms: expiry
        }
    );
    // ...and another holder can take it at that very millisecond.
    let b = l
        .try_lock("Order", "1", 1000.0, token(2), expiry)
        .unwrap()
        .to_string();
    assert!(l.check_lock(&b, expiry).is_ok());
}

#[test]
fn extend_adds_to_the_current_expiry_and_keeps_the_lease_alive() {
    let mut l = leases();
    let a = l
        .try_lock("Order", "1", 1000.0, token(1), T0)
        .unwrap()
        .to_string();
    let info = l.extend_lock_expiration(&a, 1000.0, T0 + 900.0).unwrap();
    assert_eq!(info.expires_at_ms, T0 + 2000.0);
    assert!(l.check_lock(&a, T0 + 1500.0).is_ok());
    assert!(
        l.try_lock("Order", "1", 1000.0, token(2), T0 + 1500.0)
            .is_err()
    );
    assert!(l.check_lock(&a, T0 + 2000.0).is_err());
}

#[test]
fn extend_is_capped_at_the_maximum_ttl_from_now() {
    let mut l = leases();
    let a = l
        .try_lock("Order", "1", MAX_TTL_MS, token(1), T0)
        .unwrap()
        .to_string();
    let info = l.extend_lock_expiration(&a, MAX_TTL_MS, T0 + 10.0).unwrap();
    assert_eq!(info.expires_at_ms, T0 + 10.0 + MAX_TTL_MS);
    let info = l.extend_lock_expiration(&a, 1e15, T0 + 20.0).unwrap();
    assert_eq!(
        info.expires_at_ms,
        T0 + 20.0 + MAX_TTL_MS,
        "any increment is capped, not refused"
    );
}

#[test]
fn decide_within_caps_an_extension_at_a_store_s_lower_bound() {
    let mut l = leases();
    let a = l
        .try_lock("Order", "1", 1000.0, token(1), T0)
        .unwrap()
        .to_string();
    let held = l.store().records().unwrap().remove(0);
    let extend = Operation::extend(&a, 60_000.0).unwrap();
    let expiry = |decision: LeaseDecision| match decision.write {
        Write::Put(record) => record.expires_at_ms,
        other => panic!("{other:?}"),
    };
    let capped = extend.decide_within(Some(&held), T0 + 100.0, 5000.0);
    assert_eq!(expiry(capped.unwrap()), T0 + 5100.0);
    let under = Operation::extend(&a, 10.0).unwrap();
    let uncapped = under.decide_within(Some(&held), T0 + 100.0, 5000.0);
    assert_eq!(expiry(uncapped.unwrap()), T0 + 1010.0);
    // A bound over the core's own maximum is no bound: MAX_TTL_MS still holds.
    let huge = Operation::extend(&a, 1e15).unwrap();
    let core_cap = huge.decide_within(Some(&held), T0, 2.0 * MAX_TTL_MS);
    assert_eq!(expiry(core_cap.unwrap()), T0 + MAX_TTL_MS);
}

#[test]
fn check_and_extend_fail_on_unknown_released_and_expired_leases() {
    let mut l = leases();
    let a = l
        .try_lock("Order", "1", 1000.0, token(1), T0)
        .unwrap()
        .to_string();
    let never_issued = format!("Order/2/{}", "ab".repeat(16));
    assert_eq!(
        l.check_lock(&never_issued, T0).unwrap_err(),
        LeaseError::NotFound
    );
    assert_eq!(
        l.extend_lock_expiration(&never_issued, 10.0, T0)
            .unwrap_err(),
        LeaseError::NotFound
    );
    l.release_lock(&a, T0 + 1.0).unwrap();
    assert_eq!(
        l.check_lock(&a, T0 + 2.0).unwrap_err(),
        LeaseError::NotFound
    );
    assert_eq!(
        l.extend_lock_expiration(&a, 10.0, T0 + 2.0).unwrap_err(),
        LeaseError::NotFound
    );
    assert_eq!(
        l.release_lock(&a, T0 + 2.0).unwrap_err(),
        LeaseError::NotFound
    );
    // A guessed token for a held key is not the holder's.
    let b = l
        .try_lock("Order", "1", 1000.0, token(2), T0 + 3.0)
        .unwrap()
        .to_string();
    let guessed = format!("Order/1/{}", "02".repeat(15) + "03");
    assert_eq!(
        l.check_lock(&guessed, T0 + 4.0).unwrap_err(),
        LeaseError::TakenOver
    );
    assert!(l.check_lock(&b, T0 + 4.0).is_ok());
}

#[test]
fn release_by_a_stale_lock_id_fails_and_leaves_the_new_holder_alone() {
    let mut l = leases();
    let stale = l
        .try_lock("Order", "1", 1000.0, token(1), T0)
        .unwrap()
        .to_string();
    let fresh = l
        .try_lock("Order", "1", 1000.0, token(2), T0 + 1000.0)
        .unwrap()
        .to_string();
    assert_eq!(
        l.release_lock(&stale, T0 + 1001.0).unwrap_err(),
        LeaseError::TakenOver
    );
    assert_eq!(
        l.check_lock(&stale, T0 + 1001.0).unwrap_err(),
        LeaseError::TakenOver
    );
    assert_eq!(
        l.extend_lock_expiration(&stale, 5000.0, T0 + 1001.0)
            .unwrap_err(),
        LeaseError::TakenOver
    );
    let info = l.check_lock(&fresh, T0 + 1001.0).unwrap();
    assert_eq!(
        info.expires_at_ms,
        T0 + 2000.0,
        "the stale extend must not have touched it"
    );
    assert_eq!(l.store().records().unwrap()[0].token, token(2));
    l.release_lock(&fresh, T0 + 1002.0).unwrap();
    assert!(l.list(T0 + 1002.0).unwrap().is_empty());
}

#[test]
fn the_holder_may_release_its_own_expired_lease() {
    let mut l = leases();
    let a = l
        .try_lock("Order", "1", 1000.0, token(1), T0)
        .unwrap()
        .to_string();
    l.release_lock(&a, T0 + 5000.0).unwrap();
    assert!(l.store().records().unwrap().is_empty());
}

#[test]
fn list_reports_live_leases_and_deletes_rows_expired_for_a_day() {
    let mut l = leases();
    let a = l
        .try_lock("Order", "1", 1000.0, token(1), T0)
        .unwrap()
        .to_string();
    l.try_lock("Order", "2", 3000.0, token(2), T0).unwrap();
    let live = l.list(T0 + 1000.0).unwrap();
    assert_eq!(
        live,
        vec![LeaseInfo {
            key: key("Order", "2"),
            expires_at_ms: T0 + 3000.0
        }]
    );
    assert_eq!(
        l.store().records().unwrap().len(),
        2,
        "a fresh expired row is kept..."
    );
    assert_eq!(
        l.check_lock(&a, T0 + 1000.0).unwrap_err(),
        LeaseError::Expired {
            expires_at_ms: T0 + 1000.0
        },
        "...so its holder still learns that it expired"
    );
    let day = PURGE_EXPIRED_AFTER_MS;
    assert_eq!(l.list(T0 + 1000.0 + day - 1.0).unwrap(), vec![]);
    assert_eq!(l.store().records().unwrap().len(), 2);
    l.list(T0 + 1000.0 + day).unwrap();
    assert_eq!(
        l.store().records().unwrap().len(),
        1,
        "purged a day after its expiry"
    );
    assert_eq!(
        l.check_lock(&a, T0 + 1000.0 + day).unwrap_err(),
        LeaseError::NotFound
    );
}

#[test]
fn bad_arguments_are_rejected_before_the_store_is_touched() {
    let mut l = leases();
    let invalid = |r: Result<LockId, LeaseError>| matches!(r, Err(LeaseError::InvalidArgument(_)));
    assert!(invalid(l.try_lock("", "1", 1000.0, token(1), T0)));
    assert!(invalid(l.try_lock("Order", "", 1000.0, token(1), T0)));
    for ttl in [
        0.0,
        -1.0,
        -0.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        MAX_TTL_MS + 1.0,
    ] {
        assert!(
            invalid(l.try_lock("Order", "1", ttl, token(1), T0)),
            "ttl {ttl}"
        );
    }
    let too_long_ttl = l
        .try_lock("Order", "1", MAX_TTL_MS + 1.0, token(1), T0)
        .unwrap_err()
        .to_string();
    assert!(
        too_long_ttl.contains(&format!("at most {} ms", MAX_TTL_MS as u64)),
        "{too_long_ttl}"
    );
    let long = "x".repeat(MAX_KEY_PART_BYTES + 1);
    assert!(invalid(l.try_lock(&long, "1", 1000.0, token(1), T0)));
    assert!(invalid(l.try_lock("Order", &long, 1000.0, token(1), T0)));
    assert!(l.store().records().unwrap().is_empty());
    // The limits themselves are allowed.
    let edge = "x".repeat(MAX_KEY_PART_BYTES);
    let a = l
        .try_lock(&edge, &edge, MAX_TTL_MS, token(1), T0)
        .unwrap()
        .to_string();
    for inc in [0.0, -5.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert!(
            matches!(
                l.extend_lock_expiration(&a, inc, T0),
                Err(LeaseError::InvalidArgument(_))
            ),
            "inc {inc}"
        );
    }
    assert_eq!(
        LeaseError::InvalidArgument(String::new()).code(),
        "InvalidArgument"
    );
}

#[test]
fn malformed_lock_ids_are_invalid_arguments() {
    let hex = "0f".repeat(16);
    for text in [
        String::new(),
        "nonsense".into(),
        hex.clone(),
        format!("Order/{hex}"),
        format!("/1/{hex}"),
        format!("Order//{hex}"),
        format!("Order/1/{}", hex.to_uppercase()),
        format!("Order/1/{}", &hex[1..]),
        format!("Order/1/{hex}0"),
        format!("Order/1/x{}", &hex[1..]),
        format!("Order/1/2/{hex}"),
        format!("Or%41der/1/{hex}"),
        format!("Order%/1/{hex}"),
    ] {
        assert!(
            matches!(LockId::parse(&text), Err(LeaseError::InvalidArgument(_))),
            "{text:?}"
        );
    }
}

#[test]
fn lock_ids_round_trip_any_type_and_id() {
    for (lease_type, id) in [
        ("a/b", "%2F"),
        ("%", "/"),
        ("문서", "10/20"),
        ("domain.Article", "%25/%"),
    ] {
        let lock_id = LockId {
            key: key(lease_type, id),
            token: token(7),
        };
        let text = lock_id.to_string();
        assert_eq!(text.matches('/').count(), 2, "{text}");
        assert_eq!(LockId::parse(&text).unwrap(), lock_id);
    }
}

#[test]
fn lock_ids_escape_only_percent_and_slash() {
    let lock_id = LockId {
        key: key("a/b%", "문서/%2F"),
        token: token(7),
    };
    let hex = token(7).to_hex();
    assert_eq!(lock_id.to_text(), format!("a%2Fb%25/문서%2F%252F/{hex}"));
}

#[test]
fn tokens_are_128_bit_hex_and_never_debug_printed() {
    let t = Token::from_random_bytes([
        0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0xa, 0xff,
    ]);
    assert_eq!(t.to_string(), "deadbeef000102030405060708090aff");
    assert_eq!(Token::parse_hex(&t.to_string()), Some(t));
    assert_eq!(format!("{t:?}"), "Token(..)");
    let record = LeaseRecord {
        key: key("Order", "1"),
        token: t,
        expires_at_ms: T0,
    };
    assert!(!format!("{record:?}").contains("dead"));
}

#[test]
fn a_failed_operation_writes_nothing() {
    let op = Operation::try_lock("Order", "1", 1000.0, token(2)).unwrap();
    let held = LeaseRecord {
        key: key("Order", "1"),
        token: token(1),
        expires_at_ms: T0 + 1.0,
    };
    assert!(op.decide(Some(&held), T0).is_err());
    let check = Operation::check(&held.lock_id().to_string()).unwrap();
    assert_eq!(check.decide(Some(&held), T0).unwrap().write, Write::Nothing);
    assert_eq!(
        check
            .decide(Some(&held), T0 + 1.0)
            .unwrap_err()
            .expires_at_ms(),
        Some(T0 + 1.0)
    );
}

#[test]
fn take_over_replaces_a_live_lease_and_revokes_its_token() {
    let alice = Operation::try_lock("domain.Article", "10", 60_000.0, token(1)).unwrap();
    let held = match alice.decide(None, T0).unwrap().write {
        Write::Put(record) => record,
        other => panic!("{other:?}"),
    };
    let take_over = TakeOver::new("domain.Article", "10", 30_000.0, token(2)).unwrap();
    let (decision, revoked) = take_over.decide(Some(&held), T0 + 5.0);
    assert_eq!(revoked, Some(token(1)), "alice's live lease is revoked");
    let bob = match decision.write {
        Write::Put(record) => record,
        other => panic!("{other:?}"),
    };
    assert_eq!((bob.token, bob.expires_at_ms), (token(2), T0 + 30_005.0));
    assert!(
        matches!(decision.outcome, LeaseOutcome::Acquired { lock_id, .. } if lock_id == bob.lock_id())
    );
    // Alice's every operation now finds bob's lease: the core says TakenOver, which `revoked_or` turns
    // into Revoked for her token only.
    let alice_id = held.lock_id();
    for op in [
        Operation::check(&alice_id.to_text()).unwrap(),
        Operation::release(&alice_id.to_text()).unwrap(),
        Operation::extend(&alice_id.to_text(), 1000.0).unwrap(),
    ] {
        let error = op.decide(Some(&bob), T0 + 6.0).unwrap_err();
        assert_eq!(error, LeaseError::TakenOver);
        assert_eq!(revoked_or(error, &alice_id, revoked), LeaseError::Revoked);
    }
    assert_eq!(LeaseError::Revoked.code(), "Revoked");
    let carol_id = LockId {
        key: key("domain.Article", "10"),
        token: token(3),
    };
    assert_eq!(
        revoked_or(LeaseError::TakenOver, &carol_id, revoked),
        LeaseError::TakenOver
    );
    assert_eq!(
        revoked_or(LeaseError::NotFound, &alice_id, revoked),
        LeaseError::NotFound
    );
}

#[test]
fn take_over_of_a_free_or_expired_key_revokes_nothing() {
    let take_over = TakeOver::new("Order", "1", 1000.0, token(2)).unwrap();
    assert_eq!(take_over.decide(None, T0).1, None);
    let expired = LeaseRecord {
        key: key("Order", "1"),
        token: token(1),
        expires_at_ms: T0,
    };
    let (decision, revoked) = take_over.decide(Some(&expired), T0);
    assert_eq!(
        revoked, None,
        "a lapsed holder hears TakenOver, as after a tryLock"
    );
    assert!(matches!(decision.write, Write::Put(r) if r.expires_at_ms == T0 + 1000.0));
    assert!(matches!(
        TakeOver::new("Order", "", 1000.0, token(4)),
        Err(LeaseError::InvalidArgument(_))
    ));
    assert!(matches!(
        TakeOver::new("Order", "1", MAX_TTL_MS + 1.0, token(4)),
        Err(LeaseError::InvalidArgument(_))
    ));
}

#[derive(Clone, Debug)]
enum Step {
    TryLock { key: u8, ttl: u16 },
    TakeOver { key: u8, ttl: u16 },
    Check { lease: u8 },
    Release { lease: u8 },
    Extend { lease: u8, inc: u16 },
    List,
    Wait(u16),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..2, 1u16..300).prop_map(|(key, ttl)| Step::TryLock { key, ttl }),
        (0u8..2, 1u16..300).prop_map(|(key, ttl)| Step::TakeOver { key, ttl }),
        any::<u8>().prop_map(|lease| Step::Check { lease }),
        any::<u8>().prop_map(|lease| Step::Release { lease }),
        (any::<u8>(), 1u16..300).prop_map(|(lease, inc)| Step::Extend { lease, inc }),
        Just(Step::List),
        (0u16..200).prop_map(Step::Wait),
    ]
}

proptest! {
    /// Whatever happens, at any moment at most one lock id per key passes `checkLock`, and it is the one
    /// `list()` reports (same expiry).
    #[test]
    fn at_most_one_holder_per_key(steps in proptest::collection::vec(step(), 1..80)) {
        let mut l = leases();
        let mut now = T0;
        let mut issued: Vec<(u8, String)> = Vec::new();
        for (n, step) in steps.iter().enumerate() {
            let pick = |lease: u8| issued.get(lease as usize % issued.len().max(1)).map(|(_, id)| id.clone());
            match *step {
                Step::TryLock { key, ttl } => {
                    if let Ok(id) = l.try_lock("T", &key.to_string(), f64::from(ttl), token(n as u8), now) {
                        issued.push((key, id.to_string()));
                    }
                }
                Step::TakeOver { key, ttl } => {
                    let id = l.take_over("T", &key.to_string(), f64::from(ttl), token(n as u8), now).unwrap();
                    issued.push((key, id.to_string()));
                }
                Step::Check { lease } => { if let Some(id) = pick(lease) { let _ = l.check_lock(&id, now); } }
                Step::Release { lease } => { if let Some(id) = pick(lease) { let _ = l.release_lock(&id, now); } }
                Step::Extend { lease, inc } => {
                    if let Some(id) = pick(lease) { let _ = l.extend_lock_expiration(&id, f64::from(inc), now); }
                }
                Step::List => { l.list(now).unwrap(); }
                Step::Wait(ms) => now += f64::from(ms),
            }
            for k in 0u8..2 {
                let holders: Vec<LeaseInfo> = issued.iter().filter(|(key, _)| *key == k)
                    .filter_map(|(_, id)| l.check_lock(id, now).ok()).collect();
                prop_assert!(holders.len() <= 1, "key {k}: {holders:?}");
                let listed: Vec<LeaseInfo> = l.list(now).unwrap().into_iter()
                    .filter(|info| info.key.id() == k.to_string()).collect();
                prop_assert_eq!(&holders, &listed);
            }
        }
    }
}
