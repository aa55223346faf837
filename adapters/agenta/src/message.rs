//! The four messages as Rust types, read only after their schema passed
//! (`Schemas::parse`): what the schema guarantees, the types hold. Free-form
//! members (schemas, inputs, results, metadata) stay JSON.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::schema::{MessageType, SchemaFailure, Schemas, Violation};
use crate::state::Status;

/// An agent and its organisation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    /// The agent.
    pub agent_id: String,
    /// Its organisation.
    pub organization_id: String,
    /// A name for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
}

/// The seller of an offer, and where it takes requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seller {
    /// The agent.
    pub agent_id: String,
    /// Its organisation.
    pub organization_id: String,
    /// A name for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Where it takes execution requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

/// What an offer costs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pricing {
    /// `fixed`, `usage_based` or `quote_required`.
    pub pricing_model: String,
    /// ISO 4217 code.
    pub currency: String,
    /// In the currency's minor unit.
    pub amount: u64,
    /// What one unit is, for usage-based pricing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// How quotes are made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote_notes: Option<String>,
}

/// How fast the seller works.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceLevels {
    /// Usually done within this many seconds.
    pub target_completion_seconds: u64,
    /// Always done (or failed) within this many seconds.
    pub max_completion_seconds: u64,
    /// Whether partial results are sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_partial_results: Option<bool>,
    /// Whether the buyer may cancel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_cancellation: Option<bool>,
}

/// How a result is judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerificationPolicy {
    /// `seller_attested`, `buyer_verified` or `third_party_verified`.
    pub mode: String,
    /// Artifacts a receipt must carry.
    pub required_artifacts: Vec<String>,
    /// What a pass means, for people.
    pub pass_criteria: Vec<String>,
}

/// A seller's offer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Offer {
    /// `agenta.delegation.v0`.
    pub protocol_version: String,
    /// `offer`.
    pub message_type: String,
    /// The offer.
    pub offer_id: String,
    /// Its version; requests name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offer_version: Option<String>,
    /// Who sells.
    pub seller_agent: Seller,
    /// A short name.
    pub title: String,
    /// What the work is.
    pub description: String,
    /// Capability names the seller claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
    /// What a request's `input` must match.
    pub input_schema: Value,
    /// What a completed receipt's `result` must match.
    pub output_schema: Value,
    /// What it costs.
    pub pricing: Pricing,
    /// How fast.
    pub service_levels: ServiceLevels,
    /// How results are judged.
    pub verification_policy: VerificationPolicy,
    /// The seller's terms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terms_url: Option<String>,
    /// From when it may be bought (RFC 3339).
    pub valid_from: String,
    /// Until when (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<String>,
    /// When work may run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_window: Option<Map<String, Value>>,
    /// How much the seller takes at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limits: Option<Map<String, Value>>,
    /// Who may buy (none: anyone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_buyer_agents: Option<Vec<String>>,
    /// Free-form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A buyer's payment terms for a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Payment {
    /// ISO 4217 code.
    pub currency: String,
    /// The most the buyer pays, in the currency's minor unit.
    pub max_amount: u64,
    /// The authorization that backs it.
    pub payment_authorization_id: String,
    /// Whether the amount is held in escrow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escrow_required: Option<bool>,
}

/// A buyer's request to execute an offer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionRequest {
    /// `agenta.delegation.v0`.
    pub protocol_version: String,
    /// `execution_request`.
    pub message_type: String,
    /// The request.
    pub request_id: String,
    /// Ties related messages together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// The request this one serves, when it is a sub-request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_request_id: Option<String>,
    /// The offer bought.
    pub offer_id: String,
    /// The offer version bought.
    pub offer_version: String,
    /// Who buys.
    pub buyer_agent: Agent,
    /// Who sells.
    pub seller_agent_id: String,
    /// The work's input.
    pub input: Map<String, Value>,
    /// What the buyer pays.
    pub payment: Payment,
    /// When (`deadline_at`, …).
    pub execution_constraints: Map<String, Value>,
    /// `low`, `normal`, `high` or `urgent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// Where receipts go (`url`, `auth_reference`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback: Option<Map<String, Value>>,
    /// What the buyer will verify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification_requirements: Option<Map<String, Value>>,
    /// The same key with the same body is the same request.
    pub idempotency_key: String,
    /// When it was sent (RFC 3339).
    pub requested_at: String,
    /// Free-form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// Evidence a receipt or a verification points to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Artifact {
    /// `result_payload`, `logs`, `checksums`, `citations`, `screenshots`,
    /// `trace_ids` or `other`.
    pub artifact_type: String,
    /// Where it is.
    pub uri: String,
    /// Its digest (`sha256:<hex>` by this gateway's convention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// What it is, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A seller's report on a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionReceipt {
    /// `agenta.delegation.v0`.
    pub protocol_version: String,
    /// `execution_receipt`.
    pub message_type: String,
    /// The receipt.
    pub receipt_id: String,
    /// The request it reports on.
    pub request_id: String,
    /// The seller's execution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    /// The offer.
    pub offer_id: String,
    /// The offer version.
    pub offer_version: String,
    /// Who sells.
    pub seller_agent_id: String,
    /// Who buys.
    pub buyer_agent_id: String,
    /// Where the request is (see [`Status`]).
    pub status: String,
    /// Why, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_reason: Option<String>,
    /// The result, once completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Map<String, Value>>,
    /// Evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Vec<Artifact>>,
    /// Units consumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Map<String, Value>>,
    /// What is charged (`currency`, `final_amount`, `payment_capture_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub financials: Option<Map<String, Value>>,
    /// What went wrong (`code`, `message`, `retryable`, `details`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Map<String, Value>>,
    /// What happens next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_action: Option<Map<String, Value>>,
    /// When it was issued (RFC 3339).
    pub issued_at: String,
    /// Free-form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

impl ExecutionReceipt {
    /// Its status (the schema allows only the seven).
    pub fn status(&self) -> Option<Status> {
        Status::parse(&self.status)
    }
}

/// One check of a verification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    /// The check.
    pub check_id: String,
    /// What it checks.
    pub description: String,
    /// `pass`, `fail`, `not_applicable` or `inconclusive`.
    pub status: String,
    /// Why, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A verifier's judgement of a completed request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerificationResult {
    /// `agenta.delegation.v0`.
    pub protocol_version: String,
    /// `verification_result`.
    pub message_type: String,
    /// The verification.
    pub verification_id: String,
    /// The request verified.
    pub request_id: String,
    /// The receipt verified.
    pub receipt_id: String,
    /// The seller's execution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    /// Who verified.
    pub verifier_agent: Agent,
    /// `pass`, `fail` or `inconclusive`.
    pub decision: String,
    /// 0 to 1.
    pub score: f64,
    /// For people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// What was checked.
    pub checks: Vec<Check>,
    /// Evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Vec<Artifact>>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reasons: Option<Vec<String>>,
    /// When (RFC 3339).
    pub verified_at: String,
    /// Free-form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A message, read as its type.
pub trait Message: serde::de::DeserializeOwned {
    /// Its type.
    const TYPE: MessageType;
}

impl Message for Offer {
    const TYPE: MessageType = MessageType::Offer;
}
impl Message for ExecutionRequest {
    const TYPE: MessageType = MessageType::ExecutionRequest;
}
impl Message for ExecutionReceipt {
    const TYPE: MessageType = MessageType::ExecutionReceipt;
}
impl Message for VerificationResult {
    const TYPE: MessageType = MessageType::VerificationResult;
}

impl Schemas {
    /// Checks `message` against its type's schema, then reads it.
    pub fn parse<M: Message>(&self, message: &Value) -> Result<M, SchemaFailure> {
        self.validate(M::TYPE, message)?;
        serde_json::from_value(message.clone()).map_err(|e| SchemaFailure {
            message_type: M::TYPE,
            violations: vec![Violation {
                pointer: String::new(),
                message: e.to_string(),
            }],
        })
    }
}
