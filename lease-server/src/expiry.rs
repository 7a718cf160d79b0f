//! Expired events: nothing is written when a lease runs out, so each instance times the expiry of every
//! live lease its streams watch, and when the time comes asks the database (whose clock judges expiry)
//! whether the lease did run out. Only then are its watchers told; if the lease was extended meanwhile,
//! the timer is set again to the new expiry.
//!
//! A timer runs on this machine's monotonic clock for the time the database said was left (`expiresAt`
//! minus the database's `now` in the change), so the two machines' clocks need not agree.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
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

/// The timers: a queue of due times, and per key the timer that counts (the one set for the latest live
/// state seen: its number, fencing number and expiry); an earlier timer of the key fires for nothing.
#[derive(Default)]
struct Timers {
    latest: HashMap<LeaseKey, (u64, i64, f64)>,
    due: BinaryHeap<Reverse<(Instant, u64, LeaseKey)>>,
    next_id: u64,
}

impl Timers {
    fn set(&mut self, change: &Change) {
        let (Some(key), Some(lease)) = (change.key(), &change.lease) else {
            return;
        };
        let state = (change.fence, lease.expires_at);
        // An older state of the key (a snapshot or a late notification) never moves its timer.
        if let Some(&(_, fence, expires_at)) = self.latest.get(&key)
            && (fence, expires_at) >= state
        {
            return;
        }
        let left_ms = (lease.expires_at - change.now).max(0.0);
        let at = Instant::now() + Duration::from_secs_f64(left_ms / 1000.0) + MARGIN;
        self.next_id += 1;
        self.latest
            .insert(key.clone(), (self.next_id, state.0, state.1));
        self.due.push(Reverse((at, self.next_id, key)));
    }

    fn next_due(&self) -> Option<Instant> {
        self.due.peek().map(|Reverse((at, _, _))| *at)
    }

    /// The keys whose timer that counts is due at `now`, with the (fence, expiry) it was set for.
    fn take_due(&mut self, now: Instant) -> Vec<(LeaseKey, (i64, f64))> {
        let mut fired = Vec::new();
        while self.next_due().is_some_and(|at| at <= now) {
            let Some(Reverse((_, id, key))) = self.due.pop() else {
                break;
            };
            if let Some(&(latest, fence, expires_at)) = self.latest.get(&key)
                && latest == id
            {
                self.latest.remove(&key);
                fired.push((key, (fence, expires_at)));
            }
        }
        fired
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
    use crate::lease_row::Holder;

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
    }
}
