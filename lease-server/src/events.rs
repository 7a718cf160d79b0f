//! Where a store hands the changes it commits: this instance's watchers ([`Bus`]) and its expiry timers
//! ([`crate::expiry`]). With SQLite the store publishes right after its commit; with PostgreSQL every
//! instance publishes what its `LISTEN` connection receives, its own changes included, so all instances
//! see the same changes in the database's commit order.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::bus::Bus;
use crate::change::Change;

pub struct Events {
    pub bus: Arc<Bus>,
    expiries: mpsc::UnboundedSender<Change>,
}

impl Events {
    /// The hub, and the receiving end of the expiry timers' requests (for [`crate::expiry::watch`]).
    pub fn new() -> (Events, mpsc::UnboundedReceiver<Change>) {
        let (expiries, requests) = mpsc::unbounded_channel();
        let events = Events {
            bus: Arc::new(Bus::default()),
            expiries,
        };
        (events, requests)
    }

    /// Tell this instance's watchers; if someone watches a live lease, time its expiry.
    pub fn publish(&self, change: Change) {
        let held = change.lease.is_some().then(|| change.clone());
        if let (true, Some(change)) = (self.bus.publish(change), held) {
            self.time_expiry(change);
        }
    }

    /// Time the expiry of the live lease `change` reports (a stream's first state, or a change).
    pub fn time_expiry(&self, change: Change) {
        // The timer task stops only at shutdown, when nobody needs the event any more.
        let _ = self.expiries.send(change);
    }
}
