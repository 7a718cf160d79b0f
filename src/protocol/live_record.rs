//! The storage hint: one localStorage key saying until when some member of a busy history promises to
//! be around (members holding or waiting for a lock renew it; a member being frozen extends it to the end
//! of its freeze grace). A context that joins and hears no answer waits for this time before it starts a
//! new history, so that slow or frozen holders keep their locks. It is only a hint: a stale or missing
//! value can make a joiner start a new history too early, which revokes (and reports) locks but never
//! breaks mutual exclusion. Safety never reads storage.

/// The localStorage key of the hint.
pub const LIVE_KEY: &str = "weblocks:live";

/// Parses a stored value (a decimal wall-clock time in ms); anything else counts as absent.
pub fn parse(value: Option<&str>) -> Option<u64> {
    let v = value?;
    if v.is_empty() || v.len() > 16 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

pub fn format(until: u64) -> String {
    until.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_only_plain_times() {
        assert_eq!(parse(Some("1700000000000")), Some(1_700_000_000_000));
        assert_eq!(parse(Some(&format(42))), Some(42));
        for bad in [
            "",
            "-1",
            "1e9",
            " 12",
            "12 ",
            "0x10",
            "99999999999999999",
            "１２",
        ] {
            assert_eq!(parse(Some(bad)), None, "{bad:?}");
        }
        assert_eq!(parse(None), None);
    }
}
