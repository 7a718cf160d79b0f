//! The storage seam: [`LeaseStore`] keeps records by key; [`Leases`] runs the operations on one.
//!
//! A store only keeps rows; every decision is [`Operation::decide`]'s. The contract: while [`Leases::run`]
//! reads a key, decides and writes, no other run may touch that key (one thread owns a `Leases`; a store
//! shared between processes wraps each run in a transaction). The browser's IndexedDB store cannot
//! implement this synchronous trait (its reads complete in callbacks), so `js/lease_idb_store.js` runs the
//! same read-decide-write steps inside one `readwrite` transaction instead, calling
//! [`Operation::decide`] through the wasm edge (`src/wasm/lease_operation.rs`).

use super::error::LeaseError;
use super::key::LeaseKey;
use super::lock_id::LockId;
use super::operation::{LeaseOutcome, Operation, Write, list_live};
use super::record::{LeaseInfo, LeaseRecord};
use super::take_over::TakeOver;
use super::token::Token;
use crate::sorted_vec::SortedMap;

/// Rows keyed by (type, id), like the `locks` table of a database.
pub trait LeaseStore {
    fn get(&self, key: &LeaseKey) -> Result<Option<LeaseRecord>, LeaseError>;
    /// Insert or replace the row at `record.key`.
    fn put(&mut self, record: LeaseRecord) -> Result<(), LeaseError>;
    fn delete(&mut self, key: &LeaseKey) -> Result<(), LeaseError>;
    /// Every row, in key order.
    fn records(&self) -> Result<Vec<LeaseRecord>, LeaseError>;
}

/// A store in memory, for tests and for contexts that need no persistence.
#[derive(Debug, Default)]
pub struct MemoryLeaseStore {
    rows: SortedMap<LeaseKey, LeaseRecord>,
}

impl LeaseStore for MemoryLeaseStore {
    fn get(&self, key: &LeaseKey) -> Result<Option<LeaseRecord>, LeaseError> {
        Ok(self.rows.get(key).cloned())
    }

    fn put(&mut self, record: LeaseRecord) -> Result<(), LeaseError> {
        self.rows.insert(record.key.clone(), record);
        Ok(())
    }

    fn delete(&mut self, key: &LeaseKey) -> Result<(), LeaseError> {
        self.rows.remove(key);
        Ok(())
    }

    fn records(&self) -> Result<Vec<LeaseRecord>, LeaseError> {
        Ok(self.rows.values().cloned().collect())
    }
}

/// The lease manager (`tryLock`, `checkLock`, `releaseLock`, `extendLockExpiration`) over a [`LeaseStore`], with the clock and the randomness passed in.
#[derive(Debug, Default)]
pub struct Leases<S> {
    store: S,
}

impl<S: LeaseStore> Leases<S> {
    pub fn new(store: S) -> Leases<S> {
        Leases { store }
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    /// Run one operation: read its key, decide, write.
    pub fn run(&mut self, operation: &Operation, now_ms: f64) -> Result<LeaseOutcome, LeaseError> {
        let current = self.store.get(operation.key())?;
        let decision = operation.decide(current.as_ref(), now_ms)?;
        match decision.write {
            Write::Nothing => {}
            Write::Put(record) => self.store.put(record)?,
            Write::Delete(key) => self.store.delete(&key)?,
        }
        Ok(decision.outcome)
    }

    pub fn try_lock(
        &mut self,
        lease_type: &str,
        id: &str,
        ttl_ms: f64,
        token: Token,
        now_ms: f64,
    ) -> Result<LockId, LeaseError> {
        acquired_lock_id(self.run(&Operation::try_lock(lease_type, id, ttl_ms, token)?, now_ms)?)
    }

    /// Take the lease on (type, id) whoever holds it. This store keeps no memory of what it revoked, so
    /// the replaced holder hears `TakenOver` here (a store that keeps it refines that with `revoked_or`).
    pub fn take_over(
        &mut self,
        lease_type: &str,
        id: &str,
        ttl_ms: f64,
        token: Token,
        now_ms: f64,
    ) -> Result<LockId, LeaseError> {
        let take_over = TakeOver::new(lease_type, id, ttl_ms, token)?;
        let current = self.store.get(&take_over.key)?;
        let (decision, _revoked) = take_over.decide(current.as_ref(), now_ms);
        if let Write::Put(record) = decision.write {
            self.store.put(record)?;
        }
        acquired_lock_id(decision.outcome)
    }

    pub fn check_lock(&mut self, lock_id: &str, now_ms: f64) -> Result<LeaseInfo, LeaseError> {
        held_info(self.run(&Operation::check(lock_id)?, now_ms)?)
    }

    pub fn release_lock(&mut self, lock_id: &str, now_ms: f64) -> Result<(), LeaseError> {
        self.run(&Operation::release(lock_id)?, now_ms).map(drop)
    }

    pub fn extend_lock_expiration(
        &mut self,
        lock_id: &str,
        inc_ms: f64,
        now_ms: f64,
    ) -> Result<LeaseInfo, LeaseError> {
        held_info(self.run(&Operation::extend(lock_id, inc_ms)?, now_ms)?)
    }

    /// The live leases in key order; rows expired for a day are deleted on the way.
    pub fn list(&mut self, now_ms: f64) -> Result<Vec<LeaseInfo>, LeaseError> {
        let (live, purge) = list_live(&self.store.records()?, now_ms);
        for key in &purge {
            self.store.delete(key)?;
        }
        Ok(live)
    }
}

fn acquired_lock_id(outcome: LeaseOutcome) -> Result<LockId, LeaseError> {
    match outcome {
        LeaseOutcome::Acquired { lock_id, .. } => Ok(lock_id),
        other => unreachable!("tryLock/takeOver decided {other:?}"),
    }
}

fn held_info(outcome: LeaseOutcome) -> Result<LeaseInfo, LeaseError> {
    match outcome {
        LeaseOutcome::Held(info) => Ok(info),
        other => unreachable!("check/extend decided {other:?}"),
    }
}
