//! A page's deletion of weblocks' databases (logout code that deletes every database of its origin),
//! as this context takes part in it (docs/PROTOCOL.md §7, "a page's sweep").
//!
//! IndexedDB holds a deletion until every connection to the database is closed, and tells each
//! connection so (`versionchange` without a new version: [`StorageEvent::DeletionWaits`]). Opens made
//! after the deletion wait behind it and then make the database anew. The edge loop decides, once the
//! participant's effects are carried out ([`crate::protocol::edge`]): a context that holds and waits for
//! nothing leaves the protocol, if it is in it, then gives up every weblocks connection
//! ([`Evidence::release_for_sweep`]); one that holds or waits keeps them until it does not, and says so
//! once meanwhile.
//!
//! # Guarantees
//!
//! - **No context is found gone while it holds or waits.** Only this context's database opened ahead
//!   (one nobody waits for: its `Leave` went first) is closed here, never a member's; so a watcher's
//!   upgrade, which the close lets start, finds gone only a context that is out of the protocol.
//! - **The register lists every member.** A member keeps its register connection, so the register is
//!   deleted only once no member is left; what is made anew after it lists the members that join
//!   after, each of which writes its entry before it is announced, as always.
//! - **One transport per origin.** The transport record is given up only by a context that is out of
//!   the protocol and stays out until the record, asked again behind the deletion, names the transport
//!   it uses ([`StorageEvent::RecordAgreed`]); where it names another, the context refuses. A context
//!   that gave it up therefore runs no transport the record does not name.
//! - **Never silent.** While the record has not answered for [`REGISTER_WAIT_MS`], the context says
//!   so once ([`Finding::RegisterWaits`]); a context that keeps a deletion waiting is told to the edge
//!   once per deletion ([`Evidence::take_sweep_told`]).

use super::{Evidence, Finding, Own, REGISTER_WAIT_MS, Register, StorageOp};

/// Where this context stands in a page's deletion of weblocks' databases.
#[derive(Debug, Default)]
pub(super) struct Sweep {
    /// A deletion waits for one of this context's connections, which it has not given up since.
    waiting: bool,
    /// That this context keeps it waiting was told (once per deletion).
    told: bool,
    /// The record was given up and asked again, since then; its answer has not come.
    asking: Option<u64>,
    /// The releases not answered yet (`StorageEvent::RecordAgreed` answers one each): only the answer
    /// to the last lets the participant back in, since a read made before a release was not kept.
    unanswered: u32,
    /// That the record has not answered was told.
    told_asking: bool,
}

impl Evidence {
    /// A deletion waits for one of this context's connections.
    pub fn deletion_waits_here(&self) -> bool {
        self.sweep.waiting
    }

    /// Whether the edge is to say that this context keeps a deletion waiting: true once per deletion.
    pub fn take_sweep_told(&mut self) -> bool {
        self.sweep.waiting && !std::mem::replace(&mut self.sweep.told, true)
    }

    /// The record was given up and has not answered since: the context stays out of the protocol.
    pub fn record_asking(&self) -> bool {
        self.sweep.asking.is_some()
    }

    /// This context holds and waits for nothing and is out of the protocol: it gives up every weblocks
    /// connection but its watches (opens of others' databases, which hold none until they complete).
    /// The register is opened again at its next use, and this context's database made anew at the next
    /// `OpenAlive`: both then wait behind the deletion.
    pub fn release_for_sweep(&mut self, now: u64) {
        self.sweep.waiting = false;
        self.sweep.told = false;
        if self.lost {
            // The browser took this context's storage: the record cannot be read again, so it could
            // never rejoin. It refuses now, as it would once its own database's opens failed.
            if !matches!(self.own, Own::Failed) {
                self.own = Own::Failed;
                self.findings.push_back(Finding::Unreachable);
            }
            return;
        }
        if let Register::Open(handle) | Register::Opening(handle) = self.register {
            self.ops.push_back(StorageOp::Close { handle });
            self.register = Register::Closed;
            self.register_since = None;
            if !self.queued.is_empty() {
                self.open_register();
            }
        }
        // Only one nobody waits for (its context is out of the protocol, or was never in): a member's
        // database is closed only as its context leaves or ends. One still being made goes too: its
        // entry went (or goes) into the register being deleted, so made now it would be listed
        // nowhere once that deletion completes, and left behind if its context then crashed.
        match self.own {
            Own::Ahead { handle, key } | Own::Opening { handle, key, .. } => {
                self.own = Own::None;
                self.ops.push_back(StorageOp::Close { handle });
                self.ops.push_back(StorageOp::Delete {
                    database: self.own_database(key),
                });
            }
            // Its entry's transaction completes with nothing left to open.
            Own::Registering { .. } => self.own = Own::None,
            _ => {}
        }
        // Its entry goes with the register; where the page deleted only this database, a read of the
        // register takes it out once missing long enough (`COLLECT_AFTER_MS`).
        self.ops.push_back(StorageOp::ReleaseRecord);
        self.sweep.unanswered += 1;
        if self.sweep.asking.is_none() {
            self.sweep.asking = Some(now);
            self.sweep.told_asking = false;
        }
    }

    /// `StorageEvent::DeletionWaits`.
    pub(super) fn deletion_waits(&mut self) {
        self.sweep.waiting = true;
    }

    /// `StorageEvent::RecordAgreed`: the participant may join again.
    pub(super) fn record_agreed(&mut self) {
        if self.sweep.unanswered == 0 {
            return;
        }
        self.sweep.unanswered -= 1;
        if self.sweep.unanswered == 0 && self.sweep.asking.take().is_some() {
            self.findings.push_back(Finding::RecordAgreed);
        }
    }

    /// When the record's wait is to be told.
    pub(super) fn sweep_deadline(&self) -> Option<u64> {
        let since = self.sweep.asking.filter(|_| !self.sweep.told_asking)?;
        Some(since + REGISTER_WAIT_MS)
    }

    pub(super) fn sweep_timeout(&mut self, now: u64) {
        if let Some(at) = self.sweep_deadline()
            && now >= at
        {
            self.sweep.told_asking = true;
            self.findings.push_back(Finding::RegisterWaits);
        }
    }
}

#[cfg(test)]
mod tests;
