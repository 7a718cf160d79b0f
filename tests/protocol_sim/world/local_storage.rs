//! The simulated localStorage: each context's cache, writes that reach the authoritative store after a
//! delay, and the storage events that reach every other context after a further delay.

use super::{Ev, Status, World};

impl World {
    pub(super) fn cache_set(&mut self, i: usize, key: String, value: Option<String>) {
        match value {
            Some(v) => self.contexts[i].cache.insert(key, v),
            None => self.contexts[i].cache.remove(&key),
        };
    }

    pub(super) fn write_storage(&mut self, i: usize, key: String, value: Option<String>) {
        if !self.env.storage {
            return;
        }
        self.cache_set(i, key.clone(), value.clone());
        let delay = self.rng.range(0, self.env.storage_lag_max);
        let n = &mut self.contexts[i];
        let at = (self.now + delay).max(n.last_storage_write);
        n.last_storage_write = at;
        self.schedule(at, i, Ev::StorageGlobal { key, value });
    }

    pub(super) fn storage_global(&mut self, writer: usize, key: String, value: Option<String>) {
        match &value {
            Some(v) => self.storage.insert(key.clone(), v.clone()),
            None => self.storage.remove(&key),
        };
        for j in 0..self.contexts.len() {
            if j == writer
                || matches!(
                    self.contexts[j].status,
                    Status::NotStarted | Status::Crashed | Status::Closed
                )
            {
                continue;
            }
            let delay = self.rng.range(0, self.env.storage_lag_max);
            let n = &mut self.contexts[j];
            let at = (self.now + delay).max(n.last_storage_event);
            n.last_storage_event = at;
            self.schedule(
                at,
                j,
                Ev::StorageEvent {
                    key: key.clone(),
                    value: value.clone(),
                },
            );
        }
    }

    /// The authoritative value of a storage key.
    pub fn storage_value(&self, key: &str) -> Option<&String> {
        self.storage.get(key)
    }
}
