//! One row of the `locks` table and what an operation does to it: the core's decision (`weblocks::lease`)
//! turned into the row write, the reply and the change event. Pure, shared by both databases: a store
//! reads the row, the database's clock and the key's last fencing number in one transaction, calls
//! [`plan`], and carries out its [`RowWrite`] in that same transaction.
//!
//! Two things the core does not keep, the service adds here:
//! - who holds a lease and since when (`holder`, `acquired_at_ms`), shown to other users;
//! - a **fencing number** per grant: the key's previous number plus one. Numbers only grow per (type, id),
//!   even across releases (the store keeps the last one in a table of its own), so an application that
//!   stores the number with each write can refuse a write from a holder whose lease was taken over.
//!
//! The table never holds a usable lockId: it keeps a digest of each token ([`digest`]), and every lockId
//! a request brings is digested before it is compared.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use weblocks::lease::{
    LeaseDecision, LeaseError, LeaseKey, LeaseOutcome, LeaseRecord, LockId, Operation, TakeOver,
    Token, Write, revoked_or,
};

use crate::change::{Change, ChangeKind, Held};
use crate::grant_token::GrantToken;
use crate::holder::Holder;

/// One row of `locks`: the core's record (token digested) and what the service adds.
#[derive(Clone, Debug, PartialEq)]
pub struct LeaseRow {
    pub record: LeaseRecord,
    /// The digest of the token this lease revoked by taking it over while it was live.
    pub revoked: Option<Token>,
    pub holder: Holder,
    pub acquired_at_ms: f64,
    pub fence: i64,
}

/// A lease as anyone may see it: never its token.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseView {
    #[serde(rename = "type")]
    pub lease_type: String,
    pub id: String,
    pub holder: Holder,
    pub acquired_at: f64,
    pub expires_at: f64,
    pub fence: i64,
}

impl LeaseRow {
    pub fn view(&self) -> LeaseView {
        LeaseView {
            lease_type: self.record.key.lease_type().to_owned(),
            id: self.record.key.id().to_owned(),
            holder: self.holder.clone(),
            acquired_at: self.acquired_at_ms,
            expires_at: self.record.expires_at_ms,
            fence: self.fence,
        }
    }

    /// The change that leaves this row as its key's live lease.
    pub fn change(&self, kind: ChangeKind, now_ms: f64) -> Change {
        Change {
            kind,
            lease_type: self.record.key.lease_type().to_owned(),
            id: self.record.key.id().to_owned(),
            fence: self.fence,
            lease: Some(Held {
                holder: self.holder.clone(),
                acquired_at: self.acquired_at_ms,
                expires_at: self.record.expires_at_ms,
            }),
            now: now_ms,
        }
    }
}

/// The digest kept in the table for a token: the first 128 bits of its SHA-256. Tokens are 128 random
/// bits, so the digest is as unguessable, and knowing it does not give the token back.
pub fn digest(token: Token) -> Token {
    let hash = Sha256::digest(token.bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&hash[..16]);
    Token::from_random_bytes(bytes)
}

/// What a request asks of one key.
#[derive(Clone, Debug)]
pub enum Action {
    /// One of the four lease operations (tryLock, checkLock, releaseLock, extendLockExpiration); a
    /// lockId's token is already digested.
    Operation(Operation),
    TakeOver(TakeOver),
}

/// The two ways to be granted a lease.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Grant {
    TryLock,
    TakeOver,
}

/// An action, who asks, and for a grant where the new lockId's token comes from.
#[derive(Clone, Debug)]
pub struct LeaseRequest {
    pub action: Action,
    pub requester: Holder,
    /// A grant's token (its digest replaces the action's placeholder in [`plan`], once the lease's
    /// fencing number is known).
    pub grant: Option<GrantToken>,
}

/// What a grant's action holds before [`plan`] knows its token (the constructors check the arguments).
fn placeholder() -> Token {
    Token::from_random_bytes([0; 16])
}

impl LeaseRequest {
    /// `tryLock` or `takeOver` on (type, id): the new lease gets the token of `grant` (fresh, or derived
    /// from a request id).
    pub fn grant(
        kind: Grant,
        lease_type: &str,
        id: &str,
        ttl_ms: f64,
        grant: GrantToken,
        requester: Holder,
    ) -> Result<LeaseRequest, LeaseError> {
        let action = match kind {
            Grant::TryLock => {
                Action::Operation(Operation::try_lock(lease_type, id, ttl_ms, placeholder())?)
            }
            Grant::TakeOver => {
                Action::TakeOver(TakeOver::new(lease_type, id, ttl_ms, placeholder())?)
            }
        };
        Ok(LeaseRequest {
            action,
            requester,
            grant: Some(grant),
        })
    }

    /// `checkLock`, `releaseLock` or `extendLockExpiration`, built by the core from the lockId text; the
    /// lockId's token is replaced by its digest, which is what the table holds.
    pub fn on_lock_id(mut operation: Operation, requester: Holder) -> LeaseRequest {
        if let Some(lock_id) = lock_id_of(&mut operation) {
            lock_id.token = digest(lock_id.token);
        }
        LeaseRequest {
            action: Action::Operation(operation),
            requester,
            grant: None,
        }
    }

    pub fn key(&self) -> &LeaseKey {
        match &self.action {
            Action::Operation(operation) => operation.key(),
            Action::TakeOver(take_over) => &take_over.key,
        }
    }

    /// Whether the action may create a lease (and so the key's fencing row).
    pub fn grants(&self) -> bool {
        self.grant.is_some()
    }

    /// Whether the action only reads (a `checkLock`): a store may run it as one plain read.
    pub fn reads_only(&self) -> bool {
        matches!(self.action, Action::Operation(Operation::Check(_)))
    }
}

impl Action {
    /// A grant's action with the digest of its token in place of the placeholder.
    fn storing(&self, stored: Token) -> Action {
        match self {
            Action::Operation(Operation::TryLock { key, ttl_ms, .. }) => {
                Action::Operation(Operation::TryLock {
                    key: key.clone(),
                    ttl_ms: *ttl_ms,
                    token: stored,
                })
            }
            Action::TakeOver(take_over) => Action::TakeOver(TakeOver {
                token: stored,
                ..take_over.clone()
            }),
            other => other.clone(),
        }
    }
}

fn lock_id_of(operation: &mut Operation) -> Option<&mut LockId> {
    match operation {
        Operation::Check(lock_id)
        | Operation::Release(lock_id)
        | Operation::Extend { lock_id, .. } => Some(lock_id),
        Operation::TryLock { .. } => None,
    }
}

/// What the requester is told on success. `now` is the database's time when it decided: with it a
/// client turns `expiresAt` into time left on its own clock.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Acquired {
        lock_id: String,
        lease: LeaseView,
        now: f64,
    },
    Held {
        lease: LeaseView,
        now: f64,
    },
    Released,
}

/// The row change that makes a decision true.
#[derive(Clone, Debug, PartialEq)]
pub enum RowWrite {
    Nothing,
    /// Insert or replace the key's row, and record `row.fence` as the key's last fencing number.
    Grant(LeaseRow),
    /// Move the expiry of the key's row.
    Extend {
        key: LeaseKey,
        expires_at_ms: f64,
    },
    Delete(LeaseKey),
}

/// A successful operation: the reply, the write, and the change others are told of (none for a check).
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub reply: Reply,
    pub write: RowWrite,
    pub change: Option<Change>,
}

/// A failed operation (it writes nothing): the core's error, refined to `Revoked` where that applies, and
/// the live lease that holds the key, if any (a conflict shows its holder and since when); `now`, the
/// database's time when it decided (none for a refusal before the database was asked).
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    pub error: LeaseError,
    pub holder: Option<Box<LeaseView>>,
    pub now: Option<f64>,
}

/// Decide `request` given the key's current row, the database's time, the key's last fencing number, and
/// the longest a lease may have left (the configured maximum ttl).
pub fn plan(
    request: &LeaseRequest,
    current: Option<&LeaseRow>,
    now_ms: f64,
    last_fence: i64,
    max_left_ms: f64,
) -> Result<Plan, Refusal> {
    let record = current.map(|row| &row.record);
    let sub = request.requester.sub.as_str();
    // A retried grant whose lease is live: the same lease and lockId again, and nothing written.
    if let (Some(grant), Some(row)) = (&request.grant, current)
        && !row.record.is_expired(now_ms)
        && row.holder.sub == sub
        && grant.made(sub, &row.record.key, row.fence, row.record.token, digest)
    {
        let token = grant.for_lease(sub, &row.record.key, row.fence);
        return Ok(Plan {
            reply: Reply::Acquired {
                lock_id: LockId {
                    key: row.record.key.clone(),
                    token,
                }
                .to_text(),
                lease: row.view(),
                now: now_ms,
            },
            write: RowWrite::Nothing,
            change: None,
        });
    }
    let fence = last_fence + 1;
    let token = request
        .grant
        .as_ref()
        .map(|grant| grant.for_lease(sub, request.key(), fence));
    let action = match token {
        Some(token) => request.action.storing(digest(token)),
        None => request.action.clone(),
    };
    let (decision, revoked) = match &action {
        Action::TakeOver(take_over) => take_over.decide(record, now_ms),
        Action::Operation(operation) => {
            let decision = operation.decide_within(record, now_ms, max_left_ms);
            (
                decision.map_err(|e| refusal(e, operation, current, now_ms))?,
                None,
            )
        }
    };
    let LeaseDecision { outcome, write } = decision;
    let plan = match (outcome, write) {
        (LeaseOutcome::Acquired { lock_id, .. }, Write::Put(record)) => {
            let kind = if revoked.is_some() {
                ChangeKind::TakenOver
            } else {
                ChangeKind::Acquired
            };
            let row = LeaseRow {
                record,
                revoked,
                holder: request.requester.clone(),
                acquired_at_ms: now_ms,
                fence,
            };
            let token = token.expect("a grant carries its token");
            let lock_id = LockId { token, ..lock_id };
            Plan {
                reply: Reply::Acquired {
                    lock_id: lock_id.to_text(),
                    lease: row.view(),
                    now: now_ms,
                },
                change: Some(row.change(kind, now_ms)),
                write: RowWrite::Grant(row),
            }
        }
        (LeaseOutcome::Held(_), Write::Put(record)) => {
            let row = LeaseRow {
                record,
                ..current.expect("an extension extends a row").clone()
            };
            Plan {
                reply: Reply::Held {
                    lease: row.view(),
                    now: now_ms,
                },
                change: Some(row.change(ChangeKind::Extended, now_ms)),
                write: RowWrite::Extend {
                    key: row.record.key.clone(),
                    expires_at_ms: row.record.expires_at_ms,
                },
            }
        }
        (LeaseOutcome::Held(_), Write::Nothing) => Plan {
            reply: Reply::Held {
                lease: current.expect("a check reads a row").view(),
                now: now_ms,
            },
            write: RowWrite::Nothing,
            change: None,
        },
        (LeaseOutcome::Released, Write::Delete(key)) => {
            let fence = current.expect("a release deletes a row").fence;
            Plan {
                reply: Reply::Released,
                change: Some(Change::ended(ChangeKind::Released, &key, fence, now_ms)),
                write: RowWrite::Delete(key),
            }
        }
        (outcome, write) => unreachable!("the core decided {outcome:?} with {write:?}"),
    };
    Ok(plan)
}

fn refusal(
    error: LeaseError,
    operation: &Operation,
    current: Option<&LeaseRow>,
    now_ms: f64,
) -> Refusal {
    let error = match operation {
        Operation::Check(lock_id)
        | Operation::Release(lock_id)
        | Operation::Extend { lock_id, .. } => {
            revoked_or(error, lock_id, current.and_then(|row| row.revoked))
        }
        Operation::TryLock { .. } => error,
    };
    let holder = current
        .filter(|row| !row.record.is_expired(now_ms))
        .map(|row| Box::new(row.view()));
    Refusal {
        error,
        holder,
        now: Some(now_ms),
    }
}

/// The columns of a `locks` row as both databases return them (all `None` when the key has no row).
pub struct RowColumns {
    pub lockid: Option<String>,
    pub expiration_time: Option<f64>,
    pub holder_sub: Option<String>,
    pub holder_name: Option<String>,
    pub acquired_time: Option<f64>,
    pub fence: Option<i64>,
    pub revoked_lockid: Option<String>,
}

impl RowColumns {
    /// The row of `key`, `None` if it has none; a row that does not decode is a storage error.
    pub fn into_row(self, key: &LeaseKey) -> Result<Option<LeaseRow>, LeaseError> {
        let Some(lockid) = self.lockid else {
            return Ok(None);
        };
        let corrupt = || LeaseError::Storage(format!("a corrupt row in locks for {key:?}"));
        let revoked = match self.revoked_lockid {
            Some(hex) => Some(Token::parse_hex(&hex).ok_or_else(corrupt)?),
            None => None,
        };
        match (
            self.expiration_time,
            self.holder_sub,
            self.holder_name,
            self.acquired_time,
            self.fence,
        ) {
            (Some(expires_at_ms), Some(sub), Some(name), Some(acquired_at_ms), Some(fence)) => {
                Ok(Some(LeaseRow {
                    record: LeaseRecord {
                        key: key.clone(),
                        token: Token::parse_hex(&lockid).ok_or_else(corrupt)?,
                        expires_at_ms,
                    },
                    revoked,
                    holder: Holder { sub, name },
                    acquired_at_ms,
                    fence,
                }))
            }
            _ => Err(corrupt()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: f64 = 1_700_000_000_000.0;
    const DAY: f64 = 86_400_000.0;

    fn user(name: &str) -> Holder {
        Holder {
            sub: name.to_lowercase(),
            name: name.to_owned(),
        }
    }

    fn token(n: u8) -> Token {
        Token::from_random_bytes([n; 16])
    }

    fn granted(plan: &Plan) -> (String, LeaseRow) {
        match (&plan.reply, &plan.write) {
            (Reply::Acquired { lock_id, .. }, RowWrite::Grant(row)) => {
                (lock_id.clone(), row.clone())
            }
            other => panic!("not a grant: {other:?}"),
        }
    }

    /// `name`'s request of `kind` on Order 1 for `ttl_ms`, with token `n`.
    fn on_order(kind: Grant, ttl_ms: f64, n: u8, name: &str) -> LeaseRequest {
        LeaseRequest::grant(kind, "Order", "1", ttl_ms, token(n).into(), user(name)).unwrap()
    }

    fn on_lock_id(lock_id: &str, build: fn(&str) -> Result<Operation, LeaseError>) -> LeaseRequest {
        LeaseRequest::on_lock_id(build(lock_id).unwrap(), user("Alice"))
    }

    #[test]
    fn a_grant_numbers_the_lease_names_its_holder_and_keeps_only_a_digest() {
        let request = LeaseRequest::grant(
            Grant::TryLock,
            "domain.Article",
            "10",
            60_000.0,
            token(7).into(),
            user("Alice"),
        )
        .unwrap();
        let plan = plan(&request, None, T0, 41, DAY).unwrap();
        let (lock_id, row) = granted(&plan);
        assert_eq!(lock_id, format!("domain.Article/10/{}", "07".repeat(16)));
        assert_eq!(row.fence, 42, "the key's last number plus one");
        assert_eq!(row.holder, user("Alice"));
        assert_eq!(
            (row.acquired_at_ms, row.record.expires_at_ms),
            (T0, T0 + 60_000.0)
        );
        assert_eq!(row.record.token, digest(token(7)));
        assert_ne!(
            row.record.token,
            token(7),
            "the table never holds the token itself"
        );
        let change = plan.change.unwrap();
        assert_eq!((change.kind, change.fence), (ChangeKind::Acquired, 42));
    }

    #[test]
    fn a_conflict_names_the_live_holder_and_a_check_needs_the_real_token() {
        let alice = on_order(Grant::TryLock, 60_000.0, 1, "Alice");
        let (alice_id, row) = granted(&plan(&alice, None, T0, 0, DAY).unwrap());
        let bob = on_order(Grant::TryLock, 60_000.0, 2, "Bob");
        let refusal = plan(&bob, Some(&row), T0 + 10.0, 1, DAY).unwrap_err();
        assert_eq!(refusal.error.code(), "AlreadyLocked");
        let holder = refusal.holder.unwrap();
        assert_eq!(
            (holder.holder.name.as_str(), holder.acquired_at),
            ("Alice", T0)
        );

        let check = on_lock_id(&alice_id, Operation::check);
        assert_eq!(
            plan(&check, Some(&row), T0 + 10.0, 1, DAY).unwrap().reply,
            Reply::Held {
                lease: row.view(),
                now: T0 + 10.0
            }
        );
        // The digest, presented as if it were the token (what a reader of the table would try), fails.
        let from_table = LockId {
            key: row.record.key.clone(),
            token: row.record.token,
        }
        .to_text();
        let forged = on_lock_id(&from_table, Operation::check);
        assert_eq!(
            plan(&forged, Some(&row), T0 + 10.0, 1, DAY)
                .unwrap_err()
                .error,
            LeaseError::TakenOver
        );
    }

    #[test]
    fn a_take_over_revokes_the_live_holder_who_is_then_told_revoked() {
        let alice = on_order(Grant::TryLock, 60_000.0, 1, "Alice");
        let (alice_id, alice_row) = granted(&plan(&alice, None, T0, 0, DAY).unwrap());
        let bob = on_order(Grant::TakeOver, 30_000.0, 2, "Bob");
        let taken = plan(&bob, Some(&alice_row), T0 + 5.0, 1, DAY).unwrap();
        assert_eq!(taken.change.as_ref().unwrap().kind, ChangeKind::TakenOver);
        let (_, bob_row) = granted(&taken);
        assert_eq!(
            (bob_row.fence, bob_row.revoked),
            (2, Some(digest(token(1))))
        );
        for build in [Operation::check, Operation::release] {
            let refusal = plan(
                &on_lock_id(&alice_id, build),
                Some(&bob_row),
                T0 + 6.0,
                2,
                DAY,
            )
            .unwrap_err();
            assert_eq!(refusal.error, LeaseError::Revoked);
            assert_eq!(refusal.holder.unwrap().holder.name, "Bob");
        }
    }

    #[test]
    fn extension_is_capped_at_the_maximum_ttl_and_release_reports_its_fence() {
        let alice = on_order(Grant::TryLock, 1000.0, 1, "Alice");
        let (id, row) = granted(&plan(&alice, None, T0, 4, DAY).unwrap());
        let extend =
            LeaseRequest::on_lock_id(Operation::extend(&id, 60_000.0).unwrap(), user("Alice"));
        let extended = plan(&extend, Some(&row), T0 + 100.0, 5, 5000.0).unwrap();
        assert_eq!(
            extended.write,
            RowWrite::Extend {
                key: row.record.key.clone(),
                expires_at_ms: T0 + 5100.0
            }
        );
        assert_eq!(extended.change.unwrap().kind, ChangeKind::Extended);
        let released = plan(
            &on_lock_id(&id, Operation::release),
            Some(&row),
            T0 + 200.0,
            5,
            DAY,
        )
        .unwrap();
        assert_eq!(released.write, RowWrite::Delete(row.record.key.clone()));
        let change = released.change.unwrap();
        assert_eq!(
            (change.kind, change.fence, change.lease),
            (ChangeKind::Released, 5, None)
        );
    }

    /// `name`'s grant of `kind` on Order 1 carrying `request_id`.
    fn requested(kind: Grant, request_id: &str, name: &str) -> LeaseRequest {
        let grant = GrantToken::Requested {
            key: std::sync::Arc::new(crate::grant_token::GrantKey::new(
                b"a secret of thirty-two bytes, ok",
            )),
            request_id: request_id.into(),
        };
        LeaseRequest::grant(kind, "Order", "1", 60_000.0, grant, user(name)).unwrap()
    }

    #[test]
    fn a_retried_grant_gets_the_same_lease_for_its_user_only_while_it_is_live() {
        for kind in [Grant::TryLock, Grant::TakeOver] {
            let first = requested(kind, "req-0123456789abcdef", "Alice");
            let (lock_id, row) = granted(&plan(&first, None, T0, 3, DAY).unwrap());
            assert_eq!(row.fence, 4);
            assert_eq!(
                row.record.token,
                digest(LockId::parse(&lock_id).unwrap().token)
            );

            // The answer was lost; the retry (a copy of the request) gets the same lease, writes nothing,
            // tells nobody.
            let retry = plan(&first, Some(&row), T0 + 500.0, 4, DAY).unwrap();
            assert_eq!(
                retry.reply,
                Reply::Acquired {
                    lock_id: lock_id.clone(),
                    lease: row.view(),
                    now: T0 + 500.0
                }
            );
            assert_eq!((retry.write, retry.change), (RowWrite::Nothing, None));

            // Bob presenting alice's request id is another user: a conflict (or, with takeOver, a new lease).
            let bob = requested(kind, "req-0123456789abcdef", "Bob");
            match kind {
                Grant::TryLock => {
                    let refusal = plan(&bob, Some(&row), T0 + 500.0, 4, DAY).unwrap_err();
                    assert_eq!(refusal.error.code(), "AlreadyLocked");
                    assert_eq!(refusal.holder.unwrap().holder.name, "Alice");
                }
                Grant::TakeOver => {
                    let (bobs, bob_row) =
                        granted(&plan(&bob, Some(&row), T0 + 500.0, 4, DAY).unwrap());
                    assert_ne!(bobs, lock_id);
                    assert_eq!(bob_row.fence, 5);
                }
            }
            // Another request id of alice's is another grant: a conflict for tryLock.
            if kind == Grant::TryLock {
                let other = requested(kind, "req-0123456789abcdeF", "Alice");
                assert_eq!(
                    plan(&other, Some(&row), T0 + 500.0, 4, DAY)
                        .unwrap_err()
                        .error
                        .code(),
                    "AlreadyLocked"
                );
            }
            // Once the lease has expired the id no longer names it: the retry is a new grant, with a new
            // number and so a new token (the old lockId does not check it).
            let late = plan(&first, Some(&row), T0 + 60_000.0, 4, DAY).unwrap();
            let (late_id, late_row) = granted(&late);
            assert_eq!(late_row.fence, 5);
            assert_ne!(late_id, lock_id);
            let stale = on_lock_id(&lock_id, Operation::check);
            assert_eq!(
                plan(&stale, Some(&late_row), T0 + 60_001.0, 5, DAY)
                    .unwrap_err()
                    .error,
                LeaseError::TakenOver
            );
        }
    }

    #[test]
    fn every_answer_carrying_an_expiry_carries_the_database_s_time() {
        let alice = on_order(Grant::TryLock, 1000.0, 1, "Alice");
        let granted_plan = plan(&alice, None, T0, 0, DAY).unwrap();
        assert!(matches!(granted_plan.reply, Reply::Acquired { now, .. } if now == T0));
        let (id, row) = granted(&granted_plan);
        let extend = LeaseRequest::on_lock_id(Operation::extend(&id, 10.0).unwrap(), user("Alice"));
        assert!(
            matches!(plan(&extend, Some(&row), T0 + 7.0, 1, DAY).unwrap().reply, Reply::Held { now, .. } if now == T0 + 7.0)
        );
        let late = on_lock_id(&id, Operation::check);
        let refusal = plan(&late, Some(&row), T0 + 1000.0, 1, DAY).unwrap_err();
        assert_eq!(
            (refusal.error.code(), refusal.now),
            ("Expired", Some(T0 + 1000.0))
        );
        let conflict = plan(
            &on_order(Grant::TryLock, 1000.0, 2, "Bob"),
            Some(&row),
            T0 + 9.0,
            1,
            DAY,
        )
        .unwrap_err();
        assert_eq!(conflict.now, Some(T0 + 9.0));
    }

    #[test]
    fn columns_decode_into_a_row_or_a_storage_error() {
        let key = LeaseKey::new("Order", "1").unwrap();
        let columns = |lockid: Option<&str>, fence: Option<i64>| RowColumns {
            lockid: lockid.map(str::to_owned),
            expiration_time: Some(T0),
            holder_sub: Some("alice".into()),
            holder_name: Some("Alice".into()),
            acquired_time: Some(T0 - 5.0),
            fence,
            revoked_lockid: None,
        };
        assert_eq!(columns(None, None).into_row(&key).unwrap(), None);
        let row = columns(Some(&"ab".repeat(16)), Some(3))
            .into_row(&key)
            .unwrap()
            .unwrap();
        assert_eq!((row.fence, row.record.expires_at_ms), (3, T0));
        assert!(matches!(
            columns(Some("zz"), Some(3)).into_row(&key),
            Err(LeaseError::Storage(_))
        ));
        assert!(matches!(
            columns(Some(&"ab".repeat(16)), None).into_row(&key),
            Err(LeaseError::Storage(_))
        ));
    }
}
