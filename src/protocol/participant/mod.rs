//! One context's participant in the coordination protocol (docs/PROTOCOL.md): a sans-I/O state machine
//! in the manner of quinn-proto's `Connection`. Events go in through `handle_*` methods, each given the
//! wall-clock time in ms (`Date.now()`); what the edge must do comes out of
//! [`Participant::poll_effect`], in the order it must be done.
//!
//! What the caller does (the edge loop, [`crate::protocol::edge`], does it for every edge):
//! - After every `handle_*` call, carry out every effect [`Participant::poll_effect`] returns, in order,
//!   until it returns `None` (an effect may be carried out later only where its doc says so: a
//!   `FlushSoon` asks for [`Participant::handle_flush`] before the task ends, `OpenChannels` over the log
//!   and `ReadLog` for their answers). Effects that call back into JS (the Engine's sink) may cause more
//!   calls; those are fine between two effects.
//! - Then ask [`Participant::poll_timeout`] for its next deadline, and have
//!   [`Participant::handle_timeout`] called at (or after) it; `None`: no timer.
//! - Feed it everything that happens: the local calls of the Engine contract (`handle_request`,
//!   `handle_release`, `handle_abort`, `handle_query`), what the transport delivers (`handle_message`
//!   on the broadcast transport; `handle_log`, one finding of the log writer, over the log), the timer, the
//!   evidence of life and death (`handle_alive`, `handle_alive_lost`, `handle_census`, `handle_gone`),
//!   and the page's lifecycle (`handle_freeze`, `handle_resume`,
//!   `handle_pagehide`, `handle_pageshow`, `handle_close`; `handle_missed_messages` when the transport
//!   lost messages of its order).
//!
//! Where it stands has two axes, kept together in [`state`] and changed only by its `move_to_*`
//! functions, which assert that each change is legal:
//! - Its state in the protocol ([`state::State`]): a context not in the protocol is detached; once it
//!   needs a lock it joins ([`joining`]), and with a complete replica it is synced ([`synced`]), until it
//!   leaves, loses its membership (and joins again), or retires.
//! - Its context's life ([`state::Lifecycle`]), moved by the page's lifecycle calls and by the protocol:
//!   `Running` (it follows the order and runs its policies); `Frozen` (`handle_freeze`, back to
//!   `Running` on `handle_resume`: it keeps its locks, and runs no policy meanwhile; also a page in the
//!   back/forward cache, `handle_pagehide` with `persisted` under [`BackForwardCache::Stay`], back to
//!   `Running` on `handle_pageshow`); `Hidden` (`handle_pagehide` with `persisted` under
//!   [`BackForwardCache::Release`]: in the back/forward cache, out of the protocol with nothing held,
//!   back to `Running` on `handle_pageshow`); `Gone` (`handle_close`, or
//!   `handle_pagehide` without `persisted`: for good); `Retired` (a message of a newer protocol version
//!   arrived: out of the protocol, and it grants nothing any more). Only a running or frozen context is
//!   in the protocol; only a running one enters it.
//!
//! What it has in every state (its requests, queries, counters and effects) is its [`core`]; the rules
//! that need the replica (sending its requests once active, answering queries, making way) live with the
//! synced state.
//!
//! # Guarantees
//!
//! Each rests on the assumptions docs/PROTOCOL.md §2 names, and on the edge carrying out every effect in
//! order:
//! - **Mutual exclusion** (PROTOCOL §6): no lock is granted to two contexts at once in conflicting modes,
//!   except where a context steals it (as natively). On the broadcast transport it rests on A1 and A2; over
//!   the log on A1′ alone. It never rests on a timer.
//! - **A live context keeps its locks** (§6, §7): a member is removed only by its `Leave` or by a `Gone`
//!   backed by A5 (the edge's evidence of life and death), and a history is reset only once every context
//!   that could be a member is known gone. No timer decides who is gone or who is alone.
//! - **Progress** (§7): a request is granted once the locks ahead of it are released or their holders are
//!   gone, provided the edge delivers what the transport delivers and calls
//!   [`Participant::handle_timeout`] when asked.
//! - **Versions** (§9): a context that meets a newer protocol version stops granting
//!   ([`Effect::Incompatible`]) rather than misread it.
//!
//! # The edge loop
//!
//! A lone context, driven by hand as the edge loop ([`crate::protocol::edge`]) drives it
//! in a browser and in the simulation: each input, then every effect in order, each answered by a later
//! input, then its next deadline. `cargo test` runs it, so it follows the code.
//!
//! ```
//! use std::collections::VecDeque;
//! use weblocks::protocol::{Config, Effect, Participant, wire};
//! use weblocks::scheduler::LockOptions;
//!
//! let mut p = Participant::new("tab", Config::default());
//! p.handle_request(0, 1, "x", LockOptions::default());
//! // What the edge will feed it next: the answers its effects get, in the order they come.
//! let mut inputs: VecDeque<Box<dyn FnOnce(&mut Participant)>> = VecDeque::new();
//! let mut granted = false;
//! loop {
//!     while let Some(effect) = p.poll_effect() {
//!         match effect {
//!             // Its liveness database opened, under key 7: its Join goes out.
//!             Effect::OpenAlive => inputs.push_back(Box::new(|p| p.handle_alive(1, 7))),
//!             Effect::FlushSoon => inputs.push_back(Box::new(|p| p.handle_flush())),
//!             // The channel gives a context its own messages too, at their place in the order.
//!             Effect::Transmit(messages) => {
//!                 let values = wire::encode_transmit(&messages, p.version());
//!                 inputs.push_back(Box::new(move |p| p.handle_message(2, &values)));
//!             }
//!             // The census, once its Join came back: no other context lives.
//!             Effect::Census => inputs.push_back(Box::new(|p| p.handle_census(3, Vec::new()))),
//!             Effect::Granted(id) => granted = id == 1,
//!             // OpenChannels, ArmFarewell...: carried out by a real edge.
//!             _ => {}
//!         }
//!     }
//!     // Its next deadline: the edge's timer calls `handle_timeout` then (none is needed here).
//!     let _deadline: Option<u64> = p.poll_timeout();
//!     match inputs.pop_front() {
//!         Some(input) => input(&mut p),
//!         None => break,
//!     }
//! }
//! assert!(granted, "a lone context is granted once the census shows no other context");
//! ```

mod config;
mod core;
mod effect;
mod joining;
mod log_reader;
mod log_transport;
mod state;
mod sweep;
mod synced;

pub use config::{BackForwardCache, Config, Transport, Wake};
pub use effect::{Effect, LossReason};
pub use log_reader::TRIM_STEP;

use crate::protocol::replica::Replica;
use crate::protocol::wire::{
    Body, Decoded, MemberKey, Message, MessageId, PROTOCOL_VERSION, Value, decode_versioned,
    split_batch,
};
use crate::scheduler::LockOptions;

use self::core::{Core, RequestState, earliest};
use joining::{Joined, Joining};
use log_reader::LogReader;
use state::{Lifecycle, Phase};
pub use sweep::SweepStep;
use synced::{MakeWay, Membership, Synced};

/// One context of the origin.
pub struct Participant {
    core: Core,
    /// Where it stands in the protocol and in its context's life.
    phase: Phase,
    /// Over the log: its order restored, and when to read it.
    log: LogReader,
    /// Since when this context has had nothing held, pending or queried, where it polls the log: it
    /// leaves the protocol after `query_linger` of it.
    idle_since: Option<u64>,
    /// The incarnation whose farewell the edge keeps armed.
    armed: Option<u32>,
    /// It gave up the origin's transport record for a page's deletion, and has not read it again:
    /// it stays out of the protocol ([`sweep`]).
    record_pending: bool,
}

impl Participant {
    pub fn new(client_id: &str, config: Config) -> Participant {
        Self::with_version(client_id, config, PROTOCOL_VERSION)
    }

    /// A participant speaking protocol `version` (tests simulate a deploy with two versions).
    pub fn with_version(client_id: &str, config: Config, version: u32) -> Participant {
        Participant {
            core: Core::new(client_id, config, version),
            phase: Phase::new(),
            log: LogReader::new(),
            idle_since: None,
            armed: None,
            record_pending: false,
        }
    }

    /// The next effect to carry out, in order; `None` once there is none.
    #[must_use]
    pub fn poll_effect(&mut self) -> Option<Effect> {
        self.core.next_effect()
    }

    /// When [`Participant::handle_timeout`] is due: the earliest deadline of its policies, as of the last
    /// `handle_*` call (`None`: none). Calling it earlier does no harm (it looks at its deadlines and
    /// gives the next); later delays what it waits for.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<u64> {
        self.core.next_deadline()
    }

    pub fn client_id(&self) -> &str {
        self.core.client()
    }

    /// This context's current membership.
    pub fn member_key(&self) -> MemberKey {
        self.core.member_key()
    }

    /// The transport this participant coordinates over.
    pub fn transport(&self) -> Transport {
        self.core.config().transport
    }

    /// The protocol version this participant speaks.
    pub fn version(&self) -> u32 {
        self.core.version()
    }

    /// The replica, once it has a complete one (for tests and diagnostics).
    pub fn replica(&self) -> Option<&Replica> {
        self.phase.synced().map(Synced::replica)
    }

    /// Over the log, the key up to which this context has applied the log (for the simulation).
    pub fn log_position(&self) -> Option<u64> {
        self.log.position()
    }

    /// True while nothing is held, pending, queued or queried here and no deadline is set (for tests).
    pub fn is_quiet(&self) -> bool {
        self.core.is_quiet()
    }

    // ---- the Engine contract ----------------------------------------------------------------------

    /// Spec 4.1 step 3 for request `id` (ids are never reused by a context).
    pub fn handle_request(&mut self, now: u64, id: u64, name: &str, options: LockOptions) {
        let core = &mut self.core;
        if core.request_state(id).is_some()
            || matches!(self.phase.lifecycle(), Lifecycle::Gone | Lifecycle::Hidden)
        {
            return;
        }
        // A retired context grants nothing. A local miss (docs/PROTOCOL.md §5) is decided here,
        // without the order's round trip.
        if options.if_available
            && (self.phase.lifecycle() == Lifecycle::Retired
                || (!options.steal && core.holds_conflicting(name, options.mode)))
        {
            core.emit(Effect::NotAvailable(id));
            return;
        }
        core.add_request(id, name, options);
        self.attach();
        // Earlier queued requests exist only while this context is not an active member, and then
        // nothing is sent: sending just this one keeps call order and a bulk of calls linear.
        if let Some(s) = self.phase.synced_mut() {
            s.send_request(&mut self.core, id, None);
        }
        self.after(now);
    }

    /// Spec 4.2: lock `id`'s waiting promise settled. A lock that is not held (stolen) is a no-op.
    pub fn handle_release(&mut self, now: u64, id: u64) {
        if self.core.request_state(id) == Some(RequestState::Held) {
            self.core.forget_request(id);
            self.send_lock_message(Body::Release { id });
        }
        self.after(now);
    }

    /// Spec 4.3: request `id`'s signal fired. Returns true if it was still pending here (JS rejects the
    /// request); false if it was granted (or unknown). If the grant is already decided in the origin
    /// but not yet seen here, the origin releases it when it applies the abort.
    pub fn handle_abort(&mut self, now: u64, id: u64) -> bool {
        let aborted = match self.core.request_state(id) {
            Some(RequestState::Queued) => true,
            Some(RequestState::Posted) => {
                self.send_lock_message(Body::Abort { id });
                true
            }
            Some(RequestState::Held) | None => false,
        };
        if aborted {
            self.core.forget_request(id);
        }
        self.after(now);
        aborted
    }

    /// Spec 4.5: the snapshot arrives as [`Effect::Snapshot`] once the replica has applied every message
    /// this context sent before the query.
    pub fn handle_query(&mut self, now: u64, query: u64) {
        let core = &mut self.core;
        if matches!(self.phase.lifecycle(), Lifecycle::Retired | Lifecycle::Gone) {
            core.answer_locally(query);
            return;
        }
        // Over the log, the answer must include what the origin did before the call, and an entry may be
        // in the log unheard of here: where the context reads only when poked or polled, and also over
        // the carrier, whose frame of an entry is lost when its writer ends between the append and the
        // post. So the context waits for an `Alive` of its own to come back: its key comes after every
        // entry appended before the call, and the context applies the log in key order. Except the sole
        // member over the carrier: no other member can have locked or requested anything, and a
        // joiner's requests wait for this context's `State`.
        let transport = core.config().transport;
        let sole =
            transport.prompt() && self.phase.synced().is_some_and(|s| s.is_sole_member(core));
        if matches!(transport, Transport::Log(_)) && self.is_active_member() && !sole {
            self.core.send(Body::Alive);
        }
        self.core.add_query(now, query);
        self.attach();
        self.after(now);
    }

    // ---- what the transport delivers ----------------------------------------------------------------

    /// Broadcast transport: a message arrived on the channel (including this context's own, seen
    /// through its second channel object). Anything that does not decode is ignored.
    pub fn handle_message(&mut self, now: u64, values: &[Value]) {
        self.apply_values(now, values);
        self.after(now);
    }

    /// The task that queued messages ends: they go out now, as one channel message.
    pub fn handle_flush(&mut self) {
        self.core.flush();
    }

    /// The deadline [`Participant::poll_timeout`] gave has come.
    pub fn handle_timeout(&mut self, now: u64) {
        self.core.deadline_reached();
        self.after(now);
    }

    // ---- evidence of life and death ---------------------------------------------------------------------

    /// This context's liveness database is open under key `watch` (`Effect::OpenAlive`). A joiner
    /// waiting for it posts its Join; a context that left the protocol meanwhile closes it again.
    pub fn handle_alive(&mut self, now: u64, watch: u64) {
        if !self.core.alive_opened(watch) {
            return;
        }
        if self.phase.is_detached() || self.phase.lifecycle() != Lifecycle::Running {
            self.core.close_alive();
            return;
        }
        if let Some(j) = self.phase.joining_mut() {
            j.alive(&mut self.core);
        }
        self.after(now);
    }

    /// The browser closed this context's liveness database (its storage was cleared, or its storage
    /// process ended): the others will find it gone and take its locks, so it steps out at once (its
    /// held locks reported lost) and, if it still waits or queries, joins again with a new database.
    pub fn handle_alive_lost(&mut self, now: u64) {
        if !self.core.alive_lost() {
            return;
        }
        if self.phase.is_detached() || !self.phase.lives() {
            return;
        }
        self.step_out(LossReason::Evicted);
        if !self.core.is_idle() {
            self.attach();
        }
        self.after(now);
    }

    /// The origin's liveness databases (`Effect::Census`): each context's client id and key.
    pub fn handle_census(&mut self, now: u64, listed: Vec<(std::rc::Rc<str>, u64)>) {
        if let Some(j) = self.phase.joining_mut() {
            j.census(&self.core, listed);
            self.after(now);
        }
    }

    /// The liveness database `watch` of context `client` lost its last connection (`Effect::Watch`,
    /// `Effect::Census`): that context is gone.
    pub fn handle_gone(&mut self, now: u64, client: &str, watch: u64) {
        if let Some(j) = self.phase.joining_mut() {
            j.gone(client.into(), watch);
        } else if let Some(s) = self.phase.synced_mut() {
            s.gone(&mut self.core, client, watch);
        } else {
            return;
        }
        self.after(now);
    }

    // ---- the page's lifecycle -------------------------------------------------------------------------

    /// The page is being frozen. Its liveness database stays open, so it keeps its locks for as long as
    /// it lives; but a joiner waits for every member that lives, so an idle one leaves first rather than
    /// keep joiners waiting until it resumes.
    pub fn handle_freeze(&mut self, _now: u64) {
        if self.phase.lifecycle() != Lifecycle::Running {
            return;
        }
        if self.core.is_idle() {
            self.leave();
        }
        self.phase.move_to_frozen();
        self.sync_farewell();
    }

    /// The page was resumed from freezing.
    pub fn handle_resume(&mut self, now: u64) {
        if self.phase.lifecycle() != Lifecycle::Frozen {
            return;
        }
        self.phase.move_to_running();
        self.after(now);
    }

    /// `pagehide`: leave at once; but with `persisted` (entering the back/forward cache), as the
    /// configuration's [`BackForwardCache`] says: `Stay`, as on a freeze (an idle context leaves, any
    /// other keeps its locks, requests and liveness database: the browser evicts the page once
    /// another context watches it, and that eviction is the evidence that frees its locks);
    /// `Release`, the held locks are lost (reported stolen) and the pending requests wait, to be sent
    /// again on `pageshow`.
    pub fn handle_pagehide(&mut self, now: u64, persisted: bool) {
        if !persisted {
            self.handle_close(now);
            return;
        }
        if self.stays_in_cache() {
            self.handle_freeze(now);
            if self.phase.lifecycle() == Lifecycle::Frozen
                && !self.phase.is_detached()
                && self.core.config().transport == Transport::Broadcast
            {
                // A member that holds or waits: a message of its own, which reaches its own channel
                // object once the page is in the cache, where Gecko evicts a page that a message
                // reaches (as its native API keeps such a page out of the cache); Blink delivers it
                // before, and the page stays until a watch or another message evicts it. The others
                // ignore it. Not over the log: an append begun here might not finish.
                self.core.send(Body::Alive);
                self.core.flush();
            }
            return;
        }
        if !self.phase.lives() {
            return;
        }
        self.step_out(LossReason::Hidden);
        self.phase.move_to_hidden();
        self.core.set_deadline(None);
        self.sync_farewell();
    }

    /// `pageshow` after the back/forward cache: carry on (`Stay`: as on a resume), or join again if
    /// anything is waiting (`Release`).
    pub fn handle_pageshow(&mut self, now: u64, persisted: bool) {
        if persisted && self.stays_in_cache() {
            // Its farewell was not posted on entry (the edge posts it only when the page goes for
            // good), so a context whose `pagehide` was cut short is still the member it was.
            self.handle_resume(now);
            return;
        }
        if persisted && self.phase.lives() {
            // Back from the cache without this participant having seen its `pagehide` (the listener was
            // cut short), while the edge's farewell told the origin it left: catch up before joining.
            self.handle_pagehide(now, true);
        }
        if !persisted || self.phase.lifecycle() != Lifecycle::Hidden {
            return;
        }
        self.phase.move_to_running();
        if !self.core.is_idle() {
            self.attach();
        }
        self.after(now);
    }

    /// Whether this context stays a member in the back/forward cache ([`BackForwardCache::Stay`]):
    /// the edge then posts its farewell only on a `pagehide` without `persisted`, and keeps its
    /// liveness database open through one with it.
    pub fn stays_in_cache(&self) -> bool {
        self.back_forward_cache() == BackForwardCache::Stay
    }

    /// What this context does on entering the back/forward cache (its configuration's).
    pub fn back_forward_cache(&self) -> BackForwardCache {
        self.core.config().back_forward_cache
    }

    /// The transport lost messages of the order this context was following (a log it reads from was
    /// trimmed past its position, or an append of its own failed): its replica can no longer be
    /// trusted. It steps out as on entering the back/forward cache (its held locks reported lost, as
    /// after a reset; its Leave releases them wherever the origin still counts them) and, if it still
    /// waits or queries, joins again with a state transfer.
    pub fn handle_missed_messages(&mut self, now: u64) {
        if !self.phase.lives() || self.phase.is_detached() {
            return;
        }
        self.step_out(LossReason::Reset);
        if !self.core.is_idle() {
            self.attach();
        }
        self.after(now);
    }

    /// The context closes (unload, `pagehide` without `persisted`, a worker's end): leave at once.
    pub fn handle_close(&mut self, _now: u64) {
        if self.phase.lifecycle() == Lifecycle::Gone {
            return;
        }
        if self.phase.lifecycle() != Lifecycle::Retired {
            self.leave();
        }
        self.core.end_alive();
        self.phase.move_to_gone();
        self.core.set_deadline(None);
        self.sync_farewell();
    }

    // ---- internals ------------------------------------------------------------------------------------

    fn is_active_member(&self) -> bool {
        self.phase.synced().is_some_and(Synced::is_active)
    }

    /// Enters the protocol if this context is not in it yet: opens its channels (over the log, it starts
    /// reading it anew: out of the protocol it followed nothing, and what it missed comes with the state
    /// transfer) and joins.
    fn attach(&mut self) {
        if self.phase.is_detached()
            && self.phase.lifecycle() == Lifecycle::Running
            && !self.record_pending
        {
            if matches!(self.core.config().transport, Transport::Log(_)) {
                self.log = LogReader::new();
            }
            self.core.emit(Effect::OpenChannels);
            self.phase.move_to_joining(Joining::start(&mut self.core));
        }
    }

    /// Leaves the protocol: tells the others (if it ever joined), sends what it queued, closes its
    /// channels, its liveness database (after its `Leave`) and forgets the replica.
    fn leave(&mut self) {
        if !self.phase.is_detached() {
            self.send_lock_message(Body::Leave);
            self.core.flush();
            self.core.emit(Effect::CloseChannels);
        }
        // After its Leave: the others then find it gone only once it has left.
        self.core.close_alive();
        self.phase.move_to_detached();
        // Messages sent before leaving will not come back on the closed channels.
        self.core.forget_echoes();
        self.core.reset_watermarks();
    }

    /// Leaves the protocol with its held locks lost (for `reason`) and its requests queued, to be sent
    /// again when it joins again.
    fn step_out(&mut self, reason: LossReason) {
        self.leave();
        self.core.lose_membership(reason);
    }

    /// A newer protocol version is running: give up every lock and grant nothing any more.
    fn retire(&mut self, version: u32) {
        let core = &mut self.core;
        core.emit(Effect::Incompatible { version });
        core.lose_membership(LossReason::Retired);
        core.refuse_if_available();
        if !self.phase.is_detached() {
            self.core.emit(Effect::CloseChannels);
        }
        self.core.close_alive();
        self.phase.move_to_detached();
        self.phase.move_to_retired();
        self.core.answer_all_locally();
        self.core.set_deadline(None);
        self.sync_farewell();
    }

    /// Sends one of this context's own lock messages (`Request`, `Release`, `Abort`, `Leave`): a synced
    /// context may decide it alone (see [`Synced::send_lock_message`]).
    fn send_lock_message(&mut self, body: Body) {
        match self.phase.synced_mut() {
            Some(s) => s.send_lock_message(&mut self.core, body),
            None => self.core.send(body),
        }
    }

    /// Applies one channel message or log entry (a message or a batch) at the next place of the order.
    fn apply_values(&mut self, now: u64, values: &[Value]) {
        if !self.phase.lives() {
            return;
        }
        let version = self.core.version();
        match split_batch(values, version) {
            Some(parts) => {
                for part in parts {
                    if let Some(decoded) = decode_versioned(part, version) {
                        self.receive(now, decoded);
                    }
                }
            }
            None => {
                if let Some(decoded) = decode_versioned(values, version) {
                    self.receive(now, decoded);
                }
            }
        }
    }

    /// The next message of the order, for the state to apply.
    fn receive(&mut self, now: u64, decoded: Decoded) {
        if let Decoded::Ours(m) = &decoded
            && &m.sender.client == self.core.client()
            && m.seq != 0
        {
            // A member's own messages come back in the order it sent them, each once (A2, A1′): one
            // that comes back past a message it has not seen means that one was lost (over the log, an
            // append that aborted, whose gap is told later). Its replica lacks what it sent, so its
            // answers would too: it steps out now, as for any gap.
            if self.core.echo_skips(m.seq) && self.phase.synced().is_some() {
                self.step_out(LossReason::Reset);
                if !self.core.is_idle() {
                    self.attach();
                }
                return;
            }
            self.core.echoed(m.seq);
        }
        if let Decoded::Foreign { version, .. } = &decoded
            && *version > self.core.version()
        {
            self.retire(*version);
            return;
        }
        if let Some(j) = self.phase.joining_mut() {
            match j.receive(&mut self.core, now, decoded) {
                Joined::Waiting => {}
                Joined::Complete { replica, last } => self.synced(*replica, last),
                Joined::Restart => self.start_joining(),
            }
        } else if let Some(s) = self.phase.synced_mut() {
            s.receive(&mut self.core, decoded);
            self.check_membership();
        }
    }

    /// The replica is complete: the context follows the order with it.
    fn synced(&mut self, replica: Replica, last: MessageId) {
        self.phase.move_to_synced(Synced::new(replica, last));
        self.check_membership();
    }

    /// Queues a Join of a new incarnation, and waits for a state transfer.
    fn start_joining(&mut self) {
        self.phase.move_to_joining(Joining::start(&mut self.core));
    }

    /// After every applied message of a synced context: once active it sends what it queued; if it lost
    /// its membership, its requests go back to the queue and it joins afresh.
    fn check_membership(&mut self) {
        let Some(s) = self.phase.synced_mut() else {
            return;
        };
        match s.membership(&self.core) {
            Membership::Active { just_became: true } => s.send_queued(&mut self.core),
            Membership::Active { just_became: false } => {}
            Membership::Lost { was_active } => {
                if was_active {
                    // Locks whose revocation the replica reported are gone already; any other held lock
                    // went with the membership.
                    self.core.lose_membership(LossReason::Evicted);
                }
                self.phase.move_to_joining(Joining::start(&mut self.core));
            }
        }
    }

    /// Runs after every event: the state's policies (which may send), the queries, the log, and the
    /// earliest next deadline ([`Participant::poll_timeout`]); then the farewell the edge keeps for this
    /// membership.
    fn after(&mut self, now: u64) {
        if self.phase.lifecycle() != Lifecycle::Running {
            if !self.phase.lives() {
                self.core.set_deadline(None);
            }
            self.sync_farewell();
            return;
        }
        let mut next: Option<u64> = self.make_way(now);
        let core = &mut self.core;
        if let Some(j) = self.phase.joining_mut() {
            next = earliest(next, j.policies(core, now));
        } else if let Some(s) = self.phase.synced_mut() {
            next = earliest(next, s.policies(core, now));
            s.answer_queries(core);
        }
        next = earliest(next, self.log_policy(now));
        self.core.set_deadline(next);
        self.sync_farewell();
    }

    /// The farewell the edge keeps armed: this membership's `Leave` while the context is in the
    /// protocol and alive, none otherwise. Re-armed only when the membership changes.
    fn sync_farewell(&mut self) {
        let farewell =
            (self.phase.lives() && !self.phase.is_detached()).then_some(self.core.incarnation());
        if farewell != self.armed {
            self.armed = farewell;
            let message = farewell.map(|_| Message {
                sender: self.core.member_key(),
                seq: 0,
                body: Body::Leave,
            });
            self.core.emit(Effect::ArmFarewell(message));
        }
    }

    /// Making way (see [`Synced::make_way`]) is for a synced member only: out of that state, what such a
    /// member noted for it is void. Returns when to look again.
    fn make_way(&mut self, now: u64) -> Option<u64> {
        let Some(s) = self.phase.synced() else {
            self.idle_since = None;
            self.core.take_saw_request();
            return None;
        };
        match s.make_way(&mut self.core, &mut self.idle_since, now) {
            MakeWay::Stay { look_again } => look_again,
            MakeWay::Leave => {
                self.leave();
                None
            }
        }
    }
}
