//! The one signature algorithm the service knows: HS256, HMAC-SHA256 with the shared secret.
//!
//! `jsonwebtoken` parses tokens and checks their claims; it asks a process-wide `CryptoProvider` for the
//! cryptography. This provider answers for HS256 only (RustCrypto's `hmac` and `sha2`) and refuses every
//! other algorithm, so a token can never make the service verify it some other way (no "alg: none", no
//! RSA public key used as an HMAC secret), and no RSA or elliptic-curve code is compiled in.

use hmac::{Hmac, Mac};
use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
use jsonwebtoken::errors::{ErrorKind, Result, new_error};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

static PROVIDER: CryptoProvider = CryptoProvider {
    signer_factory: signer,
    verifier_factory: verifier,
    key_utils: KeyUtils::new_unimplemented(),
};

/// Make this provider the process's. Idempotent: a later call finds it installed and changes nothing.
pub fn install() {
    let _ = PROVIDER.install_default();
}

fn hmac(algorithm: &Algorithm, secret: Result<&[u8]>) -> Result<Hs256> {
    if *algorithm != Algorithm::HS256 {
        return Err(new_error(ErrorKind::InvalidAlgorithm));
    }
    let mac =
        HmacSha256::new_from_slice(secret?).map_err(|_| new_error(ErrorKind::InvalidKeyFormat))?;
    Ok(Hs256(mac))
}

fn signer(algorithm: &Algorithm, key: &EncodingKey) -> Result<Box<dyn JwtSigner>> {
    Ok(Box::new(hmac(algorithm, Ok(key.as_bytes()))?))
}

fn verifier(algorithm: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>> {
    Ok(Box::new(hmac(algorithm, key.try_get_as_bytes())?))
}

/// HMAC-SHA256 keyed with the secret; each use works on a copy, so one key serves concurrent requests.
struct Hs256(HmacSha256);

impl signature::Signer<Vec<u8>> for Hs256 {
    fn try_sign(&self, message: &[u8]) -> std::result::Result<Vec<u8>, signature::Error> {
        let mut mac = self.0.clone();
        mac.update(message);
        Ok(mac.finalize().into_bytes().to_vec())
    }
}

impl signature::Verifier<Vec<u8>> for Hs256 {
    /// `verify_slice` compares in constant time: the time taken tells nothing about the right signature.
    fn verify(&self, message: &[u8], tag: &Vec<u8>) -> std::result::Result<(), signature::Error> {
        let mut mac = self.0.clone();
        mac.update(message);
        mac.verify_slice(tag).map_err(signature::Error::from_source)
    }
}

impl JwtSigner for Hs256 {
    fn algorithm(&self) -> Algorithm {
        Algorithm::HS256
    }
}

impl JwtVerifier for Hs256 {
    fn algorithm(&self) -> Algorithm {
        Algorithm::HS256
    }
}
