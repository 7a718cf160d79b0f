//! Deleting the rows that expired a day ago or more (the core's clean-up), away from any request: every
//! minute, batches of at most [`PURGE_BATCH`] rows, each its own short transaction, found through the
//! expiry index, with a pause between batches so that requests go first.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::store::{PURGE_BATCH, Store};

const EVERY: Duration = Duration::from_secs(60);
const BETWEEN_BATCHES: Duration = Duration::from_millis(100);

/// Purge until `shutdown`.
pub async fn run(store: Arc<Store>, mut shutdown: watch::Receiver<bool>) {
    loop {
        loop {
            match store.purge_expired().await {
                Ok(deleted) if i64::try_from(deleted).is_ok_and(|n| n >= PURGE_BATCH) => {
                    tracing::debug!(deleted, "purged expired leases; more to purge");
                }
                Ok(deleted) => {
                    if deleted > 0 {
                        tracing::debug!(deleted, "purged expired leases");
                    }
                    break;
                }
                Err(error) => {
                    tracing::warn!(?error, "could not purge expired leases");
                    break;
                }
            }
            tokio::select! {
                () = tokio::time::sleep(BETWEEN_BATCHES) => {}
                () = crate::shutdown::stopped(&mut shutdown) => return,
            }
        }
        tokio::select! {
            () = tokio::time::sleep(EVERY) => {}
            () = crate::shutdown::stopped(&mut shutdown) => return,
        }
    }
}
