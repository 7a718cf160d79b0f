//! Change events: what the stream of a (type, id) or of a type tells its watchers, and what one instance
//! tells the others through PostgreSQL's `NOTIFY` (the same JSON).
//!
//! Events of one key may reach a watcher out of order (a snapshot read while older notifications are
//! still on their way). [`Order`] makes each stream monotone: a key's state only moves forward, by
//! fencing number first (every grant has a larger one), then, within one lease, from live (expiry only
//! growing) to ended.

use serde::{Deserialize, Serialize};
use weblocks::lease::LeaseKey;

use crate::holder::Holder;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ChangeKind {
    /// The state when the stream opened (or the key's state when the watcher asked).
    Current,
    Acquired,
    Extended,
    Released,
    /// The lease's time ran out (detected by the instance serving the stream, checked against the database).
    Expired,
    /// A takeOver replaced a live lease.
    TakenOver,
}

/// A key's new state: `lease` is the live lease, or `None` when the key is free.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub kind: ChangeKind,
    #[serde(rename = "type")]
    pub lease_type: String,
    pub id: String,
    /// The fencing number of the lease the change is about (for a free key: of its last lease, 0 if none).
    pub fence: i64,
    pub lease: Option<Held>,
    /// The database's clock when the change was made or read, in ms since the epoch (lets a page show
    /// how long a lease has left whatever its own clock says).
    pub now: f64,
}

/// A live lease as a change reports it (its type, id and fencing number are the change's).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Held {
    pub holder: Holder,
    pub acquired_at: f64,
    pub expires_at: f64,
}

impl Change {
    /// A change that leaves the key free; `fence` is the number of the lease that ended.
    pub fn ended(kind: ChangeKind, key: &LeaseKey, fence: i64, now_ms: f64) -> Change {
        Change {
            kind,
            lease_type: key.lease_type().to_owned(),
            id: key.id().to_owned(),
            fence,
            lease: None,
            now: now_ms,
        }
    }

    pub fn key(&self) -> Option<LeaseKey> {
        LeaseKey::new(self.lease_type.as_str(), self.id.as_str()).ok()
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a change serializes")
    }

    /// Where this change stands in its key's history.
    pub fn order(&self) -> Order {
        Order {
            fence: self.fence,
            expires_at: self.lease.as_ref().map(|lease| lease.expires_at),
        }
    }
}

/// A point in one key's history: the fencing number, and the expiry while that lease is live (`None`
/// once it ended, which is after any expiry of the same lease).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Order {
    fence: i64,
    expires_at: Option<f64>,
}

impl Order {
    /// Whether a state at `self` may follow one at `earlier`: a later lease, or the same lease extended
    /// or ended. An equal state is no news either.
    pub fn follows(&self, earlier: &Order) -> bool {
        if self.fence != earlier.fence {
            return self.fence > earlier.fence;
        }
        match (earlier.expires_at, self.expires_at) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(before), Some(after)) => after > before,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(fence: i64, expires_at: Option<f64>) -> Change {
        Change {
            kind: ChangeKind::Current,
            lease_type: "Order".into(),
            id: "1".into(),
            fence,
            lease: expires_at.map(|expires_at| Held {
                holder: Holder {
                    sub: "a".into(),
                    name: "A".into(),
                },
                acquired_at: 0.0,
                expires_at,
            }),
            now: 0.0,
        }
    }

    #[test]
    fn a_key_s_state_moves_forward_only() {
        let live = change(3, Some(100.0)).order();
        assert!(change(3, Some(150.0)).order().follows(&live), "extended");
        assert!(
            change(3, None).order().follows(&live),
            "released or expired"
        );
        assert!(
            change(4, Some(10.0))
                .order()
                .follows(&change(3, None).order()),
            "granted again"
        );
        assert!(change(4, Some(10.0)).order().follows(&live), "taken over");
        assert!(
            !change(3, Some(100.0)).order().follows(&live),
            "the same state again"
        );
        assert!(
            !change(3, Some(90.0)).order().follows(&live),
            "an older extension"
        );
        assert!(
            !change(3, Some(200.0))
                .order()
                .follows(&change(3, None).order()),
            "after its end"
        );
        assert!(!change(2, None).order().follows(&live), "an older lease");
    }
}
