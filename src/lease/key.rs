//! A lease's key, (type, id) (`tryLock("domain.Article", "10")`: what is locked, a kind and an id), and
//! the argument limits.

use super::error::LeaseError;

/// Longest accepted type or id, in UTF-8 bytes.
pub const MAX_KEY_PART_BYTES: usize = 1024;

/// Longest accepted ttl, and the longest a lease can have left at any time (extensions are capped): 24 hours.
pub const MAX_TTL_MS: f64 = 24.0 * 60.0 * 60.0 * 1000.0;

/// What is locked: a type ("domain.Article") and an id within it ("10"). Both are non-empty.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaseKey {
    lease_type: String,
    id: String,
}

impl LeaseKey {
    /// Validate and build a key: both parts non-empty and at most [`MAX_KEY_PART_BYTES`] long.
    pub fn new(
        lease_type: impl Into<String>,
        id: impl Into<String>,
    ) -> Result<LeaseKey, LeaseError> {
        let (lease_type, id) = (lease_type.into(), id.into());
        check_part("type", &lease_type)?;
        check_part("id", &id)?;
        Ok(LeaseKey { lease_type, id })
    }

    pub fn lease_type(&self) -> &str {
        &self.lease_type
    }

    pub fn id(&self) -> &str {
        &self.id
    }
}

// Messages are concatenated, not `format!`ted: the wasm then carries no formatting machinery. The limit is
// written out in the message below; this keeps the two in step.
const _: () = assert!(MAX_KEY_PART_BYTES == 1024);

fn check_part(what: &str, value: &str) -> Result<(), LeaseError> {
    if value.is_empty() {
        return Err(invalid(what, " must be a non-empty string"));
    }
    if value.len() > MAX_KEY_PART_BYTES {
        return Err(invalid(what, " must be at most 1024 bytes in UTF-8"));
    }
    Ok(())
}

/// `InvalidArgument("<what><why>")`.
pub(crate) fn invalid(what: &str, why: &str) -> LeaseError {
    LeaseError::InvalidArgument(what.to_owned() + why)
}

/// Validate a duration in milliseconds: finite and > 0.
pub fn check_positive_ms(what: &str, ms: f64) -> Result<f64, LeaseError> {
    if !ms.is_finite() || ms <= 0.0 {
        return Err(invalid(
            what,
            " must be a positive finite number of milliseconds",
        ));
    }
    Ok(ms)
}

/// Validate a ttl: positive, finite and at most [`MAX_TTL_MS`].
pub fn check_ttl_ms(ttl_ms: f64) -> Result<f64, LeaseError> {
    if check_positive_ms("ttlMs", ttl_ms)? > MAX_TTL_MS {
        // A literal: formatting the f64 constant would bring float formatting into the wasm.
        return Err(LeaseError::InvalidArgument(
            "ttlMs must be at most 86400000 ms (24 hours)".into(),
        ));
    }
    Ok(ttl_ms)
}
