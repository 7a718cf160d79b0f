//! A page's deletion of weblocks' databases, as the participant takes part in it (docs/PROTOCOL.md §7,
//! "a page's sweep"; the edge loop asks, [`crate::protocol::evidence::sweep`] gives the connections up).

use super::Participant;
use super::core::RequestState;
use super::state::Lifecycle;
use crate::protocol::participant::LossReason;

/// What the participant does while a deletion waits for its context's connections.
#[derive(Debug, PartialEq, Eq)]
pub enum SweepStep {
    /// It held nothing and was in the protocol: it left (its effects first), its pending requests
    /// kept here to be sent again, and it stays out until the record is agreed again.
    Left,
    /// It holds nothing and is out of the protocol: its connections may go.
    Release,
    /// It holds these locks: its connections stay until it does not.
    Keeps(Vec<String>),
}

impl Participant {
    /// The edge's question while a deletion waits (see [`SweepStep`]). Only a holder keeps its
    /// connections: a holder needs no new connection to go on (its callback ends, its release goes on
    /// the transport it has), so the deletion completes once no context holds. A context that only
    /// waits steps out instead, as after a reset but with nothing to lose: kept in, it could wait for a
    /// context that cannot reach the deleted databases (a joiner whose new connection waits behind the
    /// deletion), which waits for it in turn (the simulation found that cycle).
    pub fn sweep_step(&mut self, _now: u64) -> SweepStep {
        // A context that is gone, or retired (a newer version runs: it grants nothing any more), has
        // nothing to keep the connections for.
        let over = matches!(self.phase.lifecycle(), Lifecycle::Gone | Lifecycle::Retired);
        // Each name once, by request id (no sort: it would add to the wasm).
        let mut held: Vec<String> = Vec::new();
        for r in self.core.requests() {
            if r.state == RequestState::Held && !held.iter().any(|n| **n == *r.name) {
                held.push(r.name.to_string());
            }
        }
        if !over && !held.is_empty() {
            return SweepStep::Keeps(held);
        }
        self.record_pending = true;
        if self.phase.is_detached() {
            return SweepStep::Release;
        }
        self.leave();
        // It holds nothing: no lock is reported lost; its pending requests go back to its queue.
        self.core.lose_membership(LossReason::Reset);
        self.sync_farewell();
        SweepStep::Left
    }

    /// The record, asked again after the context gave its connections up, names the transport it
    /// uses: it joins again if it waits for anything.
    pub fn handle_record_agreed(&mut self, now: u64) {
        if !std::mem::replace(&mut self.record_pending, false) {
            return;
        }
        if !self.core.is_idle() {
            self.attach();
        }
        self.after(now);
    }

    /// Out of the protocol until the record is agreed again (for the simulation's checks).
    pub fn waits_for_record(&self) -> bool {
        self.record_pending
    }
}
