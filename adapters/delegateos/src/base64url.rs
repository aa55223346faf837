//! Base64url without padding (RFC 4648 §5), the encoding of every DelegateOS
//! key, signature, hash and serialized token.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// Why a base64url string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Base64UrlError {
    /// Not base64url, or padded, or with non-zero trailing bits.
    #[error("not valid unpadded base64url: {0}")]
    Invalid(String),
    /// Decoded to a different length than the field requires.
    #[error("expected {expected} bytes, got {actual}")]
    /// Decodes to the wrong number of bytes.
    Length {
        /// How many bytes were expected.
        expected: usize,
        /// How many it decodes to.
        actual: usize,
    },
}

/// Encodes bytes as unpadded base64url.
pub fn encode(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Decodes strict unpadded base64url: padding, `+`/`/` and non-canonical
/// trailing bits are refused, so one byte string has exactly one text form.
pub fn decode(text: &str) -> Result<Vec<u8>, Base64UrlError> {
    URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|e| Base64UrlError::Invalid(in_words(e)))
}

/// Why `text` is not base64url, in words an operator reads (the crate's
/// own say `Invalid symbol 46, offset 10.`). Positions count from 1.
fn in_words(error: base64::DecodeError) -> String {
    use base64::DecodeError::*;
    let byte = |offset: usize, b: u8| match b {
        b'=' => format!("padding '=' at character {}", offset + 1),
        b'.' => format!(
            "'.' at character {} (a JWT or a signed token's separator?)",
            offset + 1
        ),
        0x21..=0x7e => format!("'{}' at character {}", b as char, offset + 1),
        _ => format!("byte 0x{b:02x} at position {}", offset + 1),
    };
    match error {
        InvalidByte(offset, b) => format!(
            "{} is not a base64url character (A-Z, a-z, 0-9, '-', '_')",
            byte(offset, b)
        ),
        InvalidLength(n) => {
            format!("{n} characters cannot be unpadded base64url (a length of 4k+1 is impossible)")
        }
        InvalidLastSymbol(offset, b) => format!(
            "{} ends the text with bits that encode nothing (not the canonical form)",
            byte(offset, b)
        ),
        InvalidPadding => "padding '=' is not allowed".to_owned(),
    }
}

/// Decodes strict base64url into exactly `N` bytes.
pub fn decode_array<const N: usize>(text: &str) -> Result<[u8; N], Base64UrlError> {
    // A quick length check keeps hostile megabyte inputs from being decoded at all.
    if text.len() > N.div_ceil(3) * 4 {
        return Err(Base64UrlError::Length {
            expected: N,
            actual: text.len() * 3 / 4,
        });
    }
    let bytes = decode(text)?;
    let actual = bytes.len();
    bytes.try_into().map_err(|_| Base64UrlError::Length {
        expected: N,
        actual,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_strictness() {
        assert_eq!(encode(&[0xfb, 0xff]), "-_8");
        assert_eq!(decode("-_8").unwrap(), vec![0xfb, 0xff]);
        assert!(decode("-_8=").is_err(), "padding refused");
        assert!(decode("+/8").is_err(), "standard alphabet refused");
        assert!(decode("-_9").is_err(), "non-zero trailing bits refused");
        assert!(decode_array::<2>("AAAA").is_err());
        assert_eq!(decode_array::<2>("AAA").unwrap(), [0, 0]);
    }

    /// Operators read words, never the decoder's `Invalid symbol 46`.
    #[test]
    fn errors_are_words() {
        let said = |text: &str| decode(text).unwrap_err().to_string();
        assert_eq!(
            said("eyJhbGciOi.x"),
            "not valid unpadded base64url: '.' at character 11 (a JWT or a signed token's separator?) is not a base64url character (A-Z, a-z, 0-9, '-', '_')"
        );
        assert!(said("ab+d").contains("'+' at character 3 is not a base64url character"));
        assert!(said("a\u{7}bc").contains("byte 0x07 at position 2"));
        assert!(said("AAAAA").contains("5 characters cannot be unpadded base64url"));
        assert!(said("-_9").contains("'9' at character 3 ends the text with bits"));
        assert!(said("AA==").contains("padding '='"), "{}", said("AA=="));
        for text in ["eyJhbGciOi.x", "ab+d", "AAAAA", "-_9", "AA=="] {
            let s = said(text);
            assert!(!s.contains("Invalid") && !s.contains("symbol"), "{s}");
        }
    }
}
