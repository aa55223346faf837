//! The bytes Motebit signs and how keys, signatures and digests are
//! written: RFC 8785 canonical JSON of an artifact without `signature`,
//! Ed25519 over those raw bytes (no prehash), base64url signatures without
//! padding, lowercase hex keys and SHA-256 digests.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ed25519_dalek::{Signature, VerifyingKey};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{Failure, Reason};

/// An Ed25519 public key written as the gateway accepts it: exactly 64
/// lowercase hex digits of a valid point.
pub fn parse_key(hex_key: &str) -> Result<VerifyingKey, Failure> {
    let bytes = lowercase_hex32(hex_key).ok_or_else(|| {
        Failure::new(
            Reason::BadKey,
            "a public key must be 64 lowercase hex digits",
        )
    })?;
    VerifyingKey::from_bytes(&bytes)
        .map_err(|_| Failure::new(Reason::BadKey, "the public key is not an Ed25519 point"))
}

/// A key in hex as the reference reads one (either case; the verdict
/// reports what the reference would): `None` unless 64 hex digits.
pub fn lenient_key(hex_key: &str) -> Option<VerifyingKey> {
    VerifyingKey::from_bytes(&any_case_hex32(hex_key)?).ok()
}

/// 32 bytes from 64 hex digits of either case (how the reference reads
/// keys for identity binding).
pub fn any_case_hex32(text: &str) -> Option<[u8; 32]> {
    let mut bytes = [0u8; 32];
    (text.len() == 64)
        .then(|| hex::decode_to_slice(text, &mut bytes).ok())
        .flatten()
        .map(|()| bytes)
}

/// 32 bytes from exactly 64 lowercase hex digits.
pub fn lowercase_hex32(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !is_lower_hex(text) {
        return None;
    }
    let mut bytes = [0u8; 32];
    hex::decode_to_slice(text, &mut bytes).ok()?;
    Some(bytes)
}

/// Whether `text` is only lowercase hex digits.
pub fn is_lower_hex(text: &str) -> bool {
    text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A key as Motebit writes it.
pub fn key_hex(key: &VerifyingKey) -> String {
    hex::encode(key.as_bytes())
}

/// `hex(SHA-256(bytes))`, lowercase.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Six bytes derived from `seed` (the first of `SHA-256(seed)`): the body
/// of a content-addressed DelegateOS ID.
pub fn id_bytes(seed: &str) -> [u8; 6] {
    let h = Sha256::digest(seed.as_bytes());
    let mut b = [0u8; 6];
    b.copy_from_slice(&h[..6]);
    b
}

/// Base64url without padding.
pub fn b64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Decodes base64url without padding.
pub fn from_b64url(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(text).ok()
}

/// The canonical bytes of `artifact` without its `signature` member: what
/// every JCS-suite artifact is signed over.
pub fn signing_bytes(artifact: &Value) -> Result<Vec<u8>, Failure> {
    let Value::Object(members) = artifact else {
        return Err(Failure::malformed("an artifact must be a JSON object"));
    };
    let mut body = members.clone();
    body.remove("signature");
    canonical(&Value::Object(body))
}

/// RFC 8785 canonical JSON.
pub fn canonical(value: &Value) -> Result<Vec<u8>, Failure> {
    serde_jcs::to_vec(value).map_err(|e| Failure::malformed(format!("not canonicalizable: {e}")))
}

/// `hex(SHA-256(JCS(value)))`: how a whole signed artifact is named.
pub fn digest(value: &Value) -> Result<String, Failure> {
    Ok(sha256_hex(&canonical(value)?))
}

/// Whether `signature` (base64url of 64 bytes) is `key`'s Ed25519 signature
/// of `message`. Strict verification: non-canonical signatures and
/// small-order keys are refused (docs/decisions.md).
pub fn verifies(key: &VerifyingKey, message: &[u8], signature: &str) -> bool {
    let Some(bytes) = from_b64url(signature) else {
        return false;
    };
    let Ok(sig) = Signature::from_slice(&bytes) else {
        return false;
    };
    key.verify_strict(message, &sig).is_ok()
}

/// Signs `artifact` (its members without `signature`) and sets `signature`.
pub fn sign(key: &delegateos::Keypair, artifact: &mut Value) -> Result<(), Failure> {
    let message = signing_bytes(artifact)?;
    let signature = key.sign_message(&message);
    if let Value::Object(members) = artifact {
        members.insert(
            "signature".into(),
            Value::String(b64url(&signature.to_bytes())),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_lowercase_hex_only() {
        let k = "8a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c";
        assert!(parse_key(k).is_ok());
        assert_eq!(
            parse_key(&k.to_uppercase()).unwrap_err().reason,
            Reason::BadKey
        );
        assert_eq!(parse_key(&k[..62]).unwrap_err().reason, Reason::BadKey);
        assert!(lenient_key(&k.to_uppercase()).is_some());
        assert!(lenient_key("zz").is_none());
    }

    #[test]
    fn signing_bytes_leave_out_only_the_signature() {
        let v = serde_json::json!({"b": 1, "a": "x", "signature": "s"});
        assert_eq!(signing_bytes(&v).unwrap(), br#"{"a":"x","b":1}"#);
        assert!(signing_bytes(&serde_json::json!([1])).is_err());
    }
}
