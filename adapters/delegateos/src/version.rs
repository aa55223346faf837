//! The `version: "0.1"` field of contracts and attestations.

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
