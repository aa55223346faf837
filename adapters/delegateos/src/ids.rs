//! Identifiers with a fixed shape: a prefix and 12 lowercase hex digits.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why an identifier was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {text:?} is not {prefix} followed by 12 lowercase hex digits")]
pub struct IdError {
    kind: &'static str,
    prefix: &'static str,
    text: String,
}

fn check(kind: &'static str, prefix: &'static str, text: &str) -> Result<(), IdError> {
    let ok = text.len() == prefix.len() + 12
        && text.starts_with(prefix)
        && text[prefix.len()..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if ok {
        Ok(())
    } else {
        Err(IdError {
            kind,
            prefix,
            text: text.chars().take(64).collect(),
        })
    }
}

macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// The prefix every such ID starts with.
            pub const PREFIX: &'static str = $prefix;

            /// Parses an ID.
            pub fn parse(text: &str) -> Result<Self, IdError> {
                check($kind, $prefix, text)?;
                Ok(Self(text.to_owned()))
            }

            /// The ID made of the prefix and the hex of 6 bytes.
            pub fn from_bytes(bytes: [u8; 6]) -> Self {
                let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                Self(format!("{}{hex}", $prefix))
            }

            /// The ID as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl std::str::FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                Self::parse(s)
            }
        }
        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                Self::parse(&text).map_err(serde::de::Error::custom)
            }
        }
    };
}

prefixed_id!(
    /// A delegation ID: `del_` + 12 lowercase hex.
    DelegationId,
    "delegation ID",
    "del_"
);
prefixed_id!(
    /// A task contract ID: `ct_` + 12 lowercase hex.
    ContractId,
    "contract ID",
    "ct_"
);
prefixed_id!(
    /// An attestation ID: `att_` + 12 lowercase hex.
    AttestationId,
    "attestation ID",
    "att_"
);

impl DelegationId {
    /// The parent delegation ID of every root delegation (§8.2).
    pub fn root_parent() -> Self {
        Self("del_000000000000".to_owned())
    }

    /// Whether this is the root parent `del_000000000000`.
    pub fn is_root_parent(&self) -> bool {
        self.0 == "del_000000000000"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert!(DelegationId::parse("del_f7e8d9c0b1a2").is_ok());
        assert!(DelegationId::parse("del_F7E8D9C0B1A2").is_err());
        assert!(DelegationId::parse("del_f7e8d9c0b1a").is_err());
        assert!(DelegationId::parse("ct_f7e8d9c0b1a2").is_err());
        assert!(DelegationId::parse("del_f7e8d9c0b1ag").is_err());
        assert!(ContractId::parse("ct_a1b2c3d4e5f6").is_ok());
        assert!(AttestationId::parse("att_a1b2c3d4e5f6").is_ok());
        assert_eq!(
            ContractId::from_bytes([0xab; 6]).as_str(),
            "ct_abababababab"
        );
        assert!(DelegationId::root_parent().is_root_parent());
    }
}
