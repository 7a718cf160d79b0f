//! This instance's change subscriptions: one broadcast channel per watched (type, id) and per watched
//! type, created by the first watcher and dropped with the last. Publishing a change costs nothing for a
//! key nobody here watches.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::broadcast;
use weblocks::lease::LeaseKey;

use crate::change::Change;

/// Changes a slow watcher may fall behind by before its stream is ended (its page reconnects and gets
/// the current state again: nothing is lost, only replaced by the newer state).
const BACKLOG: usize = 16;

/// What a stream watches.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Topic {
    Key(LeaseKey),
    Type(String),
}

#[derive(Default)]
struct Channels {
    keys: HashMap<LeaseKey, broadcast::Sender<Arc<Change>>>,
    types: HashMap<String, broadcast::Sender<Arc<Change>>>,
}

impl Channels {
    fn of(&mut self, topic: &Topic) -> Option<&mut broadcast::Sender<Arc<Change>>> {
        match topic {
            Topic::Key(key) => self.keys.get_mut(key),
            Topic::Type(lease_type) => self.types.get_mut(lease_type),
        }
    }
}

#[derive(Default)]
pub struct Bus {
    channels: Mutex<Channels>,
}

/// A watcher's receiving end; dropping it drops the topic's channel if it was the last.
pub struct Subscription {
    pub receiver: broadcast::Receiver<Arc<Change>>,
    topic: Topic,
    bus: Arc<Bus>,
}

impl Bus {
    fn channels(&self) -> MutexGuard<'_, Channels> {
        // A panic elsewhere while the lock was held leaves the maps consistent (each step is one insert or
        // remove), so a poisoned lock is still usable.
        self.channels
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn subscribe(self: &Arc<Self>, topic: Topic) -> Subscription {
        let mut channels = self.channels();
        let receiver = match channels.of(&topic) {
            Some(sender) => sender.subscribe(),
            None => {
                let (sender, receiver) = broadcast::channel(BACKLOG);
                match &topic {
                    Topic::Key(key) => channels.keys.insert(key.clone(), sender),
                    Topic::Type(lease_type) => channels.types.insert(lease_type.clone(), sender),
                };
                receiver
            }
        };
        Subscription {
            receiver,
            topic,
            bus: Arc::clone(self),
        }
    }

    /// Hand `change` to the watchers of its key and of its type; whether anyone here watches it.
    pub fn publish(&self, change: Change) -> bool {
        let Some(key) = change.key() else {
            return false;
        };
        let change = Arc::new(change);
        let channels = self.channels();
        let mut watched = false;
        for sender in [
            channels.keys.get(&key),
            channels.types.get(key.lease_type()),
        ]
        .into_iter()
        .flatten()
        {
            watched |= sender.send(Arc::clone(&change)).is_ok();
        }
        drop(channels);
        watched
    }

    /// Whether any stream here watches `key` (itself or its type).
    pub fn watches(&self, key: &LeaseKey) -> bool {
        let channels = self.channels();
        channels.keys.contains_key(key) || channels.types.contains_key(key.lease_type())
    }

    /// End every stream: after this instance may have missed changes (its database listener reconnected),
    /// pages reconnect and get the current state.
    pub fn end_all(&self) {
        let mut channels = self.channels();
        channels.keys.clear();
        channels.types.clear();
    }

    /// The number of topics watched (for tests and the benchmark's accounting).
    pub fn topics(&self) -> usize {
        let channels = self.channels();
        channels.keys.len() + channels.types.len()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut channels = self.bus.channels();
        // This receiver still counts: it is dropped after this function returns.
        if channels
            .of(&self.topic)
            .is_some_and(|sender| sender.receiver_count() <= 1)
        {
            match &self.topic {
                Topic::Key(key) => channels.keys.remove(key),
                Topic::Type(lease_type) => channels.types.remove(lease_type),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::ChangeKind;

    fn change(lease_type: &str, id: &str) -> Change {
        Change::ended(
            ChangeKind::Released,
            &LeaseKey::new(lease_type, id).unwrap(),
            1,
            0.0,
        )
    }

    #[tokio::test]
    async fn watchers_of_a_key_and_of_its_type_get_its_changes_and_only_those() {
        let bus = Arc::new(Bus::default());
        let mut by_key = bus.subscribe(Topic::Key(LeaseKey::new("Order", "1").unwrap()));
        let mut by_type = bus.subscribe(Topic::Type("Order".into()));
        assert!(bus.publish(change("Order", "1")));
        assert!(bus.publish(change("Order", "2")));
        assert!(!bus.publish(change("Article", "1")), "nobody watches it");
        assert_eq!(by_key.receiver.recv().await.unwrap().id, "1");
        assert!(by_key.receiver.try_recv().is_err());
        assert_eq!(by_type.receiver.recv().await.unwrap().id, "1");
        assert_eq!(by_type.receiver.recv().await.unwrap().id, "2");
        assert!(
            bus.watches(&LeaseKey::new("Order", "3").unwrap()),
            "through its type"
        );
    }

    #[test]
    fn the_last_watcher_leaving_drops_its_channel() {
        let bus = Arc::new(Bus::default());
        let key = Topic::Key(LeaseKey::new("Order", "1").unwrap());
        let first = bus.subscribe(key.clone());
        let second = bus.subscribe(key);
        assert_eq!(bus.topics(), 1);
        drop(first);
        assert_eq!(bus.topics(), 1);
        drop(second);
        assert_eq!(bus.topics(), 0);
        assert!(!bus.watches(&LeaseKey::new("Order", "1").unwrap()));
    }

    #[tokio::test]
    async fn end_all_closes_every_stream() {
        let bus = Arc::new(Bus::default());
        let mut watcher = bus.subscribe(Topic::Type("Order".into()));
        bus.end_all();
        assert!(matches!(
            watcher.receiver.recv().await,
            Err(broadcast::error::RecvError::Closed)
        ));
        drop(watcher);
        assert_eq!(bus.topics(), 0);
    }
}
