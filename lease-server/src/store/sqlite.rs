//! The embedded default: a SQLite file, created on first start, owned by one thread of this process.
//!
//! The thread runs the operations one at a time, each in its own `BEGIN IMMEDIATE` transaction (SQLite
//! also serialises writers from other processes on the file, but only this instance hears of changes:
//! run one instance per file). The file is in WAL mode with `synchronous=FULL`: a reply goes out only
//! after its transaction is on disk, so neither a killed process nor a power cut loses a granted lease.
//! Changes are published by the thread right after each commit, so watchers see them in commit order.

use std::path::Path;
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, Transaction, TransactionBehavior, params};
use tokio::sync::oneshot;
use weblocks::lease::LeaseKey;

use super::{key_state, listed, storage};
use crate::api_error::ApiError;
use crate::change::Change;
use crate::events::Events;
use crate::lease_row::{LeaseRequest, LeaseRow, LeaseView, Reply, RowColumns, RowWrite, plan};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS locks (
    type TEXT NOT NULL,
    id TEXT NOT NULL,
    lockid TEXT NOT NULL UNIQUE,
    expiration_time REAL NOT NULL,
    holder_sub TEXT NOT NULL,
    holder_name TEXT NOT NULL,
    acquired_time REAL NOT NULL,
    fence INTEGER NOT NULL,
    revoked_lockid TEXT,
    PRIMARY KEY (type, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lock_fences (
    type TEXT NOT NULL,
    id TEXT NOT NULL,
    fence INTEGER NOT NULL,
    PRIMARY KEY (type, id)
) WITHOUT ROWID;
";

/// The database's clock in ms since the epoch (`unixepoch('subsec')`: milliseconds resolution).
const NOW_MS: &str = "unixepoch('subsec') * 1000.0";

/// A key's row (all NULL without one), its last fencing number and the time, in one statement.
const READ_KEY: &str = "
SELECT unixepoch('subsec') * 1000.0,
       l.lockid, l.expiration_time, l.holder_sub, l.holder_name, l.acquired_time, l.fence, l.revoked_lockid,
       f.fence
FROM (SELECT 1) AS one
LEFT JOIN locks AS l ON l.type = ?1 AND l.id = ?2
LEFT JOIN lock_fences AS f ON f.type = ?1 AND f.id = ?2";

const GRANT: &str = "
INSERT INTO locks (type, id, lockid, expiration_time, holder_sub, holder_name, acquired_time, fence, revoked_lockid)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
ON CONFLICT (type, id) DO UPDATE SET
    lockid = excluded.lockid, expiration_time = excluded.expiration_time, holder_sub = excluded.holder_sub,
    holder_name = excluded.holder_name, acquired_time = excluded.acquired_time, fence = excluded.fence,
    revoked_lockid = excluded.revoked_lockid";

const SET_FENCE: &str = "
INSERT INTO lock_fences (type, id, fence) VALUES (?1, ?2, ?3)
ON CONFLICT (type, id) DO UPDATE SET fence = excluded.fence";

const EXTEND: &str = "UPDATE locks SET expiration_time = ?3 WHERE type = ?1 AND id = ?2";
const DELETE: &str = "DELETE FROM locks WHERE type = ?1 AND id = ?2";
/// Deletes a row only if it is still the lease that was listed (conditional: no lock needed).
const PURGE: &str = "DELETE FROM locks WHERE type = ?1 AND id = ?2 AND lockid = ?3";
const LIST: &str = "
SELECT type, id, lockid, expiration_time, holder_sub, holder_name, acquired_time, fence, revoked_lockid
FROM locks WHERE ?1 IS NULL OR type = ?1 ORDER BY type, id";

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

pub struct SqliteStore {
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    events: Arc<Events>,
}

impl SqliteStore {
    pub async fn open(path: &Path, events: Arc<Events>) -> Result<SqliteStore, String> {
        let path = path.to_owned();
        let (opened_tx, opened) = oneshot::channel();
        let (jobs, queue) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("sqlite".into())
            .spawn(move || {
                let mut connection = match connect(&path) {
                    Ok(connection) => connection,
                    Err(error) => {
                        let _ =
                            opened_tx.send(Err(format!("cannot open {}: {error}", path.display())));
                        return;
                    }
                };
                let _ = opened_tx.send(Ok(()));
                // Runs until every sender is gone (`close`), finishing the queued jobs first.
                while let Ok(job) = queue.recv() {
                    job(&mut connection);
                }
                if let Err((_, error)) = connection.close() {
                    tracing::warn!(%error, "closing the SQLite database");
                }
            })
            .map_err(|e| e.to_string())?;
        opened
            .await
            .map_err(|_| "the SQLite thread died".to_owned())??;
        Ok(SqliteStore {
            jobs: Mutex::new(Some(jobs)),
            thread: Mutex::new(Some(thread)),
            events,
        })
    }

    /// Run `job` on the database thread; its answer.
    async fn call<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Connection, &Events) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let (answer_tx, answer) = oneshot::channel();
        let events = Arc::clone(&self.events);
        let job: Job = Box::new(move |connection| {
            let _ = answer_tx.send(job(connection, &events));
        });
        let sent = match &*self.jobs.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(jobs) => jobs.send(job).is_ok(),
            None => false,
        };
        if !sent {
            return Err(storage("the database is closed"));
        }
        answer
            .await
            .map_err(|_| storage("the database thread stopped"))?
    }

    pub async fn run(&self, request: LeaseRequest, max_left_ms: f64) -> Result<Reply, ApiError> {
        self.call(move |connection, events| {
            let behavior = if request.reads_only() {
                TransactionBehavior::Deferred
            } else {
                TransactionBehavior::Immediate
            };
            let transaction = connection
                .transaction_with_behavior(behavior)
                .map_err(storage)?;
            let (now, current, last_fence) = read_key(&transaction, request.key())?;
            // A refusal returns here: the transaction is dropped, which rolls it back (it wrote nothing).
            let plan = plan(&request, current.as_ref(), now, last_fence, max_left_ms)?;
            write(&transaction, &plan.write).map_err(storage)?;
            transaction.commit().map_err(storage)?;
            if let Some(change) = plan.change {
                events.publish(change);
            }
            Ok(plan.reply)
        })
        .await
    }

    pub async fn list(
        &self,
        lease_type: Option<String>,
        limit: usize,
    ) -> Result<(Vec<LeaseView>, f64), ApiError> {
        self.call(move |connection, _| {
            let transaction = connection.transaction().map_err(storage)?;
            let now: f64 = transaction
                .query_row(&format!("SELECT {NOW_MS}"), [], |row| row.get(0))
                .map_err(storage)?;
            let rows = list_rows(&transaction, lease_type.as_deref())?;
            let (views, doomed) = listed(rows, now, limit);
            for row in &doomed {
                let key = &row.record.key;
                let mut purge = transaction.prepare_cached(PURGE).map_err(storage)?;
                purge
                    .execute(params![
                        key.lease_type(),
                        key.id(),
                        row.record.token.to_hex()
                    ])
                    .map_err(storage)?;
            }
            transaction.commit().map_err(storage)?;
            Ok((views, now))
        })
        .await
    }

    pub async fn key_state(&self, key: &LeaseKey) -> Result<Change, ApiError> {
        let key = key.clone();
        self.call(move |connection, _| {
            let (now, row, last_fence) = read_key(connection, &key)?;
            Ok(key_state(&key, row, last_fence, now))
        })
        .await
    }

    pub async fn health(&self) -> Result<(), ApiError> {
        self.call(|connection, _| {
            connection
                .query_row("SELECT 1", [], |_| Ok(()))
                .map_err(storage)
        })
        .await
    }

    pub async fn close(&self) {
        drop(self.jobs.lock().unwrap_or_else(|p| p.into_inner()).take());
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let connection = Connection::open(path)?;
    connection.busy_timeout(Duration::from_secs(5))?;
    let mode: String = connection.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(%mode, "SQLite did not switch to WAL");
    }
    connection.pragma_update(None, "synchronous", "FULL")?;
    connection.execute_batch(SCHEMA)?;
    Ok(connection)
}

/// The columns of a `locks` row from `at` on (NULLs read as `None`).
fn columns(row: &rusqlite::Row, at: usize) -> rusqlite::Result<RowColumns> {
    Ok(RowColumns {
        lockid: row.get(at)?,
        expiration_time: row.get(at + 1)?,
        holder_sub: row.get(at + 2)?,
        holder_name: row.get(at + 3)?,
        acquired_time: row.get(at + 4)?,
        fence: row.get(at + 5)?,
        revoked_lockid: row.get(at + 6)?,
    })
}

/// The time, `key`'s row and its last fencing number (0 if it never had a lease).
fn read_key(
    connection: &Connection,
    key: &LeaseKey,
) -> Result<(f64, Option<LeaseRow>, i64), ApiError> {
    let mut read = connection.prepare_cached(READ_KEY).map_err(storage)?;
    let (now, columns, fence) = read
        .query_row(params![key.lease_type(), key.id()], |row| {
            Ok((
                row.get::<_, f64>(0)?,
                columns(row, 1)?,
                row.get::<_, Option<i64>>(8)?,
            ))
        })
        .map_err(storage)?;
    Ok((now, columns.into_row(key)?, fence.unwrap_or(0)))
}

fn list_rows(
    transaction: &Transaction,
    lease_type: Option<&str>,
) -> Result<Vec<LeaseRow>, ApiError> {
    let mut list = transaction.prepare_cached(LIST).map_err(storage)?;
    let rows = list
        .query_map(params![lease_type], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                columns(row, 2)?,
            ))
        })
        .map_err(storage)?;
    let mut leases = Vec::new();
    for row in rows {
        let (lease_type, id, columns) = row.map_err(storage)?;
        let key = LeaseKey::new(lease_type, id)?;
        leases.extend(columns.into_row(&key)?);
    }
    Ok(leases)
}

fn write(transaction: &Transaction, write: &RowWrite) -> rusqlite::Result<()> {
    match write {
        RowWrite::Nothing => {}
        RowWrite::Grant(row) => {
            let key = &row.record.key;
            transaction.prepare_cached(GRANT)?.execute(params![
                key.lease_type(),
                key.id(),
                row.record.token.to_hex(),
                row.record.expires_at_ms,
                row.holder.sub,
                row.holder.name,
                row.acquired_at_ms,
                row.fence,
                row.revoked.map(|token| token.to_hex()),
            ])?;
            transaction.prepare_cached(SET_FENCE)?.execute(params![
                key.lease_type(),
                key.id(),
                row.fence
            ])?;
        }
        RowWrite::Extend { key, expires_at_ms } => {
            transaction.prepare_cached(EXTEND)?.execute(params![
                key.lease_type(),
                key.id(),
                expires_at_ms
            ])?;
        }
        RowWrite::Delete(key) => {
            transaction
                .prepare_cached(DELETE)?
                .execute(params![key.lease_type(), key.id()])?;
        }
    }
    Ok(())
}
