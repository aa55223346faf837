//! Why dgw refuses an LDP message: one vocabulary, mapped once to each
//! wire format (a SESSION_REJECT's reason, `data.type`) by its stable name.

/// A refusal's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Not JSON of the envelope's or the body's shape.
    Malformed,
    /// A `type` no LDP message has.
    UnknownType,
    /// No signature, or one that does not verify.
    BadSignature,
    /// A signature algorithm other than `hmac-sha256`.
    UnsupportedAlgorithm,
    /// A timestamp that does not parse, or outside the window.
    Stale,
    /// A message ID (or ID and nonce) seen before.
    Replayed,
    /// Not legal in the session's state.
    IllegalInState,
    /// The session's TTL has passed.
    SessionExpired,
    /// The trust domains do not allow the session.
    TrustDomain,
    /// A TASK_RESULT without its provenance.
    MissingProvenance,
    /// No payload mode is left to fall back to.
    NoFallback,
}

impl Reason {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Malformed => "malformed",
            Reason::UnknownType => "unknown_message_type",
            Reason::BadSignature => "bad_signature",
            Reason::UnsupportedAlgorithm => "unsupported_signature_algorithm",
            Reason::Stale => "stale_timestamp",
            Reason::Replayed => "replay",
            Reason::IllegalInState => "illegal_in_state",
            Reason::SessionExpired => "session_expired",
            Reason::TrustDomain => "trust_domain_mismatch",
            Reason::MissingProvenance => "missing_provenance",
            Reason::NoFallback => "no_fallback_mode",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refusal: its reason and, for people, what exactly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {detail}")]
pub struct Refusal {
    /// Why.
    pub reason: Reason,
    /// What, for people (never a secret).
    pub detail: String,
}

impl Refusal {
    /// A refusal for `reason`.
    pub fn new(reason: Reason, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
        }
    }
}
