//! Why a context refuses to decide locks, and the error its requests get (docs/PROTOCOL.md §2, §12).
//!
//! A context refuses when it cannot be sure that it shares its origin's one lock manager: granting on its
//! own could make it a second manager beside the origin's. It then grants nothing: its held locks are lost
//! (as after a reset), and every request and query, pending or new, is rejected with the DOMException
//! [`Refusal::name`]. Pure, so that it also builds natively, for its tests.

/// The codes of the refusals, as `js/transport_choice.js` names them (tests/static/boundary_codes.test.mjs
/// checks that both say the same).
const REFUSED_DISAGREES: u32 = 1;
const REFUSED_UNREACHABLE: u32 = 2;

/// Why a context refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The origin's record names a transport this context cannot use (js/transport_choice.js): its
    /// realm has no BroadcastChannel where the log is carried, or its engine is not known to give one
    /// order where the broadcast transport is recorded.
    Disagreement,
    /// This context cannot reach its origin's transport: IndexedDB is missing, or its database could not
    /// be opened or used, after the retries.
    Unreachable,
    /// As `Unreachable`, after the browser closed this context's open IndexedDB connections (WebKit when
    /// its storage process ends, iOS for a tab in the background): the engine does not let this document
    /// open them again, and a reload does. JS never names it: the edge gives it for `Unreachable` once
    /// its evidence saw its connections closed (docs/PROTOCOL.md §7, "storage lost").
    StorageLost,
}

impl Refusal {
    /// The refusal that JS names by `code` (`REFUSED_*` of js/transport_choice.js), if any.
    pub fn from_code(code: u32) -> Option<Refusal> {
        match code {
            REFUSED_DISAGREES => Some(Refusal::Disagreement),
            REFUSED_UNREACHABLE => Some(Refusal::Unreachable),
            _ => None,
        }
    }

    /// The code JS names this refusal by.
    pub fn code(self) -> u32 {
        match self {
            Refusal::Disagreement => REFUSED_DISAGREES,
            Refusal::Unreachable | Refusal::StorageLost => REFUSED_UNREACHABLE,
        }
    }

    /// The DOMException name every request and query of a refusing context is rejected with: the
    /// operation failed for a reason of its own, which the message gives.
    pub fn name(self) -> &'static str {
        "OperationError"
    }

    /// What the rejection says, for the reader of the console.
    pub fn message(self) -> &'static str {
        match self {
            Refusal::Disagreement => {
                "weblocks: this context cannot use the transport its origin's other contexts coordinate \
                 over (a script removed BroadcastChannel here), so it grants no lock: it would be a \
                 second lock manager."
            }
            Refusal::Unreachable => {
                "weblocks: this context cannot reach the IndexedDB its origin's contexts coordinate \
                 through (storage blocked, cleared or failing), so it grants no lock: it would lock \
                 alone beside them."
            }
            Refusal::StorageLost => {
                "weblocks: the browser closed this page's IndexedDB connections and does not let it open \
                 them again (its storage process ended, or iOS suspended the tab), so it grants no lock: \
                 reload the page to lock again. Other tabs, and tabs opened now, lock as before."
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codes_of_js_name_the_refusals_and_nothing_else() {
        assert_eq!(Refusal::from_code(1), Some(Refusal::Disagreement));
        assert_eq!(Refusal::from_code(2), Some(Refusal::Unreachable));
        for refusal in [Refusal::Disagreement, Refusal::Unreachable] {
            assert_eq!(Refusal::from_code(refusal.code()), Some(refusal));
        }
        // Given by the edge in place of `Unreachable`, never named by JS.
        assert_eq!(
            Refusal::from_code(Refusal::StorageLost.code()),
            Some(Refusal::Unreachable)
        );
        for code in [0, 3, u32::MAX] {
            assert_eq!(Refusal::from_code(code), None);
        }
    }

    #[test]
    fn every_refusal_is_an_operation_error_that_says_why() {
        for refusal in [
            Refusal::Disagreement,
            Refusal::Unreachable,
            Refusal::StorageLost,
        ] {
            assert_eq!(refusal.name(), "OperationError");
            assert!(refusal.message().starts_with("weblocks: "));
            assert!(refusal.message().contains("grants no lock"));
        }
        assert_ne!(
            Refusal::Disagreement.message(),
            Refusal::Unreachable.message()
        );
        // A context whose storage the browser took says what gives it back.
        assert!(Refusal::StorageLost.message().contains("reload the page"));
    }
}
