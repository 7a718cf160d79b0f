//! The log transport's inputs, as the participant takes them: one typed input, [`Found`], decoded once
//! by the log writer ([`crate::protocol::log_writer`]) from what the browser's IndexedDB and the log's
//! carrier gave, and the log's rules for following it ([`LogReader`](super::log_reader::LogReader)
//! keeps the keys). Nothing here runs over the broadcast transport: every input is ignored unless the
//! context is in the protocol over the log.

use super::{Effect, Participant, Transport};
use crate::protocol::log_writer::Found;
use crate::protocol::wire::{self, Body, Decoded, KIND_JOIN, Value, decode_versioned};

impl Participant {
    /// One finding of the log writer. `Found::Unreachable` is the edge's (the context refuses): it
    /// changes nothing here.
    pub fn handle_log(&mut self, now: u64, found: Found) {
        match found {
            Found::Identity(log) => self.handle_log_identity(log),
            Found::Started(last) => self.handle_log_started(now, last),
            Found::Entry(key, data) => self.handle_log_entry(now, key, &data),
            Found::Read(floor) => self.handle_log_read(now, floor),
            Found::Carried(data) => self.handle_carried(now, &data),
            Found::Poke => self.handle_log_poke(now),
            Found::Gap => self.handle_missed_messages(now),
            Found::Unreachable => {}
        }
    }

    /// Log transport: the log's last key before this context started reading it (the answer to
    /// [`Effect::OpenChannels`]).
    fn handle_log_started(&mut self, now: u64, last: u64) {
        self.log.start(last);
        self.follow_log(now);
        self.after(now);
    }

    /// Log transport: an entry of the log arrived, from this context's own append once committed, from
    /// the carrier, or from a read. Entries are applied in key order, each once, whatever order they
    /// come in.
    fn handle_log_entry(&mut self, now: u64, key: u64, values: &[Value]) {
        if self.log_is_followed()
            && let Some(values) = self.log.arrive(key, values)
        {
            self.apply_values(now, &values);
        }
        self.after_log_entry(now);
    }

    /// Log transport: a transaction over the log (a read, the start's or a later one, before its
    /// answer; or an append, before its entry) found the identity the log was given with its database.
    /// Carrier frames are taken only of that log (see [`crate::protocol::log_order`]).
    fn handle_log_identity(&mut self, log: u64) {
        self.log.identify(log);
    }

    fn after_log_entry(&mut self, now: u64) {
        if self.log_is_followed() {
            self.follow_log(now);
        }
        self.after(now);
    }

    /// Log transport: the read of [`Effect::ReadLog`] ended (its entries came through
    /// [`Found::Entry`]); `floor` is the greatest key the log has deleted. A floor past
    /// the position means this context missed messages (it fell behind a trim): it steps out and joins
    /// again (see [`Participant::handle_missed_messages`]).
    fn handle_log_read(&mut self, now: u64, floor: u64) {
        if self.log.read_done(floor) && self.log_is_followed() {
            self.handle_missed_messages(now);
            return;
        }
        if self.log_is_followed() {
            self.follow_log(now);
        }
        self.after(now);
    }

    /// Log transport without a carrier: another document appended to the log (a localStorage poke).
    fn handle_log_poke(&mut self, now: u64) {
        self.log.poked();
        self.after(now);
    }

    /// Log transport: a message arrived on the log's carrier (a BroadcastChannel), or a farewell through
    /// a `storage` event where there is no carrier. A carrier frame ([`wire::decode_entry`]) is an
    /// entry of the log, taken only if it names the log this context reads. A `Leave` of sequence
    /// number 0 is another context's farewell (docs/PROTOCOL.md §8), which its own append may not
    /// outlive: any active member appends it for its sender. It is exactly what its sender would have
    /// sent, and its sender believes in no lock any more (it is gone, or stepped out as it entered the
    /// back/forward cache); it takes no position, so where in the log a copy lands, and how many
    /// copies do, changes nothing (a second `Leave` is void). An older
    /// version's `Join` is answered as on the broadcast transport, and its other frames make this
    /// context read the log; a newer version's message retires this context.
    fn handle_carried(&mut self, now: u64, values: &[Value]) {
        if let Some((key, log, data)) = wire::decode_entry(values, self.core.version()) {
            if self.log_is_followed()
                && let Some(values) = self.log.carried(log, key, data)
            {
                self.apply_values(now, &values);
            }
            self.after_log_entry(now);
            return;
        }
        match decode_versioned(values, self.core.version()) {
            Some(Decoded::Ours(m))
                if self.is_active_member()
                    && m.body == Body::Leave
                    && m.seq == 0
                    && &m.sender.client != self.core.client() =>
            {
                self.core.queue(m);
            }
            Some(Decoded::Foreign { version, .. }) if version > self.core.version() => {
                self.retire(version)
            }
            Some(Decoded::Foreign { version, kind, .. })
                if version < self.core.version() && kind == KIND_JOIN && self.log_is_followed() =>
            {
                self.core.send(Body::Alive);
            }
            // An older version's frame of an entry: its key is not read here, so no hole shows it. A
            // read of the log applies it at its place (§9's rules for an older version's messages).
            Some(Decoded::Foreign { .. }) if self.log_is_followed() => self.log.poked(),
            _ => {}
        }
        self.after(now);
    }

    /// Whether the log's entries are for this context now: it is in the protocol over the log.
    fn log_is_followed(&self) -> bool {
        matches!(self.core.config().transport, Transport::Log(_))
            && !self.phase.is_detached()
            && self.phase.lives()
    }

    /// Applies the log's entries that are next in key order, and notes a missing key.
    fn follow_log(&mut self, now: u64) {
        while let Some(values) = self.log.next() {
            self.apply_values(now, &values);
        }
        self.log.note_hole(now);
    }

    /// Starts the reads of the log the transport needs (see [`LogReader::policy`]). Returns when to look
    /// again.
    pub(super) fn log_policy(&mut self, now: u64) -> Option<u64> {
        let Transport::Log(wake) = self.core.config().transport else {
            return None;
        };
        if !self.log_is_followed() {
            self.log.stop_polling();
            return None;
        }
        let waiting =
            self.core.has_interest() || self.core.has_queries() || self.phase.is_joining();
        let (read, next) = self.log.policy(self.core.config(), wake, waiting, now);
        if let Some(after) = read {
            self.core.emit(Effect::ReadLog { after });
        }
        if let Some(s) = self.phase.synced()
            && s.is_active()
            && let Some(upto) = self.log.trim_to(
                s.replica().is_sole_member(&self.core.member_key()),
                self.core.config().log_keep,
            )
        {
            self.core.emit(Effect::TrimLog { upto });
        }
        next
    }
}
