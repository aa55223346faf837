//! Envelope signatures as ldp-protocol 0.2.0 makes them: HMAC-SHA256 with
//! the shared secret over `from|to|session_id|timestamp|message_id`, then
//! `|nonce` when there is one, then `|` and the body's key fields (HELLO:
//! `delegate_id`; SESSION_ACCEPT: `session_id`; SESSION_REJECT: `reason`;
//! TASK_SUBMIT: `task_id|skill`; the other TASK_*: `task_id`; else
//! nothing), then `|` and the body's type; lowercase hex, algorithm
//! `hmac-sha256`.
//!
//! The reference's signature does not cover the payload. dgw's extension:
//! an envelope with `payload_digest` (`hex(SHA-256(JCS({body,
//! payload_mode, provenance})))`) has `|` and that digest appended to the
//! signed input, and the digest must match the payload. A plain reference
//! peer neither sends nor checks it (docs/adapters/ldp.md).

use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::message::{Body, Envelope};
use crate::{Reason, Refusal};

/// The one algorithm.
pub const ALGORITHM: &str = "hmac-sha256";

type HmacSha256 = Hmac<Sha256>;

fn mac(envelope: &Envelope, secret: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length: new_from_slice never fails for it.
    let mut mac = match HmacSha256::new_from_slice(secret) {
        Ok(m) => m,
        Err(_) => unreachable_hmac(),
    };
    for (i, field) in [
        &envelope.from,
        &envelope.to,
        &envelope.session_id,
        &envelope.timestamp,
        &envelope.message_id,
    ]
    .into_iter()
    .enumerate()
    {
        if i > 0 {
            mac.update(b"|");
        }
        mac.update(field.as_bytes());
    }
    if let Some(nonce) = &envelope.nonce {
        mac.update(b"|");
        mac.update(nonce.as_bytes());
    }
    mac.update(b"|");
    match &envelope.body {
        Body::Hello { delegate_id, .. } => mac.update(delegate_id.as_bytes()),
        Body::SessionAccept { session_id, .. } => mac.update(session_id.as_bytes()),
        Body::SessionReject { reason, .. } => mac.update(reason.as_bytes()),
        Body::TaskSubmit { task_id, skill, .. } => {
            mac.update(task_id.as_bytes());
            mac.update(b"|");
            mac.update(skill.as_bytes());
        }
        Body::TaskUpdate { task_id, .. }
        | Body::TaskResult { task_id, .. }
        | Body::TaskFailed { task_id, .. }
        | Body::TaskCancel { task_id } => mac.update(task_id.as_bytes()),
        Body::CapabilityManifest { .. }
        | Body::SessionPropose { .. }
        | Body::Attestation { .. }
        | Body::SessionClose { .. } => {}
    }
    mac.update(b"|");
    mac.update(envelope.body.kind().as_bytes());
    if let Some(digest) = &envelope.payload_digest {
        mac.update(b"|");
        mac.update(digest.as_bytes());
    }
    mac
}

#[allow(clippy::panic)]
fn unreachable_hmac() -> ! {
    // HMAC accepts every key length (RFC 2104): this cannot happen.
    panic!("HMAC-SHA256 refused a key")
}

/// The signature of `envelope` with `secret`, lowercase hex.
pub fn sign(envelope: &Envelope, secret: &[u8]) -> String {
    hex::encode(mac(envelope, secret).finalize().into_bytes())
}

/// The payload digest dgw binds: `hex(SHA-256(JCS({body, payload_mode,
/// provenance})))`.
pub fn payload_digest(envelope: &Envelope) -> String {
    let payload = json!({
        "body": envelope.body,
        "payload_mode": envelope.payload_mode,
        "provenance": envelope.provenance,
    });
    let bytes = serde_jcs::to_vec(&payload).unwrap_or_default();
    hex::encode(Sha256::digest(bytes))
}

/// Signs `envelope` in place: with `bind_payload`, its payload digest
/// first (only toward peers that check it).
pub fn apply(envelope: &mut Envelope, secret: &[u8], bind_payload: bool) {
    envelope.payload_digest = bind_payload.then(|| payload_digest(envelope));
    envelope.signature = Some(sign(envelope, secret));
    envelope.signature_algorithm = Some(ALGORITHM.to_owned());
}

/// Verifies `envelope`'s signature with `secret` (constant time), and its
/// payload digest when it has one; `require_digest` refuses an envelope
/// without one.
pub fn verify(envelope: &Envelope, secret: &[u8], require_digest: bool) -> Result<(), Refusal> {
    match envelope.signature_algorithm.as_deref() {
        Some(ALGORITHM) => {}
        None => {
            return Err(Refusal::new(
                Reason::BadSignature,
                "the message is not signed",
            ))
        }
        Some(other) => {
            return Err(Refusal::new(
                Reason::UnsupportedAlgorithm,
                format!("signature_algorithm {other:?}; only {ALGORITHM} is accepted"),
            ))
        }
    }
    let signature = envelope
        .signature
        .as_deref()
        .filter(|s| s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .and_then(|s| hex::decode(s).ok())
        .ok_or_else(|| Refusal::new(Reason::BadSignature, "the signature is not lowercase hex"))?;
    mac(envelope, secret)
        .verify_slice(&signature)
        .map_err(|_| Refusal::new(Reason::BadSignature, "the signature does not verify"))?;
    match &envelope.payload_digest {
        Some(d) if *d != payload_digest(envelope) => Err(Refusal::new(
            Reason::BadSignature,
            "the payload does not match its signed digest",
        )),
        None if require_digest => Err(Refusal::new(
            Reason::BadSignature,
            "the message binds no payload digest",
        )),
        _ => Ok(()),
    }
}
