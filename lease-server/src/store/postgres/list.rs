//! The statements over many rows: `list` (the live leases of a type, or of all, in key order) and the
//! purge of long-expired rows, each reading only what it answers through an index (`tests.rs` checks
//! the plans).

use deadpool_postgres::Client;
use weblocks::lease::LeaseKey;
use weblocks::lease::operation::PURGE_EXPIRED_AFTER_MS;

use super::transaction::columns;
use super::{NOW_MS, Shared};
use crate::lease_row::LeaseView;
use crate::store::{PURGE_BATCH, StoreError, live_views, storage};

/// The live leases of type $1 (or of every type: `of_type` false, $1 unused), the first $2 in (type, id)
/// order, and the time: a range of the primary key read in its order that stops at the limit (one row
/// of NULLs, with the time, if there is none).
pub(super) fn list_sql(of_type: bool) -> String {
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
pub(super) fn purge_sql() -> String {
    format!(
        "DELETE FROM locks WHERE ctid = ANY(ARRAY(
             SELECT ctid FROM locks WHERE expiration_time <= {NOW_MS} - $1 ORDER BY expiration_time LIMIT $2
         )) AND expiration_time <= {NOW_MS} - $1"
    )
}

impl Shared {
    pub(super) async fn list(
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

    /// Delete one batch of long-expired rows: how many.
    pub(super) async fn purge_expired(&self, client: &Client) -> Result<usize, StoreError> {
        let purge = client.prepare_cached(&self.purge).await.map_err(storage)?;
        let deleted = client
            .execute(&purge, &[&PURGE_EXPIRED_AFTER_MS, &PURGE_BATCH])
            .await
            .map_err(storage)?;
        Ok(usize::try_from(deleted).unwrap_or(usize::MAX))
    }
}
