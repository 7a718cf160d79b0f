//! The embedded default: a SQLite file, created on first start, owned by one thread of this process.
//!
//! The thread runs the operations one at a time. It commits them in groups: the operations queued when it
//! is free (at most `--sqlite-group`, 256 by default) run one after the other in one `BEGIN IMMEDIATE` transaction, each inside
//! a savepoint of its own that is rolled back if it fails (so a refused operation writes nothing), and one
//! `COMMIT` makes them all durable at once. Each operation still reads, decides and writes with nothing in
//! between, and sees the writes of those before it, exactly as if each had its own transaction; what the
//! group saves is the disk flushes, one per group instead of one per operation. The file is in WAL mode with
//! `synchronous=FULL`: no answer leaves before its group's commit is on disk, so neither a killed process
//! nor a power cut loses a granted lease (if the commit fails, every operation of the group fails, none
//! having been answered). SQLite also serialises writers from other processes on the file, but only this
//! instance hears of changes: run one instance per file. Changes are published by the thread after each
//! commit, in order, so watchers see them in commit order.

use std::path::Path;
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::oneshot;
use weblocks::lease::LeaseKey;
use weblocks::lease::operation::PURGE_EXPIRED_AFTER_MS;

use super::{PURGE_BATCH, StoreError, key_state, live_views, storage};
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
CREATE INDEX IF NOT EXISTS locks_by_expiry ON locks (expiration_time);
";

/// The database's clock in ms since the epoch (`unixepoch('subsec')`: milliseconds resolution).
const NOW_MS: &str = "unixepoch('subsec') * 1000.0";

/// The time and a key's last fencing number (NULL if it never had a lease). Not the `(SELECT 1) LEFT
/// JOIN locks` form that returns the row too: with it, SQLite prepares the statement again at every run
/// (its plan depends on the bound values), which cost a fifth of the store's time.
const CLOCK_AND_FENCE: &str = "
SELECT unixepoch('subsec') * 1000.0, (SELECT f.fence FROM lock_fences AS f WHERE f.type = ?1 AND f.id = ?2)";

/// A key's row, if it has one.
const ROW: &str = "
SELECT lockid, expiration_time, holder_sub, holder_name, acquired_time, fence, revoked_lockid
FROM locks WHERE type = ?1 AND id = ?2";

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
/// At most ?2 rows expired ?1 ms ago or more, found through `locks_by_expiry`.
const PURGE: &str = "
DELETE FROM locks WHERE (type, id) IN (
    SELECT type, id FROM locks WHERE expiration_time <= unixepoch('subsec') * 1000.0 - ?1 LIMIT ?2
)";

/// The live leases of type ?1 (expiring after ?2), the first ?3 in id order: a range of the primary
/// key, read in its order, that stops at the limit. (`+expiration_time` keeps the planner from reading
/// the expiry index instead, which would read every live lease of every type and sort them.)
pub(super) const LIST_OF_TYPE: &str = "
SELECT type, id, lockid, expiration_time, holder_sub, holder_name, acquired_time, fence, revoked_lockid
FROM locks WHERE type = ?1 AND +expiration_time > ?2 ORDER BY type, id LIMIT ?3";

/// The live leases of every type (expiring after ?1), the first ?2 in (type, id) order: the primary key
/// read in its order, stopping at the limit.
pub(super) const LIST_ALL: &str = "
SELECT type, id, lockid, expiration_time, holder_sub, holder_name, acquired_time, fence, revoked_lockid
FROM locks WHERE +expiration_time > ?1 ORDER BY type, id LIMIT ?2";

/// What an operation leaves to do once its group's transaction has ended (with the commit's outcome):
/// answer its caller, and publish its change if it was committed.
type Finish = Box<dyn FnOnce(Result<(), String>) + Send>;

/// One operation, run inside its group's transaction: whether its writes stay, and its [`Finish`]. A job
/// dropped without running (its group could not begin) drops its answer channel: the caller hears a
/// storage error.
type Job = Box<dyn FnOnce(&Connection) -> (bool, Finish) + Send>;

pub struct SqliteStore {
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    events: Arc<Events>,
}

impl SqliteStore {
    /// Open (creating) the file at `path`; commit at most `group` operations together.
    pub async fn open(
        path: &Path,
        events: Arc<Events>,
        group: usize,
    ) -> Result<SqliteStore, String> {
        let group = group.max(1);
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
                while let Ok(first) = queue.recv() {
                    let mut jobs = vec![first];
                    jobs.extend(queue.try_iter().take(group - 1));
                    run_group(&mut connection, jobs);
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

    /// Run `job` on the database thread, in a group transaction: its value once committed (its change,
    /// if any, is then published), or its error (its writes are rolled back).
    async fn call<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Connection) -> Result<(T, Option<Change>), StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (answer_tx, answer) = oneshot::channel();
        let events = Arc::clone(&self.events);
        let job: Job = Box::new(move |connection| {
            let outcome = job(connection);
            let keep = outcome.is_ok();
            let finish: Finish = Box::new(move |committed| {
                let answer = match (outcome, committed) {
                    (Ok((value, change)), Ok(())) => {
                        if let Some(change) = change {
                            events.publish(change);
                        }
                        Ok(value)
                    }
                    (Ok(_), Err(why)) => Err(storage(why)),
                    (Err(error), _) => Err(error),
                };
                let _ = answer_tx.send(answer);
            });
            (keep, finish)
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
            .map_err(|_| storage("the database thread dropped the operation"))?
    }

    pub async fn run(&self, request: LeaseRequest, max_left_ms: f64) -> Result<Reply, StoreError> {
        self.call(move |connection| {
            let (now, current, last_fence) = read_key(connection, request.key())?;
            // A refusal returns here: its savepoint is rolled back (it wrote nothing).
            let plan = plan(&request, current.as_ref(), now, last_fence, max_left_ms)?;
            write(connection, &plan.write).map_err(storage)?;
            Ok((plan.reply, plan.change))
        })
        .await
    }

    pub async fn list(
        &self,
        lease_type: Option<String>,
        limit: usize,
    ) -> Result<(Vec<LeaseView>, f64), StoreError> {
        self.call(move |connection| {
            let now: f64 = connection
                .query_row(&format!("SELECT {NOW_MS}"), [], |row| row.get(0))
                .map_err(storage)?;
            let rows = list_rows(connection, lease_type.as_deref(), now, limit)?;
            Ok(((live_views(rows, now), now), None))
        })
        .await
    }

    pub async fn purge_expired(&self) -> Result<usize, StoreError> {
        self.call(|connection| {
            let deleted = connection
                .prepare_cached(PURGE)
                .and_then(|mut purge| purge.execute(params![PURGE_EXPIRED_AFTER_MS, PURGE_BATCH]))
                .map_err(storage)?;
            Ok((deleted, None))
        })
        .await
    }

    pub async fn key_state(&self, key: &LeaseKey) -> Result<Change, StoreError> {
        let key = key.clone();
        self.call(move |connection| {
            let (now, row, last_fence) = read_key(connection, &key)?;
            Ok((key_state(&key, row, last_fence, now), None))
        })
        .await
    }

    pub async fn health(&self) -> Result<(), StoreError> {
        self.call(|connection| {
            connection
                .query_row("SELECT 1", [], |_| Ok(((), None)))
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

/// Run `group` in one transaction, each job inside a savepoint of its own; then finish each with the
/// commit's outcome. If the transaction cannot begin, the jobs are dropped unrun (their callers hear a
/// storage error); if a savepoint cannot be closed, the whole group is rolled back and fails.
fn run_group(connection: &mut Connection, group: Vec<Job>) {
    if let Err(error) = execute(connection, "BEGIN IMMEDIATE") {
        tracing::error!(%error, "cannot begin a transaction");
        return;
    }
    let mut finishes = Vec::with_capacity(group.len());
    let mut intact = Ok(());
    for job in group {
        if let Err(error) = execute(connection, "SAVEPOINT operation") {
            intact = Err(error.to_string());
            break;
        }
        // A job that panics (a bug) is rolled back and its caller hears a storage error (its answer
        // channel is dropped with it); the thread and the other jobs carry on.
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(connection)));
        let keep = match ran {
            Ok((keep, finish)) => {
                finishes.push(finish);
                keep
            }
            Err(_) => false,
        };
        let rolled_back = if keep {
            Ok(())
        } else {
            execute(connection, "ROLLBACK TO operation")
        };
        if let Err(error) = rolled_back.and_then(|()| execute(connection, "RELEASE operation")) {
            intact = Err(error.to_string());
            break;
        }
    }
    let committed =
        intact.and_then(|()| execute(connection, "COMMIT").map_err(|error| error.to_string()));
    if committed.is_err() && !connection.is_autocommit() {
        let _ = connection.execute_batch("ROLLBACK");
    }
    for finish in finishes {
        finish(committed.clone());
    }
}

/// A statement without parameters, prepared once (these run several times per operation).
fn execute(connection: &Connection, sql: &str) -> rusqlite::Result<()> {
    connection.prepare_cached(sql)?.execute([]).map(drop)
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
    // Room for every statement of the store (the default, 16, is just enough today).
    connection.set_prepared_statement_cache_capacity(32);
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
) -> Result<(f64, Option<LeaseRow>, i64), StoreError> {
    let (now, fence) = connection
        .prepare_cached(CLOCK_AND_FENCE)
        .and_then(|mut read| {
            read.query_row(params![key.lease_type(), key.id()], |row| {
                Ok((row.get::<_, f64>(0)?, row.get::<_, Option<i64>>(1)?))
            })
        })
        .map_err(storage)?;
    let columns = connection
        .prepare_cached(ROW)
        .and_then(|mut read| {
            read.query_row(params![key.lease_type(), key.id()], |row| columns(row, 0))
                .optional()
        })
        .map_err(storage)?;
    let row = match columns {
        Some(columns) => columns.into_row(key)?,
        None => None,
    };
    Ok((now, row, fence.unwrap_or(0)))
}

fn list_rows(
    transaction: &Connection,
    lease_type: Option<&str>,
    now_ms: f64,
    limit: usize,
) -> Result<Vec<LeaseRow>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let read = |row: &rusqlite::Row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            columns(row, 2)?,
        ))
    };
    let rows = match lease_type {
        Some(lease_type) => transaction
            .prepare_cached(LIST_OF_TYPE)
            .and_then(|mut list| {
                list.query_map(params![lease_type, now_ms, limit], read)?
                    .collect::<rusqlite::Result<Vec<_>>>()
            }),
        None => transaction.prepare_cached(LIST_ALL).and_then(|mut list| {
            list.query_map(params![now_ms, limit], read)?
                .collect::<rusqlite::Result<Vec<_>>>()
        }),
    }
    .map_err(storage)?;
    let mut leases = Vec::with_capacity(rows.len());
    for row in rows {
        let (lease_type, id, columns) = row;
        let key = LeaseKey::new(lease_type, id)?;
        leases.extend(columns.into_row(&key)?);
    }
    Ok(leases)
}

fn write(transaction: &Connection, write: &RowWrite) -> rusqlite::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(connection: &Connection, sql: &str) -> String {
        let mut explain = connection
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap();
        let count = explain.parameter_count();
        let params: Vec<rusqlite::types::Value> = (0..count)
            .map(|_| rusqlite::types::Value::Integer(1))
            .collect();
        let steps: Vec<String> = explain
            .query_map(rusqlite::params_from_iter(params), |row| row.get(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        steps.join("; ")
    }

    /// `list` reads a range of the primary key in its order and stops at the limit (no sort of every
    /// row); a purge finds its rows through the expiry index.
    #[test]
    fn list_and_purge_read_through_an_index() {
        let dir = std::env::temp_dir().join(format!("weblocks-plan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let connection = connect(&dir.join("plan.sqlite3")).unwrap();
        let of_type = plan(&connection, LIST_OF_TYPE);
        assert!(
            of_type.contains("SEARCH locks USING PRIMARY KEY (type=?)"),
            "{of_type}"
        );
        let all = plan(&connection, LIST_ALL);
        for listed in [&of_type, &all] {
            assert!(!listed.contains("TEMP B-TREE"), "sorts every row: {listed}");
        }
        let purge = plan(&connection, PURGE);
        assert!(
            purge.contains("USING COVERING INDEX locks_by_expiry (expiration_time<?)")
                || purge.contains("USING INDEX locks_by_expiry"),
            "{purge}"
        );
        drop(connection);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn list_reads_live_leases_of_the_type_up_to_the_limit_and_purge_is_bounded() {
        let dir = std::env::temp_dir().join(format!("weblocks-list-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (events, _expiries) = Events::new();
        let store = SqliteStore::open(&dir.join("list.sqlite3"), Arc::new(events), 16)
            .await
            .unwrap();
        store
            .call(|connection| {
                let now: f64 = connection
                    .query_row(&format!("SELECT {NOW_MS}"), [], |row| row.get(0))
                    .unwrap();
                let mut insert = connection
                    .prepare("INSERT INTO locks VALUES (?1, ?2, ?3, ?4, 's', 'n', 0, 1, NULL)")
                    .unwrap();
                for i in 0..2500 {
                    let expires = if i % 2 == 0 {
                        now + 60_000.0
                    } else {
                        now - 2.0 * 86_400_000.0
                    };
                    insert
                        .execute(params![
                            "Order",
                            format!("{i:05}"),
                            format!("{i:032x}"),
                            expires
                        ])
                        .unwrap();
                }
                insert
                    .execute(params![
                        "Other",
                        "1",
                        format!("{:032x}", 1_000_000),
                        now + 60_000.0
                    ])
                    .unwrap();
                Ok(((), None))
            })
            .await
            .unwrap();
        let (views, _) = store.list(Some("Order".into()), 10).await.unwrap();
        let ids: Vec<&str> = views.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "00000", "00002", "00004", "00006", "00008", "00010", "00012", "00014", "00016",
                "00018"
            ]
        );
        let (views, _) = store.list(Some("None".into()), 10).await.unwrap();
        assert!(views.is_empty());
        let (views, _) = store.list(None, 5000).await.unwrap();
        assert_eq!(views.len(), 1251);
        assert_eq!(
            store.purge_expired().await.unwrap(),
            1000,
            "one batch at most"
        );
        assert_eq!(store.purge_expired().await.unwrap(), 250);
        assert_eq!(store.purge_expired().await.unwrap(), 0);
        assert_eq!(
            store.list(None, 5000).await.unwrap().0.len(),
            1251,
            "live leases stay"
        );
        store.close().await;
        let _ = std::fs::remove_dir_all(dir);
    }
}
