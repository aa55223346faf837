//! The `VerificationVerdict` (spec/conformance/verification-verdict/,
//! `@motebit/protocol` 3.16's `verification-verdict.ts`): what each axis of
//! a receipt or delegation token established, never a bare boolean. The
//! producers ([`receipt()`], [`delegation_token()`]) follow the reference's
//! `verifyReceiptVerdict` and `verifyDelegationTokenVerdict` rule for rule
//! over any JSON object, read as the reference's JavaScript reads it
//! ([`crate::js`]): a member missing or of another type gets the verdict
//! the reference gives it, not an error. A pinned key (dgw's key pinning)
//! is the one input the reference lacks, and raises `identityBinding` to
//! `pinned` (or `invalid` on a mismatch).

mod receipt;
mod token;

pub use receipt::receipt;
pub use token::{delegation_token, Unjudged};

use ed25519_dalek::{Signature, VerifyingKey};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::js::{self, Member};
use crate::{encoding, identity, SUITE};

/// Whether the signature (and, for receipts, the hash binding) holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Integrity {
    /// It holds.
    Verified,
    /// It does not.
    Invalid,
}

/// How strongly the signer's key is bound to its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdentityBinding {
    /// The id commits to the key by itself.
    Sovereign,
    /// A transparency proof binds them (dgw never reports it: it holds none).
    Anchored,
    /// The key is the one pinned for the id.
    Pinned,
    /// Nothing binds them.
    Unverified,
    /// The key is not the one pinned for the id.
    Invalid,
}

/// Whether a token confers the authority it claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Authority {
    /// It does.
    Valid,
    /// Its window has passed.
    Expired,
    /// Its window has not started.
    NotYetValid,
    /// It is not a valid tick of its grant.
    Insufficient,
    /// Nothing to judge it by (a receipt).
    Unknown,
}

/// The revocation axis's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RevocationStatus {
    /// A revocation set was consulted and names nothing.
    Fresh,
    /// The set is older than tolerated.
    Stale,
    /// No set was consulted.
    Unchecked,
    /// Revoked.
    Revoked,
}

/// The revocation axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Revocation {
    /// What was found.
    pub status: RevocationStatus,
    /// The consulted set's basis and age, as the caller described it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freshness: Option<Value>,
}

/// What time the authority was judged by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TemporalBasis {
    /// Ordering alone: no clock consulted.
    Clockless,
    /// The verifier's clock.
    LocalClock,
    /// A ledger's time.
    LedgerAnchored,
}

/// One piece of evidence the verdict rests on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceRef {
    /// What it is.
    pub kind: String,
    /// Which one: the artifact's member as written, whatever its type;
    /// absent when the artifact lacks it (the reference's `undefined`).
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<Value>,
    /// Where the evidence can be re-checked (protocol 3.6), kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Value>,
}

impl EvidenceRef {
    fn of(kind: &str, reference: Member<'_>) -> Self {
        EvidenceRef {
            kind: kind.to_owned(),
            reference: reference.cloned(),
            provenance: None,
        }
    }
}

/// What to do about the first failing axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Repair {
    /// `<axis>.<cause>`.
    pub code: String,
    /// The axis.
    pub axis: String,
    /// What failed.
    pub summary: String,
    /// Where the rule is written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canonical: Option<String>,
    /// What to do.
    pub fix: String,
}

/// What a verdict is about: `VerdictSubject`, closed, as `@motebit/protocol`
/// 3.16 lists it (3.12 added the last four). dgw produces verdicts on
/// receipts and delegation tokens and reads verdicts on any subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Subject {
    /// An identity file.
    #[serde(rename = "identity")]
    Identity,
    /// An execution receipt.
    #[serde(rename = "receipt")]
    Receipt,
    /// A tool-invocation receipt.
    #[serde(rename = "tool-invocation")]
    ToolInvocation,
    /// A verifiable credential.
    #[serde(rename = "credential")]
    Credential,
    /// A verifiable presentation.
    #[serde(rename = "presentation")]
    Presentation,
    /// A skill.
    #[serde(rename = "skill")]
    Skill,
    /// Not recognised.
    #[serde(rename = "unknown")]
    Unknown,
    /// A delegation token.
    #[serde(rename = "delegation_token")]
    DelegationToken,
    /// A key succession (protocol 3.12).
    #[serde(rename = "succession")]
    Succession,
    /// A revocation (protocol 3.12).
    #[serde(rename = "revocation")]
    Revocation,
    /// A bond commitment (protocol 3.12).
    #[serde(rename = "bond_commitment")]
    BondCommitment,
    /// A solvency proof (protocol 3.12).
    #[serde(rename = "solvency_proof")]
    SolvencyProof,
}

impl Subject {
    /// The subject named `name`, if it is one.
    pub fn from_name(name: &str) -> Option<Self> {
        serde_json::from_value(Value::String(name.to_owned())).ok()
    }
}

/// A verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Verdict {
    /// What it is about.
    #[serde(rename = "type")]
    pub kind: Subject,
    /// The signature axis.
    pub integrity: Integrity,
    /// The key-to-id axis.
    pub identity_binding: IdentityBinding,
    /// The authority axis.
    pub authority: Authority,
    /// The revocation axis.
    pub revocation: Revocation,
    /// The clock the authority was judged by.
    pub temporal_basis: TemporalBasis,
    /// What it rests on.
    pub evidence_basis: Vec<EvidenceRef>,
    /// The first failing axis's repair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<Repair>,
}

impl Verdict {
    /// As JSON.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// A verdict as written (by the reference or another verifier), of any
    /// subject.
    pub fn from_json(value: &Value) -> Result<Self, serde_json::Error> {
        Self::deserialize(value)
    }

    /// The reference's `isFullyVerified`: every load-bearing axis passes.
    pub fn is_fully_verified(&self) -> bool {
        self.integrity == Integrity::Verified
            && matches!(
                self.identity_binding,
                IdentityBinding::Sovereign | IdentityBinding::Anchored | IdentityBinding::Pinned
            )
            && self.authority == Authority::Valid
            && self.revocation.status == RevocationStatus::Fresh
    }
}

const DOCTRINE: &str = "docs/doctrine/verify-family-fail-closed.md";
const IDENTITY_DOCTRINE: &str = "docs/doctrine/identity-binding-verification.md";

/// The binding of `id` to the key `key` (the reference's
/// `verifySovereignBinding`, then dgw's pin): a pin decides when there is
/// one; else sovereign or unverified.
fn binding(id: Member<'_>, key: Member<'_>, pinned: Option<&str>) -> IdentityBinding {
    match pinned {
        Some(pin) if js::is_str(key, pin) => IdentityBinding::Pinned,
        Some(_) => IdentityBinding::Invalid,
        None if sovereign(id, key) => IdentityBinding::Sovereign,
        None => IdentityBinding::Unverified,
    }
}

/// `verifySovereignBinding(id, key)`: a `did:key` id that decodes to the
/// key's bytes, or the UUIDv8 of `SHA-256(hexToBytes(key))` in any case;
/// false wherever the reference throws (an id that is not a string).
fn sovereign(id: Member<'_>, key: Member<'_>) -> bool {
    let Some(id) = id.and_then(Value::as_str) else {
        return false;
    };
    let Some(bytes) = js::hex_to_bytes(key) else {
        return false;
    };
    if id.starts_with("did:key:") {
        return identity::did_key_bytes(id).is_some_and(|k| k[..] == bytes[..]);
    }
    id.to_lowercase() == identity::sovereign_id_of_bytes(&bytes)
}

/// Whether `artifact`'s `signature` verifies over its other members with
/// the key `key` (bytes as `hexToBytes` reads them), under the one suite:
/// the reference's `verifyExecutionReceipt` / `verifyDelegation` /
/// `verifyStandingDelegation` / `verifyDelegationRevocation`, signature
/// part. Ed25519 is checked strictly (decision 6): a signature that only
/// ZIP-215 accepts (small-order or non-canonical points) is not taken.
fn signed(artifact: &Map<String, Value>, key: Option<Vec<u8>>) -> bool {
    if !js::is_str(artifact.get("suite"), SUITE) {
        return false;
    }
    let Some(key) = key
        .and_then(|k| <[u8; 32]>::try_from(k).ok())
        .and_then(|k| VerifyingKey::from_bytes(&k).ok())
    else {
        return false;
    };
    let Some(sig) =
        js::from_base64url(artifact.get("signature")).and_then(|s| Signature::from_slice(&s).ok())
    else {
        return false;
    };
    encoding::canonical(&js::body(artifact))
        .is_ok_and(|message| key.verify_strict(&message, &sig).is_ok())
}

fn pin_mismatch_repair() -> Repair {
    Repair {
        code: "identity.key_mismatch".into(),
        axis: "identityBinding".into(),
        summary: "The key is not the one pinned for this motebit_id.".into(),
        canonical: Some(IDENTITY_DOCTRINE.into()),
        fix: "Treat the artifact as an impersonation until an administrator re-pins the key (dgw motebit pin).".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The 12 subjects of `@motebit/protocol` 3.16 (the eval-attestation
    /// schema's enum), each read and written back as itself; nothing else.
    #[test]
    fn verdicts_of_every_subject_are_read() {
        let subjects = [
            "identity",
            "receipt",
            "tool-invocation",
            "credential",
            "presentation",
            "skill",
            "unknown",
            "delegation_token",
            "succession",
            "revocation",
            "bond_commitment",
            "solvency_proof",
        ];
        for name in subjects {
            let v = json!({"type": name, "integrity": "verified", "identityBinding": "anchored",
                "authority": "unknown", "revocation": {"status": "unchecked"},
                "temporalBasis": "ledger_anchored",
                "evidenceBasis": [{"kind": "x", "ref": "y", "provenance": {"digest": {"algorithm": "sha-256", "value": "00"}}}]});
            let read = Verdict::from_json(&v).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(Subject::from_name(name), Some(read.kind));
            assert_eq!(read.to_json(), v, "{name}");
        }
        assert_eq!(Subject::from_name("receipts"), None);
        let unknown_member = json!({"type": "receipt", "integrity": "verified", "identityBinding": "sovereign",
            "authority": "unknown", "revocation": {"status": "unchecked"}, "temporalBasis": "clockless",
            "evidenceBasis": [], "valid": true});
        assert!(Verdict::from_json(&unknown_member).is_err());
    }
}
