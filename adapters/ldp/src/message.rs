//! The envelope and the 12 message types, typed as the reference
//! `ldp-protocol` 0.2.0 writes them (its field names where the spec's
//! examples differ). Unknown types, unknown members and missing ones are
//! refused with the reason; re-serialized, a message carries only what
//! dgw understood.
//!
//! One leniency, for the PyPI package `ldp-protocol` 0.2.0 (checked
//! against that release): its body is one model holding every member of
//! the tagged union, those of other types `null`. A body member that
//! belongs to another message type is dropped when it is `null`, and
//! refused when it carries a value; a name no type has is refused even
//! when `null` (decision 167).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::mode::PayloadMode;
use crate::{Reason, Refusal, MAX_MESSAGE_BYTES};

/// The 12 message types, as `body.type` names them.
pub const TYPES: [&str; 12] = [
    "HELLO",
    "CAPABILITY_MANIFEST",
    "SESSION_PROPOSE",
    "SESSION_ACCEPT",
    "SESSION_REJECT",
    "TASK_SUBMIT",
    "TASK_UPDATE",
    "TASK_RESULT",
    "TASK_FAILED",
    "TASK_CANCEL",
    "ATTESTATION",
    "SESSION_CLOSE",
];

/// Each type's body members besides `type`, as [`Body`] reads them (a
/// unit test keeps the two in step).
pub fn members(kind: &str) -> &'static [&'static str] {
    match kind {
        "HELLO" => &["delegate_id", "supported_modes"],
        "CAPABILITY_MANIFEST" => &["capabilities"],
        "SESSION_PROPOSE" => &["config"],
        "SESSION_ACCEPT" => &["session_id", "negotiated_mode", "fallback_chain"],
        "SESSION_REJECT" => &["reason", "error"],
        "TASK_SUBMIT" => &["task_id", "skill", "input", "contract"],
        "TASK_UPDATE" => &["task_id", "progress", "message"],
        "TASK_RESULT" => &["task_id", "output", "provenance"],
        "TASK_FAILED" => &["task_id", "error"],
        "TASK_CANCEL" => &["task_id"],
        "ATTESTATION" => &["claim", "evidence"],
        "SESSION_CLOSE" => &["reason"],
        _ => &[],
    }
}

/// Drops from `body` (of type `kind`) each `null` member that is another
/// type's and not this one's: the PyPI package's shape. What remains is
/// read strictly.
fn drop_foreign_nulls(kind: &str, body: &mut Value) {
    let Some(body) = body.as_object_mut() else {
        return;
    };
    let own = members(kind);
    body.retain(|name, value| {
        !(value.is_null()
            && !own.contains(&name.as_str())
            && TYPES.iter().any(|t| members(t).contains(&name.as_str())))
    });
}

/// Every LDP message's wrapper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// Unique per message (a UUID).
    pub message_id: String,
    /// The session (empty before one is accepted).
    pub session_id: String,
    /// The sender's delegate ID.
    pub from: String,
    /// The recipient's delegate ID.
    pub to: String,
    /// The message.
    pub body: Body,
    /// The payload mode of this message.
    pub payload_mode: PayloadMode,
    /// RFC 3339.
    pub timestamp: String,
    /// Provenance, when the message carries a result.
    #[serde(default)]
    pub provenance: Option<Provenance>,
    /// HMAC-SHA256 of the header fields, lowercase hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// `hmac-sha256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_algorithm: Option<String>,
    /// 16 random bytes, hex: replay protection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    /// dgw's extension: `hex(SHA-256(JCS(body)))`, covered by the
    /// signature when present (docs/adapters/ldp.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_digest: Option<String>,
}

/// A message body, by its `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE", deny_unknown_fields)]
pub enum Body {
    /// The initiator's handshake.
    Hello {
        /// Who says hello.
        delegate_id: String,
        /// The modes it supports, preferred first.
        supported_modes: Vec<PayloadMode>,
    },
    /// The responder's capabilities.
    CapabilityManifest {
        /// Skills, modes, limits (free-form in the reference).
        capabilities: Value,
    },
    /// The initiator proposes a session.
    SessionPropose {
        /// Its configuration.
        config: SessionConfig,
    },
    /// The responder accepts.
    SessionAccept {
        /// The session's ID.
        session_id: String,
        /// The mode negotiated.
        negotiated_mode: PayloadMode,
        /// The modes to fall back to (the spec's diagram has them).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fallback_chain: Option<Vec<PayloadMode>>,
    },
    /// The responder rejects.
    SessionReject {
        /// Why.
        reason: String,
        /// Typed, when given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<LdpError>,
    },
    /// A task.
    TaskSubmit {
        /// Its ID.
        task_id: String,
        /// The skill asked.
        skill: String,
        /// Its input (a semantic frame or text).
        input: Value,
        /// A delegation contract (the reference's extension), when given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        contract: Option<DelegationContract>,
    },
    /// Progress.
    TaskUpdate {
        /// The task.
        task_id: String,
        /// 0 to 1.
        #[serde(default)]
        progress: Option<f32>,
        /// For people.
        #[serde(default)]
        message: Option<String>,
    },
    /// A result.
    TaskResult {
        /// The task.
        task_id: String,
        /// Its output.
        output: Value,
        /// Who produced it, how (required: spec "Provenance").
        provenance: Provenance,
    },
    /// A failure.
    TaskFailed {
        /// The task.
        task_id: String,
        /// Why.
        error: LdpError,
    },
    /// The initiator cancels a task.
    TaskCancel {
        /// The task.
        task_id: String,
    },
    /// A trust signal.
    Attestation {
        /// What is claimed.
        claim: Value,
        /// What backs it.
        evidence: Value,
    },
    /// Either side ends the session.
    SessionClose {
        /// Why.
        #[serde(default)]
        reason: Option<String>,
    },
}

impl Body {
    /// Its `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Body::Hello { .. } => "HELLO",
            Body::CapabilityManifest { .. } => "CAPABILITY_MANIFEST",
            Body::SessionPropose { .. } => "SESSION_PROPOSE",
            Body::SessionAccept { .. } => "SESSION_ACCEPT",
            Body::SessionReject { .. } => "SESSION_REJECT",
            Body::TaskSubmit { .. } => "TASK_SUBMIT",
            Body::TaskUpdate { .. } => "TASK_UPDATE",
            Body::TaskResult { .. } => "TASK_RESULT",
            Body::TaskFailed { .. } => "TASK_FAILED",
            Body::TaskCancel { .. } => "TASK_CANCEL",
            Body::Attestation { .. } => "ATTESTATION",
            Body::SessionClose { .. } => "SESSION_CLOSE",
        }
    }
}

/// The reference's delegation contract on a TASK_SUBMIT: bounded
/// expectations the router sets for the task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegationContract {
    /// Its ID.
    pub contract_id: String,
    /// What the task is for.
    pub objective: String,
    /// How its result is judged.
    pub success_criteria: Vec<String>,
    /// Its limits.
    #[serde(default)]
    pub policy: PolicyEnvelope,
    /// By when, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// When it was made, RFC 3339.
    pub created_at: String,
}

/// A contract's limits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyEnvelope {
    /// What the router does when the contract fails.
    #[serde(default)]
    pub failure_policy: FailurePolicy,
    /// What the task may cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetPolicy>,
    /// Free-form constraints for the delegate.
    #[serde(default)]
    pub safety_constraints: Vec<String>,
    /// How deep the delegate may delegate on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_delegation_depth: Option<u32>,
}

/// What the router does when a contract fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailurePolicy {
    /// Reject the result.
    FailClosed,
    /// Keep it, noting the violation (the reference's default).
    #[default]
    FailOpen,
}

/// What a task may cost, as the router caps it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetPolicy {
    /// Tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
}

impl DelegationContract {
    /// Whether a task costing `cost_microcents` is within the router's
    /// dollar cap (none: within). A cap that is not a number ≥ 0 admits
    /// nothing.
    pub fn admits_cost(&self, cost_microcents: u64) -> bool {
        match self.policy.budget.as_ref().and_then(|b| b.max_cost_usd) {
            None => true,
            Some(cap) if cap.is_nan() || cap < 0.0 => false,
            // 1 USD = 100 cents = 10^8 microcents.
            Some(cap) => cost_microcents as f64 <= cap * 1e8,
        }
    }
}

/// SESSION_PROPOSE's configuration: the spec's members ("Session
/// Configuration") and the ones the reference's client sends instead
/// (`payload_mode`, and its own `trust_domain`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionConfig {
    /// Preference list, highest first (the spec's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_payload_modes: Option<Vec<PayloadMode>>,
    /// The one mode asked (the reference client's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_mode: Option<PayloadMode>,
    /// Seconds of inactivity before the session expires.
    #[serde(default = "default_ttl")]
    pub ttl_secs: u64,
    /// The trust domain the responder must be in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_trust_domain: Option<String>,
    /// The initiator's own trust domain (the reference client's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_domain: Option<String>,
    /// The most the session may spend, microcents (dgw's extension: a
    /// router caps its session below what its payer could spend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_microcents: Option<u64>,
}

impl SessionConfig {
    /// The initiator's preferences, highest first: the spec's list, else
    /// the one mode asked then Text (as the reference server reads it),
    /// else the spec's default `[semantic_frame, text]`.
    pub fn preferences(&self) -> Vec<PayloadMode> {
        match (&self.preferred_payload_modes, self.payload_mode) {
            (Some(list), _) => list.clone(),
            (None, Some(mode)) => vec![mode, PayloadMode::Text],
            (None, None) => vec![PayloadMode::SemanticFrame, PayloadMode::Text],
        }
    }
}

fn default_ttl() -> u64 {
    3600
}

/// Who produced a result, and how (spec "Provenance"; the reference's
/// later members optional).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// The delegate that produced it.
    pub produced_by: String,
    /// Its model version.
    pub model_version: String,
    /// The mode of the exchange.
    pub payload_mode_used: PayloadMode,
    /// Self-reported, 0 to 1.
    #[serde(default)]
    pub confidence: Option<f64>,
    /// Whether it was independently verified (required by the spec;
    /// the reference defaults it to false).
    #[serde(default)]
    pub verified: bool,
    /// The session it was produced in.
    #[serde(default)]
    pub session_id: Option<String>,
    /// When, RFC 3339.
    #[serde(default)]
    pub timestamp: Option<String>,
    /// Tokens used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_used: Option<u64>,
    /// Cost in USD, as reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The contract it was produced under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_id: Option<String>,
    /// Whether the contract was met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_satisfied: Option<bool>,
    /// How it was not.
    #[serde(default)]
    pub contract_violations: Vec<String>,
    /// `unverified`, `self_verified`, `peer_verified`, `tool_verified`,
    /// `human_verified`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification_status: Option<VerificationStatus>,
    /// Evidence references.
    #[serde(default)]
    pub evidence: Vec<Value>,
    /// Earlier steps.
    #[serde(default)]
    pub lineage: Vec<Value>,
}

/// How a result was verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerificationStatus {
    /// Not at all.
    Unverified,
    /// By its producer.
    SelfVerified,
    /// By another delegate.
    PeerVerified,
    /// By a tool.
    ToolVerified,
    /// By a person.
    HumanVerified,
}

/// A typed error (the reference's `LdpError`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LdpError {
    /// A code.
    pub code: String,
    /// `identity`, `capability`, `policy`, `runtime`, `quality`,
    /// `session`, `transport`, `security`.
    pub category: String,
    /// For people.
    pub message: String,
    /// `warning`, `error`, `fatal`.
    pub severity: String,
    /// Whether a retry may succeed.
    pub retryable: bool,
    /// What was done before it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_output: Option<Value>,
}

impl Envelope {
    /// Parses untrusted bytes: at most [`MAX_MESSAGE_BYTES`], a known
    /// `body.type`, every member of its shape.
    pub fn parse(bytes: &[u8]) -> Result<Self, Refusal> {
        if bytes.len() > MAX_MESSAGE_BYTES {
            return Err(Refusal::new(
                Reason::Malformed,
                format!("a message may have at most {MAX_MESSAGE_BYTES} bytes"),
            ));
        }
        let value: Value = serde_json::from_slice(bytes)
            .map_err(|e| Refusal::new(Reason::Malformed, format!("not JSON: {e}")))?;
        Self::from_value(value)
    }

    /// The envelope `value` is.
    pub fn from_value(mut value: Value) -> Result<Self, Refusal> {
        let kind = value
            .get("body")
            .and_then(|b| b.get("type"))
            .and_then(Value::as_str)
            .ok_or_else(|| Refusal::new(Reason::Malformed, "the envelope has no body.type"))?;
        if !TYPES.contains(&kind) {
            return Err(Refusal::new(
                Reason::UnknownType,
                format!("{kind:?} is not an LDP message type"),
            ));
        }
        let kind = kind.to_owned();
        if let Some(body) = value.get_mut("body") {
            drop_foreign_nulls(&kind, body);
        }
        let provenance = value.pointer("/body/provenance");
        if kind == "TASK_RESULT" && provenance.is_none_or(Value::is_null) {
            return Err(Refusal::new(
                Reason::MissingProvenance,
                "a TASK_RESULT must carry its provenance (spec \"Provenance\")",
            ));
        }
        serde_json::from_value(value)
            .map_err(|e| Refusal::new(Reason::Malformed, format!("{kind}: {e}")))
    }

    /// The provenance of a result: the body's, else the envelope's.
    pub fn result_provenance(&self) -> Option<&Provenance> {
        match &self.body {
            Body::TaskResult { provenance, .. } => Some(provenance),
            _ => self.provenance.as_ref(),
        }
    }
}
