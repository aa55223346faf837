//! Agenta delegation protocol v0 (`agenta.delegation.v0`,
//! `../shared/specs/agenta/`): a seller's **offer**, a buyer's
//! **execution_request**, the seller's **execution_receipts** and a
//! verifier's **verification_result**.
//!
//! This crate checks each message against its published JSON Schema (draft
//! 2020-12, vendored byte for byte in `schemas/`) and keeps the request state
//! machine exactly as the manifest publishes it. Pure: no I/O, no clock.

#![deny(missing_docs)]

pub mod conformance;
pub mod failure;
pub mod limits;
pub mod message;
pub mod schema;
pub mod state;
pub mod translate;

pub use conformance::{check_completed, check_input, Breach};
pub use failure::FailureMode;
pub use limits::{Limits, TooLarge};
pub use message::{ExecutionReceipt, ExecutionRequest, Message, Offer, VerificationResult};
pub use schema::{MessageType, SchemaFailure, Schemas, Violation};
pub use state::{InvalidTransition, Status};
pub use translate::{
    attestation_to_receipt, offer_to_contract, receipt_to_attestation, request_to_contract,
    Currencies, ReceiptContext, Untranslatable,
};

/// The protocol identifier every message carries in `protocol_version`.
pub const PROTOCOL_ID: &str = "agenta.delegation.v0";

/// The manifest as published (message types, transitions, failure modes).
pub const MANIFEST: &str = include_str!("../schemas/manifest.json");
