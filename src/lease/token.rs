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

    /// Parse 32 lowercase hex digits (the output of `Display`).
    pub fn parse_hex(text: &str) -> Option<Token> {
        if text.len() != Self::HEX_LEN {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (i, byte) in bytes.iter_mut().enumerate() {
            let digits = text.get(2 * i..2 * i + 2)?;
            if !digits
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            {
                return None;
            }
            *byte = u8::from_str_radix(digits, 16).ok()?;
        }
        Some(Token(bytes))
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// Never print a token by accident (logs, panics): `Debug` shows only that it is one.
impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(..)")
    }
}
