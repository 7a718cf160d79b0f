//! The order of the log transport (docs/PROTOCOL.md §12): entries of the origin's log in IndexedDB,
//! handed to the participant in key order, each once, whatever order they arrive in.
//!
//! Over the log, a message's place in the origin's sequence is its key. IndexedDB runs the read/write
//! transactions of an origin's connections on one object store one at a time, and each append takes the
//! key generator's next key (an aborted append gives its key back), so the committed keys are dense
//! and in commit order: when the entry of key *k* has committed, so has every entry below *k*, unless a
//! trim deleted it (then the log's *floor*, the greatest key deleted, is at least that key).
//!
//! An entry reaches a context in one of three ways: its own append, once committed; the
//! BroadcastChannel that carries every committed entry to the other contexts (its *carrier*, in
//! whatever order that channel delivers: WebKit hands a post to the sender's own process first, so
//! two contexts may see two orders); or a read of the log from the position on. The order the
//! participant applies never depends on which came first: [`LogOrder`] hands on the entry of key
//! *position + 1* and nothing else. A missing key (its carrier message is late, or lost with a writer
//! that crashed between its commit and its post) shows as an entry held *ahead*: the participant then
//! reads the log, which holds every key below one that has committed.
//!
//! Keys name entries only within one log: when the log's database is deleted and made anew (a page's
//! logout code wiping every database), its keys start at 1 again. So each log has an *identity*, made
//! with its database, and every carrier frame names the log of its entry; a reader takes a frame only of
//! the log it reads ([`LogOrder::carried`]), and knows that log's identity from its own reads of it
//! ([`LogOrder::identify`]). A frame of another log, or one that comes before the reader knows its
//! log, is dropped: a read of the log brings whatever it carried.

use super::wire::Value;

/// The most entries a reader keeps ahead of its position, and the most slots they may have together.
/// Past either, an entry that arrives ahead is dropped rather than kept: a read of the log, from the
/// position on, brings it again (it is in the log), so nothing is applied out of order and nothing is
/// lost; a reader that a carrier floods (or that cannot start) holds a bounded amount of memory.
pub const AHEAD_ENTRIES: usize = 1024;
pub const AHEAD_SLOTS: usize = 1 << 18;

/// One context's reader of the log.
#[derive(Default)]
pub(super) struct LogOrder {
    /// The key of the last entry handed on; `None` until the log said where this reader starts.
    position: Option<u64>,
    /// Entries that arrived ahead of the position (or before the start). Only what a carrier delivers
    /// out of key order waits here, and the next key fills the hole within a hop or a read: a few
    /// entries, searched one by one (a read hands on its entries in key order, each at once). At most
    /// [`AHEAD_ENTRIES`] of at most [`AHEAD_SLOTS`] slots in all.
    ahead: Vec<(u64, Vec<Value>)>,
    /// The slots of the entries held ahead.
    ahead_slots: usize,
    /// The identity of the log this reader reads, once a read of it told (0 is no log's).
    log: u64,
    /// A read of the log is under way.
    reading: bool,
    /// Another read was wanted while one was under way: it starts when that one ends.
    read_again: bool,
    /// The greatest key held ahead when the read under way started. That entry had committed before
    /// the read's transaction was made (it arrived first), so the read sees every key below it that
    /// the log still has: one still missing after the read never comes.
    covered: u64,
}

/// What a read of the log told beyond its entries.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ReadEnd {
    /// Nothing was lost.
    Complete,
    /// The log was trimmed past this reader's position: the entries up to the floor are gone for it,
    /// and it goes on from the floor.
    Trimmed,
    /// A key below an entry held ahead is still missing after the read: it never comes (the log no
    /// longer has it, or the entry held ahead is not of this log). The reader cannot go on.
    Missing,
}

impl LogOrder {
    /// The log's last key before this reader existed. A context starts reading before it posts its
    /// `Join` (the read's transaction is made first, so IndexedDB runs it first): everything from the
    /// `Join` on comes after `last`, and what came before reaches the context through a state transfer.
    pub fn start(&mut self, last: u64) {
        if self.position.is_none() {
            self.position = Some(last);
            self.drop_through(last);
        }
    }

    /// A read of the log (the start, or any later read) found that the log it reads has identity `log`.
    /// The identity may change while the database stays the same (where an older version's trim
    /// overwrote it, and an append made it anew): what was taken meanwhile is of this database, which is
    /// all a reader ever reads (its context reads another database only through a new reader).
    pub fn identify(&mut self, log: u64) {
        self.log = log;
    }

    /// A carrier frame of the entry of key `key` of log `log` arrived: taken as [`LogOrder::arrive`]
    /// does if `log` is the log this reader reads, dropped otherwise (a late frame of a deleted log,
    /// whose keys name other entries of the new one; or one that came before this reader knew its log).
    pub fn carried(&mut self, log: u64, key: u64, data: Vec<Value>) -> Option<Vec<Value>> {
        if !self.reads(log) {
            return None;
        }
        self.arrive(key, data)
    }

    /// Whether `log` is the identity of the log this reader reads, as far as its reads told.
    pub fn reads(&self, log: u64) -> bool {
        log != 0 && log == self.log
    }

    /// An entry arrived (from any source): returns it if it is the next in key order (the position moves
    /// past it), and keeps it otherwise. One at or below the position was handed on already, and is
    /// dropped.
    pub fn arrive(&mut self, key: u64, data: Vec<Value>) -> Option<Vec<Value>> {
        match self.position {
            Some(p) if key == p + 1 => {
                self.position = Some(key);
                return Some(data);
            }
            Some(p) if key <= p => {}
            _ => {
                let room = self.ahead.len() < AHEAD_ENTRIES
                    && self.ahead_slots + data.len() <= AHEAD_SLOTS;
                if room && !self.ahead.iter().any(|(k, _)| *k == key) {
                    self.ahead_slots += data.len();
                    self.ahead.push((key, data));
                }
            }
        }
        None
    }

    /// The next entry in key order among those kept, if it has arrived; the position moves past it.
    pub fn next(&mut self) -> Option<Vec<Value>> {
        let next = self.position? + 1;
        let at = self.ahead.iter().position(|(k, _)| *k == next)?;
        self.position = Some(next);
        let (_, data) = self.ahead.swap_remove(at);
        self.ahead_slots -= data.len();
        Some(data)
    }

    /// Whether an entry is held ahead of a missing key (after [`LogOrder::next`] has handed on all it
    /// could): the missing one's carrier message is late or lost, and a read of the log would find it.
    pub fn has_hole(&self) -> bool {
        self.position.is_some() && !self.ahead.is_empty()
    }

    /// Starts a read of the log: the key to read after, or `None` while a read is under way (one more
    /// starts when it ends, see [`LogOrder::read_done`]) or before the start.
    pub fn read_from(&mut self) -> Option<u64> {
        let position = self.position?;
        if self.reading {
            self.read_again = true;
            return None;
        }
        self.reading = true;
        self.read_again = false;
        self.covered = self.ahead.iter().map(|(k, _)| *k).max().unwrap_or(0);
        Some(position)
    }

    /// A read ended; its entries have arrived (and every one next in key order was handed on).
    /// `floor` is the greatest key the log has deleted. Whether another read was asked for meanwhile
    /// is [`LogOrder::wants_read`].
    pub fn read_done(&mut self, floor: u64) -> ReadEnd {
        self.reading = false;
        match self.position {
            Some(p) if floor > p => {
                self.position = Some(floor);
                self.drop_through(floor);
                ReadEnd::Trimmed
            }
            Some(p) if p < self.covered => ReadEnd::Missing,
            _ => ReadEnd::Complete,
        }
    }

    /// A read was asked for while the last one was under way.
    pub fn wants_read(&self) -> bool {
        self.read_again && !self.reading
    }

    /// The position, for tests and the simulation: every key up to it has been handed on.
    pub fn position(&self) -> Option<u64> {
        self.position
    }

    fn drop_through(&mut self, key: u64) {
        self.ahead.retain(|(k, _)| *k > key);
        self.ahead_slots = self.ahead.iter().map(|(_, data)| data.len()).sum();
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use proptest::prelude::*;

    use super::{AHEAD_ENTRIES, LogOrder, ReadEnd};
    use crate::protocol::wire::Value;

    fn entry(key: u64) -> Vec<Value> {
        vec![Value::Num(key as f64)]
    }

    fn key_of(data: &[Value]) -> u64 {
        let Value::Num(n) = data[0] else { panic!() };
        n as u64
    }

    /// Hands `key`'s entry to `order`, then takes every entry that is next in key order.
    fn arrive(order: &mut LogOrder, key: u64, out: &mut Vec<u64>) {
        if let Some(data) = order.arrive(key, entry(key)) {
            out.push(key_of(&data));
        }
        drain(order, out);
    }

    fn drain(order: &mut LogOrder, out: &mut Vec<u64>) {
        while let Some(data) = order.next() {
            out.push(key_of(&data));
        }
    }

    #[test]
    fn hands_on_in_key_order_and_reads_across_a_missing_key() {
        let mut order = LogOrder::default();
        let mut out = Vec::new();
        arrive(&mut order, 5, &mut out);
        order.start(3);
        assert!(order.has_hole(), "key 4 is missing");
        assert_eq!(order.read_from(), Some(3));
        drain(&mut order, &mut out);
        assert!(out.is_empty());
        arrive(&mut order, 4, &mut out);
        assert_eq!(order.read_done(0), ReadEnd::Complete);
        drain(&mut order, &mut out);
        assert_eq!(out, [4, 5]);
        assert!(!order.has_hole());
    }

    #[test]
    fn entries_before_the_start_are_not_for_this_reader() {
        let mut order = LogOrder::default();
        let mut out = Vec::new();
        arrive(&mut order, 2, &mut out);
        arrive(&mut order, 3, &mut out);
        order.start(2);
        drain(&mut order, &mut out);
        assert_eq!(out, [3]);
        arrive(&mut order, 3, &mut out);
        drain(&mut order, &mut out);
        assert_eq!(
            out,
            [3],
            "an entry handed on once is dropped when it arrives again"
        );
    }

    #[test]
    fn one_read_at_a_time_and_one_more_if_asked_meanwhile() {
        let mut order = LogOrder::default();
        assert_eq!(order.read_from(), None, "not started");
        order.start(0);
        assert_eq!(order.read_from(), Some(0));
        assert_eq!(order.read_from(), None);
        assert!(!order.wants_read(), "not while the first is under way");
        order.read_done(0);
        assert!(order.wants_read(), "the read asked for during the first");
        assert_eq!(order.read_from(), Some(0));
        order.read_done(0);
        assert!(!order.wants_read());
    }

    #[test]
    fn a_floor_past_the_position_is_a_gap() {
        let mut order = LogOrder::default();
        let mut out = Vec::new();
        order.start(2);
        arrive(&mut order, 9, &mut out);
        arrive(&mut order, 7, &mut out);
        assert_eq!(order.read_from(), Some(2));
        assert_eq!(order.read_done(7), ReadEnd::Trimmed);
        drain(&mut order, &mut out);
        assert_eq!(out, Vec::<u64>::new(), "8 is still missing");
        arrive(&mut order, 8, &mut out);
        drain(&mut order, &mut out);
        assert_eq!(out, [8, 9]);
    }

    fn text(x: &str) -> Vec<Value> {
        vec![Value::Str(x.into())]
    }

    /// The log's database was deleted and made anew (keys start at 1 again) while a frame of the old
    /// log was on its way: it names the old log, and is dropped instead of being applied in place of
    /// the new log's entry of its key (which would then be dropped as handed on already).
    #[test]
    fn a_late_frame_of_a_deleted_log_is_not_applied_in_place_of_the_new_logs_entry() {
        const OLD: u64 = 7;
        const NEW: u64 = 9;
        let mut order = LogOrder::default();
        order.identify(NEW);
        order.start(0);
        assert!(order.carried(OLD, 3, text("old entry 3")).is_none());
        assert!(!order.has_hole(), "nothing of another log waits ahead");
        let mut out = Vec::new();
        for k in 1..=3 {
            let data = text(&format!("new entry {k}"));
            out.extend(if k == 2 {
                order.carried(NEW, k, data)
            } else {
                order.arrive(k, data)
            });
            while let Some(d) = order.next() {
                out.push(d);
            }
        }
        assert_eq!(
            out,
            [
                text("new entry 1"),
                text("new entry 2"),
                text("new entry 3")
            ]
        );
    }

    #[test]
    fn frames_before_the_log_is_known_or_of_another_log_are_not_kept() {
        let mut order = LogOrder::default();
        let mut out = Vec::new();
        assert!(order.carried(5, 2, entry(2)).is_none());
        order.start(0);
        arrive(&mut order, 3, &mut out);
        order.identify(5);
        assert!(order.carried(6, 4, entry(4)).is_none());
        assert!(order.carried(0, 4, entry(4)).is_none(), "0 is no log's");
        assert!(order.carried(5, 5, entry(5)).is_none(), "kept ahead");
        order.identify(8);
        arrive(&mut order, 1, &mut out);
        arrive(&mut order, 2, &mut out);
        assert_eq!(out, [1, 2, 3], "4 is missing: none of its frames was taken");
        out.extend(order.carried(8, 4, entry(4)).map(|data| key_of(&data)));
        drain(&mut order, &mut out);
        assert_eq!(
            out,
            [1, 2, 3, 4, 5],
            "what was taken before the identity changed stays"
        );
    }

    /// A carrier that floods a reader (or a reader that cannot start) fills at most the bound; what
    /// did not fit comes again with a read, in order.
    #[test]
    fn entries_held_ahead_are_bounded_and_a_read_brings_the_rest() {
        let mut order = LogOrder::default();
        let mut out = Vec::new();
        order.start(0);
        let last = AHEAD_ENTRIES as u64 + 500;
        for k in (2..=last).rev() {
            arrive(&mut order, k, &mut out);
        }
        assert_eq!(order.ahead.len(), AHEAD_ENTRIES);
        let big = vec![Value::Num(0.0); super::AHEAD_SLOTS];
        assert!(order.arrive(last + 1, big).is_none());
        assert_eq!(order.ahead.len(), AHEAD_ENTRIES, "no room for more slots");
        assert_eq!(order.read_from(), Some(0));
        for k in 1..=last {
            arrive(&mut order, k, &mut out);
        }
        assert_eq!(order.read_done(0), ReadEnd::Complete);
        assert_eq!(out, (1..=last).collect::<Vec<_>>());
        assert!(!order.has_hole());
        assert_eq!(order.ahead_slots, 0);
    }

    #[test]
    fn a_key_still_missing_after_the_read_behind_it_never_comes() {
        let mut order = LogOrder::default();
        let mut out = Vec::new();
        order.start(2);
        arrive(&mut order, 5, &mut out);
        assert_eq!(order.read_from(), Some(2));
        // The read brings 3, and nothing more: 4 is not in the log, though 5 arrived before the read.
        arrive(&mut order, 3, &mut out);
        assert_eq!(order.read_done(0), ReadEnd::Missing);
        assert_eq!(out, [3]);
    }

    #[test]
    fn an_entry_that_arrives_during_a_read_is_not_the_reads_to_bring() {
        let mut order = LogOrder::default();
        let mut out = Vec::new();
        order.start(2);
        assert_eq!(order.read_from(), Some(2));
        // 5 committed after the read's transaction was made: the read need not see 4 either.
        arrive(&mut order, 5, &mut out);
        arrive(&mut order, 3, &mut out);
        assert_eq!(order.read_done(0), ReadEnd::Complete);
        assert_eq!(order.read_from(), Some(3));
        arrive(&mut order, 4, &mut out);
        assert_eq!(order.read_done(0), ReadEnd::Complete);
        assert_eq!(out, [3, 4, 5]);
    }

    proptest! {
        /// Whatever order entries arrive in, with duplicates and reads that return a prefix of the
        /// committed log, the reader hands on exactly the keys after its start, in order, once each.
        #[test]
        fn any_arrival_order_gives_the_log_order(
            start in 0u64..5,
            count in 1u64..40,
            arrivals in proptest::collection::vec((0u64..45, any::<bool>()), 0..120),
        ) {
            let mut order = LogOrder::default();
            let mut out = Vec::new();
            let mut started = false;
            for (key, read) in arrivals {
                if read && started {
                    // A read returns every committed key after the position.
                    if let Some(from) = order.read_from() {
                        for k in from + 1..=start + count {
                            arrive(&mut order, k, &mut out);
                        }
                        order.read_done(0);
                    }
                } else if key >= 1 && key <= start + count {
                    arrive(&mut order, key, &mut out);
                }
                if !started && key % 3 == 0 {
                    order.start(start);
                    started = true;
                }
                drain(&mut order, &mut out);
                prop_assert!(out.windows(2).all(|w| w[1] == w[0] + 1));
                prop_assert!(out.first().is_none_or(|&k| k == start + 1));
            }
            order.start(start);
            for k in 1..=start + count {
                arrive(&mut order, k, &mut out);
            }
            drain(&mut order, &mut out);
            prop_assert_eq!(out, (start + 1..=start + count).collect::<Vec<_>>());
        }
    }
}
