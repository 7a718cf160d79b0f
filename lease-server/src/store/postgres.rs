//! PostgreSQL: several instances on one database, behind a load balancer.
//!
//! Each operation takes a row lock on its key's `lock_fences` row (`SELECT ... FOR UPDATE`, after making
//! sure the row exists for a grant) before it reads the `locks` row and the database's clock, so every
//! write to a key, from any instance, is serialised, and each read sees the writes committed before it
//! (READ COMMITTED takes a fresh snapshot per statement, and the read runs after the lock is granted). A
//! `checkLock` only reads, in one statement. The statements of one operation are pipelined on one
//! connection: two round trips (begin, lock and read; write, notify and commit) whatever the operation.
//!
//! Changes reach every instance through the database: the writing transaction `NOTIFY`s the change,
//! delivered to every listening connection only if and when it commits, in commit order. Each instance
//! keeps one connection `LISTEN`ing and publishes what arrives there (its own changes included).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool_postgres::{Client, Manager, ManagerConfig, Pool, RecyclingMethod};
use futures_util::StreamExt;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, NoTls, Row, Statement};
use weblocks::lease::LeaseKey;

use super::{CHANNEL, key_state, listed, storage};
use crate::api_error::ApiError;
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
const PURGE: &str = "DELETE FROM locks WHERE type = $1 AND id = $2 AND lockid = $3";
const NOTIFY: &str = "SELECT pg_notify($1, $2)";

fn read_key_sql() -> String {
    format!(
        "SELECT {NOW_MS},
                l.lockid, l.expiration_time, l.holder_sub, l.holder_name, l.acquired_time, l.fence, l.revoked_lockid,
                (SELECT f.fence FROM lock_fences AS f WHERE f.type = $1 AND f.id = $2)
         FROM (SELECT 1) AS one LEFT JOIN locks AS l ON l.type = $1 AND l.id = $2"
    )
}

fn list_sql() -> String {
    format!(
        "SELECT {NOW_MS}, l.type, l.id,
                l.lockid, l.expiration_time, l.holder_sub, l.holder_name, l.acquired_time, l.fence, l.revoked_lockid
         FROM (SELECT 1) AS one LEFT JOIN locks AS l ON $1::text IS NULL OR l.type = $1
         ORDER BY l.type, l.id"
    )
}

pub struct PostgresStore {
    pool: Pool,
    listening: Arc<AtomicBool>,
    stop_listening: watch::Sender<bool>,
    listener: std::sync::Mutex<Option<JoinHandle<()>>>,
    read_key: String,
    list: String,
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

impl PostgresStore {
    pub async fn open(
        config: tokio_postgres::Config,
        events: Arc<Events>,
        pool_size: usize,
    ) -> Result<PostgresStore, String> {
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(pool_size)
            .build()
            .map_err(|e| e.to_string())?;
        let client = pool
            .get()
            .await
            .map_err(|e| format!("cannot connect to PostgreSQL: {e}"))?;
        client
            .batch_execute(SCHEMA)
            .await
            .map_err(|e| format!("cannot create the tables: {e}"))?;
        drop(client);
        let listening = Arc::new(AtomicBool::new(false));
        let (stop_listening, stop) = watch::channel(false);
        let (ready_tx, mut ready) = mpsc::channel(1);
        let listener = tokio::spawn(listen(
            config,
            events,
            Arc::clone(&listening),
            stop,
            ready_tx,
        ));
        // Serve only once changes are heard: a stream opened before would miss them.
        ready.recv().await;
        Ok(PostgresStore {
            pool,
            listening,
            stop_listening,
            listener: std::sync::Mutex::new(Some(listener)),
            read_key: read_key_sql(),
            list: list_sql(),
        })
    }

    async fn client(&self) -> Result<Client, ApiError> {
        self.pool.get().await.map_err(storage)
    }

    async fn prepare(&self, client: &Client) -> Result<Prepared, ApiError> {
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

    pub async fn run(&self, request: LeaseRequest, max_left_ms: f64) -> Result<Reply, ApiError> {
        let client = self.client().await?;
        let statements = self.prepare(&client).await?;
        let key = request.key().clone();
        let (lease_type, id) = (key.lease_type(), key.id());
        if request.reads_only() {
            let row = client
                .query_one(&statements.read_key, &[&lease_type, &id])
                .await
                .map_err(storage)?;
            let (now, current, last_fence) = decode_key_row(&row, &key)?;
            return Ok(plan(&request, current.as_ref(), now, last_fence, max_left_ms)?.reply);
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
            Err(error) => return Err(abandon(&client, error).await),
        };
        let (now, current, last_fence) = decode_key_row(&read, &key)?;
        let plan = match plan(&request, current.as_ref(), now, last_fence, max_left_ms) {
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
            write(&client, &statements, &plan.write),
            notify,
            client.batch_execute("COMMIT"),
        );
        match committed {
            Ok(_) => Ok(plan.reply),
            Err(error) => Err(abandon(&client, error).await),
        }
    }

    pub async fn list(
        &self,
        lease_type: Option<String>,
        limit: usize,
    ) -> Result<(Vec<LeaseView>, f64), ApiError> {
        let client = self.client().await?;
        let list = client.prepare_cached(&self.list).await.map_err(storage)?;
        let rows = client.query(&list, &[&lease_type]).await.map_err(storage)?;
        let mut now = 0.0;
        let mut leases = Vec::new();
        for row in &rows {
            now = row.try_get(0).map_err(storage)?;
            let (Some(lease_type), Some(id)) = (
                row.try_get::<_, Option<String>>(1).map_err(storage)?,
                row.try_get::<_, Option<String>>(2).map_err(storage)?,
            ) else {
                continue; // the one row of an empty table
            };
            let key = LeaseKey::new(lease_type, id)?;
            leases.extend(columns(row, 3).map_err(storage)?.into_row(&key)?);
        }
        let (views, doomed) = listed(leases, now, limit);
        if !doomed.is_empty() {
            let purge = client.prepare_cached(PURGE).await.map_err(storage)?;
            for row in &doomed {
                let key = &row.record.key;
                let token = row.record.token.to_hex();
                client
                    .execute(&purge, &[&key.lease_type(), &key.id(), &token])
                    .await
                    .map_err(storage)?;
            }
        }
        Ok((views, now))
    }

    pub async fn key_state(&self, key: &LeaseKey) -> Result<Change, ApiError> {
        let client = self.client().await?;
        let read = client
            .prepare_cached(&self.read_key)
            .await
            .map_err(storage)?;
        let row = client
            .query_one(&read, &[&key.lease_type(), &key.id()])
            .await
            .map_err(storage)?;
        let (now, current, last_fence) = decode_key_row(&row, key)?;
        Ok(key_state(key, current, last_fence, now))
    }

    pub async fn health(&self) -> Result<(), ApiError> {
        self.client()
            .await?
            .batch_execute("SELECT 1")
            .await
            .map_err(storage)?;
        if !self.listening.load(Ordering::Acquire) {
            return Err(storage("not listening for changes (reconnecting)"));
        }
        Ok(())
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
        self.pool.close();
    }
}

/// After a failed statement: end the transaction (queued behind anything still in flight), and the error.
async fn abandon(client: &Client, error: tokio_postgres::Error) -> ApiError {
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
fn decode_key_row(row: &Row, key: &LeaseKey) -> Result<(f64, Option<LeaseRow>, i64), ApiError> {
    let now: f64 = row.try_get(0).map_err(storage)?;
    let current = columns(row, 1).map_err(storage)?.into_row(key)?;
    let fence: Option<i64> = row.try_get(8).map_err(storage)?;
    Ok((now, current, fence.unwrap_or(0)))
}

/// Keep one connection listening on [`CHANNEL`] and publish what it hears, reconnecting when it drops;
/// `ready` is told once the first `LISTEN` is in place (or failed).
async fn listen(
    config: tokio_postgres::Config,
    events: Arc<Events>,
    listening: Arc<AtomicBool>,
    mut stop: watch::Receiver<bool>,
    ready: mpsc::Sender<()>,
) {
    loop {
        match config.connect(NoTls).await {
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
                match client.batch_execute(&format!("LISTEN {CHANNEL}")).await {
                    Ok(()) => {
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
                    Err(error) => tracing::warn!(%error, "LISTEN failed"),
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
