//! The `version: "0.1"` field of contracts and attestations, and the
//! `version: "1.0"` DelegateOS 0.3 may stamp on a token.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The only structure version there is: `"0.1"`. Anything else does not parse.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct V01;

impl V01 {
    /// The version, as written.
    pub const TEXT: &'static str = "0.1";
}

impl Serialize for V01 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(Self::TEXT)
    }
}

impl<'de> Deserialize<'de> for V01 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text == Self::TEXT {
            Ok(V01)
        } else {
            Err(serde::de::Error::custom(format!(
                "version {text:?} is not supported (only \"0.1\")"
            )))
        }
    }
}

/// The token version DelegateOS 0.3's `setTokenVersion` writes for the
/// format dgw speaks (its `TOKEN_CURRENT_VERSION`, `"1.0"`). No signature
/// covers it; anything else does not parse (and `dct::decode` refuses it as
/// `unsupported_token_version` first).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenV10;

impl TokenV10 {
    /// The version, as written.
    pub const TEXT: &'static str = "1.0";
}

impl Serialize for TokenV10 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(Self::TEXT)
    }
}

impl<'de> Deserialize<'de> for TokenV10 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text == Self::TEXT {
            Ok(TokenV10)
        } else {
            Err(serde::de::Error::custom(format!(
                "token version {text:?} is not supported (only \"1.0\")"
            )))
        }
    }
}
