//! What an offer promises, checked on the messages that claim to keep it:
//! a request's `input` against the offer's `input_schema`, and a completed
//! receipt's `result` against its `output_schema` and its artifacts against
//! the verification policy's `required_artifacts`.

use serde_json::{Map, Value};

use crate::failure::FailureMode;
use crate::message::{ExecutionReceipt, Offer};
use crate::schema::Violation;

/// A message that breaks its offer: the failure mode and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {}", mode.as_str(), violations.iter().map(|v| format!("{} {}", v.pointer, v.message)).collect::<Vec<_>>().join("; "))]
pub struct Breach {
    /// `schema_validation_failure` (input), `output_schema_violation` or
    /// `required_evidence_missing`.
    pub mode: FailureMode,
    /// Every violation, with its JSON Pointer into the message.
    pub violations: Vec<Violation>,
}

/// Checks `value` against a schema the offer carries (draft 2020-12,
/// formats checked); pointers are prefixed with `at`.
fn check(schema: &Value, value: &Value, at: &str, mode: FailureMode) -> Result<(), Breach> {
    let validator = jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(schema)
        .map_err(|e| Breach {
            mode,
            violations: vec![Violation {
                pointer: at.into(),
                message: format!("the offer's schema does not compile: {e}"),
            }],
        })?;
    let violations: Vec<Violation> = validator
        .iter_errors(value)
        .map(|e| Violation {
            pointer: format!("{at}{}", e.instance_path()),
            message: e.to_string(),
        })
        .collect();
    if violations.is_empty() {
        Ok(())
    } else {
        Err(Breach { mode, violations })
    }
}

/// A request's `input` against the offer's `input_schema`
/// (`schema_validation_failure` at `/input…`).
pub fn check_input(offer: &Offer, input: &Map<String, Value>) -> Result<(), Breach> {
    check(
        &offer.input_schema,
        &Value::Object(input.clone()),
        "/input",
        FailureMode::SchemaValidationFailure,
    )
}

/// A completed receipt against the offer: its `result` present and matching
/// the `output_schema` (`output_schema_violation`), then every artifact type
/// the verification policy requires present (`required_evidence_missing`).
pub fn check_completed(offer: &Offer, receipt: &ExecutionReceipt) -> Result<(), Breach> {
    let Some(result) = &receipt.result else {
        return Err(Breach {
            mode: FailureMode::OutputSchemaViolation,
            violations: vec![Violation {
                pointer: "/result".into(),
                message: "a completed receipt carries a result".into(),
            }],
        });
    };
    check(
        &offer.output_schema,
        &Value::Object(result.clone()),
        "/result",
        FailureMode::OutputSchemaViolation,
    )?;
    let present: Vec<&str> = receipt
        .artifacts
        .iter()
        .flatten()
        .map(|a| a.artifact_type.as_str())
        .collect();
    let missing: Vec<Violation> = offer
        .verification_policy
        .required_artifacts
        .iter()
        .filter(|r| !present.contains(&r.as_str()))
        .map(|r| Violation {
            pointer: "/artifacts".into(),
            message: format!("the verification policy requires a {r} artifact"),
        })
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Breach {
            mode: FailureMode::RequiredEvidenceMissing,
            violations: missing,
        })
    }
}
