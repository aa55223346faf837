//! Why an Agenta call was refused: the manifest's failure mode where it has
//! one, else a gateway code; mapped once to HTTP (an Agenta-style error
//! object, in the shape of a receipt's `error`) and to JSON-RPC.

use agenta::{Breach, FailureMode, InvalidTransition, SchemaFailure, TooLarge, Violation};
use serde_json::{json, Value};

use dgw_core::gatekeeper::GateError;
use dgw_core::protocol::HttpAnswer;
use dgw_core::state::StorageError;

/// A refusal: nothing changed, except where its code says otherwise.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Refusal {
    pub status: u16,
    /// The manifest's failure mode (`schema_validation_failure`, …) or one
    /// of the gateway's (`idempotency_conflict`, `unauthorized`, …).
    pub code: &'static str,
    pub message: String,
    pub violations: Vec<Violation>,
}

impl Refusal {
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            violations: Vec::new(),
        }
    }

    /// A failure mode of the manifest, with its status.
    pub fn mode(mode: FailureMode, message: impl Into<String>) -> Self {
        let status = match mode {
            FailureMode::SchemaValidationFailure => 400,
            FailureMode::BudgetAuthorizationMissing => 402,
            FailureMode::OfferVersionMismatch => 409,
            FailureMode::CapacityUnavailable
            | FailureMode::UpstreamDependencyFailed
            | FailureMode::DeadlineExceeded => 502,
            FailureMode::OutputSchemaViolation
            | FailureMode::RequiredEvidenceMissing
            | FailureMode::DigestMismatch => 422,
        };
        Self::new(status, mode.as_str(), message)
    }

    pub fn budget(message: impl Into<String>) -> Self {
        Self::mode(FailureMode::BudgetAuthorizationMissing, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(401, "unauthorized", message)
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(404, "not_found", format!("no such {what}"))
    }

    pub fn storage(e: StorageError) -> Self {
        Self::new(503, "state_unavailable", e.to_string())
    }

    /// The wire object.
    pub fn body(&self) -> Value {
        let mut error = json!({
            "code": self.code,
            "message": self.message,
            "retryable": matches!(self.status, 502 | 503),
        });
        if !self.violations.is_empty() {
            error["details"] = json!({
                "violations": self.violations.iter()
                    .map(|v| json!({"pointer": v.pointer, "message": v.message}))
                    .collect::<Vec<_>>(),
            });
        }
        json!({ "error": error })
    }

    pub fn answer(&self) -> HttpAnswer {
        HttpAnswer::new(self.status, self.body())
    }

    /// The JSON-RPC form: `data.type` is the code.
    pub fn into_gate_error(self) -> GateError {
        let detail = if self.violations.is_empty() {
            self.message
        } else {
            format!(
                "{}: {}",
                self.message,
                self.violations
                    .iter()
                    .map(|v| format!("{} {}", v.pointer, v.message))
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        };
        GateError::Rejected {
            kind: self.code.to_owned(),
            detail,
        }
    }
}

impl From<SchemaFailure> for Refusal {
    fn from(f: SchemaFailure) -> Self {
        Self {
            violations: f.violations,
            ..Refusal::mode(
                FailureMode::SchemaValidationFailure,
                format!("the {} does not match its schema", f.message_type.as_str()),
            )
        }
    }
}

impl From<Breach> for Refusal {
    fn from(b: Breach) -> Self {
        Self {
            violations: b.violations,
            ..Refusal::mode(b.mode, "the message breaks its offer")
        }
    }
}

impl From<TooLarge> for Refusal {
    fn from(t: TooLarge) -> Self {
        Self {
            violations: t.violations,
            ..Refusal::new(
                413,
                TooLarge::KIND,
                "a member is larger than dgw keeps (docs/adapters/agenta.md)",
            )
        }
    }
}

impl From<InvalidTransition> for Refusal {
    fn from(t: InvalidTransition) -> Self {
        Refusal::new(409, "invalid_state_transition", t.to_string())
    }
}

impl From<StorageError> for Refusal {
    fn from(e: StorageError) -> Self {
        Refusal::storage(e)
    }
}
