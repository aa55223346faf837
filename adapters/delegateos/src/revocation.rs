//! Revocation (§4): signed entries and the list verification consults.
//!
//! Only the signer of a block may revoke it: an entry takes effect on a
//! token's block only when its `revokedBy` is the key that signed that block
//! (the issuer for the authority, the attenuator for an attenuation).
//! Anyone can sign an entry, so this is what keeps a stranger from revoking
//! other people's tokens.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::{Deserialize, Serialize};

use crate::base64url;
use crate::canonical::{parse_strict, JsonError};
use crate::principal::{Keypair, PrincipalId};
use crate::signing::{self, without_signature, SignatureError};
use crate::timestamp::Timestamp;

/// Largest revocation list JSON accepted by [`RevocationList::from_json`].
pub const MAX_LIST_BYTES: usize = 64 << 20;

/// What a revocation covers (§4.2). Both deny every token that contains the
/// block; `chain` also tells a gateway to end every delegation recorded below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RevocationScope {
    /// Revokes tokens that carry the block (§4.2).
    Block,
    /// Revokes every token that carries the block, and every token
    /// attenuated from one (§4.2).
    Chain,
}

/// A signed revocation (§4.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RevocationEntry {
    /// The revoked block's revocation ID.
    pub revocation_id: String,
    /// Who revokes (and signs).
    pub revoked_by: PrincipalId,
    /// When.
    pub revoked_at: Timestamp,
    /// What it covers.
    pub scope: RevocationScope,
    /// Ed25519 signature over the canonical JSON without it (base64url).
    pub signature: String,
}

/// Why a revocation entry was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevocationError {
    #[error("revocationId is not a base64url BLAKE2b-256 hash: {0}")]
    /// The revocation ID is malformed.
    RevocationId(String),
    #[error("revocation signature: {0}")]
    /// The signature does not verify.
    Signature(#[from] SignatureError),
    #[error("revocation list: {0}")]
    /// Not JSON of the right shape.
    Json(String),
}

impl From<JsonError> for RevocationError {
    fn from(e: JsonError) -> Self {
        RevocationError::Json(e.to_string())
    }
}

impl RevocationEntry {
    /// Signs a revocation of `revocation_id` by `key`.
    pub fn sign(
        key: &Keypair,
        revocation_id: &str,
        revoked_at: Timestamp,
        scope: RevocationScope,
    ) -> Result<Self, RevocationError> {
        check_revocation_id(revocation_id)?;
        let mut entry = Self {
            revocation_id: revocation_id.to_owned(),
            revoked_by: key.principal_id().clone(),
            revoked_at,
            scope,
            signature: String::new(),
        };
        entry.signature = signing::sign(key, &without_signature(&entry)?)?;
        Ok(entry)
    }

    /// Checks the shape of the ID and the signature by `revokedBy`.
    pub fn verify(&self) -> Result<(), RevocationError> {
        check_revocation_id(&self.revocation_id)?;
        signing::verify(&self.revoked_by, &without_signature(self)?, &self.signature)?;
        Ok(())
    }

    /// [`RevocationEntry::verify`], keeping the proof in the type, so code
    /// that holds a verified entry never checks its signature again.
    pub fn into_verified(self) -> Result<VerifiedRevocation, RevocationError> {
        self.verify()?;
        Ok(VerifiedRevocation(self))
    }
}

/// A revocation entry whose ID and signature have been checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedRevocation(RevocationEntry);

impl VerifiedRevocation {
    /// The verified entry.
    pub fn entry(&self) -> &RevocationEntry {
        &self.0
    }
}

/// Checks that `id` is a revocation ID: base64url of a BLAKE2b-256 hash.
pub fn check_revocation_id(id: &str) -> Result<(), RevocationError> {
    base64url::decode_array::<32>(id)
        .map(|_| ())
        .map_err(|e| RevocationError::RevocationId(e.to_string()))
}

/// What DCT verification asks of revocation state.
pub trait RevocationCheck {
    /// Whether the block with `revocation_id`, signed by `signer`, is revoked.
    fn is_block_revoked(&self, revocation_id: &str, signer: &PrincipalId) -> bool;
}

/// A bare set of revoked IDs, for callers that have already checked who
/// revoked what (such as `dgw token verify --revoked`).
impl RevocationCheck for HashSet<String> {
    fn is_block_revoked(&self, revocation_id: &str, _signer: &PrincipalId) -> bool {
        self.contains(revocation_id)
    }
}

/// No revocations at all.
pub struct NoRevocations;

impl RevocationCheck for NoRevocations {
    fn is_block_revoked(&self, _: &str, _: &PrincipalId) -> bool {
        false
    }
}

/// Verified revocation entries, keyed by revocation ID and revoker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RevocationList {
    entries: BTreeMap<String, BTreeMap<PrincipalId, RevocationEntry>>,
}

impl RevocationList {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an entry after verifying its signature. Adding the same
    /// (ID, revoker) twice keeps the first entry.
    pub fn add(&mut self, entry: RevocationEntry) -> Result<(), RevocationError> {
        self.insert(entry.into_verified()?);
        Ok(())
    }

    /// Adds an entry already verified (see [`RevocationList::add`]).
    pub fn insert(&mut self, entry: VerifiedRevocation) {
        let VerifiedRevocation(entry) = entry;
        self.entries
            .entry(entry.revocation_id.clone())
            .or_default()
            .entry(entry.revoked_by.clone())
            .or_insert(entry);
    }

    /// Whether anyone has revoked this ID (§4.2's `isRevoked`). Verification
    /// uses [`RevocationCheck`], which also requires the right revoker.
    pub fn is_revoked(&self, revocation_id: &str) -> bool {
        self.entries.contains_key(revocation_id)
    }

    /// Every entry, ordered by revocation ID then revoker.
    pub fn list(&self) -> Vec<&RevocationEntry> {
        self.entries.values().flat_map(|m| m.values()).collect()
    }

    /// The revoked IDs.
    pub fn ids(&self) -> BTreeSet<&str> {
        self.entries.keys().map(String::as_str).collect()
    }

    /// The list as a JSON array of entries.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.list()).expect("entries always serialize")
    }

    /// Reads a JSON array of entries, verifying every signature.
    pub fn from_json(json: &str) -> Result<Self, RevocationError> {
        let value = parse_strict(json.as_bytes(), MAX_LIST_BYTES)?;
        let entries: Vec<RevocationEntry> =
            serde_json::from_value(value).map_err(|e| RevocationError::Json(e.to_string()))?;
        let mut list = Self::new();
        for entry in entries {
            list.add(entry)?;
        }
        Ok(list)
    }
}

impl RevocationCheck for RevocationList {
    fn is_block_revoked(&self, revocation_id: &str, signer: &PrincipalId) -> bool {
        self.entries
            .get(revocation_id)
            .is_some_and(|by| by.contains_key(signer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        Timestamp::parse("2026-02-17T10:00:00.000Z").unwrap()
    }

    #[test]
    fn sign_add_check_round_trip() {
        let key = Keypair::from_seed([3; 32]);
        let id = base64url::encode(&[9; 32]);
        let entry = RevocationEntry::sign(&key, &id, now(), RevocationScope::Chain).unwrap();
        let mut list = RevocationList::new();
        list.add(entry.clone()).unwrap();
        assert!(list.is_revoked(&id));
        assert!(list.is_block_revoked(&id, key.principal_id()));
        let stranger = Keypair::from_seed([4; 32]);
        assert!(!list.is_block_revoked(&id, stranger.principal_id()));
        let back = RevocationList::from_json(&list.to_json()).unwrap();
        assert_eq!(back, list);
        assert_eq!(back.list(), vec![&entry]);
    }

    #[test]
    fn tampered_entries_are_refused() {
        let key = Keypair::from_seed([3; 32]);
        let id = base64url::encode(&[9; 32]);
        let entry = RevocationEntry::sign(&key, &id, now(), RevocationScope::Block).unwrap();
        let mut list = RevocationList::new();
        let mut t = entry.clone();
        t.scope = RevocationScope::Chain;
        assert!(t.clone().into_verified().is_err());
        assert!(list.add(t).is_err());
        assert_eq!(entry.clone().into_verified().unwrap().entry(), &entry);
        let mut t = entry.clone();
        t.revoked_at = Timestamp::parse("2026-02-17T10:00:01Z").unwrap();
        assert!(list.add(t).is_err());
        let mut t = entry.clone();
        t.revoked_by = Keypair::from_seed([5; 32]).principal_id().clone();
        assert!(list.add(t).is_err());
        let mut t = entry.clone();
        t.revocation_id = base64url::encode(&[8; 32]);
        assert!(list.add(t).is_err());
        let mut t = entry;
        t.revocation_id = "not-a-hash".into();
        assert!(matches!(list.add(t), Err(RevocationError::RevocationId(_))));
        assert!(list.list().is_empty());
        assert!(RevocationList::from_json("[{}]").is_err());
        assert!(RevocationList::from_json("{").is_err());
    }
}
