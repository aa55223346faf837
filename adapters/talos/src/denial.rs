//! The denial reasons of §4.3, plus `INVALID_FRAME` (the reference vectors'
//! reason for an envelope or frame that is not well formed).

use std::fmt;

/// Why a Talos request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TalosDenial {
    /// The request carries no capability.
    NoCapability,
    /// Past `expires_at` (with the allowed skew).
    Expired,
    /// The capability, or a parent, is revoked.
    Revoked,
    /// The scope does not cover the tool, method or resources.
    ScopeMismatch,
    /// A chain link is broken, widened or too deep.
    DelegationInvalid,
    /// The gateway does not know the tool.
    UnknownTool,
    /// The correlation ID was used before in the session.
    Replay,
    /// A signature does not verify, or the issuer is not trusted.
    SignatureInvalid,
    /// The envelope or frame is malformed.
    InvalidFrame,
}

impl TalosDenial {
    /// The wire name, such as `SCOPE_MISMATCH`.
    pub fn as_str(self) -> &'static str {
        match self {
            TalosDenial::NoCapability => "NO_CAPABILITY",
            TalosDenial::Expired => "EXPIRED",
            TalosDenial::Revoked => "REVOKED",
            TalosDenial::ScopeMismatch => "SCOPE_MISMATCH",
            TalosDenial::DelegationInvalid => "DELEGATION_INVALID",
            TalosDenial::UnknownTool => "UNKNOWN_TOOL",
            TalosDenial::Replay => "REPLAY",
            TalosDenial::SignatureInvalid => "SIGNATURE_INVALID",
            TalosDenial::InvalidFrame => "INVALID_FRAME",
        }
    }
}

impl fmt::Display for TalosDenial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refusal: the reason and a sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {detail}")]
pub struct Denied {
    /// The reason, as §4.2 names it.
    pub reason: TalosDenial,
    /// What was wrong, for people.
    pub detail: String,
}

impl Denied {
    /// A denial for `reason`.
    pub fn new(reason: TalosDenial, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
        }
    }
}
