//! The event queue: every event of the simulated origin, at its time in simulated wall-clock time
//! (ms), in the order it was scheduled among events of the same time; the loop that runs them and the
//! checks after each step.

use std::cmp::Reverse;

use super::{Action, Ev, Fault, World};

pub(super) struct Scheduled {
    at: u64,
    seq: u64,
    context: usize,
    ev: Ev,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl World {
    pub fn client_at(&mut self, at: u64, context: usize, action: Action) {
        self.schedule(at, context, Ev::Client(action));
    }

    pub fn fault_at(&mut self, at: u64, context: usize, fault: Fault) {
        self.schedule(at, context, Ev::Fault(fault));
    }

    pub(super) fn schedule(&mut self, at: u64, context: usize, ev: Ev) {
        self.seq += 1;
        self.queue.push(Reverse(Scheduled {
            at,
            seq: self.seq,
            context,
            ev,
        }));
    }

    /// Runs events until the queue is empty, `until` is reached, or a violation is found. Returns
    /// false if it stopped at `until` with events left.
    pub fn run_until(&mut self, until: u64) -> bool {
        while self.violations.is_empty() {
            let Some(Reverse(next)) = self.queue.peek() else {
                return true;
            };
            if next.at > until {
                self.now = until;
                return false;
            }
            self.step();
        }
        true
    }

    /// Runs events until `done` holds; false if the queue ran dry or a violation was found first.
    pub fn run_until_done(&mut self, done: impl Fn(&World) -> bool) -> bool {
        while !done(self) {
            if !self.violations.is_empty() || self.queue.is_empty() {
                return false;
            }
            self.step();
        }
        true
    }

    /// Runs the next event (the queue is not empty).
    pub(super) fn step(&mut self) {
        let Reverse(s) = self.queue.pop().expect("an event");
        self.now = self.now.max(s.at);
        self.steps += 1;
        if self.steps > self.max_steps {
            return self.violation(format!("runaway: more than {} events", self.max_steps));
        }
        self.dispatch(s.context, s.ev);
        if self.deleting {
            self.finish_deletion();
        }
        if self.record.is_some() && self.checking {
            self.check_one_transport();
        }
        if std::mem::take(&mut self.dirty) && self.checking {
            self.check_step();
        }
        if !self.stale.is_empty() && self.checking {
            self.check_stale_beliefs();
        }
    }
}
