//! Expired events: nothing is written when a lease runs out, so each instance times the expiry of every
//! live lease its streams watch, and when the time comes asks the database (whose clock judges expiry)
//! whether the lease did run out. Only then are its watchers told; if the lease was extended meanwhile,
//! the timer is set again to the new expiry.
//!
//! A timer runs on this machine's monotonic clock for the time the database said was left (`expiresAt`
//! minus the database's `now` in the change), so the two machines' clocks need not agree.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use weblocks::lease::LeaseKey;

use crate::change::{Change, ChangeKind};
use crate::events::Events;
use crate::store::Store;

/// Added to each timer, so the database, asked when it fires, finds the lease already expired.
const MARGIN: Duration = Duration::from_millis(5);

/// One key's timer: when it is due, and the live state (fencing number, expiry) it was set for.
struct Timer {
    at: (Instant, u64),
    fence: i64,
    expires_at: f64,
}

/// The timers, one per key at most: setting a key's timer again (an extension, a new lease) moves it, so
/// their number, and their memory, follow the number of leases watched, never the number of changes.
#[derive(Default)]
struct Timers {
    by_key: HashMap<LeaseKey, Timer>,
    /// The same timers in due order (the sequence number tells apart those due at the same instant).
    due: BTreeMap<(Instant, u64), LeaseKey>,
    next_seq: u64,
}

impl Timers {
    fn set(&mut self, change: &Change) {
        let (Some(key), Some(lease)) = (change.key(), &change.lease) else {
            return;
        };
        let state = (change.fence, lease.expires_at);
        // An older state of the key (a snapshot or a late notification) never moves its timer.
        if let Some(timer) = self.by_key.get(&key)
            && (timer.fence, timer.expires_at) >= state
        {
            return;
        }
        let left_ms = (lease.expires_at - change.now).max(0.0);
        let at = Instant::now() + Duration::from_secs_f64(left_ms / 1000.0) + MARGIN;
        self.next_seq += 1;
        let timer = Timer {
            at: (at, self.next_seq),
            fence: state.0,
            expires_at: state.1,
        };
        if let Some(replaced) = self.by_key.insert(key.clone(), timer) {
            self.due.remove(&replaced.at);
        }
        self.due.insert((at, self.next_seq), key);
    }

    fn next_due(&self) -> Option<Instant> {
        self.due.first_key_value().map(|((at, _), _)| *at)
    }

    /// The keys whose timer is due at `now`, with the (fence, expiry) it was set for.
    fn take_due(&mut self, now: Instant) -> Vec<(LeaseKey, (i64, f64))> {
        let mut fired = Vec::new();
        while self.next_due().is_some_and(|at| at <= now) {
            let Some((_, key)) = self.due.pop_first() else {
                break;
            };
            if let Some(timer) = self.by_key.remove(&key) {
                fired.push((key, (timer.fence, timer.expires_at)));
            }
        }
        fired
    }

    /// The timers set (for tests: one per key).
    #[cfg(test)]
    fn entries(&self) -> usize {
        self.due.len().max(self.by_key.len())
    }
}

/// Run the timers until `shutdown`: `requests` are the live leases [`Events::time_expiry`] hands over.
pub async fn watch(
    mut requests: mpsc::UnboundedReceiver<Change>,
    events: Arc<Events>,
    store: Arc<Store>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut timers = Timers::default();
    loop {
        let sleep = async {
            match timers.next_due() {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            request = requests.recv() => match request {
                Some(change) => timers.set(&change),
                None => return,
            },
            () = sleep => {
                for (key, (fence, _)) in timers.take_due(Instant::now()) {
                    if events.bus.watches(&key) {
                        check(&key, fence, &events, &store).await;
                    }
                }
            }
            () = crate::shutdown::stopped(&mut shutdown) => return,
        }
    }
}

/// Ask the database for `key`'s state: if the lease numbered `fence` has run out, tell the watchers; if
/// it is still live (extended, or this clock ran ahead), time it again.
async fn check(key: &LeaseKey, fence: i64, events: &Events, store: &Store) {
    let state = match store.key_state(key).await {
        Ok(state) => state,
        Err(error) => {
            tracing::warn!(?error, "could not check a lease's expiry");
            return;
        }
    };
    if state.fence != fence {
        return; // a later lease: its own changes were published
    }
    match state.lease {
        Some(_) => events.time_expiry(state),
        None => events.publish(Change {
            kind: ChangeKind::Expired,
            ..state
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::Held;
    use crate::holder::Holder;

    fn live(id: &str, fence: i64, expires_at: f64, now: f64) -> Change {
        Change {
            kind: ChangeKind::Acquired,
            lease_type: "Order".into(),
            id: id.into(),
            fence,
            lease: Some(Held {
                holder: Holder {
                    sub: "a".into(),
                    name: "A".into(),
                },
                acquired_at: now,
                expires_at,
            }),
            now,
        }
    }

    #[test]
    fn a_timer_fires_for_the_latest_state_of_its_key_only() {
        let mut timers = Timers::default();
        let start = Instant::now();
        timers.set(&live("1", 1, 1000.0, 0.0)); // due in 1 s
        timers.set(&live("1", 1, 3000.0, 500.0)); // extended: due 2.5 s later
        timers.set(&live("1", 1, 2000.0, 0.0)); // an older extension arriving late: ignored
        timers.set(&live("2", 4, 1500.0, 0.0));
        assert!(
            timers
                .take_due(start + Duration::from_millis(999))
                .is_empty()
        );
        let fired: Vec<String> = timers
            .take_due(start + Duration::from_millis(2000))
            .into_iter()
            .map(|(key, _)| key.id().to_owned())
            .collect();
        assert_eq!(fired, ["2"], "key 1's first timer was superseded");
        let fired = timers.take_due(start + Duration::from_millis(2600));
        assert_eq!(fired.len(), 1);
        assert_eq!(fired[0].1, (1, 3000.0));
        assert_eq!(timers.next_due(), None);
        assert_eq!(timers.entries(), 0);
    }

    #[test]
    fn extending_a_watched_lease_keeps_one_timer_per_key() {
        let mut timers = Timers::default();
        for extension in 1..=10_000 {
            let now = f64::from(extension);
            timers.set(&live("1", 1, 60_000.0 + now, now));
        }
        timers.set(&live("2", 1, 60_000.0, 0.0));
        assert_eq!(timers.entries(), 2, "one timer per watched lease");
        assert!(timers.take_due(Instant::now()).is_empty());
    }
}
