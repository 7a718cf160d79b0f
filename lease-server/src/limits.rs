//! What the service accepts beyond the lease core's own checks (non-empty type and id of at most 1024
//! bytes, ttls of at most 24 hours): the configured ttl bounds, and names without control characters.
//!
//! Types, ids and user names travel in change notifications (PostgreSQL's `NOTIFY` carries at most 8000
//! bytes) and in JSON, where a control character takes six bytes; without them, one notification stays
//! under 5.5 KB whatever the names (tested below).

use crate::api_error::ApiError;

/// Longest `sub` or `name` claim, in UTF-8 bytes.
pub const MAX_NAME_BYTES: usize = 256;

/// A `sub` or `name` claim: 1 to [`MAX_NAME_BYTES`] bytes, no control character.
pub fn check_name(what: &str, value: &str) -> Result<(), String> {
    if value.is_empty() || value.len() > MAX_NAME_BYTES {
        return Err(format!(
            "the token's `{what}` must hold 1 to {MAX_NAME_BYTES} bytes"
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(format!("the token's `{what}` contains a control character"));
    }
    Ok(())
}

/// A lease type or id: no control character (the core checks emptiness and length).
pub fn check_key_part(what: &str, value: &str) -> Result<(), ApiError> {
    if value.chars().any(char::is_control) {
        return Err(ApiError::Invalid(format!(
            "{what} must not contain control characters"
        )));
    }
    Ok(())
}

/// The ttls a lease may be taken for, and so the most it may have left after an extension.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TtlBounds {
    pub min_ms: f64,
    pub max_ms: f64,
}

impl TtlBounds {
    pub fn check(&self, ttl_ms: f64) -> Result<f64, ApiError> {
        if !(self.min_ms..=self.max_ms).contains(&ttl_ms) {
            return Err(ApiError::Invalid(format!(
                "ttlMs must be between {} and {} ms",
                self.min_ms, self.max_ms
            )));
        }
        Ok(ttl_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_key_parts_refuse_control_characters() {
        assert!(check_name("name", "Alice O'Brien; DROP TABLE locks --").is_ok());
        assert!(check_name("name", "").is_err());
        assert!(check_name("name", &"é".repeat(129)).is_err(), "258 bytes");
        assert!(check_name("name", "a\u{0}b").is_err());
        assert!(check_key_part("type", "domain.Article'--").is_ok());
        assert!(check_key_part("id", "10\n").is_err());
        assert!(check_key_part("id", "\u{7f}").is_err());
    }

    #[test]
    fn ttls_must_lie_within_the_bounds() {
        let bounds = TtlBounds {
            min_ms: 1000.0,
            max_ms: 60_000.0,
        };
        assert_eq!(bounds.check(1000.0).unwrap(), 1000.0);
        assert_eq!(bounds.check(60_000.0).unwrap(), 60_000.0);
        assert!(bounds.check(999.0).is_err());
        assert!(bounds.check(60_001.0).is_err());
        assert!(bounds.check(f64::NAN).is_err());
    }

    #[test]
    fn the_worst_notification_fits_postgres_s_8000_bytes() {
        use crate::change::{Change, ChangeKind, Held};
        use crate::holder::Holder;
        // Quotes and backslashes are the longest JSON escapes of names without control characters.
        let long = "\"".repeat(1024);
        let name = "\\".repeat(MAX_NAME_BYTES);
        let worst = Change {
            kind: ChangeKind::Current,
            lease_type: long.clone(),
            id: long,
            fence: i64::MAX,
            lease: Some(Held {
                holder: Holder {
                    sub: name.clone(),
                    name,
                },
                acquired_at: 0.0,
                expires_at: f64::MAX,
            }),
            now: f64::MIN_POSITIVE,
        };
        let bytes = worst.to_json().len();
        assert!(bytes < 8000, "{bytes} bytes");
        let back: Change = serde_json::from_str(&worst.to_json()).unwrap();
        assert_eq!(back, worst);
    }
}
