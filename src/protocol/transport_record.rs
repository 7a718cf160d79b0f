//! The origin's record of its transport (docs/PROTOCOL.md §2, "the record"): what a context that prefers
//! one transport uses where the origin's first context recorded another.
//!
//! Every browser context reads the record, or writes its preference where there is none, in one
//! read/write transaction before its first join; IndexedDB runs those one at a time (A1′), so every
//! context reads the first writer's value. [`settle`] then gives each context the recorded transport or a
//! refusal, never a third transport: so every context of an origin that decides locks uses the one
//! recorded, with the one recorded wake mode, and two managers never coexist for as long as the record
//! lasts. The record lasts while any context of the origin lives: each keeps its connection to it open and
//! does not give it up on `versionchange`, so a page's deletion of it waits until they are all gone, and a
//! context that starts meanwhile waits behind that deletion (js/transport_choice.js).
//!
//! Pure, so that the browser's edge and the simulation settle with this same code.

/// A transport as the record names it: the stored value is [`Recorded::name`], which never changes
/// (docs/PROTOCOL.md §9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// The broadcast transport: only where the engine is known to give one order (A1).
    Broadcast,
    /// The log, each entry carried by BroadcastChannel.
    Log,
    /// The log without a carrier: documents are poked through storage, workers poll.
    LogBare,
}

/// The record names a transport this context cannot use: it refuses
/// ([`crate::protocol`]'s caller rejects every request, `Refusal::Disagreement` in the browser).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Disagreement;

impl Recorded {
    /// Every transport, in the order the record moves contexts (toward the log, then off the carrier).
    pub const ALL: [Recorded; 3] = [Recorded::Broadcast, Recorded::Log, Recorded::LogBare];

    /// The value stored in the record.
    pub fn name(self) -> &'static str {
        match self {
            Recorded::Broadcast => "broadcast",
            Recorded::Log => "log",
            Recorded::LogBare => "log-bare",
        }
    }

    /// The transport a stored value names; `None` for anything else (no version writes another).
    pub fn parse(value: &str) -> Option<Recorded> {
        Recorded::ALL.into_iter().find(|r| r.name() == value)
    }
}

/// What a context that prefers `preferred` uses where the origin's record says `recorded`.
///
/// A record only ever moves a context toward the log (a broadcast context adopts either log), and from
/// the carried log to the log without a carrier (a context with a carrier can leave it unused); never
/// toward the broadcast transport, whose order only an engine known to give A1 may rely on, nor onto a
/// carrier a realm does not have. Every other pair disagrees.
pub fn settle(preferred: Recorded, recorded: Recorded) -> Result<Recorded, Disagreement> {
    use Recorded::{Broadcast, Log, LogBare};
    match (preferred, recorded) {
        (p, r) if p == r => Ok(r),
        (Broadcast, Log | LogBare) | (Log, LogBare) => Ok(recorded),
        _ => Err(Disagreement),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Recorded::{Broadcast, Log, LogBare};

    #[test]
    fn the_table_of_docs_protocol_section_2() {
        let table = [
            (Broadcast, [Ok(Broadcast), Ok(Log), Ok(LogBare)]),
            (Log, [Err(Disagreement), Ok(Log), Ok(LogBare)]),
            (LogBare, [Err(Disagreement), Err(Disagreement), Ok(LogBare)]),
        ];
        for (preferred, row) in table {
            for (recorded, expected) in Recorded::ALL.into_iter().zip(row) {
                assert_eq!(
                    settle(preferred, recorded),
                    expected,
                    "{preferred:?} / {recorded:?}"
                );
            }
        }
    }

    #[test]
    fn every_settled_transport_is_the_recorded_one() {
        for preferred in Recorded::ALL {
            for recorded in Recorded::ALL {
                if let Ok(settled) = settle(preferred, recorded) {
                    assert_eq!(settled, recorded);
                }
            }
        }
    }

    #[test]
    fn stored_names_round_trip_and_nothing_else_parses() {
        for r in Recorded::ALL {
            assert_eq!(Recorded::parse(r.name()), Some(r));
        }
        for other in ["", "Broadcast", "log-carried", "alone", "log "] {
            assert_eq!(Recorded::parse(other), None);
        }
    }
}
