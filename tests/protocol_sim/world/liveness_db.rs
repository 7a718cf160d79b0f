//! The simulated liveness databases (evidence): each context's own database, held open while it
//! lives, and the watches of others whose open waits for that connection to close.

use std::rc::Rc;

use super::{Ev, Status, World};

/// Evidence: a context's liveness database, as the storage backend keeps it.
#[derive(Debug)]
pub(super) struct AliveDb {
    pub(super) owner: usize,
    /// Its owner's connection is open.
    pub(super) open: bool,
    /// The contexts whose open at a newer version waits for that connection to close.
    pub(super) watchers: Vec<usize>,
}

impl World {
    /// Evidence: context `i` opens a liveness database of its own under a new key. It is open from its
    /// request on: an open at a newer version made after it waits for it.
    pub(super) fn open_alive(&mut self, i: usize) {
        self.last_watch += 1;
        let watch = self.last_watch;
        let client: Rc<str> = self.contexts[i].participant.client_id().into();
        self.alive.insert(
            (client, watch),
            AliveDb {
                owner: i,
                open: true,
                watchers: Vec::new(),
            },
        );
        let delay = self.rng.range(0, 3);
        self.schedule(self.now + delay, i, Ev::AliveOpened { watch });
    }

    /// Evidence: context `i` opens liveness database `watch` of `client` at a newer version. It completes
    /// once no connection to it is left (at once if there is none, or it was deleted): then `i` hears
    /// that the context is gone, after the backend's delay.
    pub(super) fn watch_alive(&mut self, i: usize, client: Rc<str>, watch: u64) {
        match self.alive.get_mut(&(client.clone(), watch)) {
            Some(db) if db.open => {
                if !db.watchers.contains(&i) {
                    db.watchers.push(i);
                }
                // A new open at a newer version of a database that a page in the back/forward cache
                // keeps open evicts that page (Blink, Gecko), which closes the connection.
                let owner = db.owner;
                if self.contexts[owner].status == Status::Cached {
                    self.evict(owner, "a watch opened its liveness database");
                }
            }
            _ => {
                let delay = self.rng.range(1, 5);
                self.schedule(self.now + delay, i, Ev::Gone { client, watch });
            }
        }
    }

    /// Evidence: the liveness database context `i` has open loses its connection (the context closed
    /// it, or it is gone): every pending open at a newer version completes, each after the backend's
    /// delay (tens of ms after a process ends), and the database is deleted.
    pub(super) fn close_alive(&mut self, i: usize) {
        let keys: Vec<(Rc<str>, u64)> = self
            .alive
            .iter()
            .filter(|(_, db)| db.owner == i && db.open)
            .map(|(k, _)| k.clone())
            .collect();
        let gone = !self.contexts[i].status.alive();
        for key in keys {
            let db = self.alive.remove(&key).expect("listed");
            for w in db.watchers {
                let delay = if gone {
                    self.rng.range(5, 70)
                } else {
                    self.rng.range(1, 5)
                };
                let (client, watch) = key.clone();
                self.schedule(self.now + delay, w, Ev::Gone { client, watch });
            }
        }
    }
}
