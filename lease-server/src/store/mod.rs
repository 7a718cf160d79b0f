//! The `locks` table, in SQLite (one instance, the embedded default) or PostgreSQL (any number of
//! instances on one database).
//!
//! Both keep the table `locks(type, id, lockid, expiration_time)` with (type, id) the primary key and
//! lockid unique, plus the holder, the time it was acquired, the lease's fencing number and the token it
//! revoked; and `lock_fences(type, id, fence)`, the last fencing number granted per key, which
//! is never deleted, so numbers keep growing across releases.
//!
//! Every operation is one database transaction that reads the key's row and the database's clock,
//! decides ([`crate::lease_row::plan`], the lease core's decision) and writes; operations on one key are
//! serialised by the database (SQLite: one writer at a time; PostgreSQL: a row lock on the key's
//! `lock_fences` row, taken before the read), so two instances can never both grant a key. Expiry is
//! judged by the database's clock, read inside that transaction.

mod error;
mod postgres;
mod sqlite;

use std::fmt::Display;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use weblocks::lease::LeaseKey;

use crate::bus::Topic;
use crate::change::{Change, ChangeKind};
use crate::events::Events;
use crate::lease_row::{LeaseRequest, LeaseRow, LeaseView, Reply};

pub use error::StoreError;
pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

/// The name of the PostgreSQL notification channel changes travel on.
pub const CHANNEL: &str = "weblocks_leases";

/// Most leases a stream's first state of a type reports.
pub const SNAPSHOT_LIMIT: usize = 10_000;

pub enum Store {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

/// Most rows one purge deletes, in one transaction: purging is bounded work of its own, never a
/// request's.
pub const PURGE_BATCH: i64 = 1000;

/// Where the `locks` table lives.
#[derive(Clone, Debug)]
pub enum Database {
    /// `sqlite:PATH`: a file, created on first start.
    Sqlite(PathBuf),
    /// `postgres://…` or `postgresql://…`: shared by any number of instances.
    Postgres(Box<tokio_postgres::Config>),
}

impl FromStr for Database {
    type Err = String;

    fn from_str(url: &str) -> Result<Database, String> {
        if let Some(path) = url.strip_prefix("sqlite:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err("sqlite: needs a file path, e.g. sqlite:leases.sqlite3".into());
            }
            return Ok(Database::Sqlite(PathBuf::from(path)));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return tokio_postgres::Config::from_str(url)
                .map(|config| Database::Postgres(Box::new(config)))
                .map_err(|e| format!("not a PostgreSQL URL: {e}"));
        }
        Err("expected sqlite:PATH or postgres://USER@HOST:PORT/DATABASE".into())
    }
}

/// How a store uses its database.
#[derive(Clone, Copy, Debug)]
pub struct StoreOptions {
    /// PostgreSQL: connections in the pool.
    pub pg_pool: usize,
    /// SQLite: the most operations committed together (1: each in a transaction of its own).
    pub sqlite_group: usize,
    pub pg: PgTimeouts,
}

/// PostgreSQL: how long each step may take (see `Config` for each).
#[derive(Clone, Copy, Debug)]
pub struct PgTimeouts {
    pub connect: Duration,
    pub pool_wait: Duration,
    pub statement: Duration,
    pub lock: Duration,
    pub idle_in_transaction: Duration,
}

impl Store {
    /// Open the database, creating the tables if they are missing.
    pub async fn open(
        database: &Database,
        events: Arc<Events>,
        options: StoreOptions,
    ) -> Result<Store, String> {
        Ok(match database {
            Database::Sqlite(path) => {
                Store::Sqlite(SqliteStore::open(path, events, options.sqlite_group).await?)
            }
            Database::Postgres(config) => {
                Store::Postgres(PostgresStore::open((**config).clone(), events, options).await?)
            }
        })
    }

    /// Run one lease operation atomically; its change, if any, is published once committed.
    pub async fn run(&self, request: LeaseRequest, max_left_ms: f64) -> Result<Reply, StoreError> {
        match self {
            Store::Sqlite(store) => store.run(request, max_left_ms).await,
            Store::Postgres(store) => store.run(request, max_left_ms).await,
        }
    }

    /// The live leases (of `lease_type` if given), at most `limit`, in (type, id) order, and the
    /// database's time. Only those rows are read, through the primary key's index: the cost follows the
    /// answer (plus the expired rows among them not yet purged), not the table.
    pub async fn list(
        &self,
        lease_type: Option<String>,
        limit: usize,
    ) -> Result<(Vec<LeaseView>, f64), StoreError> {
        match self {
            Store::Sqlite(store) => store.list(lease_type, limit).await,
            Store::Postgres(store) => store.list(lease_type, limit).await,
        }
    }

    /// Delete at most [`PURGE_BATCH`] rows that expired [`PURGE_EXPIRED_AFTER_MS`] ago or more (the
    /// core's clean-up: until then, their holder still learns `Expired`); how many it deleted.
    ///
    /// [`PURGE_EXPIRED_AFTER_MS`]: weblocks::lease::operation::PURGE_EXPIRED_AFTER_MS
    pub async fn purge_expired(&self) -> Result<usize, StoreError> {
        match self {
            Store::Sqlite(store) => store.purge_expired().await,
            Store::Postgres(store) => store.purge_expired().await,
        }
    }

    /// `key`'s state now, as a change of kind `current`.
    pub async fn key_state(&self, key: &LeaseKey) -> Result<Change, StoreError> {
        match self {
            Store::Sqlite(store) => store.key_state(key).await,
            Store::Postgres(store) => store.key_state(key).await,
        }
    }

    /// What a new stream on `topic` is told first: its key's state, or its type's live leases.
    pub async fn snapshot(&self, topic: &Topic) -> Result<Vec<Change>, StoreError> {
        match topic {
            Topic::Key(key) => Ok(vec![self.key_state(key).await?]),
            Topic::Type(lease_type) => {
                let (views, now) = self.list(Some(lease_type.clone()), SNAPSHOT_LIMIT).await?;
                Ok(views.iter().map(|view| current(view, now)).collect())
            }
        }
    }

    /// Whether the database answers (and, for PostgreSQL, this instance listens for changes).
    pub async fn health(&self) -> Result<&'static str, StoreError> {
        match self {
            Store::Sqlite(store) => store.health().await.map(|()| "sqlite"),
            Store::Postgres(store) => store.health().await.map(|()| "postgres"),
        }
    }

    /// Finish the queued work and close the database.
    pub async fn close(&self) {
        match self {
            Store::Sqlite(store) => store.close().await,
            Store::Postgres(store) => store.close().await,
        }
    }
}

/// A database failure described by `error`.
fn storage(error: impl Display) -> StoreError {
    StoreError::Database(error.to_string())
}

/// A key's state: its live lease, or free with the number of its last lease (0 if it never had one).
fn key_state(key: &LeaseKey, row: Option<LeaseRow>, last_fence: i64, now_ms: f64) -> Change {
    match row.filter(|row| !row.record.is_expired(now_ms)) {
        Some(row) => row.change(ChangeKind::Current, now_ms),
        None => Change::ended(ChangeKind::Current, key, last_fence, now_ms),
    }
}

fn current(view: &LeaseView, now_ms: f64) -> Change {
    let mut change = Change::ended(
        ChangeKind::Current,
        &LeaseKey::new(view.lease_type.as_str(), view.id.as_str()).expect("a listed key is valid"),
        view.fence,
        now_ms,
    );
    change.lease = Some(crate::change::Held {
        holder: view.holder.clone(),
        acquired_at: view.acquired_at,
        expires_at: view.expires_at,
    });
    change
}

/// The views of the listed rows that are live at `now_ms` (as the core judges expiry).
fn live_views(rows: Vec<LeaseRow>, now_ms: f64) -> Vec<LeaseView> {
    rows.into_iter()
        .filter(|row| !row.record.is_expired(now_ms))
        .map(|row| row.view())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::holder::Holder;
    use weblocks::lease::{LeaseRecord, Token};

    const T0: f64 = 1_700_000_000_000.0;
    const DAY: f64 = 86_400_000.0;

    fn row(id: &str, expires_at_ms: f64) -> LeaseRow {
        LeaseRow {
            record: LeaseRecord {
                key: LeaseKey::new("Order", id).unwrap(),
                token: Token::from_random_bytes([1; 16]),
                expires_at_ms,
            },
            revoked: None,
            holder: Holder {
                sub: "a".into(),
                name: "A".into(),
            },
            acquired_at_ms: T0 - DAY * 3.0,
            fence: 1,
        }
    }

    #[test]
    fn list_reports_live_rows_only() {
        let rows = vec![
            row("1", T0 + 1.0),
            row("2", T0),
            row("3", T0 - DAY - 1.0),
            row("4", T0 + 5.0),
        ];
        let ids: Vec<String> = live_views(rows, T0).into_iter().map(|v| v.id).collect();
        assert_eq!(ids, ["1", "4"]);
    }

    #[test]
    fn a_key_s_state_is_its_live_lease_or_free_with_its_last_number() {
        let key = LeaseKey::new("Order", "1").unwrap();
        let live = key_state(&key, Some(row("1", T0 + 1.0)), 1, T0);
        assert!(live.lease.is_some());
        let expired = key_state(&key, Some(row("1", T0)), 1, T0);
        assert_eq!((expired.lease, expired.fence), (None, 1));
        assert_eq!(key_state(&key, None, 0, T0).fence, 0);
    }
}
