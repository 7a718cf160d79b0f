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
    /// The key up to which this reader last asked for the log to be trimmed.
    trimmed: u64,
}

/// A trim is asked for once it would delete at least this many entries: one transaction for many.
pub const TRIM_STEP: u64 = 64;

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

    /// A carrier frame of log `log` arrived (see [`LogOrder::carried`]). One of another identity than
    /// the reads told makes this context read the log: the identity may have been made anew in the
    /// same database (where an older version's trim overwrote it), and the read tells which.
    pub fn carried(&mut self, log: u64, key: u64, values: &[Value]) -> Option<Vec<Value>> {
        self.read_wanted |= !self.order.reads(log);
        self.order.carried(log, key, values.to_vec())
    }

    /// A read found the identity of the log (see [`LogOrder::identify`]).
    pub fn identify(&mut self, log: u64) {
        self.order.identify(log);
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

    /// Where to trim the log now, if anywhere. Entries a member has applied are needed by no one else
    /// once it is the history's sole member (a joiner reads from the log's last key before its `Join`
    /// on: the entries before that come to it in the `State` it joins with), but for the last
    /// [`TRIM_STEP`], kept for a joiner that read its start just before them and whose `Join` this
    /// member has not applied yet; otherwise every member keeps the last `keep` entries it applied
    /// ([`Config::log_keep`]: a member further behind, which cannot have read the log for that many
    /// entries, being frozen, suspended or blocked, finds the floor past its position when it reads
    /// again, and steps out and rejoins). Decided from the log's keys and the history's members alone:
    /// no clock, no membership's age.
    pub fn trim_to(&mut self, sole_member: bool, keep: u64) -> Option<u64> {
        let position = self.order.position()?;
        let to = position.saturating_sub(if sole_member { TRIM_STEP } else { keep });
        (to >= self.trimmed + TRIM_STEP).then(|| {
            self.trimmed = to;
            to
        })
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

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::{LogReader, TRIM_STEP};

    /// Where a reader at `position` would trim (it asked for nothing before).
    fn trim_at(position: u64, sole_member: bool, keep: u64) -> Option<u64> {
        let mut reader = LogReader::new();
        reader.start(position);
        reader.trim_to(sole_member, keep)
    }

    #[test]
    fn the_sole_member_trims_what_it_applied_and_every_member_keeps_its_last_entries() {
        assert_eq!(
            trim_at(2 * TRIM_STEP - 1, true, 1_000),
            None,
            "not worth a transaction"
        );
        assert_eq!(trim_at(500, true, 1_000), Some(500 - TRIM_STEP));
        assert_eq!(
            trim_at(500, false, 1_000),
            None,
            "another member may need them"
        );
        assert_eq!(trim_at(5_000, false, 1_000), Some(4_000));
    }

    #[test]
    fn each_trim_waits_for_a_step_of_entries() {
        let mut reader = LogReader::new();
        reader.start(1_100);
        assert_eq!(reader.trim_to(false, 1_000), Some(100));
        assert_eq!(reader.trim_to(false, 1_000), None);
        for key in 1_101..1_100 + TRIM_STEP {
            assert!(reader.arrive(key, &[]).is_some());
        }
        assert_eq!(reader.trim_to(false, 1_000), None);
        assert!(reader.arrive(1_100 + TRIM_STEP, &[]).is_some());
        assert_eq!(reader.trim_to(false, 1_000), Some(100 + TRIM_STEP));
    }

    #[test]
    fn a_frame_of_another_log_is_dropped_and_asks_for_a_read() {
        use crate::protocol::participant::config::{Config, Wake};
        use crate::protocol::wire::Value;
        let config = Config::default();
        let mut reader = LogReader::new();
        reader.identify(7);
        reader.start(10);
        let entry = [Value::Num(1.0)];
        assert_eq!(reader.policy(&config, Wake::Carrier, true, 0), (None, None));
        assert_eq!(reader.carried(8, 11, &entry), None);
        assert_eq!(reader.policy(&config, Wake::Carrier, true, 0).0, Some(10));
        assert_eq!(reader.carried(7, 11, &entry), Some(entry.to_vec()));
    }
}
