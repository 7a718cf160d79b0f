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
    // At most 16 digits: no overflow. Folded by hand, like `format`, to keep std's number parsing and
    // formatting code out of the wasm.
    Some(v.bytes().fold(0, |n, b| n * 10 + u64::from(b - b'0')))
}

/// The stored form of `until`: its decimal digits.
pub fn format(until: u64) -> String {
    // Written from the last digit into a buffer as long as the longest u64.
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = until;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut text = String::new();
    for &d in &digits[at..] {
        text.push(char::from(d));
    }
    text
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

    #[test]
    fn formats_as_std_does_and_round_trips() {
        for t in [
            0,
            7,
            10,
            42,
            999,
            1_000,
            1_700_000_000_000,
            9_999_999_999_999_999,
            u64::MAX,
        ] {
            assert_eq!(format(t), t.to_string());
        }
        for t in [0, 1, 10, 1_700_000_000_123, 9_999_999_999_999_999] {
            assert_eq!(parse(Some(&format(t))), Some(t));
        }
        assert_eq!(parse(Some("0000000000000001")), Some(1));
    }
}
