//! Identity cards (spec "Identity Cards"): every member typed and
//! validated; the capability entries take the spec's members
//! (`quality_hint`, `latency_hint_ms_p50`, `cost_hint`) and the
//! reference's (`description`, schemas, `quality`, `domains`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::mode::PayloadMode;
use crate::trust::TrustDomain;
use crate::{Reason, Refusal};

/// The prefix of every delegate ID.
pub const DELEGATE_PREFIX: &str = "ldp:delegate:";

/// A cost tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CostTier {
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
}

/// A delegate's identity card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityCard {
    /// `ldp:delegate:<name>`.
    pub delegate_id: String,
    /// For people.
    pub name: String,
    /// Its purpose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `qwen`, `llama`, `claude`, …
    pub model_family: String,
    /// The model's version.
    pub model_version: String,
    /// SHA-256 of the weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights_fingerprint: Option<String>,
    /// Its trust domain.
    pub trust_domain: TrustDomain,
    /// Tokens.
    pub context_window: u64,
    /// `deep-analytical`, `fast-practical`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_profile: Option<String>,
    /// `low`, `medium`, `high`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_profile: Option<CostTier>,
    /// `p50:2000ms`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_profile: Option<String>,
    /// `us-east`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jurisdiction: Option<String>,
    /// What it can do.
    pub capabilities: Vec<Capability>,
    /// Its modes, preferred first (Text among them).
    pub supported_payload_modes: Vec<PayloadMode>,
    /// Where it is reached.
    pub endpoint: String,
    /// Anything else.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

/// One capability of a card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capability {
    /// The skill's name (TASK_SUBMIT's `skill`).
    pub name: String,
    /// 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality_hint: Option<f64>,
    /// Median latency, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_hint_ms_p50: Option<u64>,
    /// Its cost tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_hint: Option<CostTier>,
    /// For people (the reference's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its input's JSON Schema (the reference's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// Its output's JSON Schema (the reference's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Quality metrics (the reference's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<Value>,
    /// Domains (the reference's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<String>,
}

impl IdentityCard {
    /// Parses and validates a card.
    pub fn from_value(value: Value) -> Result<Self, Refusal> {
        let card: Self = serde_json::from_value(value)
            .map_err(|e| Refusal::new(Reason::Malformed, format!("identity card: {e}")))?;
        card.validate()?;
        Ok(card)
    }

    /// The spec's rules: an `ldp:delegate:<name>` ID, names present, a
    /// trust domain with a name, hints within their ranges, Text among the
    /// modes (every delegate MUST support it), capability names unique.
    /// The endpoint may be empty (the reference's in-process server leaves
    /// it so; dgw writes its own into the cards it serves).
    pub fn validate(&self) -> Result<(), Refusal> {
        let bad = |what: String| {
            Err(Refusal::new(
                Reason::Malformed,
                format!("identity card: {what}"),
            ))
        };
        match self.delegate_id.strip_prefix(DELEGATE_PREFIX) {
            Some(name) if !name.is_empty() => {}
            _ => return bad(format!("delegate_id must be {DELEGATE_PREFIX}<name>")),
        }
        for (field, v) in [
            ("name", &self.name),
            ("model_family", &self.model_family),
            ("model_version", &self.model_version),
            ("trust_domain.name", &self.trust_domain.name),
        ] {
            if v.is_empty() {
                return bad(format!("{field} is empty"));
            }
        }
        if !self.supported_payload_modes.contains(&PayloadMode::Text) {
            return bad("supported_payload_modes must include text".into());
        }
        let mut names = std::collections::BTreeSet::new();
        for c in &self.capabilities {
            if c.name.is_empty() || !names.insert(c.name.as_str()) {
                return bad(format!("capability {:?} is empty or listed twice", c.name));
            }
            if c.quality_hint.is_some_and(|q| !(0.0..=1.0).contains(&q)) {
                return bad(format!(
                    "capability {:?}: quality_hint must be within 0 and 1",
                    c.name
                ));
            }
        }
        Ok(())
    }

    /// Whether it declares `skill`.
    pub fn has_skill(&self, skill: &str) -> bool {
        self.capabilities.iter().any(|c| c.name == skill)
    }
}
