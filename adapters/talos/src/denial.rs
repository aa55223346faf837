//! The denial reasons of §4.3, plus `INVALID_FRAME` (the reference vectors'
//! reason for an envelope or frame that is not well formed).

use std::fmt;

/// Why a Talos request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TalosDenial {
    NoCapability,
    Expired,
    Revoked,
    ScopeMismatch,
    DelegationInvalid,
    UnknownTool,
    Replay,
    SignatureInvalid,
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
    pub reason: TalosDenial,
    pub detail: String,
}

impl Denied {
    pub fn new(reason: TalosDenial, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
        }
    }
}
