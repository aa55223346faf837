//! The one signing rule of DelegateOS: Ed25519 over the 32-byte BLAKE2b-256
//! digest of the RFC 8785 canonical JSON of a value.

use blake2::digest::consts::U32;
use blake2::{Blake2b, Digest};
use ed25519_dalek::Signature;
use serde::Serialize;

use crate::base64url;
use crate::canonical::{canonicalize, JsonError};
use crate::principal::{Keypair, PrincipalId};

/// BLAKE2b with a 256-bit output.
type Blake2b256 = Blake2b<U32>;

/// Why a signature did not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// Not 64 bytes of base64url.
    #[error("signature is not 64 bytes of base64url: {0}")]
    Encoding(String),
    /// The signer's ID is not an Ed25519 public key.
    #[error("signer is not a valid Ed25519 public key: {0}")]
    Key(String),
    /// The value cannot be canonicalized.
    #[error(transparent)]
    Json(#[from] JsonError),
    /// The signature does not match.
    #[error("signature does not verify")]
    Mismatch,
}

/// BLAKE2b-256 of `bytes`.
pub fn blake2b256(bytes: &[u8]) -> [u8; 32] {
    Blake2b256::digest(bytes).into()
}

/// BLAKE2b-256 of the canonical JSON of `value`.
pub fn digest<T: Serialize + ?Sized>(value: &T) -> Result<[u8; 32], JsonError> {
    Ok(blake2b256(&canonicalize(value)?))
}

/// `base64url(BLAKE2b-256(canonical(value)))`: revocation IDs and output hashes.
pub fn hash_id<T: Serialize + ?Sized>(value: &T) -> Result<String, JsonError> {
    Ok(base64url::encode(&digest(value)?))
}

/// `value` as JSON without its top-level `signature` field: what contracts,
/// attestations and revocation entries sign (§4.1, §5.1, §7.2).
pub fn without_signature<T: Serialize + ?Sized>(value: &T) -> Result<serde_json::Value, JsonError> {
    let mut json =
        serde_json::to_value(value).map_err(|e| JsonError::Canonicalize(e.to_string()))?;
    if let Some(map) = json.as_object_mut() {
        map.remove("signature");
    }
    Ok(json)
}

/// Signs `value` and returns the base64url signature.
pub fn sign<T: Serialize + ?Sized>(key: &Keypair, value: &T) -> Result<String, JsonError> {
    Ok(base64url::encode(
        &key.sign_digest(&digest(value)?).to_bytes(),
    ))
}

/// Verifies a base64url signature by `signer` over `value`.
///
/// Uses `verify_strict`: it refuses small-order keys and non-canonical
/// signatures, which honest signers never produce.
pub fn verify<T: Serialize + ?Sized>(
    signer: &PrincipalId,
    value: &T,
    signature: &str,
) -> Result<(), SignatureError> {
    let sig = base64url::decode_array::<64>(signature)
        .map_err(|e| SignatureError::Encoding(e.to_string()))?;
    let key = signer
        .verifying_key()
        .map_err(|e| SignatureError::Key(e.to_string()))?;
    let digest = digest(value)?;
    key.verify_strict(&digest, &Signature::from_bytes(&sig))
        .map_err(|_| SignatureError::Mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blake2b256_known_answer() {
        // BLAKE2b-256("abc"), from the BLAKE2 reference implementation.
        assert_eq!(
            blake2b256(b"abc")
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>(),
            "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319"
        );
    }

    #[test]
    fn sign_verify_and_tamper() {
        let key = Keypair::from_seed([7; 32]);
        let value = serde_json::json!({"b": 1, "a": [true, null]});
        let sig = sign(&key, &value).unwrap();
        verify(key.principal_id(), &value, &sig).unwrap();
        // Key order does not matter: the signature is over canonical bytes.
        let reordered: serde_json::Value =
            serde_json::from_str(r#"{"a":[true,null],"b":1}"#).unwrap();
        verify(key.principal_id(), &reordered, &sig).unwrap();
        let tampered = serde_json::json!({"b": 2, "a": [true, null]});
        assert_eq!(
            verify(key.principal_id(), &tampered, &sig),
            Err(SignatureError::Mismatch)
        );
        let other = Keypair::from_seed([8; 32]);
        assert_eq!(
            verify(other.principal_id(), &value, &sig),
            Err(SignatureError::Mismatch)
        );
        assert!(matches!(
            verify(key.principal_id(), &value, "AAAA"),
            Err(SignatureError::Encoding(_))
        ));
    }
}
