//! Ed25519 keys of Talos principals, named by DIDs. Issuers are trusted only
//! when configured; a delegate's key may also be read from a self-certifying
//! `did:talos:<64 hex>` (the public key itself, as the reference's peer IDs are).

use std::collections::HashMap;

use base64::Engine;
use ed25519_dalek::{Signature, VerifyingKey};

/// The DID prefix.
pub const DID_PREFIX: &str = "did:talos:";

/// Trusted issuers: DID → key.
#[derive(Debug, Clone, Default)]
pub struct Issuers(HashMap<String, VerifyingKey>);

impl Issuers {
    /// No trusted issuers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Trusts `key` for capabilities issued by `did`.
    pub fn insert(&mut self, did: &str, key: VerifyingKey) {
        self.0.insert(did.to_owned(), key);
    }

    /// A trusted issuer's key.
    pub fn trusted(&self, did: &str) -> Option<&VerifyingKey> {
        self.0.get(did)
    }

    /// A key for any principal: configured, or self-certifying.
    pub fn resolve(&self, did: &str) -> Option<VerifyingKey> {
        self.trusted(did).copied().or_else(|| self_certifying(did))
    }
}

/// The key inside `did:talos:<64 lowercase hex>`.
pub fn self_certifying(did: &str) -> Option<VerifyingKey> {
    let hex_key = did.strip_prefix(DID_PREFIX)?;
    if hex_key.len() != 64 || hex_key.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let bytes: [u8; 32] = hex::decode(hex_key).ok()?.try_into().ok()?;
    VerifyingKey::from_bytes(&bytes).ok()
}

/// A public key written as 64 hex digits or 43 base64url characters.
pub fn parse_public_key(text: &str) -> Option<VerifyingKey> {
    let bytes = if text.len() == 64 {
        hex::decode(text).ok()?
    } else {
        delegateos::base64url::decode(text).ok()?
    };
    let bytes: [u8; 32] = bytes.try_into().ok()?;
    VerifyingKey::from_bytes(&bytes).ok()
}

/// A signature in base64url without padding (the spec's), or padded
/// standard base64 (what the Python reference emits). 64 bytes either way.
pub fn decode_signature(text: &str) -> Option<Signature> {
    let bytes = delegateos::base64url::decode(text)
        .ok()
        .or_else(|| base64::engine::general_purpose::STANDARD.decode(text).ok())?;
    let bytes: [u8; 64] = bytes.try_into().ok()?;
    Some(Signature::from_bytes(&bytes))
}
