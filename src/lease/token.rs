//! A lease's token: 128 random bits from the caller (the browser's `crypto.getRandomValues`), as 32 hex digits.

use std::fmt;

/// The secret part of a `LockId`. Whoever knows it holds the lease; it cannot be guessed.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Token([u8; 16]);

impl Token {
    /// Number of hex digits in the text form.
    pub const HEX_LEN: usize = 32;

    /// A token from 16 random bytes; the caller supplies the randomness (the core stays pure).
    pub fn from_random_bytes(bytes: [u8; 16]) -> Token {
        Token(bytes)
    }

    /// The 16 bytes (for a store that keeps only a digest of the token).
    pub fn bytes(&self) -> [u8; 16] {
        self.0
    }

    /// Parse 32 lowercase hex digits (the output of [`Token::to_hex`]).
    pub fn parse_hex(text: &str) -> Option<Token> {
        let digits = text.as_bytes();
        if digits.len() != Self::HEX_LEN {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = hex_value(digits[2 * i])? << 4 | hex_value(digits[2 * i + 1])?;
        }
        Some(Token(bytes))
    }

    /// The text form: 32 lowercase hex digits. Written by hand, not with `format!`: the wasm then carries
    /// no formatting machinery for it.
    pub fn to_hex(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut text = String::with_capacity(Self::HEX_LEN);
        for byte in self.0 {
            text.push(DIGITS[usize::from(byte >> 4)] as char);
            text.push(DIGITS[usize::from(byte & 15)] as char);
        }
        text
    }
}

/// The value of one lowercase hex digit.
fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        _ => None,
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// Never print a token by accident (logs, panics): `Debug` shows only that it is one.
impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(..)")
    }
}
