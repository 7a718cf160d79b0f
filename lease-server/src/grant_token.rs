//! The token a granted lease's lockId carries, and how a retried grant gets the same one back.
//!
//! A `tryLock` or `takeOver` whose answer was lost on the way back has granted a lease its caller has no
//! lockId for. So a grant may carry a **request id**, chosen by the client for one grant and repeated by
//! its retries. Its token is then not random but derived: HMAC-SHA256, keyed with a key derived from the
//! service's secret, of (user, type, id, request id, fencing number). A retry reads the key's row as
//! every operation does, and if the row is live, held by the same user, and its digest is the digest of
//! the token derived for the row's fencing number, the retry is given that lease and lockId again and
//! writes nothing. What this guarantees, and why:
//!
//! - **Nothing is stored for it**: the request id lives in the row's digest only, so it is kept exactly
//!   as long as its lease (a released, expired or replaced row no longer matches) and costs one HMAC per
//!   grant, whatever the number of requests.
//! - **Only the same user**: the user's `sub` is in the MAC, and the row must name that user; another
//!   user presenting the same request id gets `AlreadyLocked` and the holder, as without one.
//! - **A new lease still gets a new token**: fencing numbers only grow per key, so a request id used
//!   again for a later lease derives another token; a stale lockId never checks a later lease.
//! - **Unguessable**: without the secret, the request id, the user and the key do not give the token
//!   (HMAC is a PRF), and reading the table gives only digests, as for random tokens.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::Arc;
use weblocks::lease::{LeaseKey, Token};

type HmacSha256 = Hmac<Sha256>;

/// The HMAC key of derived tokens: the service's secret, keyed for this use only (a JWT's signature and
/// a token are never the MAC of one message under one key).
pub struct GrantKey(HmacSha256);

impl GrantKey {
    pub fn new(secret: &[u8]) -> GrantKey {
        let mut derive = HmacSha256::new_from_slice(secret).expect("HMAC takes any key length");
        derive.update(b"weblocks-lease-server: lease tokens of requested grants");
        let key = derive.finalize().into_bytes();
        GrantKey(HmacSha256::new_from_slice(&key).expect("HMAC takes any key length"))
    }

    /// The token of the lease numbered `fence` on `key`, granted to `sub` for `request_id`. Each field is
    /// length-prefixed, so no two field lists give one message.
    fn token(&self, sub: &str, key: &LeaseKey, request_id: &str, fence: i64) -> Token {
        let mut mac = self.0.clone();
        for field in [sub, key.lease_type(), key.id(), request_id] {
            mac.update(&(field.len() as u64).to_be_bytes());
            mac.update(field.as_bytes());
        }
        mac.update(&fence.to_be_bytes());
        let tag = mac.finalize().into_bytes();
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&tag[..16]);
        Token::from_random_bytes(bytes)
    }
}

impl std::fmt::Debug for GrantKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GrantKey(…)")
    }
}

/// Where a grant's token comes from.
#[derive(Clone, Debug)]
pub enum GrantToken {
    /// 128 random bits (a grant without a request id).
    Fresh(Token),
    /// Derived from the request id (see the module's documentation).
    Requested {
        key: Arc<GrantKey>,
        request_id: String,
    },
}

impl From<Token> for GrantToken {
    fn from(token: Token) -> GrantToken {
        GrantToken::Fresh(token)
    }
}

impl GrantToken {
    /// The token of the lease numbered `fence` on `key` when granted to `sub`.
    pub fn for_lease(&self, sub: &str, key: &LeaseKey, fence: i64) -> Token {
        match self {
            GrantToken::Fresh(token) => *token,
            GrantToken::Requested {
                key: grant_key,
                request_id,
            } => grant_key.token(sub, key, request_id, fence),
        }
    }

    /// Whether this grant asks again for a lease it already made: a request id whose token, for the
    /// lease's number and user, digests to `stored` (the row's digest). A fresh token never does.
    pub fn made(
        &self,
        sub: &str,
        key: &LeaseKey,
        fence: i64,
        stored: Token,
        digest: fn(Token) -> Token,
    ) -> bool {
        matches!(self, GrantToken::Requested { .. })
            && digest(self.for_lease(sub, key, fence)) == stored
    }
}

/// Longest request id, in bytes.
pub const MAX_REQUEST_ID_BYTES: usize = 128;
/// Shortest request id: 16 characters of base64url or hex already hold 64 or more random bits, enough
/// that one user's grant attempts never collide by chance.
pub const MIN_REQUEST_ID_BYTES: usize = 16;

/// A request id: [`MIN_REQUEST_ID_BYTES`] to [`MAX_REQUEST_ID_BYTES`] characters of `A-Z a-z 0-9 - _`.
pub fn check_request_id(request_id: &str) -> Result<(), String> {
    let length_ok = (MIN_REQUEST_ID_BYTES..=MAX_REQUEST_ID_BYTES).contains(&request_id.len());
    let alphabet_ok = request_id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if length_ok && alphabet_ok {
        Ok(())
    } else {
        Err(format!(
            "requestId must hold {MIN_REQUEST_ID_BYTES} to {MAX_REQUEST_ID_BYTES} characters of \
             A-Z, a-z, 0-9, '-' and '_'"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requested(secret: &[u8], request_id: &str) -> GrantToken {
        GrantToken::Requested {
            key: Arc::new(GrantKey::new(secret)),
            request_id: request_id.into(),
        }
    }

    #[test]
    fn a_derived_token_depends_on_every_field_and_on_the_secret() {
        let key = LeaseKey::new("Order", "1").unwrap();
        let grant = requested(b"secret one, thirty-two bytes long", "r-0123456789abcdef");
        let token = grant.for_lease("alice", &key, 7);
        assert_eq!(
            token,
            grant.for_lease("alice", &key, 7),
            "a retry derives it again"
        );
        assert_ne!(token, grant.for_lease("bob", &key, 7), "another user");
        assert_ne!(token, grant.for_lease("alice", &key, 8), "a later lease");
        assert_ne!(
            token,
            grant.for_lease("alice", &LeaseKey::new("Order", "2").unwrap(), 7)
        );
        assert_ne!(
            token,
            requested(b"secret one, thirty-two bytes long", "r-0123456789abcdeg")
                .for_lease("alice", &key, 7)
        );
        assert_ne!(
            token,
            requested(b"secret two, thirty-two bytes long", "r-0123456789abcdef")
                .for_lease("alice", &key, 7)
        );
        // Length prefixes: moving a byte from one field to the next changes the message.
        let (ab, a_b) = (
            LeaseKey::new("Ord", "er1").unwrap(),
            LeaseKey::new("Orde", "r1").unwrap(),
        );
        assert_ne!(
            grant.for_lease("alice", &ab, 7),
            grant.for_lease("alice", &a_b, 7)
        );
    }

    #[test]
    fn a_fresh_token_is_never_a_retry() {
        let key = LeaseKey::new("Order", "1").unwrap();
        let fresh = GrantToken::from(Token::from_random_bytes([3; 16]));
        let same = |t: Token| t;
        assert!(!fresh.made("alice", &key, 1, Token::from_random_bytes([3; 16]), same));
        let grant = requested(b"secret one, thirty-two bytes long", "r-0123456789abcdef");
        let stored = grant.for_lease("alice", &key, 1);
        assert!(grant.made("alice", &key, 1, stored, same));
        assert!(!grant.made("bob", &key, 1, stored, same));
    }

    #[test]
    fn request_ids_are_bounded_url_safe_text() {
        assert!(check_request_id("0123456789abcdef").is_ok());
        assert!(check_request_id(&"A_-z".repeat(32)).is_ok());
        for bad in [
            "",
            "short",
            &"a".repeat(129),
            "0123456789abcde/",
            "0123456789abcdé1",
            "0123456789abcd\n1",
        ] {
            assert!(check_request_id(bad).is_err(), "{bad:?}");
        }
    }
}
