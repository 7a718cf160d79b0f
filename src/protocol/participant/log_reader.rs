//! How a participant reads the log (docs/PROTOCOL.md §12): the log's order restored
//! ([`LogOrder`]), and when to read the log itself.

use crate::protocol::log_order::{LogOrder, ReadEnd};
use crate::protocol::wire::Value;

use super::config::{Config, Wake};
use super::core::earliest;

#[derive(Default)]
pub(super) struct LogReader {
    order: LogOrder,
    /// Since when an entry has waited behind a missing key.
    hole_since: Option<u64>,
    /// A poke asked for a read.
    read_wanted: bool,
    /// Without a carrier: when to read the log next.
    next_poll: Option<u64>,
}

impl LogReader {
    /// A reader that has not started (see [`LogOrder::start`]).
    pub fn new() -> LogReader {
        LogReader::default()
    }

    pub fn position(&self) -> Option<u64> {
        self.order.position()
    }

    pub fn start(&mut self, last: u64) {
        self.order.start(last);
    }

    /// An entry arrived: returns it if it is the next in key order (see [`LogOrder::arrive`]).
    pub fn arrive(&mut self, key: u64, values: &[Value]) -> Option<Vec<Value>> {
        self.order.arrive(key, values.to_vec())
    }

    /// The next entry in key order among those that came early.
    pub fn next(&mut self) -> Option<Vec<Value>> {
        self.order.next()
    }

    /// A read ended with this floor; true if messages were lost for this reader: the floor was past
    /// its position, or a key it waits for is not in the log (see [`ReadEnd`]).
    pub fn read_done(&mut self, floor: u64) -> bool {
        self.order.read_done(floor) != ReadEnd::Complete
    }

    pub fn poked(&mut self) {
        self.read_wanted = true;
    }

    /// Notes whether an entry waits behind a missing key, and since when.
    pub fn note_hole(&mut self, now: u64) {
        if self.order.has_hole() {
            self.hole_since.get_or_insert(now);
        } else {
            self.hole_since = None;
        }
    }

    pub fn stop_polling(&mut self) {
        self.next_poll = None;
    }

    /// The reads of the log the transport needs: behind a missing key (at once without a carrier,
    /// after `log_hole_wait` with one, since the carrier usually brings it within a hop), after a poke,
    /// and every `log_poll` without a carrier while the context `waiting` for something (with polls
    /// only: always). Returns the key to read after, if a read starts now, and when to look again.
    pub fn policy(
        &mut self,
        config: &Config,
        wake: Wake,
        waiting: bool,
        now: u64,
    ) -> (Option<u64>, Option<u64>) {
        let mut read = std::mem::take(&mut self.read_wanted) || self.order.wants_read();
        let mut next = None;
        if let Some(since) = self.hole_since {
            let due = if wake == Wake::Carrier {
                since + config.log_hole_wait
            } else {
                since
            };
            read |= now >= due;
            next = Some(due).filter(|&d| d > now);
        }
        let polls = match wake {
            Wake::Carrier => false,
            Wake::Pokes => waiting,
            Wake::Polls => true,
        };
        if polls {
            let due = *self.next_poll.get_or_insert(now + config.log_poll);
            if now >= due {
                read = true;
                self.next_poll = Some(now + config.log_poll);
            }
            next = earliest(next, self.next_poll);
        } else {
            self.next_poll = None;
        }
        let after = if read { self.order.read_from() } else { None };
        (after, next)
    }
}
