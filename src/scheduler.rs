//! The lock manager of the Web Locks spec, sections 2 and 4, as a pure state machine.
//!
//! It knows nothing of JS, promises or tasks: a [`LockRequest`] carries an id, the client that made it, a
//! name and a mode, and every algorithm returns the [`Decision`]s the caller must carry out (invoke a
//! callback with a lock, invoke it with `null`, reject a stolen lock's released promise). The same
//! manager runs in a lone context and in every replica of an origin (the coordination protocol).
//!
//! # Guarantees
//!
//! Each holds after every call, and the tests in `tests/scheduler.rs` check them:
//! - **FIFO per name.** The requests for one name are granted in the order they were made ("the lock
//!   request queue" of spec 2.4 is a queue), except that `steal` goes to the front and `ifAvailable` is
//!   granted at once or not at all; a request for one name never waits on a request for another.
//! - **Exclusive means alone, shared means with shared only.** A name is held by one exclusive lock, or by
//!   any number of shared locks; a shared request waits behind an earlier exclusive one even when the name is
//!   held shared (spec 2.5, "grantable"), so an exclusive request is never starved by later shared ones.
//! - **Nothing is lost.** Each request ends exactly once: granted, answered `null` (`ifAvailable`), aborted,
//!   stolen or terminated with its client; every [`Decision`] a call returns is one the caller must carry
//!   out, which is why the calls that return them are `#[must_use]`.
//! - **One order for every replica.** The manager is deterministic: the same calls in the same order give
//!   the same decisions and the same [`Snapshot`] in every context that replays them.

use crate::sequence_map::SequenceMap;
use crate::sorted_vec::SortedMap;
use std::rc::Rc;

/// Identifies a request, and the lock it becomes once granted (a lock is a granted request).
pub type RequestId = u64;

/// The spec's `LockMode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LockMode {
    #[default]
    Exclusive,
    Shared,
}

impl LockMode {
    /// The WebIDL enum value.
    pub fn as_str(self) -> &'static str {
        match self {
            LockMode::Exclusive => "exclusive",
            LockMode::Shared => "shared",
        }
    }
}

/// The spec's `LockOptions` dictionary as the lock manager takes it: every member but `signal`, which
/// lives in JS with the request's callback and promise. Its default is the dictionary's: an exclusive
/// request that waits its turn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockOptions {
    pub mode: LockMode,
    /// Grant now or not at all (spec 4.1 step 3.5).
    pub if_available: bool,
    /// Take the lock from its holders (spec 4.1 step 3.4).
    pub steal: bool,
}

/// A pending lock request (spec 2.5), without the parts that live in JS (callback, promise, signal).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockRequest {
    pub id: RequestId,
    pub client_id: Rc<str>,
    pub name: Rc<str>,
    pub mode: LockMode,
}

/// What the caller must do after an algorithm ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Request `id` was granted: it is now a held lock; invoke its callback with a `Lock`.
    Granted(RequestId),
    /// `ifAvailable` request `id` was not grantable: invoke its callback with `null` (spec 4.1 step 3.5.1).
    NotAvailable(RequestId),
    /// Held lock `id` was stolen: reject its released promise with an `AbortError` (spec 4.1 step 3.4.1).
    Stolen(RequestId),
}

/// One row of a snapshot: the spec's `LockInfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockInfo {
    pub name: Rc<str>,
    pub mode: LockMode,
    pub client_id: Rc<str>,
}

/// The spec's `LockManagerSnapshot`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub held: Vec<LockInfo>,
    pub pending: Vec<LockInfo>,
}

/// A lock request queue (spec 2.5): requests in the order they will be considered for a grant.
///
/// A `Vec` whose first `head` entries have already left from the front; they are dropped when they
/// make up half of it. So taking the head is O(1) amortised and the live requests are always one
/// contiguous slice (`iter`); only `push_front` (a steal) into a queue whose front has not moved is
/// O(n).
#[derive(Debug, Default)]
struct RequestQueue {
    entries: Vec<LockRequest>,
    head: usize,
}

impl RequestQueue {
    fn front(&self) -> Option<&LockRequest> {
        self.entries.get(self.head)
    }

    fn is_empty(&self) -> bool {
        self.head == self.entries.len()
    }

    fn iter(&self) -> std::slice::Iter<'_, LockRequest> {
        self.entries[self.head..].iter()
    }

    fn push_back(&mut self, request: LockRequest) {
        self.entries.push(request);
    }

    fn push_front(&mut self, request: LockRequest) {
        if self.head > 0 {
            self.head -= 1;
            self.entries[self.head] = request;
        } else {
            self.entries.insert(0, request);
        }
    }

    fn pop_front(&mut self) -> Option<LockRequest> {
        let request = self.front()?.clone();
        self.head += 1;
        if self.head * 2 > self.entries.len() {
            self.compact();
        }
        Some(request)
    }

    /// Keeps the live requests that `keep` selects, in order, and drops the entries that have left.
    fn retain(&mut self, keep: &mut dyn FnMut(&LockRequest) -> bool) {
        let mut left = self.head;
        self.entries.retain(|r| {
            if left == 0 {
                return keep(r);
            }
            left -= 1;
            false
        });
        self.head = 0;
    }

    /// Drops the entries that have left.
    fn compact(&mut self) {
        self.retain(&mut |_| true);
    }
}

/// Per resource name: the lock request queue and a summary of the held locks of that name.
#[derive(Debug, Default)]
struct Resource {
    queue: RequestQueue,
    /// Position of this name in the lock request queue map (an ordered map, spec 2.5).
    map_order: u64,
    held_exclusive: u32,
    held_shared: u32,
}

/// A held lock: the request it came from and its position in the held lock set.
#[derive(Debug)]
struct HeldLock {
    request: LockRequest,
    order: u64,
}

/// A request the manager knows, by id: waiting in the queue of a name, or held.
#[derive(Debug)]
enum Tracked {
    Pending(Rc<str>),
    Held(HeldLock),
}

/// A lock manager (spec 2.2): the held lock set and the lock request queue map.
///
/// The held lock set is an ordered set: the held entries of `requests` (by id), each with its grant
/// order; the same map has the name of each pending request. Its order is gathered when asked for
/// ([`LockManager::held_where`]: queries, steals and terminations), so a grant or a release updates
/// one map.
///
/// Every order gathered here (held-set order, queue-map order) sorts `(key, position)` pairs whose
/// keys, a grant order or a map order, are unique: an unstable sort then gives the one order every
/// replica computes.
/// Names whose queue is empty and that hold no lock are dropped from the map, so memory follows the
/// live state; a name that comes back is appended at the end of the map, as a new key would be.
#[derive(Debug, Default)]
pub struct LockManager {
    resources: SortedMap<Rc<str>, Resource>,
    requests: SequenceMap<RequestId, Tracked>,
    held_count: usize,
    next_order: u64,
}

/// Outcome of [`LockManager::request_lock`] when the arguments break the manager's own rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// The id is already pending or held.
    DuplicateId(RequestId),
}

impl LockManager {
    pub fn new() -> Self {
        Self::default()
    }

    fn tick(&mut self) -> u64 {
        self.next_order += 1;
        self.next_order
    }

    /// Spec 2.5, "get the lock request queue": the resource for `name`, created (and so appended to the
    /// map's order) when missing.
    fn resource_mut(&mut self, name: &Rc<str>) -> &mut Resource {
        let next_order = &mut self.next_order;
        self.resources.entry(name.clone()).or_insert_with(|| {
            *next_order += 1;
            Resource {
                map_order: *next_order,
                ..Resource::default()
            }
        })
    }

    fn forget_if_idle(&mut self, name: &Rc<str>) {
        if let Some(r) = self.resources.get(name)
            && r.queue.is_empty()
            && r.held_exclusive == 0
            && r.held_shared == 0
        {
            self.resources.remove(name);
        }
    }

    /// Spec 2.5, "grantable": `request` (queued or about to be) can be granted now.
    fn is_grantable(resource: &Resource, request_id: RequestId, mode: LockMode) -> bool {
        if let Some(first) = resource.queue.front()
            && first.id != request_id
        {
            return false;
        }
        match mode {
            LockMode::Exclusive => resource.held_exclusive == 0 && resource.held_shared == 0,
            LockMode::Shared => resource.held_exclusive == 0,
        }
    }

    /// Spec 4.1, "request a lock", step 3 (the part run on the lock task queue): request `id` of client
    /// `client_id` for `name`. The caller has already rejected the `options` that request() forbids
    /// together (steps 5 to 9).
    #[must_use = "the decisions are the caller's to carry out"]
    pub fn request_lock(
        &mut self,
        id: RequestId,
        client_id: Rc<str>,
        name: Rc<str>,
        options: LockOptions,
    ) -> Result<Vec<Decision>, RequestError> {
        if self.requests.contains_key(&id) {
            return Err(RequestError::DuplicateId(id));
        }
        let mut decisions = Vec::new();
        let request = LockRequest {
            id,
            client_id,
            name: name.clone(),
            mode: options.mode,
        };
        if options.steal {
            // Step 3.4: release every held lock of this name, rejecting their released promises.
            for held in self.held_ids_where(&|r| *r.name == *name) {
                self.remove_held(held);
                decisions.push(Decision::Stolen(held));
            }
            self.requests.insert(id, Tracked::Pending(name.clone()));
            self.resource_mut(&name).queue.push_front(request);
        } else {
            // Step 3.5.
            let resource = self.resource_mut(&name);
            if options.if_available && !Self::is_grantable(resource, id, options.mode) {
                decisions.push(Decision::NotAvailable(id));
                self.forget_if_idle(&name);
                return Ok(decisions);
            }
            self.requests.insert(id, Tracked::Pending(name.clone()));
            self.resource_mut(&name).queue.push_back(request);
        }
        // Step 3.6.
        self.process_lock_request_queue(&name, &mut decisions);
        Ok(decisions)
    }

    /// Spec 4.2, "release the lock": remove lock `id` from the held lock set and process its queue.
    ///
    /// Releasing a lock that is not held (already stolen, or never granted) changes nothing but still
    /// processes the queue, as the spec's steps do; it returns no decision in that case.
    #[must_use = "the decisions are the caller's to carry out"]
    pub fn release_lock(&mut self, id: RequestId) -> Vec<Decision> {
        let mut decisions = Vec::new();
        if let Some(name) = self.remove_held(id) {
            self.process_lock_request_queue(&name, &mut decisions);
            self.forget_if_idle(&name);
        }
        decisions
    }

    /// Spec 4.3, "abort the request": remove request `id` from its queue and process that queue.
    ///
    /// Returns `None` if `id` was not pending (already granted, or unknown): the caller then knows the
    /// abort lost the race with a grant.
    #[must_use = "the decisions are the caller's to carry out"]
    pub fn abort_request(&mut self, id: RequestId) -> Option<Vec<Decision>> {
        let Some(Tracked::Pending(name)) = self.requests.get(&id) else {
            return None;
        };
        let name = name.clone();
        self.requests.remove(&id);
        let mut decisions = Vec::new();
        let resource = self
            .resources
            .get_mut(&name)
            .expect("pending name has a queue");
        resource.queue.retain(&mut |r| r.id != id);
        self.process_lock_request_queue(&name, &mut decisions);
        self.forget_if_idle(&name);
        Some(decisions)
    }

    /// Spec 4.4, "process the lock request queue" for `name`: grant from the head while grantable.
    fn process_lock_request_queue(&mut self, name: &Rc<str>, decisions: &mut Vec<Decision>) {
        loop {
            let Some(resource) = self.resources.get_mut(name) else {
                return;
            };
            let Some(head) = resource.queue.front() else {
                return;
            };
            if !Self::is_grantable(resource, head.id, head.mode) {
                return;
            }
            let request = resource.queue.pop_front().expect("head exists");
            match request.mode {
                LockMode::Exclusive => resource.held_exclusive += 1,
                LockMode::Shared => resource.held_shared += 1,
            }
            let order = self.tick();
            let id = request.id;
            self.held_count += 1;
            // Its pending entry becomes the held one.
            self.requests
                .insert(id, Tracked::Held(HeldLock { request, order }));
            decisions.push(Decision::Granted(id));
        }
    }

    /// Removes a held lock from the held lock set; returns its name if it was held.
    fn remove_held(&mut self, id: RequestId) -> Option<Rc<str>> {
        self.held(id)?;
        let Some(Tracked::Held(lock)) = self.requests.remove(&id) else {
            unreachable!("checked above")
        };
        self.held_count -= 1;
        let resource = self
            .resources
            .get_mut(&lock.request.name)
            .expect("held name has a resource");
        match lock.request.mode {
            LockMode::Exclusive => resource.held_exclusive -= 1,
            LockMode::Shared => resource.held_shared -= 1,
        }
        Some(lock.request.name)
    }

    /// Spec 2.6, "terminate remaining locks and requests" for `client_id`: abort its requests, then
    /// release its locks. Returns the decisions for the other clients' requests.
    ///
    /// All of the client's requests leave their queues before any queue is processed, so none of them
    /// can be granted half-way through (the spec's sequential steps would grant and at once release it).
    #[must_use = "the decisions are the caller's to carry out"]
    pub fn terminate_client(&mut self, client_id: &str) -> Vec<Decision> {
        let mut touched: Vec<Rc<str>> = Vec::new();
        let mut removed: Vec<RequestId> = Vec::new();
        for (name, resource) in self.resources.iter_mut() {
            let before = removed.len();
            resource.queue.retain(&mut |r| {
                let mine = &*r.client_id == client_id;
                if mine {
                    removed.push(r.id);
                }
                !mine
            });
            if removed.len() != before {
                touched.push(name.clone());
            }
        }
        for id in removed {
            self.requests.remove(&id);
        }
        for id in self.held_ids_where(&|r| &*r.client_id == client_id) {
            if let Some(name) = self.remove_held(id) {
                touched.push(name);
            }
        }
        // In queue-map order, not the name order (which differs from it between contexts): every
        // replica must grant in the same order, or their held-set orders (and so query() output) drift
        // apart. Every touched name still has its resource here.
        let mut decisions = Vec::new();
        for name in &self.in_map_order(touched.iter()) {
            self.process_lock_request_queue(name, &mut decisions);
            self.forget_if_idle(name);
        }
        decisions
    }

    /// The held locks whose request `pick` selects, in held-set order (grant order). Gathered in id
    /// order, which is grant order in the common case (requests are mostly granted in the order they
    /// were made); otherwise sorted by grant order.
    fn held_where(&self, pick: &dyn Fn(&LockRequest) -> bool) -> Vec<&HeldLock> {
        let mut held: Vec<&HeldLock> = Vec::new();
        let mut in_order = true;
        for tracked in self.requests.values() {
            if let Tracked::Held(lock) = tracked
                && pick(&lock.request)
            {
                in_order &= held.last().is_none_or(|last| last.order < lock.order);
                held.push(lock);
            }
        }
        if in_order {
            return held;
        }
        let mut order: Vec<(u64, u64)> = Vec::new();
        for (i, lock) in held.iter().enumerate() {
            order.push((lock.order, i as u64));
        }
        order.sort_unstable();
        let mut sorted = Vec::new();
        for (_, i) in order {
            sorted.push(held[i as usize]);
        }
        sorted
    }

    /// The ids of [`LockManager::held_where`].
    fn held_ids_where(&self, pick: &dyn Fn(&LockRequest) -> bool) -> Vec<RequestId> {
        let mut ids = Vec::new();
        for lock in self.held_where(pick) {
            ids.push(lock.request.id);
        }
        ids
    }

    /// The names (each of which has a resource) in queue-map order, without repeats.
    fn in_map_order<'a>(&self, names: impl Iterator<Item = &'a Rc<str>>) -> Vec<Rc<str>> {
        let mut order: Vec<(u64, u64)> = Vec::new();
        for name in names {
            let i = self
                .resources
                .index_of(name)
                .expect("a name with a resource");
            order.push((self.resources.at(i).1.map_order, i as u64));
        }
        order.sort_unstable();
        let mut sorted = Vec::new();
        let mut last = None;
        for (_, i) in order {
            if last != Some(i) {
                sorted.push(self.resources.at(i as usize).0.clone());
                last = Some(i);
            }
        }
        sorted
    }

    /// Spec 4.5, "snapshot the lock state": pending requests in queue-map order, then held locks in
    /// held-set order.
    pub fn snapshot_lock_state(&self) -> Snapshot {
        let info = |r: &LockRequest| LockInfo {
            name: r.name.clone(),
            mode: r.mode,
            client_id: r.client_id.clone(),
        };
        let mut snapshot = Snapshot::default();
        for r in self.pending_requests() {
            snapshot.pending.push(info(r));
        }
        for r in self.held_requests() {
            snapshot.held.push(info(r));
        }
        snapshot
    }

    /// The held entry of `id`, if it is held.
    fn held(&self, id: RequestId) -> Option<&HeldLock> {
        match self.requests.get(&id) {
            Some(Tracked::Held(h)) => Some(h),
            _ => None,
        }
    }

    /// The held lock `id`, if it is held.
    pub fn held_lock(&self, id: RequestId) -> Option<&LockRequest> {
        self.held(id).map(|h| &h.request)
    }

    /// Whether request `id` is waiting in a queue.
    pub fn is_pending(&self, id: RequestId) -> bool {
        matches!(self.requests.get(&id), Some(Tracked::Pending(_)))
    }

    /// How many locks are held.
    pub fn held_count(&self) -> usize {
        self.held_count
    }

    /// The held locks' requests, in held-set order.
    pub fn held_requests(&self) -> Vec<&LockRequest> {
        let mut requests = Vec::new();
        for lock in self.held_where(&|_| true) {
            requests.push(&lock.request);
        }
        requests
    }

    /// The requests waiting in `name`'s queue, in queue order.
    pub fn queue(&self, name: &Rc<str>) -> impl Iterator<Item = &LockRequest> + '_ {
        self.resources
            .get(name)
            .into_iter()
            .flat_map(|r| r.queue.iter())
    }

    /// Pending requests of every queue, in queue-map order.
    pub fn pending_requests(&self) -> Vec<&LockRequest> {
        // The names with a queue, by map order.
        let mut order: Vec<(u64, u64)> = Vec::new();
        for i in 0..self.resources.len() {
            let resource = self.resources.at(i).1;
            if !resource.queue.is_empty() {
                order.push((resource.map_order, i as u64));
            }
        }
        order.sort_unstable();
        let mut pending = Vec::new();
        for (_, i) in order {
            for r in self.resources.at(i as usize).1.queue.iter() {
                pending.push(r);
            }
        }
        pending
    }

    /// True when nothing is held or pending: the state a context must be in to stay quiet.
    pub fn is_idle(&self) -> bool {
        self.requests.is_empty()
    }
}
