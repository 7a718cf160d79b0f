//! Who is asking: the user an HS256 JWT names, minted by the application's own backend with the secret the
//! service shares with it (`WEBLOCKS_LEASE_SECRET`).
//!
//! Claims: `sub` (the user's id), `name` (the display name other users see as the holder), `perms` (a list;
//! `takeover` allows `takeOver`, `admin` allows it too), `exp` (required: a token expires), `nbf` (if
//! present, the token is refused before that time). A request without a token that verifies gets 401
//! before anything else is looked at.

use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode};
use serde::Deserialize;

use crate::api_error::ApiError;
use crate::holder::Holder;
use crate::limits::check_name;

/// The shortest secret accepted: HS256's key should carry at least the hash's 256 bits.
pub const MIN_SECRET_BYTES: usize = 32;

/// The fewest distinct byte values a secret must use. A random secret of 32 bytes or more uses far more
/// (32 random hex digits: 14 or more of the 16 but for one secret in a million); a secret with fewer is
/// made by hand (`aaaa…`, `abab…`, a word repeated) and guessable whatever its length.
pub const MIN_DISTINCT_SECRET_BYTES: usize = 8;

/// Clock skew tolerated on `exp` and `nbf` between the backend that mints tokens and the service.
const LEEWAY_SECONDS: u64 = 5;

/// A verified caller.
#[derive(Clone, Debug, PartialEq)]
pub struct Identity {
    pub holder: Holder,
    pub may_take_over: bool,
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    name: String,
    #[serde(default)]
    perms: Vec<String>,
}

/// Verifies tokens against the shared secret.
pub struct TokenVerifier {
    key: DecodingKey,
    validation: Validation,
}

impl TokenVerifier {
    /// A verifier for `secret`, or why the secret is too weak: shorter than [`MIN_SECRET_BYTES`], or
    /// fewer than [`MIN_DISTINCT_SECRET_BYTES`] distinct bytes.
    pub fn new(secret: &[u8]) -> Result<TokenVerifier, String> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(format!(
                "the secret must hold at least {MIN_SECRET_BYTES} bytes (it holds {}); make one with \
                 `openssl rand -hex 32`",
                secret.len()
            ));
        }
        let mut seen = [false; 256];
        for byte in secret {
            seen[usize::from(*byte)] = true;
        }
        let distinct = seen.iter().filter(|seen| **seen).count();
        if distinct < MIN_DISTINCT_SECRET_BYTES {
            return Err(format!(
                "the secret uses only {distinct} distinct bytes (at least {MIN_DISTINCT_SECRET_BYTES}): \
                 it was not made by a random generator; make one with `openssl rand -hex 32`"
            ));
        }
        crate::hs256::install();
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "sub"]);
        Ok(TokenVerifier {
            key: DecodingKey::from_secret(secret),
            validation,
        })
    }

    /// The identity of an `Authorization` header's value (`Bearer <jwt>`), or why there is none.
    pub fn verify(&self, authorization: Option<&str>) -> Result<Identity, ApiError> {
        let header = authorization.ok_or_else(|| unauthorized("no bearer token"))?;
        let token = bearer_token(header).ok_or_else(|| unauthorized("not a bearer token"))?;
        let claims = decode::<Claims>(token, &self.key, &self.validation)
            .map_err(|e| unauthorized(&why_rejected(&e)))?
            .claims;
        check_name("sub", &claims.sub).map_err(|why| unauthorized(&why))?;
        check_name("name", &claims.name).map_err(|why| unauthorized(&why))?;
        let may_take_over = claims.perms.iter().any(|p| p == "takeover" || p == "admin");
        Ok(Identity {
            holder: Holder {
                sub: claims.sub,
                name: claims.name,
            },
            may_take_over,
        })
    }
}

fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// A reason that names the failed check, never the token or the secret.
fn why_rejected(error: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind::*;
    match error.kind() {
        ExpiredSignature => "the token has expired".into(),
        ImmatureSignature => "the token is not valid yet".into(),
        InvalidSignature => "the token's signature does not verify".into(),
        InvalidAlgorithm | InvalidAlgorithmName => "the token is not signed with HS256".into(),
        MissingRequiredClaim(claim) => format!("the token has no `{claim}` claim"),
        Json(e) => format!("the token's claims are malformed: {e}"),
        _ => "the token is malformed".into(),
    }
}

fn unauthorized(why: &str) -> ApiError {
    ApiError::Unauthorized(why.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header, encode};
    use serde_json::json;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    fn token(claims: serde_json::Value, secret: &[u8], algorithm: Algorithm) -> String {
        crate::hs256::install();
        encode(
            &Header::new(algorithm),
            &claims,
            &EncodingKey::from_secret(secret),
        )
        .unwrap()
    }

    fn verify(token: &str) -> Result<Identity, ApiError> {
        TokenVerifier::new(SECRET)
            .ok()
            .unwrap()
            .verify(Some(&format!("Bearer {token}")))
    }

    fn reason(result: Result<Identity, ApiError>) -> String {
        match result {
            Err(ApiError::Unauthorized(why)) => why,
            other => panic!("expected 401, got {other:?}"),
        }
    }

    #[test]
    fn a_valid_token_names_the_holder_and_its_permissions() {
        let claims =
            json!({ "sub": "u1", "name": "Alice", "perms": ["takeover"], "exp": now() + 60 });
        let identity = verify(&token(claims, SECRET, Algorithm::HS256)).unwrap();
        assert_eq!(identity.holder.sub, "u1");
        assert_eq!(identity.holder.name, "Alice");
        assert!(identity.may_take_over);
        let admin = json!({ "sub": "u2", "name": "Root", "perms": ["admin"], "exp": now() + 60 });
        assert!(
            verify(&token(admin, SECRET, Algorithm::HS256))
                .unwrap()
                .may_take_over
        );
        let plain = json!({ "sub": "u3", "name": "Bob", "exp": now() + 60 });
        assert!(
            !verify(&token(plain, SECRET, Algorithm::HS256))
                .unwrap()
                .may_take_over
        );
    }

    #[test]
    fn forged_expired_and_incomplete_tokens_are_refused_with_a_reason() {
        let good = json!({ "sub": "u1", "name": "Alice", "exp": now() + 60 });
        let forged = token(
            good.clone(),
            b"another secret, also 32 bytes long",
            Algorithm::HS256,
        );
        assert!(reason(verify(&forged)).contains("signature"));
        let expired = json!({ "sub": "u1", "name": "Alice", "exp": now() - 3600 });
        assert!(reason(verify(&token(expired, SECRET, Algorithm::HS256))).contains("expired"));
        let no_exp = json!({ "sub": "u1", "name": "Alice" });
        assert!(reason(verify(&token(no_exp, SECRET, Algorithm::HS256))).contains("exp"));
        let no_name = json!({ "sub": "u1", "exp": now() + 60 });
        assert!(reason(verify(&token(no_name, SECRET, Algorithm::HS256))).contains("malformed"));
        let long_name = json!({ "sub": "u1", "name": "x".repeat(300), "exp": now() + 60 });
        assert!(reason(verify(&token(long_name, SECRET, Algorithm::HS256))).contains("name"));
        // A token whose header names another algorithm (here HS384, `{"alg":"HS384","typ":"JWT"}`) is
        // refused before any signature is computed: HS256 only.
        let valid = token(good, SECRET, Algorithm::HS256);
        let other_alg = format!(
            "eyJhbGciOiJIUzM4NCIsInR5cCI6IkpXVCJ9{}",
            &valid[valid.find('.').unwrap()..]
        );
        assert!(reason(verify(&other_alg)).contains("HS256"));
        assert!(reason(verify("not.a.token")).contains("malformed"));
        let verifier = TokenVerifier::new(SECRET).ok().unwrap();
        assert!(reason(verifier.verify(None)).contains("no bearer"));
        assert!(reason(verifier.verify(Some("Basic dXNlcjpwYXNz"))).contains("bearer"));
    }

    #[test]
    fn short_and_weak_secrets_are_refused() {
        assert!(
            TokenVerifier::new(&SECRET[..31])
                .err()
                .unwrap()
                .contains("32 bytes")
        );
        let repeated = TokenVerifier::new(&[b'a'; 64]).err().unwrap();
        assert!(repeated.contains("only 1 distinct"), "{repeated}");
        assert!(TokenVerifier::new(&b"abcdefg".repeat(10)).is_err());
        assert!(TokenVerifier::new(b"0123456789abcdef0123456789abcdef").is_ok());
    }

    #[test]
    fn a_token_not_valid_yet_is_refused() {
        let later =
            json!({ "sub": "u1", "name": "Alice", "nbf": now() + 3600, "exp": now() + 7200 });
        assert!(reason(verify(&token(later, SECRET, Algorithm::HS256))).contains("not valid yet"));
        let skewed = json!({ "sub": "u1", "name": "Alice", "nbf": now() + 2, "exp": now() + 60 });
        assert!(
            verify(&token(skewed, SECRET, Algorithm::HS256)).is_ok(),
            "within the leeway"
        );
    }
}
