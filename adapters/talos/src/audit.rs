//! §5: signed audit events. Signed by the gateway's Ed25519 key over the
//! JCS bytes of every field but `signature` (base64url).

use delegateos::Keypair;
use ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::jcs;
use crate::keys::decode_signature;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum EventType {
    /// A capability was granted for a call.
    Grant,
    /// A call was denied.
    Deny,
    /// A granted call reached the tool.
    Invoke,
    /// A capability was revoked.
    Revoke,
}

/// How it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum ResultCode {
    /// Done.
    Ok,
    /// Refused.
    Denied,
    /// Failed at the tool.
    Error,
}

/// An audit event (§5.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditEvent {
    /// What happened.
    pub event_type: EventType,
    /// The tool called (empty for a revocation).
    pub tool: String,
    /// The capability's hash (§2.3); the revoked name for a revocation.
    pub capability_hash: String,
    /// SHA-256 of the request's JCS bytes without its envelope (§3).
    pub request_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// SHA-256 of the response's JCS bytes, once the tool answered.
    pub response_hash: Option<String>,
    /// The capability's subject: the agent that called.
    pub agent_id: String,
    /// `did:talos:tool:<tool>`.
    pub tool_id: String,
    /// When, RFC 3339.
    pub timestamp: String,
    /// How it ended.
    pub result_code: ResultCode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The Talos reason of a denial.
    pub denial_reason: Option<String>,
    #[serde(default)]
    /// The gateway's Ed25519 signature over the event's JCS bytes without it (base64url).
    pub signature: String,
}

impl AuditEvent {
    fn content(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.remove("signature");
        }
        v
    }

    /// Signs the event with `key`.
    pub fn sign(mut self, key: &Keypair) -> Self {
        self.signature =
            delegateos::base64url::encode(&key.sign_message(&jcs(&self.content())).to_bytes());
        self
    }

    /// Whether `key` signed it.
    pub fn verify(&self, key: &VerifyingKey) -> bool {
        decode_signature(&self.signature)
            .is_some_and(|sig| key.verify_strict(&jcs(&self.content()), &sig).is_ok())
    }
}
