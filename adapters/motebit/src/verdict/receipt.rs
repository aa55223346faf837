//! The verdict on a receipt: the reference's `verifyReceiptVerdict`.

use serde_json::{Map, Value};

use super::{
    binding, pin_mismatch_repair, signed, Authority, EvidenceRef, IdentityBinding, Integrity,
    Repair, Revocation, RevocationStatus, Subject, TemporalBasis, Verdict, DOCTRINE,
    IDENTITY_DOCTRINE,
};
use crate::encoding;
use crate::js;

/// The verdict on a receipt, any JSON object (the reference's
/// `verifyReceiptVerdict`, which never refuses an object: a member missing
/// or of another type is read as its JavaScript reads it); `pinned`: the
/// key pinned for its `motebit_id`, if any.
pub fn receipt(receipt: &Map<String, Value>, pinned: Option<&str>) -> Verdict {
    let public_key = receipt.get("public_key");
    let mut evidence = Vec::new();
    // `if (receipt.public_key)`: a key is read only when truthy, and is
    // usable only when `hexToBytes` gives 32 bytes.
    let key = if js::truthy(public_key) {
        evidence.push(EvidenceRef::of("public_key", public_key));
        js::hex_to_bytes(public_key).filter(|b| b.len() == 32)
    } else {
        None
    };
    evidence.push(EvidenceRef::of("receipt", receipt.get("result_hash")));
    let integrity_repair = if key.is_none() {
        Some(Repair {
            code: "integrity.no_key".into(),
            axis: "integrity".into(),
            summary: "Receipt has no usable embedded public_key to verify against.".into(),
            canonical: Some(DOCTRINE.into()),
            fix: "Obtain the receipt with its embedded `public_key` (hex), or supply the signer's key out of band.".into(),
        })
    } else if !signed(receipt, key.clone()) {
        Some(Repair {
            code: "integrity.signature_invalid".into(),
            axis: "integrity".into(),
            summary: "Ed25519 signature did not verify over the receipt's canonical bytes.".into(),
            canonical: Some(DOCTRINE.into()),
            fix: "The receipt was tampered or signed by a different key — re-fetch the authentic receipt; do not trust this copy.".into(),
        })
    } else if !js::is_str(
        receipt.get("result_hash"),
        &encoding::sha256_hex(js::encoded(receipt.get("result")).as_bytes()),
    ) {
        Some(Repair {
            code: "integrity.hash_inconsistent".into(),
            axis: "integrity".into(),
            summary: "Signature verifies, but result_hash != hex(SHA-256(result)) — a valid signature over a self-inconsistent receipt; the digest does not bind the result.".into(),
            canonical: Some("the receipt's result_hash field (recompute hex(SHA-256(result)))".into()),
            fix: "result_hash MUST equal hex(SHA-256(result)). The signer committed an inconsistent digest — reject the receipt; never trust result_hash as a content address for the result.".into(),
        })
    } else {
        None
    };
    let integrity = if integrity_repair.is_some() {
        Integrity::Invalid
    } else {
        Integrity::Verified
    };
    // `if (publicKey && receipt.public_key && receipt.motebit_id)`.
    let identity_binding = if key.is_some() && js::truthy(receipt.get("motebit_id")) {
        binding(receipt.get("motebit_id"), public_key, pinned)
    } else {
        IdentityBinding::Unverified
    };
    let repair = integrity_repair.or_else(|| match identity_binding {
        IdentityBinding::Unverified => Some(Repair {
            code: "identity.binding_unverified".into(),
            axis: "identityBinding".into(),
            summary: "Signature verifies, but the key-to-motebit_id binding is NOT established (integrity only).".into(),
            canonical: Some(IDENTITY_DOCTRINE.into()),
            fix: "The motebit_id does not commit to this key (not sovereign). Establish a higher rung — supply an identity file / known-keys map (pinned) or a transparency-log inclusion proof (anchored) — before treating this as identity-verified.".into(),
        }),
        IdentityBinding::Invalid => Some(pin_mismatch_repair()),
        _ => None,
    });
    Verdict {
        kind: Subject::Receipt,
        integrity,
        identity_binding,
        authority: Authority::Unknown,
        revocation: Revocation {
            status: RevocationStatus::Unchecked,
            freshness: None,
        },
        temporal_basis: TemporalBasis::Clockless,
        evidence_basis: evidence,
        repair,
    }
}
