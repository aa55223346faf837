//! Principals: Ed25519 keys named by the base64url of their public key.

use std::fmt;

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::base64url;

/// Why a principal ID or key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrincipalError {
    /// Not 32 bytes of unpadded base64url.
    #[error("principal ID {id:?} is not 32 bytes of unpadded base64url: {reason}")]
    /// Not the base64url of an Ed25519 public key.
    Encoding {
        /// The ID as given.
        id: String,
        /// What is wrong with it.
        reason: String,
    },
    /// 32 bytes, but not a point on the curve.
    #[error("principal ID {0:?} is not an Ed25519 public key")]
    NotAKey(String),
    /// A key file that is not the documented format, or whose ID does not match its seed.
    #[error("invalid key file: {0}")]
    KeyFile(String),
}

/// A principal ID: base64url (no padding) of a 32-byte Ed25519 public key,
/// always 43 characters. Holding one means the text is well formed; whether
/// it is on the curve is checked when it verifies something.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PrincipalId(String);

impl PrincipalId {
    /// Parses a principal ID.
    pub fn parse(id: &str) -> Result<Self, PrincipalError> {
        base64url::decode_array::<32>(id).map_err(|e| PrincipalError::Encoding {
            id: id.chars().take(64).collect(),
            reason: e.to_string(),
        })?;
        Ok(Self(id.to_owned()))
    }

    /// The ID of a public key.
    pub fn from_key(key: &VerifyingKey) -> Self {
        Self(base64url::encode(key.as_bytes()))
    }

    /// The ID as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The Ed25519 public key this ID names.
    pub fn verifying_key(&self) -> Result<VerifyingKey, PrincipalError> {
        let bytes =
            base64url::decode_array::<32>(&self.0).map_err(|e| PrincipalError::Encoding {
                id: self.0.clone(),
                reason: e.to_string(),
            })?;
        VerifyingKey::from_bytes(&bytes).map_err(|_| PrincipalError::NotAKey(self.0.clone()))
    }
}

impl fmt::Debug for PrincipalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PrincipalId({})", self.0)
    }
}
impl fmt::Display for PrincipalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl Serialize for PrincipalId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}
impl<'de> Deserialize<'de> for PrincipalId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        PrincipalId::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// An Ed25519 keypair made from a 32-byte seed.
pub struct Keypair {
    signing: SigningKey,
    id: PrincipalId,
}

impl Keypair {
    /// The keypair for a 32-byte seed (RFC 8032 private key).
    pub fn from_seed(seed: [u8; 32]) -> Self {
        let signing = SigningKey::from_bytes(&seed);
        let id = PrincipalId::from_key(&signing.verifying_key());
        Self { signing, id }
    }

    /// This key's principal ID.
    pub fn principal_id(&self) -> &PrincipalId {
        &self.id
    }

    /// The 32-byte seed.
    pub fn seed(&self) -> [u8; 32] {
        self.signing.to_bytes()
    }

    /// Signs a 32-byte digest.
    pub fn sign_digest(&self, digest: &[u8; 32]) -> Signature {
        self.signing.sign(digest)
    }

    /// Signs a whole message, no prehash (what protocols such as Talos and
    /// Motebit sign: the canonical bytes themselves).
    pub fn sign_message(&self, message: &[u8]) -> Signature {
        self.signing.sign(message)
    }

    /// The public key.
    pub fn public_key(&self) -> ed25519_dalek::VerifyingKey {
        self.signing.verifying_key()
    }
}

impl fmt::Debug for Keypair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the seed.
        write!(f, "Keypair({})", self.id)
    }
}

/// The key file format: `{"format":"delegateos-key-v1","principalId":…,"seed":…}`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeyFile {
    /// Always [`KeyFile::FORMAT`].
    pub format: String,
    /// The principal ID of the seed's public key.
    pub principal_id: PrincipalId,
    /// The 32-byte seed, base64url.
    pub seed: String,
}

impl KeyFile {
    /// The format tag of key files.
    pub const FORMAT: &'static str = "delegateos-key-v1";

    /// The key file for a keypair.
    pub fn new(key: &Keypair) -> Self {
        Self {
            format: Self::FORMAT.to_owned(),
            principal_id: key.principal_id().clone(),
            seed: base64url::encode(&key.seed()),
        }
    }

    /// Parses key file JSON and checks that its ID belongs to its seed.
    pub fn parse(json: &[u8]) -> Result<Keypair, PrincipalError> {
        let file: KeyFile =
            serde_json::from_slice(json).map_err(|e| PrincipalError::KeyFile(e.to_string()))?;
        if file.format != Self::FORMAT {
            return Err(PrincipalError::KeyFile(format!(
                "format is {:?}, expected {:?}",
                file.format,
                Self::FORMAT
            )));
        }
        let seed = base64url::decode_array::<32>(&file.seed)
            .map_err(|e| PrincipalError::KeyFile(format!("seed: {e}")))?;
        let key = Keypair::from_seed(seed);
        if key.principal_id() != &file.principal_id {
            return Err(PrincipalError::KeyFile(
                "principalId does not match the seed's public key".into(),
            ));
        }
        Ok(key)
    }

    /// The file's JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a KeyFile always serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc8032_test_vector_1() {
        // RFC 8032 §7.1 TEST 1.
        let seed: [u8; 32] =
            hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60");
        let key = Keypair::from_seed(seed);
        let public: [u8; 32] =
            hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
        assert_eq!(key.principal_id().as_str(), base64url::encode(&public));
        assert_eq!(key.principal_id().as_str().len(), 43);
    }

    #[test]
    fn key_file_round_trip_and_mismatch() {
        let key = Keypair::from_seed([1; 32]);
        let json = KeyFile::new(&key).to_json();
        assert_eq!(
            KeyFile::parse(json.as_bytes()).unwrap().principal_id(),
            key.principal_id()
        );
        let other = Keypair::from_seed([2; 32]);
        let forged = json.replace(key.principal_id().as_str(), other.principal_id().as_str());
        assert!(KeyFile::parse(forged.as_bytes()).is_err());
        assert!(KeyFile::parse(b"{}").is_err());
        assert!(!format!("{key:?}").contains(&KeyFile::new(&key).seed));
    }

    #[test]
    fn principal_id_parsing() {
        assert!(PrincipalId::parse("short").is_err());
        assert!(PrincipalId::parse(&"A".repeat(44)).is_err());
        assert!(PrincipalId::parse(&format!("{}=", "A".repeat(43))).is_err());
        assert!(PrincipalId::parse(&"A".repeat(43)).is_ok());
    }

    fn hex<const N: usize>(s: &str) -> [u8; N] {
        let v: Vec<u8> = (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect();
        v.try_into().unwrap()
    }
}
