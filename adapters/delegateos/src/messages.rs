//! The JSON-RPC 2.0 message bodies of §9, as typed `params` and `result`s.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::attestation::Attestation;
use crate::contract::TaskContract;
use crate::ids::DelegationId;
use crate::revocation::RevocationEntry;

/// Method names of §9.
pub const DELEGATE: &str = "delegateos/delegate";
/// The JSON-RPC method completing a delegation (§9.4).
pub const COMPLETE: &str = "delegateos/complete";
/// The JSON-RPC method recording a revocation (§9.5).
pub const REVOKE: &str = "delegateos/revoke";

/// `delegateos/delegate` params (§9.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DelegateParams {
    /// The signed contract the work is under.
    pub contract: TaskContract,
    /// The serialized DCT (base64url).
    pub dct: String,
    /// The token's format (`delegateos-sjt-v1`).
    pub dct_format: String,
    /// The new delegation.
    pub delegation_id: DelegationId,
    /// The delegation it descends from.
    pub parent_delegation_id: DelegationId,
}

/// A literal boolean field: `accepted: true` or `accepted: false`, so an
/// accept can never be read as a reject or the other way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Literal<const B: bool>;

impl<const B: bool> Serialize for Literal<B> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bool(B)
    }
}

impl<'de, const B: bool> Deserialize<'de> for Literal<B> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if bool::deserialize(d)? == B {
            Ok(Literal)
        } else {
            Err(serde::de::Error::custom(format!("expected {B}")))
        }
    }
}

/// Accepting a delegation (§9.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DelegateAccept {
    /// Always `true`.
    pub accepted: Literal<true>,
    /// The delegation accepted.
    pub delegation_id: DelegationId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// How long the delegatee expects the work to take.
    pub estimated_duration_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// What the delegatee expects the work to cost.
    pub estimated_cost_microcents: Option<u64>,
}

/// Rejecting a delegation (§9.3). `reason` is a machine-readable type, such
/// as a denial type; `details` is a sentence for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegateReject {
    /// Always `false`.
    pub accepted: Literal<false>,
    /// A machine-readable reason (a denial type).
    pub reason: String,
    /// Why, for people.
    pub details: String,
}

/// The result of `delegateos/delegate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DelegateResponse {
    /// Accepted.
    Accept(DelegateAccept),
    /// Rejected.
    Reject(DelegateReject),
}

impl DelegateResponse {
    /// An acceptance without estimates.
    pub fn accept(delegation_id: DelegationId) -> Self {
        DelegateResponse::Accept(DelegateAccept {
            accepted: Literal,
            delegation_id,
            estimated_duration_ms: None,
            estimated_cost_microcents: None,
        })
    }

    /// A rejection.
    pub fn reject(reason: impl Into<String>, details: impl Into<String>) -> Self {
        DelegateResponse::Reject(DelegateReject {
            accepted: Literal,
            reason: reason.into(),
            details: details.into(),
        })
    }
}

/// `delegateos/complete` params (§9.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompleteParams {
    /// The delegation completed.
    pub delegation_id: DelegationId,
    /// The signed attestation.
    pub attestation: Attestation,
}

/// `delegateos/revoke` params (§9.5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevokeParams {
    /// The signed revocation entry.
    pub revocation: RevocationEntry,
}

/// The name of the member that carries a DCT in MCP params (§11.1).
pub const MCP_FIELD: &str = "_delegateos";

/// `_delegateos` in an MCP `tools/call` (§11.1) or, for a whole session,
/// `initialize` params. `format`, when given, must be `delegateos-sjt-v1`;
/// `delegationId` and `contractId`, when given, must name the token's own
/// leaf delegation and contract (the gateway checks; see docs/decisions.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpDelegateos {
    /// The serialized token.
    pub dct: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The token's format, when given.
    pub format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The delegation the token must carry, when given.
    pub delegation_id: Option<DelegationId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The contract the token must be bound to, when given.
    pub contract_id: Option<crate::ids::ContractId>,
}

impl McpDelegateos {
    /// Refuses a `format` other than the one this version speaks, as
    /// `unsupported_token_format`.
    pub fn check_format(&self) -> Result<(), crate::DenialReason> {
        self.format
            .as_deref()
            .map_or(Ok(()), crate::dct::check_format)
    }
}
