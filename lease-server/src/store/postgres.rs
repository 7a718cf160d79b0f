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

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool_postgres::{
    Client, Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime,
};
use futures_util::StreamExt;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, NoTls, Row, Statement};
use weblocks::lease::LeaseKey;
use weblocks::lease::operation::PURGE_EXPIRED_AFTER_MS;

use super::{
    CHANNEL, PURGE_BATCH, PgTimeouts, StoreError, StoreOptions, key_state, live_views, storage,
};
use crate::change::Change;
use crate::events::Events;
use crate::lease_row::{LeaseRequest, LeaseRow, LeaseView, Reply, RowColumns, RowWrite, plan};

/// Serialises schema creation between instances starting together (`CREATE TABLE IF NOT EXISTS` alone
/// can fail on a concurrent creation).
const SCHEMA: &str = "
BEGIN;
SELECT pg_advisory_xact_lock(7301730173017301);
CREATE TABLE IF NOT EXISTS locks (
    type text NOT NULL,
    id text NOT NULL,
    lockid text NOT NULL UNIQUE,
    expiration_time double precision NOT NULL,
    holder_sub text NOT NULL,
    holder_name text NOT NULL,
    acquired_time double precision NOT NULL,
    fence bigint NOT NULL,
    revoked_lockid text,
    PRIMARY KEY (type, id)
);
CREATE INDEX IF NOT EXISTS locks_by_expiry ON locks (expiration_time);
CREATE TABLE IF NOT EXISTS lock_fences (
    type text NOT NULL,
    id text NOT NULL,
    fence bigint NOT NULL,
    PRIMARY KEY (type, id)
);
COMMIT;";

/// The database's clock in ms since the epoch: `clock_timestamp()`, the time the statement runs (not the
/// transaction's start, which could be before the lock was granted).
const NOW_MS: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::float8";

const ENSURE_FENCE: &str = "INSERT INTO lock_fences (type, id, fence) VALUES ($1, $2, 0) ON CONFLICT (type, id) DO NOTHING";
const LOCK_KEY: &str = "SELECT fence FROM lock_fences WHERE type = $1 AND id = $2 FOR UPDATE";
const GRANT: &str = "
INSERT INTO locks (type, id, lockid, expiration_time, holder_sub, holder_name, acquired_time, fence, revoked_lockid)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (type, id) DO UPDATE SET
    lockid = EXCLUDED.lockid, expiration_time = EXCLUDED.expiration_time, holder_sub = EXCLUDED.holder_sub,
    holder_name = EXCLUDED.holder_name, acquired_time = EXCLUDED.acquired_time, fence = EXCLUDED.fence,
    revoked_lockid = EXCLUDED.revoked_lockid";
const SET_FENCE: &str = "UPDATE lock_fences SET fence = $3 WHERE type = $1 AND id = $2";
const EXTEND: &str = "UPDATE locks SET expiration_time = $3 WHERE type = $1 AND id = $2";
const DELETE: &str = "DELETE FROM locks WHERE type = $1 AND id = $2";
const NOTIFY: &str = "SELECT pg_notify($1, $2)";

fn read_key_sql() -> String {
    format!(
        "SELECT {NOW_MS},
                l.lockid, l.expiration_time, l.holder_sub, l.holder_name, l.acquired_time, l.fence, l.revoked_lockid,
                (SELECT f.fence FROM lock_fences AS f WHERE f.type = $1 AND f.id = $2)
         FROM (SELECT 1) AS one LEFT JOIN locks AS l ON l.type = $1 AND l.id = $2"
    )
}

/// The live leases of type $1 (or of every type: `of_type` false, $1 unused), the first $2 in (type, id)
/// order, and the time: a range of the primary key read in its order that stops at the limit (one row
/// of NULLs, with the time, if there is none).
fn list_sql(of_type: bool) -> String {
    let filter = if of_type {
        "type = $1 AND"
    } else {
        "$1::text IS NULL AND"
    };
    format!(
        "SELECT c.now, l.type, l.id,
                l.lockid, l.expiration_time, l.holder_sub, l.holder_name, l.acquired_time, l.fence, l.revoked_lockid
         FROM (SELECT {NOW_MS} AS now) AS c
         LEFT JOIN LATERAL (
             SELECT * FROM locks WHERE {filter} expiration_time > c.now ORDER BY type, id LIMIT $2
         ) AS l ON true
         ORDER BY l.type, l.id"
    )
}

/// At most $2 rows expired $1 ms ago or more, found in expiry order through `locks_by_expiry` and
/// deleted by their physical address (a row a grant rewrote meanwhile has a new address and is kept; the
/// expiry is checked again on the row deleted).
fn purge_sql() -> String {
    format!(
        "DELETE FROM locks WHERE ctid = ANY(ARRAY(
             SELECT ctid FROM locks WHERE expiration_time <= {NOW_MS} - $1 ORDER BY expiration_time LIMIT $2
         )) AND expiration_time <= {NOW_MS} - $1"
    )
}

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

/// The statements of one operation, prepared (or found in the connection's cache) before any is sent:
/// preparing inside the pipeline would let a later statement (the commit) overtake it.
struct Prepared {
    read_key: Statement,
    ensure_fence: Statement,
    lock_key: Statement,
    grant: Statement,
    set_fence: Statement,
    extend: Statement,
    delete: Statement,
    notify: Statement,
}

/// `host:port` (or socket directory), user and database of `config`, for an error message: never the
/// password.
fn describe(config: &tokio_postgres::Config) -> String {
    use tokio_postgres::config::Host;
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let port = config
                .get_ports()
                .get(i)
                .or(config.get_ports().first())
                .copied()
                .unwrap_or(5432);
            match host {
                Host::Tcp(name) => format!("{name}:{port}"),
                #[cfg(unix)]
                Host::Unix(dir) => format!("{}/.s.PGSQL.{port}", dir.display()),
            }
        })
        .collect();
    let hosts = if hosts.is_empty() {
        "localhost:5432".to_owned()
    } else {
        hosts.join(", ")
    };
    format!(
        "{hosts} (user {}, database {})",
        config.get_user().unwrap_or("?"),
        config.get_dbname().or(config.get_user()).unwrap_or("?")
    )
}

/// An error and its causes, outermost first (`tokio_postgres` keeps the reason, e.g. "Connection
/// refused", in the source).
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let inner_text = inner.to_string();
        if !text.contains(&inner_text) {
            text = format!("{text}: {inner_text}");
        }
        cause = inner.source();
    }
    text
}

/// Why a pooled connection could not be had.
fn pool_error(error: PoolError, timeouts: &PgTimeouts) -> String {
    use deadpool_postgres::TimeoutType;
    match error {
        PoolError::Timeout(TimeoutType::Wait) => format!(
            "no free connection within {} ms (all pooled connections busy)",
            timeouts.pool_wait.as_millis()
        ),
        PoolError::Timeout(TimeoutType::Create) => format!(
            "no answer within {} ms while connecting",
            timeouts.connect.as_millis()
        ),
        PoolError::Timeout(TimeoutType::Recycle) => format!(
            "no answer within {} ms while checking a pooled connection",
            timeouts.connect.as_millis()
        ),
        other => with_causes(&other),
    }
}

/// `config` with the service's session settings: its name (unless the URL gives one) and the server-side
/// timeouts.
fn with_session_settings(
    mut config: tokio_postgres::Config,
    timeouts: &PgTimeouts,
) -> tokio_postgres::Config {
    if config.get_application_name().is_none() {
        config.application_name("weblocks-lease-server");
    }
    let settings = format!(
        "-c statement_timeout={} -c lock_timeout={} -c idle_in_transaction_session_timeout={}",
        timeouts.statement.as_millis(),
        timeouts.lock.as_millis(),
        timeouts.idle_in_transaction.as_millis(),
    );
    let options = match config.get_options() {
        Some(given) if !given.is_empty() => format!("{given} {settings}"),
        _ => settings,
    };
    config.options(&options);
    config.connect_timeout(timeouts.connect);
    config
}

impl PostgresStore {
    pub async fn open(
        config: tokio_postgres::Config,
        events: Arc<Events>,
        options: StoreOptions,
    ) -> Result<PostgresStore, String> {
        let timeouts = options.pg;
        let config = with_session_settings(config, &timeouts);
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pg_pool)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(timeouts.pool_wait))
            .create_timeout(Some(timeouts.connect))
            .recycle_timeout(Some(timeouts.connect))
            .build()
            .map_err(|e| e.to_string())?;
        let cannot_connect = |why: String| {
            format!(
                "cannot connect to PostgreSQL at {}: {why}",
                describe(&config)
            )
        };
        let client = pool
            .get()
            .await
            .map_err(|e| cannot_connect(pool_error(e, &timeouts)))?;
        tokio::time::timeout(
            timeouts.statement + Duration::from_secs(1),
            client.batch_execute(SCHEMA),
        )
        .await
        .map_err(|_| cannot_connect("no answer while creating the tables".into()))?
        .map_err(|e| format!("cannot create the tables: {}", with_causes(&e)))?;
        drop(client);
        let listening = Arc::new(AtomicBool::new(false));
        let (stop_listening, stop) = watch::channel(false);
        let (ready_tx, mut ready) = mpsc::channel(1);
        let listener = tokio::spawn(listen(
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
                read_key: read_key_sql(),
                list_of_type: list_sql(true),
                list_all: list_sql(false),
                purge: purge_sql(),
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
                .with_client(async |client| {
                    let purge = client
                        .prepare_cached(&shared.purge)
                        .await
                        .map_err(storage)?;
                    let deleted = client
                        .execute(&purge, &[&PURGE_EXPIRED_AFTER_MS, &PURGE_BATCH])
                        .await
                        .map_err(storage)?;
                    Ok(usize::try_from(deleted).unwrap_or(usize::MAX))
                })
                .await
        })
        .await
    }

    pub async fn key_state(&self, key: &LeaseKey) -> Result<Change, StoreError> {
        let key = key.clone();
        self.detached(move |shared| async move {
            shared
                .with_client(async |client| {
                    let read = client
                        .prepare_cached(&shared.read_key)
                        .await
                        .map_err(storage)?;
                    let row = client
                        .query_one(&read, &[&key.lease_type(), &key.id()])
                        .await
                        .map_err(storage)?;
                    let (now, current, last_fence) = decode_key_row(&row, &key)?;
                    Ok(key_state(&key, current, last_fence, now))
                })
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

impl Shared {
    async fn client(&self) -> Result<Client, StoreError> {
        self.pool
            .get()
            .await
            .map_err(|error| storage(format!("PostgreSQL: {}", pool_error(error, &self.timeouts))))
    }

    /// `work` on a pooled connection, within the deadline. The connection goes back to the pool only if
    /// it is known to be outside any transaction: after a store failure or a timeout it is dropped
    /// (closed, which makes the server roll back) instead.
    async fn with_client<T>(
        &self,
        work: impl AsyncFnOnce(&Client) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let client = self.client().await?;
        let outcome = tokio::time::timeout(self.deadline, work(&client)).await;
        self.settle(client, outcome)
    }

    fn settle<T>(
        &self,
        client: Client,
        outcome: Result<Result<T, StoreError>, tokio::time::error::Elapsed>,
    ) -> Result<T, StoreError> {
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => {
                if is_storage_failure(&error) {
                    drop(Object::take(client));
                }
                Err(error)
            }
            Err(_) => {
                drop(Object::take(client));
                Err(storage(format!(
                    "PostgreSQL did not answer within {} ms: connection dropped",
                    self.deadline.as_millis()
                )))
            }
        }
    }

    async fn prepare(&self, client: &Client) -> Result<Prepared, StoreError> {
        let (read_key, ensure_fence, lock_key, grant, set_fence, extend, delete, notify) =
            tokio::try_join!(
                client.prepare_cached(&self.read_key),
                client.prepare_cached(ENSURE_FENCE),
                client.prepare_cached(LOCK_KEY),
                client.prepare_cached(GRANT),
                client.prepare_cached(SET_FENCE),
                client.prepare_cached(EXTEND),
                client.prepare_cached(DELETE),
                client.prepare_cached(NOTIFY),
            )
            .map_err(storage)?;
        Ok(Prepared {
            read_key,
            ensure_fence,
            lock_key,
            grant,
            set_fence,
            extend,
            delete,
            notify,
        })
    }

    /// One lease operation, in one transaction (a check: one statement).
    async fn transact(
        &self,
        client: &Client,
        request: &LeaseRequest,
        max_left_ms: f64,
    ) -> Result<Reply, StoreError> {
        let statements = self.prepare(client).await?;
        let key = request.key().clone();
        let (lease_type, id) = (key.lease_type(), key.id());
        if request.reads_only() {
            let row = client
                .query_one(&statements.read_key, &[&lease_type, &id])
                .await
                .map_err(storage)?;
            let (now, current, last_fence) = decode_key_row(&row, &key)?;
            return Ok(plan(request, current.as_ref(), now, last_fence, max_left_ms)?.reply);
        }
        // Round trip 1: begin, make sure the key's fencing row exists (a grant may create the key), lock it,
        // then read the key's row and the time.
        let key_params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&lease_type, &id];
        let ensure = async {
            if request.grants() {
                client
                    .execute(&statements.ensure_fence, &key_params)
                    .await?;
            }
            Ok(())
        };
        let begun = tokio::try_join!(
            client.batch_execute("BEGIN"),
            ensure,
            client.query_opt(&statements.lock_key, &key_params),
            client.query_one(&statements.read_key, &key_params),
        );
        let read = match begun {
            Ok((_, (), _, read)) => read,
            Err(error) => return Err(abandon(client, error).await),
        };
        let (now, current, last_fence) = match decode_key_row(&read, &key) {
            Ok(decoded) => decoded,
            Err(error) => {
                client.batch_execute("ROLLBACK").await.map_err(storage)?;
                return Err(error);
            }
        };
        let plan = match plan(request, current.as_ref(), now, last_fence, max_left_ms) {
            Ok(plan) => plan,
            Err(refusal) => {
                client.batch_execute("ROLLBACK").await.map_err(storage)?;
                return Err(refusal.into());
            }
        };
        // Round trip 2: the write, the notification (sent only if the transaction commits), the commit. A
        // failed write makes the COMMIT roll back, and the error is returned.
        let payload = plan.change.as_ref().map(Change::to_json);
        let notify = async {
            if let Some(payload) = &payload {
                client
                    .execute(&statements.notify, &[&CHANNEL, payload])
                    .await?;
            }
            Ok(())
        };
        let committed = tokio::try_join!(
            write(client, &statements, &plan.write),
            notify,
            client.batch_execute("COMMIT"),
        );
        match committed {
            Ok(_) => Ok(plan.reply),
            Err(error) => Err(abandon(client, error).await),
        }
    }

    async fn list(
        &self,
        client: &Client,
        lease_type: Option<String>,
        limit: usize,
    ) -> Result<(Vec<LeaseView>, f64), StoreError> {
        let sql = match lease_type {
            Some(_) => &self.list_of_type,
            None => &self.list_all,
        };
        let list = client.prepare_cached(sql).await.map_err(storage)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = client
            .query(&list, &[&lease_type, &limit])
            .await
            .map_err(storage)?;
        let mut now = 0.0;
        let mut leases = Vec::with_capacity(rows.len());
        for row in &rows {
            now = row.try_get(0).map_err(storage)?;
            let (Some(lease_type), Some(id)) = (
                row.try_get::<_, Option<String>>(1).map_err(storage)?,
                row.try_get::<_, Option<String>>(2).map_err(storage)?,
            ) else {
                continue; // the one row when no lease is listed
            };
            let key = LeaseKey::new(lease_type, id)?;
            leases.extend(columns(row, 3).map_err(storage)?.into_row(&key)?);
        }
        Ok((live_views(leases, now), now))
    }
}

/// Whether `error` is the store's own failure (rather than the core refusing the operation).
fn is_storage_failure(error: &StoreError) -> bool {
    !matches!(error, StoreError::Refused(_))
}

/// After a failed statement: end the transaction (queued behind anything still in flight), and the error.
async fn abandon(client: &Client, error: tokio_postgres::Error) -> StoreError {
    let _ = client.batch_execute("ROLLBACK").await;
    storage(error)
}

async fn write(
    client: &Client,
    statements: &Prepared,
    write: &RowWrite,
) -> Result<(), tokio_postgres::Error> {
    match write {
        RowWrite::Nothing => {}
        RowWrite::Grant(row) => {
            let key = &row.record.key;
            let (lease_type, id) = (key.lease_type(), key.id());
            let (token, revoked) = (row.record.token.to_hex(), row.revoked.map(|t| t.to_hex()));
            let grant: [&(dyn tokio_postgres::types::ToSql + Sync); 9] = [
                &lease_type,
                &id,
                &token,
                &row.record.expires_at_ms,
                &row.holder.sub,
                &row.holder.name,
                &row.acquired_at_ms,
                &row.fence,
                &revoked,
            ];
            let set_fence: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
                [&lease_type, &id, &row.fence];
            tokio::try_join!(
                client.execute(&statements.grant, &grant),
                client.execute(&statements.set_fence, &set_fence),
            )?;
        }
        RowWrite::Extend { key, expires_at_ms } => {
            client
                .execute(
                    &statements.extend,
                    &[&key.lease_type(), &key.id(), expires_at_ms],
                )
                .await?;
        }
        RowWrite::Delete(key) => {
            client
                .execute(&statements.delete, &[&key.lease_type(), &key.id()])
                .await?;
        }
    }
    Ok(())
}

fn columns(row: &Row, at: usize) -> Result<RowColumns, tokio_postgres::Error> {
    Ok(RowColumns {
        lockid: row.try_get(at)?,
        expiration_time: row.try_get(at + 1)?,
        holder_sub: row.try_get(at + 2)?,
        holder_name: row.try_get(at + 3)?,
        acquired_time: row.try_get(at + 4)?,
        fence: row.try_get(at + 5)?,
        revoked_lockid: row.try_get(at + 6)?,
    })
}

/// The result of the key read: the time, the key's row, its last fencing number (0 if none).
fn decode_key_row(row: &Row, key: &LeaseKey) -> Result<(f64, Option<LeaseRow>, i64), StoreError> {
    let now: f64 = row.try_get(0).map_err(storage)?;
    let current = columns(row, 1).map_err(storage)?.into_row(key)?;
    let fence: Option<i64> = row.try_get(8).map_err(storage)?;
    Ok((now, current, fence.unwrap_or(0)))
}

/// Keep one connection listening on [`CHANNEL`] and publish what it hears, reconnecting when it drops;
/// `ready` is told once the first `LISTEN` is in place (or failed).
async fn listen(
    config: tokio_postgres::Config,
    connect_timeout: Duration,
    events: Arc<Events>,
    listening: Arc<AtomicBool>,
    mut stop: watch::Receiver<bool>,
    ready: mpsc::Sender<()>,
) {
    loop {
        let connected = match tokio::time::timeout(connect_timeout, config.connect(NoTls)).await {
            Ok(Ok(pair)) => Ok(pair),
            Ok(Err(error)) => Err(with_causes(&error)),
            Err(_) => Err(format!(
                "no answer within {} ms",
                connect_timeout.as_millis()
            )),
        };
        match connected {
            Ok((client, mut connection)) => {
                let (heard_tx, mut heard) = mpsc::unbounded_channel::<String>();
                let driver = tokio::spawn(async move {
                    let mut messages =
                        futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                    while let Some(message) = messages.next().await {
                        match message {
                            Ok(AsyncMessage::Notification(n)) => {
                                if heard_tx.send(n.payload().to_owned()).is_err() {
                                    return;
                                }
                            }
                            Ok(_) => {}
                            Err(error) => {
                                tracing::warn!(%error, "the listening connection failed");
                                return;
                            }
                        }
                    }
                });
                let listen = format!("LISTEN {CHANNEL}");
                match tokio::time::timeout(connect_timeout, client.batch_execute(&listen)).await {
                    Ok(Ok(())) => {
                        listening.store(true, Ordering::Release);
                        // Changes made while this instance was not listening were never heard: every
                        // stream ends, and its page reconnects to the current state.
                        events.bus.end_all();
                        let _ = ready.try_send(());
                        tracing::info!("listening for lease changes");
                        loop {
                            tokio::select! {
                                payload = heard.recv() => match payload {
                                    Some(payload) => match serde_json::from_str::<Change>(&payload) {
                                        Ok(change) => events.publish(change),
                                        Err(error) => tracing::warn!(%error, "an unreadable change notification"),
                                    },
                                    None => break,
                                },
                                () = crate::shutdown::stopped(&mut stop) => {
                                    driver.abort();
                                    return;
                                }
                            }
                        }
                        listening.store(false, Ordering::Release);
                        events.bus.end_all();
                    }
                    Ok(Err(error)) => tracing::warn!(error = %with_causes(&error), "LISTEN failed"),
                    Err(_) => tracing::warn!("LISTEN got no answer"),
                }
                driver.abort();
            }
            Err(error) => tracing::warn!(%error, "cannot connect the listening connection"),
        }
        let _ = ready.try_send(());
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
            () = crate::shutdown::stopped(&mut stop) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan PostgreSQL keeps for `sql` once prepared (its generic plan), with these parameters.
    async fn plan(client: &tokio_postgres::Client, sql: &str, types: &str, args: &str) -> String {
        client
            .batch_execute(&format!(
                "DEALLOCATE ALL; SET plan_cache_mode = force_generic_plan; PREPARE p ({types}) AS {sql}"
            ))
            .await
            .unwrap();
        let rows = client
            .simple_query(&format!("EXPLAIN EXECUTE p ({args})"))
            .await
            .unwrap();
        rows.iter()
            .filter_map(|message| match message {
                tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Run by tests/e2e/lease_service_faults.test.mjs with a throwaway cluster in `WEBLOCKS_TEST_POSTGRES`.
    #[tokio::test]
    #[ignore = "needs a PostgreSQL cluster (WEBLOCKS_TEST_POSTGRES)"]
    async fn list_and_purge_read_through_an_index() {
        let url = std::env::var("WEBLOCKS_TEST_POSTGRES").expect("WEBLOCKS_TEST_POSTGRES");
        let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
        tokio::spawn(connection);
        client
            .batch_execute("DROP DATABASE IF EXISTS plans")
            .await
            .unwrap();
        client.batch_execute("CREATE DATABASE plans").await.unwrap();
        let url = url
            .rsplit_once('/')
            .map(|(base, _)| format!("{base}/plans"))
            .unwrap();
        let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
        tokio::spawn(connection);
        client.batch_execute(SCHEMA).await.unwrap();
        // 40,000 leases of one type, half of them expired two days ago, and a few of another type.
        client
            .batch_execute(&format!(
                "INSERT INTO locks
                 SELECT 'bulk', lpad(i::text, 6, '0'), lpad(to_hex(i), 32, '0'), {NOW_MS} + (CASE WHEN i % 2 = 0 THEN 60000 ELSE -172800000 END),
                        's', 'n', 0, 1, NULL
                 FROM generate_series(1, 40000) AS i;
                 INSERT INTO locks SELECT 'x', i::text, lpad(to_hex(1000000 + i), 32, '0'), {NOW_MS} + 60000, 's', 'n', 0, 1, NULL
                 FROM generate_series(1, 5) AS i;
                 ANALYZE locks;"
            ))
            .await
            .unwrap();
        for (sql, args) in [
            (list_sql(true), "'x', 10"),
            (list_sql(true), "'bulk', 10"),
            (list_sql(false), "NULL, 10"),
        ] {
            let plan = plan(&client, &sql, "text, bigint", args).await;
            assert!(
                plan.contains("Index Scan using locks_pkey on locks"),
                "{args}: {plan}"
            );
            assert!(plan.contains("Limit"), "{args}: {plan}");
            assert!(!plan.contains("Seq Scan on locks"), "{args}: {plan}");
        }
        let purge = plan(&client, &purge_sql(), "float8, bigint", "86400000, 1000").await;
        assert!(purge.contains("locks_by_expiry"), "{purge}");
        assert!(!purge.contains("Seq Scan on locks"), "{purge}");

        // The statements' answers: the live leases of the type, up to the limit; a purge of one batch.
        let events = Arc::new(Events::new().0);
        let options = StoreOptions {
            pg_pool: 2,
            sqlite_group: 1,
            pg: PgTimeouts {
                connect: Duration::from_secs(5),
                pool_wait: Duration::from_secs(5),
                statement: Duration::from_secs(5),
                lock: Duration::from_secs(5),
                idle_in_transaction: Duration::from_secs(5),
            },
        };
        let store = PostgresStore::open(url.parse().unwrap(), events, options)
            .await
            .unwrap();
        let (views, _) = store.list(Some("bulk".into()), 3).await.unwrap();
        let ids: Vec<&str> = views.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids, ["000002", "000004", "000006"]);
        assert_eq!(store.list(Some("none".into()), 3).await.unwrap().0.len(), 0);
        assert_eq!(store.list(None, 10_000).await.unwrap().0.len(), 10_000);
        assert_eq!(store.purge_expired().await.unwrap(), 1000);
        store.close().await;
    }
}
