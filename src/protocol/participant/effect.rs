//! What a participant asks its edge to do, in the order the edge must do it. The timer is not an
//! effect: the edge asks [`super::Participant::poll_timeout`] once the effects are carried out (the edge
//! loop, [`crate::protocol::edge`], does both).

use crate::protocol::replica::RevokeReason;
use crate::protocol::wire::Message;
use crate::scheduler::Snapshot;

/// One thing the edge must do. The participant puts them in the order they must be carried out: a
/// `Transmit` before the `CloseChannels` that follows a `Leave`, an `OpenChannels` before the `Transmit`
/// of the `Join` after it, the `Leave` of a closing context before its `CloseAlive`.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// A message was queued for the channel, the first since the last `Transmit`: call
    /// [`super::Participant::handle_flush`] before the current task ends (the edge loop waits
    /// [`crate::protocol::edge::FLUSH_HOPS`] microtask hops, so that the messages this task still posts
    /// go with it).
    FlushSoon,
    /// Send these messages of this context, in order, as one channel message (one append over the
    /// log): `wire::encode` for one, `wire::encode_batch` for several. Each receiver applies them in
    /// order, as if posted one after the other, which the transport's order allows.
    Transmit(Vec<Message>),
    /// A message of this context's own that it decided alone and never sent (the lone member,
    /// docs/PROTOCOL.md §5): it took effect here, after the messages of the order applied so far and
    /// before the next, and its outcomes follow as effects. Nothing to carry out: no other context needs
    /// it, as a `State` carries it to any joiner. An edge that keeps its own record of the order (the
    /// simulation's observer) places it there.
    Decided(Message),
    /// The context enters the protocol: open its channels if they are closed (the receiving
    /// BroadcastChannel object first; over the log, its log object), and over the log start reading it
    /// (find its last key and answer with [`Found::Started`](crate::protocol::log_writer::Found) through
    /// [`super::Participant::handle_log`]). Carried out
    /// before the `Transmit` that follows it (its `Join`), so that the channels receive that `Join`.
    OpenChannels,
    /// The context has left the protocol: close its channels once the `Transmit` before this has gone
    /// out. Out of the protocol it would only be woken by every message of the origin, for nothing.
    CloseChannels,
    /// The farewell to keep ready from now on (`None`: none): a `Leave` the edge must post without
    /// running the participant when the page goes away, from a `pagehide` listener that runs no script
    /// of ours (docs/PROTOCOL.md §8): on the broadcast transport the channel's own `postMessage` bound
    /// to it; over the log, the carrier's (or localStorage's), for the others to append.
    ArmFarewell(Option<Message>),
    /// Log transport: read the entries after key `after`, hand each to
    /// [`super::Participant::handle_log`] (`Found::Entry`) and then the log's floor (`Found::Read`).
    ReadLog { after: u64 },
    /// Log transport: delete the log's entries up to key `upto`, which no member of the history needs
    /// any more, and raise the floor to it (ignore failures: the log is only longer).
    TrimLog { upto: u64 },
    /// Evidence (docs/PROTOCOL.md §7): this context's liveness database, open and in the origin's
    /// register as a member's, under a key never used before (the edge's
    /// [`crate::protocol::evidence::Evidence`] keeps one per context); answer with
    /// [`super::Participant::handle_alive`] once it is, and call
    /// [`super::Participant::handle_alive_lost`] if the browser closes it.
    OpenAlive,
    /// Evidence: the context left the protocol (carried out after the `Transmit` before it, its
    /// `Leave`). Its liveness database is no member's any more: nobody waits for it. (The edge keeps it
    /// open for the context's next membership.)
    CloseAlive,
    /// Evidence: the context ends. Its liveness database goes, deleted and out of the register, even one
    /// the edge opened ahead before the participant asked for it.
    EndAlive,
    /// Evidence: list the origin's liveness databases, answer with
    /// [`super::Participant::handle_census`], and watch each as for `Watch`.
    Census,
    /// Evidence: watch liveness database `watch` of context `client` (an open at a newer version, at
    /// most one per database); when it completes, which the backend allows only once no connection to
    /// it is left, call [`super::Participant::handle_gone`]. A failed open is no evidence: it is made
    /// again later.
    Watch {
        client: std::rc::Rc<str>,
        watch: u64,
    },
    /// Engine sink 1: request `id` was granted.
    Granted(u64),
    /// Engine sink 2: `ifAvailable` request `id` was not grantable.
    NotAvailable(u64),
    /// Engine sink 3: held lock `id` was taken away.
    Stolen { id: u64, reason: LossReason },
    /// Engine sink 4: the answer to query `query`.
    Snapshot { query: u64, snapshot: Snapshot },
    /// A newer protocol version runs in this origin: this context no longer grants anything (say so
    /// once in the console; a reload picks up the new version).
    Incompatible { version: u32 },
}

/// Why a held lock was lost (all are reported to JS as "stolen": spec 4.1 step 3.4.1's AbortError).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossReason {
    /// Another request used `steal`.
    Stolen,
    /// Its liveness database was closed under it (site data cleared, or its storage process ended): the
    /// others find it gone and take its locks.
    Evicted,
    /// A context that could reach no member started a new history.
    Reset,
    /// A newer protocol version runs in the origin.
    Retired,
    /// This page entered the back/forward cache (`pagehide` with `persisted`).
    Hidden,
}

impl From<RevokeReason> for LossReason {
    fn from(r: RevokeReason) -> Self {
        match r {
            RevokeReason::Stolen => LossReason::Stolen,
            RevokeReason::Evicted => LossReason::Evicted,
            RevokeReason::Reset => LossReason::Reset,
            RevokeReason::Retired => LossReason::Retired,
        }
    }
}
