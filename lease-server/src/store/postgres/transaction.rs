//! One lease operation's transaction: the key's fencing row locked, the key's row and the clock read,
//! the core's decision, then the write, the notification and the commit, pipelined in two round trips
//! (a check: one statement). Also reading one key's state alone.

use deadpool_postgres::Client;
use tokio_postgres::{Row, Statement};
use weblocks::lease::LeaseKey;

use super::{NOW_MS, Shared};
use crate::change::Change;
use crate::lease_row::{LeaseRequest, LeaseRow, Reply, RowColumns, RowWrite, plan};
use crate::store::{CHANNEL, StoreError, key_state, storage};

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

pub(super) fn read_key_sql() -> String {
    format!(
        "SELECT {NOW_MS},
                l.lockid, l.expiration_time, l.holder_sub, l.holder_name, l.acquired_time, l.fence, l.revoked_lockid,
                (SELECT f.fence FROM lock_fences AS f WHERE f.type = $1 AND f.id = $2)
         FROM (SELECT 1) AS one LEFT JOIN locks AS l ON l.type = $1 AND l.id = $2"
    )
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

impl Shared {
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
    pub(super) async fn transact(
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

    /// `key`'s state now, read in one statement.
    pub(super) async fn key_state(
        &self,
        client: &Client,
        key: &LeaseKey,
    ) -> Result<Change, StoreError> {
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

pub(super) fn columns(row: &Row, at: usize) -> Result<RowColumns, tokio_postgres::Error> {
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
