//! Where a participant stands, on two axes: in the protocol ([`State`]) and in its context's life
//! ([`Lifecycle`]). Both change only through the `move_to_*` functions of [`Phase`], each of which
//! asserts (in debug builds) that the change is one of the legal ones its doc lists.

use super::joining::Joining;
use super::synced::Synced;

/// Where a participant stands in the protocol.
pub(super) enum State {
    /// Not in the protocol: it never needed a lock yet, made way, left, was hidden or retired.
    Detached,
    Joining(Box<Joining>),
    Synced(Box<Synced>),
}

/// The context's life, as its page or worker tells it (the `handle_*` calls of the page's lifecycle),
/// or as the protocol ends it (a newer version).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lifecycle {
    /// Runs tasks: the participant follows the order, sends, and keeps its timer.
    Running,
    /// Frozen by the browser: its liveness database stays open, so its locks stay its own for as long
    /// as it lives (an idle member left before freezing). It still applies what is delivered to it, but
    /// runs none of its policies until it runs again.
    Frozen,
    /// In the back/forward cache: out of the protocol, nothing held; back to running on `pageshow`.
    Hidden,
    /// Closed or terminated: out of the protocol for good.
    Gone,
    /// Saw a newer protocol version: out of the protocol, and grants nothing any more.
    Retired,
}

/// The participant's two state axes together.
pub(super) struct Phase {
    state: State,
    lifecycle: Lifecycle,
}

impl Phase {
    /// A running context out of the protocol.
    pub fn new() -> Phase {
        Phase {
            state: State::Detached,
            lifecycle: Lifecycle::Running,
        }
    }

    pub fn lifecycle(&self) -> Lifecycle {
        self.lifecycle
    }

    pub fn is_detached(&self) -> bool {
        matches!(self.state, State::Detached)
    }

    pub fn is_joining(&self) -> bool {
        matches!(self.state, State::Joining(_))
    }

    /// Running or frozen: the context lives and, once it joined, takes part in the protocol.
    pub fn lives(&self) -> bool {
        matches!(self.lifecycle, Lifecycle::Running | Lifecycle::Frozen)
    }

    pub fn joining_mut(&mut self) -> Option<&mut Joining> {
        match &mut self.state {
            State::Joining(j) => Some(j),
            _ => None,
        }
    }

    pub fn synced(&self) -> Option<&Synced> {
        match &self.state {
            State::Synced(s) => Some(s),
            _ => None,
        }
    }

    pub fn synced_mut(&mut self) -> Option<&mut Synced> {
        match &mut self.state {
            State::Synced(s) => Some(s),
            _ => None,
        }
    }

    // ---- the protocol: Detached → Joining → Synced, and back ------------------------------------------

    /// Joins (a new incarnation): from `Detached` (it needs a lock), from `Joining` (it restarts), or
    /// from `Synced` (it lost its membership). Only a running or frozen context joins.
    pub fn move_to_joining(&mut self, joining: Joining) {
        debug_assert!(self.lives(), "joins while {:?}", self.lifecycle);
        self.state = State::Joining(Box::new(joining));
    }

    /// Synced: only from `Joining`, once its replica is complete.
    pub fn move_to_synced(&mut self, synced: Synced) {
        debug_assert!(
            matches!(self.state, State::Joining(_)),
            "synced without joining"
        );
        debug_assert!(self.lives(), "synced while {:?}", self.lifecycle);
        self.state = State::Synced(Box::new(synced));
    }

    /// Out of the protocol: from any state (leaving while detached changes nothing).
    pub fn move_to_detached(&mut self) {
        self.state = State::Detached;
    }

    // ---- the context's life ---------------------------------------------------------------------------

    /// `Running → Frozen`.
    pub fn move_to_frozen(&mut self) {
        debug_assert_eq!(self.lifecycle, Lifecycle::Running);
        self.lifecycle = Lifecycle::Frozen;
    }

    /// `Frozen → Running` (resumed) and `Hidden → Running` (back from the back/forward cache, still
    /// detached).
    pub fn move_to_running(&mut self) {
        debug_assert!(
            self.lifecycle == Lifecycle::Frozen
                || (self.lifecycle == Lifecycle::Hidden && self.is_detached()),
            "runs again from {:?}",
            self.lifecycle
        );
        self.lifecycle = Lifecycle::Running;
    }

    /// `Running | Frozen → Hidden`, once detached.
    pub fn move_to_hidden(&mut self) {
        debug_assert!(self.lives(), "hidden from {:?}", self.lifecycle);
        debug_assert!(self.is_detached(), "hidden in the protocol");
        self.lifecycle = Lifecycle::Hidden;
    }

    /// Any lifecycle but `Gone` → `Gone`, once detached.
    pub fn move_to_gone(&mut self) {
        debug_assert_ne!(self.lifecycle, Lifecycle::Gone);
        debug_assert!(self.is_detached(), "gone in the protocol");
        self.lifecycle = Lifecycle::Gone;
    }

    /// Any lifecycle but `Gone` → `Retired` (again, if it sees another newer version), once detached.
    pub fn move_to_retired(&mut self) {
        debug_assert_ne!(self.lifecycle, Lifecycle::Gone);
        debug_assert!(self.is_detached(), "retired in the protocol");
        self.lifecycle = Lifecycle::Retired;
    }
}
