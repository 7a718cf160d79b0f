//! The `LockId` a holder keeps (in a form field, in `sessionStorage`...): the lease's key and its token.
//!
//! Text form: `<type>/<id>/<token>`, where `%` and `/` inside type and id are written `%25` and `%2F`, and the
//! token is 32 hex digits, e.g. `domain.Article/10/3f0c...e1`. Carrying the key lets a store find the lease
//! by its (type, id) primary key, and tell a stale `LockId` (the key now has another token: `TakenOver`)
//! from a forgotten one (no record: `NotFound`). Callers treat it as opaque.

use std::fmt;

use super::error::LeaseError;
use super::key::LeaseKey;
use super::token::Token;

/// Identifies one lease: which (type, id) and the token that proves holding it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockId {
    pub key: LeaseKey,
    pub token: Token,
}

impl LockId {
    /// Parse the text form; anything else is an `InvalidArgument`.
    pub fn parse(text: &str) -> Result<LockId, LeaseError> {
        // One error for every way of failing, built in one place.
        Self::parse_parts(text)
            .ok_or_else(|| LeaseError::InvalidArgument("not a lockId returned by tryLock".into()))
    }

    fn parse_parts(text: &str) -> Option<LockId> {
        // `<type>/<id>/<token>`: type and id part at the first `/`, the token follows the last one. Byte
        // searches (`/` is ASCII, so these are char boundaries) keep std's char-pattern searcher out of the wasm.
        // The token is 32 hex digits (no `/`): the last `/` can only stand just before them.
        let first = position_of(text, |b| b == b'/')?;
        let last = text.len().checked_sub(Token::HEX_LEN + 1)?;
        if text.as_bytes()[last] != b'/' || first == last {
            return None;
        }
        let token = Token::parse_hex(&text[last + 1..])?;
        let lease_type = unescape(&text[..first])?;
        let id = unescape(&text[first + 1..last])?;
        let key = LeaseKey::new(lease_type, id).ok()?;
        Some(LockId { key, token })
    }

    /// The text form, `<type>/<id>/<token>` (built without `format!`, which would bring the formatting
    /// machinery into the wasm).
    pub fn to_text(&self) -> String {
        escape(self.key.lease_type()) + "/" + &escape(self.key.id()) + "/" + &self.token.to_hex()
    }
}

impl fmt::Display for LockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

/// `%` and `/` written `%25` and `%2F`; the text between them copied as is (found by byte: both are
/// ASCII, so no character is decoded).
fn escape(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    let mut rest = part;
    while let Some(at) = position_of(rest, is_escaped) {
        out.push_str(&rest[..at]);
        out.push_str(if rest.as_bytes()[at] == b'%' {
            "%25"
        } else {
            "%2F"
        });
        rest = &rest[at + 1..];
    }
    out.push_str(rest);
    out
}

/// The bytes a type or an id cannot hold as they are: `%` and `/`.
fn is_escaped(b: u8) -> bool {
    b == b'%' || b == b'/'
}

/// The first byte of `text` that `pick` selects (a loop and a function pointer: one small function).
fn position_of(text: &str, pick: fn(u8) -> bool) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if pick(bytes[i]) {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// The inverse of `escape`; `None` for a `/` or any `%` escape other than `%25` and `%2F`.
fn unescape(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = position_of(rest, is_escaped) {
        out.push_str(&rest[..at]);
        let escaped = rest.get(at..at + 3)?;
        out.push(match escaped {
            "%25" => '%',
            "%2F" => '/',
            _ => return None,
        });
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}
