//! Why the gateway refuses a Motebit artifact: one vocabulary for every
//! artifact, mapped once to each wire format by its stable name.

/// A refusal's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Not the artifact's shape (a member missing, of the wrong type, unknown).
    Malformed,
    /// `suite` is absent or not the artifact's suite.
    WrongSuite,
    /// A public key that is not 64 lowercase hex digits of an Ed25519 key.
    BadKey,
    /// The signature does not verify.
    BadSignature,
    /// `result_hash` is not `hex(SHA-256(result))`, or a hash is not 64 hex digits.
    HashInconsistent,
    /// No key is known for the signer.
    UnknownSigner,
    /// A nested receipt failed.
    ChildInvalid,
    /// Nesting or a chain deeper than followed.
    TooDeep,
    /// Receipts of a sequence overlap or run backwards.
    OutOfOrder,
    /// Past its `expires_at` / `exp`.
    Expired,
    /// Before its `not_before` (or `iat` in the future).
    NotYetValid,
    /// A chain whose delegate is not the next delegator.
    BrokenLinkage,
    /// A delegation wider than the one it derives from.
    ScopeWidened,
    /// Revoked.
    Revoked,
    /// A bearer token for another audience.
    WrongAudience,
    /// A bearer token living longer than allowed.
    LifetimeTooLong,
    /// A `jti` or artifact seen before.
    Replayed,
    /// Signed by a key other than the one pinned for its `motebit_id`.
    KeyMismatch,
    /// Not trusted by this gateway (no configured delegator roots the chain).
    Untrusted,
    /// A tick of a standing grant presented without its grant.
    GrantMissing,
    /// A token that is not a valid tick of its standing grant (or a tick
    /// deeper in a chain than its root).
    NotATick,
}

impl Reason {
    /// The stable wire name (`data.type`, gRPC reason, CLI message).
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Malformed => "malformed",
            Reason::WrongSuite => "wrong_suite",
            Reason::BadKey => "bad_key",
            Reason::BadSignature => "bad_signature",
            Reason::HashInconsistent => "hash_inconsistent",
            Reason::UnknownSigner => "unknown_signer",
            Reason::ChildInvalid => "child_invalid",
            Reason::TooDeep => "too_deep",
            Reason::OutOfOrder => "out_of_order",
            Reason::Expired => "expired",
            Reason::NotYetValid => "not_yet_valid",
            Reason::BrokenLinkage => "broken_linkage",
            Reason::ScopeWidened => "scope_widened",
            Reason::Revoked => "revoked",
            Reason::WrongAudience => "wrong_audience",
            Reason::LifetimeTooLong => "lifetime_too_long",
            Reason::Replayed => "replay",
            Reason::KeyMismatch => "key_mismatch",
            Reason::Untrusted => "untrusted",
            Reason::GrantMissing => "grant_missing",
            Reason::NotATick => "not_a_tick",
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
pub struct Failure {
    /// Why.
    pub reason: Reason,
    /// What, for people (never a secret).
    pub detail: String,
}

impl Failure {
    /// A refusal for `reason`.
    pub fn new(reason: Reason, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
        }
    }

    /// A shape problem.
    pub fn malformed(detail: impl Into<String>) -> Self {
        Self::new(Reason::Malformed, detail)
    }
}
