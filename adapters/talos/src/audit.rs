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
    Grant,
    Deny,
    Invoke,
    Revoke,
}

/// How it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum ResultCode {
    Ok,
    Denied,
    Error,
}

/// An audit event (§5.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditEvent {
    pub event_type: EventType,
    pub tool: String,
    pub capability_hash: String,
    pub request_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_hash: Option<String>,
    pub agent_id: String,
    pub tool_id: String,
    pub timestamp: String,
    pub result_code: ResultCode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denial_reason: Option<String>,
    #[serde(default)]
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
