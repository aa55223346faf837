//! Why a token was refused: the seven denial types of §10.1, as data.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::capability::Capability;

/// The denial types of §10.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DenialType {
    /// The token does not decode or is malformed.
    MalformedToken,
    /// A block of the token is revoked.
    Revoked,
    /// A signature does not verify or the root is not trusted.
    InvalidSignature,
    /// A block widens what the one before it allowed.
    AttenuationViolation,
    /// Past its expiry.
    Expired,
    /// The budget is spent.
    BudgetExceeded,
    /// No capability covers the request.
    CapabilityNotGranted,
    /// `issuedAt` is more than the allowed clock skew in the future (not a
    /// §10.1 step; decisions.md).
    TokenNotYetValid,
    /// The requested resource is not in canonical form (decisions.md).
    InvalidResource,
    /// A token in a format other than `delegateos-sjt-v1`, such as the
    /// Biscuit backend's `delegateos-biscuit-v1` (decisions.md 180).
    UnsupportedTokenFormat,
    /// A token stamped with a version other than `"1.0"` by DelegateOS
    /// 0.3's `setTokenVersion` (decisions.md 179).
    UnsupportedTokenVersion,
}

impl DenialType {
    /// Every §10.1 denial type, in its order (the gateway adds others).
    pub const ALL: [DenialType; 7] = [
        DenialType::MalformedToken,
        DenialType::Revoked,
        DenialType::InvalidSignature,
        DenialType::AttenuationViolation,
        DenialType::Expired,
        DenialType::BudgetExceeded,
        DenialType::CapabilityNotGranted,
    ];

    /// Every denial type, §10.1's and the gateway's (what a metric of
    /// denials is exported at zero for).
    pub const EVERY: [DenialType; 11] = [
        DenialType::MalformedToken,
        DenialType::Revoked,
        DenialType::InvalidSignature,
        DenialType::AttenuationViolation,
        DenialType::Expired,
        DenialType::BudgetExceeded,
        DenialType::CapabilityNotGranted,
        DenialType::TokenNotYetValid,
        DenialType::InvalidResource,
        DenialType::UnsupportedTokenFormat,
        DenialType::UnsupportedTokenVersion,
    ];

    /// The wire name, e.g. `malformed_token`. (A variant added here
    /// belongs in [`Self::EVERY`] too.)
    pub fn as_str(self) -> &'static str {
        match self {
            DenialType::MalformedToken => "malformed_token",
            DenialType::Revoked => "revoked",
            DenialType::InvalidSignature => "invalid_signature",
            DenialType::AttenuationViolation => "attenuation_violation",
            DenialType::Expired => "expired",
            DenialType::BudgetExceeded => "budget_exceeded",
            DenialType::CapabilityNotGranted => "capability_not_granted",
            DenialType::TokenNotYetValid => "token_not_yet_valid",
            DenialType::InvalidResource => "invalid_resource",
            DenialType::UnsupportedTokenFormat => "unsupported_token_format",
            DenialType::UnsupportedTokenVersion => "unsupported_token_version",
        }
    }
}

impl fmt::Display for DenialType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A denial: its type, a sentence for people, and for
/// `capability_not_granted` the capabilities that were in effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "camelCase")]
#[error("{kind}: {detail}")]
pub struct DenialReason {
    #[serde(rename = "type")]
    /// Which check failed.
    pub kind: DenialType,
    /// Why, for people.
    pub detail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// What the token grants, when the request was not covered.
    pub granted: Option<Vec<Capability>>,
}

impl DenialReason {
    /// A denial with a detail sentence.
    pub fn new(kind: DenialType, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
            granted: None,
        }
    }

    pub(crate) fn malformed(detail: impl fmt::Display) -> Self {
        Self::new(DenialType::MalformedToken, detail.to_string())
    }

    pub(crate) fn attenuation(detail: impl Into<String>) -> Self {
        Self::new(DenialType::AttenuationViolation, detail)
    }

    pub(crate) fn signature(detail: impl Into<String>) -> Self {
        Self::new(DenialType::InvalidSignature, detail)
    }
}
