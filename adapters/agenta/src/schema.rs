//! The four message schemas as published (draft 2020-12), compiled once:
//! formats are checked, `additionalProperties: false` refuses unknown
//! members, and a failure names the JSON Pointer of every violation.

use serde_json::Value;

use crate::failure::FailureMode;

/// Agenta's message types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageType {
    /// A seller's offer of work.
    Offer,
    /// A buyer's request to execute an offer.
    ExecutionRequest,
    /// A seller's report on a request.
    ExecutionReceipt,
    /// A verifier's judgement of a completed request.
    VerificationResult,
}

impl MessageType {
    /// Every message type, in the manifest's order.
    pub const ALL: [MessageType; 4] = [
        MessageType::Offer,
        MessageType::ExecutionRequest,
        MessageType::ExecutionReceipt,
        MessageType::VerificationResult,
    ];

    /// The `message_type` it is sent with.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageType::Offer => "offer",
            MessageType::ExecutionRequest => "execution_request",
            MessageType::ExecutionReceipt => "execution_receipt",
            MessageType::VerificationResult => "verification_result",
        }
    }

    /// The published schema, as vendored.
    pub fn schema_text(self) -> &'static str {
        match self {
            MessageType::Offer => include_str!("../schemas/offer.schema.json"),
            MessageType::ExecutionRequest => {
                include_str!("../schemas/execution_request.schema.json")
            }
            MessageType::ExecutionReceipt => {
                include_str!("../schemas/execution_receipt.schema.json")
            }
            MessageType::VerificationResult => {
                include_str!("../schemas/verification_result.schema.json")
            }
        }
    }

    /// The message type a message says it is.
    pub fn of(message: &Value) -> Option<MessageType> {
        let named = message.get("message_type")?.as_str()?;
        MessageType::ALL.into_iter().find(|t| t.as_str() == named)
    }
}

/// One way a message breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Where, as a JSON Pointer into the message (`""`: the message itself).
    pub pointer: String,
    /// What, as the validator says it.
    pub message: String,
}

/// A message that does not match its schema: the protocol-level failure
/// `schema_validation_failure`, with every violation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schema_validation_failure: {} violation(s), first at {:?}: {}", .violations.len(), .violations[0].pointer, .violations[0].message)]
pub struct SchemaFailure {
    /// The message type it was checked as.
    pub message_type: MessageType,
    /// Every violation, at least one.
    pub violations: Vec<Violation>,
}

impl SchemaFailure {
    /// The manifest's name for it.
    pub fn failure_mode(&self) -> FailureMode {
        FailureMode::SchemaValidationFailure
    }
}

/// The four compiled schemas.
pub struct Schemas {
    validators: Vec<(MessageType, jsonschema::Validator)>,
}

impl std::fmt::Debug for Schemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Schemas")
    }
}

/// Why the vendored schemas did not compile (a build defect, not input).
#[derive(Debug, thiserror::Error)]
#[error("the {message_type:?} schema does not compile: {detail}")]
pub struct CompileError {
    /// Which schema.
    pub message_type: MessageType,
    /// The compiler's words.
    pub detail: String,
}

impl Schemas {
    /// Compiles the vendored schemas (draft 2020-12, formats checked; no
    /// reference is fetched over the network).
    pub fn new() -> Result<Self, CompileError> {
        let mut validators = Vec::new();
        for t in MessageType::ALL {
            let fail = |detail: String| CompileError {
                message_type: t,
                detail,
            };
            let schema: Value =
                serde_json::from_str(t.schema_text()).map_err(|e| fail(e.to_string()))?;
            let validator = jsonschema::draft202012::options()
                .should_validate_formats(true)
                .build(&schema)
                .map_err(|e| fail(e.to_string()))?;
            validators.push((t, validator));
        }
        Ok(Self { validators })
    }

    /// Checks `message` as a `message_type`.
    pub fn validate(
        &self,
        message_type: MessageType,
        message: &Value,
    ) -> Result<(), SchemaFailure> {
        let Some((_, validator)) = self.validators.iter().find(|(t, _)| *t == message_type) else {
            return Err(SchemaFailure {
                message_type,
                violations: vec![Violation {
                    pointer: String::new(),
                    message: "no schema".into(),
                }],
            });
        };
        let violations: Vec<Violation> = validator
            .iter_errors(message)
            .map(|e| Violation {
                pointer: e.instance_path().to_string(),
                message: e.to_string(),
            })
            .collect();
        if violations.is_empty() {
            Ok(())
        } else {
            Err(SchemaFailure {
                message_type,
                violations,
            })
        }
    }

    /// Checks a message as the type its `message_type` names; a message
    /// that names none of the four fails at `/message_type`.
    pub fn validate_any(&self, message: &Value) -> Result<MessageType, SchemaFailure> {
        let Some(t) = MessageType::of(message) else {
            return Err(SchemaFailure {
                message_type: MessageType::Offer,
                violations: vec![Violation {
                    pointer: "/message_type".into(),
                    message:
                        "must be offer, execution_request, execution_receipt or verification_result"
                            .into(),
                }],
            });
        };
        self.validate(t, message).map(|()| t)
    }
}
