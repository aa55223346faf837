//! What the pipeline reports besides an authorization denial.

use crate::state::error::StorageError;
use crate::telemetry::Outcome;

/// Failures that are not authorization denials.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// The request itself is wrong.
    #[error("{0}")]
    InvalidParams(String),
    /// Something named does not exist.
    #[error("{kind} {id} not found")]
    NotFound { kind: &'static str, id: String },
    /// The request conflicts with the state it would change.
    #[error("{detail}")]
    Conflict { kind: &'static str, detail: String },
    /// An input was refused (a forged attestation, an invalid revocation).
    #[error("{detail}")]
    Rejected { kind: String, detail: String },
    /// The caller may not do this (`admin_required`,
    /// `not_reservation_holder`, `untrusted_revoker`): nothing changed.
    #[error("{detail}")]
    Forbidden { kind: &'static str, detail: String },
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl GateError {
    /// How a request that failed so counts, on every front.
    pub fn outcome(&self) -> Outcome {
        match self {
            GateError::Rejected { .. } | GateError::Forbidden { .. } => Outcome::Denied,
            _ => Outcome::Error,
        }
    }
}
