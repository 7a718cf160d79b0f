//! PostgreSQL: several instances on one database, behind a load balancer.
//!
//! Each operation takes a row lock on its key's `lock_fences` row (`SELECT ... FOR UPDATE`, after making
//! sure the row exists for a grant) before it reads the `locks` row and the database's clock, so every
//! write to a key, from any instance, is serialised, and each read sees the writes committed before it
//! (READ COMMITTED takes a fresh snapshot per statement, and the read runs after the lock is granted). A
//! `checkLock` only reads, in one statement. The statements of one operation are pipelined on one
//! connection: two round trips (begin, lock and read; write, notify and commit) whatever the operation.
//!
//! Cancel safety: each operation runs on a task of its own, which the request's handler awaits. If the
//! client goes away, the handler is dropped but the task is not: the transaction runs to its end (commit
//! or rollback) before its connection goes back to the pool. A connection that failed, or whose server
//! did not answer within the statement timeout and a second, is dropped instead (closing it makes the
//! server roll back), never pooled: a pooled connection is always outside any transaction. The server's
//! `idle_in_transaction_session_timeout` is the last resort should one ever be left in one.
//!
//! Changes reach every instance through the database: the writing transaction `NOTIFY`s the change,
//! delivered to every listening connection only if and when it commits, in commit order. Each instance
//! keeps one connection `LISTEN`ing and publishes what arrives there (its own changes included).
//!
//! - [`pool`]: the connection pool, the session settings and the schema, and how a connection goes back
//!   (or is dropped);
//! - [`transaction`]: one lease operation's transaction, and reading one key;
//! - [`list`]: the statements over many rows, `list` and the purge, each through an index;
//! - [`listener`]: the `LISTEN`ing connection that publishes every instance's changes here.

mod list;
mod listener;
mod pool;
#[cfg(test)]
mod tests;
mod transaction;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use weblocks::lease::LeaseKey;

use super::{PgTimeouts, StoreError, StoreOptions, storage};
use crate::change::Change;
use crate::events::Events;
use crate::lease_row::{LeaseRequest, LeaseView, Reply};

/// The database's clock in ms since the epoch: `clock_timestamp()`, the time the statement runs (not the
/// transaction's start, which could be before the lock was granted).
const NOW_MS: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::float8";

pub struct PostgresStore {
    shared: Arc<Shared>,
    stop_listening: watch::Sender<bool>,
    listener: std::sync::Mutex<Option<JoinHandle<()>>>,
}

/// What the operations' tasks share.
struct Shared {
    pool: Pool,
    timeouts: PgTimeouts,
    listening: Arc<AtomicBool>,
    /// The most an operation may take once it has its connection: the statement timeout, plus a second
    /// for the answer to travel.
    deadline: Duration,
    read_key: String,
    list_of_type: String,
    list_all: String,
    purge: String,
}

impl PostgresStore {
    pub async fn open(
        config: tokio_postgres::Config,
        events: Arc<Events>,
        options: StoreOptions,
    ) -> Result<PostgresStore, String> {
        let timeouts = options.pg;
        let (pool, config) = pool::open(config, &options).await?;
        let listening = Arc::new(AtomicBool::new(false));
        let (stop_listening, stop) = watch::channel(false);
        let (ready_tx, mut ready) = mpsc::channel(1);
        let listener = tokio::spawn(listener::listen(
            config,
            timeouts.connect,
            events,
            Arc::clone(&listening),
            stop,
            ready_tx,
        ));
        // Serve only once changes are heard: a stream opened before would miss them.
        ready.recv().await;
        Ok(PostgresStore {
            shared: Arc::new(Shared {
                pool,
                timeouts,
                listening,
                deadline: timeouts.statement + Duration::from_secs(1),
                read_key: transaction::read_key_sql(),
                list_of_type: list::list_sql(true),
                list_all: list::list_sql(false),
                purge: list::purge_sql(),
            }),
            stop_listening,
            listener: std::sync::Mutex::new(Some(listener)),
        })
    }

    /// Run `work` on a task of its own, so that it finishes whatever happens to the caller (see the
    /// module's comment).
    async fn detached<T, F>(&self, work: impl FnOnce(Arc<Shared>) -> F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        tokio::spawn(work(Arc::clone(&self.shared)))
            .await
            .unwrap_or_else(|failed| {
                tracing::error!(error = %failed, "a PostgreSQL operation's task failed");
                Err(StoreError::Internal)
            })
    }

    pub async fn run(&self, request: LeaseRequest, max_left_ms: f64) -> Result<Reply, StoreError> {
        self.detached(move |shared| async move {
            shared
                .with_client(async |client| shared.transact(client, &request, max_left_ms).await)
                .await
        })
        .await
    }

    pub async fn list(
        &self,
        lease_type: Option<String>,
        limit: usize,
    ) -> Result<(Vec<LeaseView>, f64), StoreError> {
        self.detached(move |shared| async move {
            shared
                .with_client(async |client| shared.list(client, lease_type, limit).await)
                .await
        })
        .await
    }

    pub async fn purge_expired(&self) -> Result<usize, StoreError> {
        self.detached(move |shared| async move {
            shared
                .with_client(async |client| shared.purge_expired(client).await)
                .await
        })
        .await
    }

    pub async fn key_state(&self, key: &LeaseKey) -> Result<Change, StoreError> {
        let key = key.clone();
        self.detached(move |shared| async move {
            shared
                .with_client(async |client| shared.key_state(client, &key).await)
                .await
        })
        .await
    }

    pub async fn health(&self) -> Result<(), StoreError> {
        self.detached(move |shared| async move {
            shared
                .with_client(async |client| client.batch_execute("SELECT 1").await.map_err(storage))
                .await?;
            if !shared.listening.load(Ordering::Acquire) {
                return Err(storage("not listening for changes (reconnecting)"));
            }
            Ok(())
        })
        .await
    }

    pub async fn close(&self) {
        let _ = self.stop_listening.send(true);
        let listener = self
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(listener) = listener {
            let _ = listener.await;
        }
        self.shared.pool.close();
    }

    /// The number of connections in the pool, busy or idle (for tests).
    pub fn pooled(&self) -> usize {
        self.shared.pool.status().size
    }
}
