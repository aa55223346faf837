//! A complete, valid example of each message type.
#![allow(dead_code)]

use agenta::MessageType;
use serde_json::{json, Value};

pub fn offer() -> Value {
    json!({
        "protocol_version": "agenta.delegation.v0", "message_type": "offer",
        "offer_id": "offer.summarize-1", "offer_version": "3",
        "seller_agent": {"agent_id": "seller-agent", "organization_id": "acme",
                         "display_name": "Summaries", "endpoint": "https://seller.example/agenta"},
        "title": "Summarize a document", "description": "Returns a 100-word summary.",
        "capabilities": ["summarize"],
        "input_schema": {"type": "object", "required": ["text"]},
        "output_schema": {"type": "object", "required": ["summary"]},
        "pricing": {"pricing_model": "fixed", "currency": "USD", "amount": 250},
        "service_levels": {"target_completion_seconds": 30, "max_completion_seconds": 120},
        "verification_policy": {"mode": "buyer_verified", "required_artifacts": ["result_payload"],
                                "pass_criteria": ["a summary under 120 words"]},
        "valid_from": "2026-11-01T00:00:00Z"
    })
}

pub fn request() -> Value {
    json!({
        "protocol_version": "agenta.delegation.v0", "message_type": "execution_request",
        "request_id": "req-00000001", "offer_id": "offer.summarize-1", "offer_version": "3",
        "buyer_agent": {"agent_id": "buyer-agent", "organization_id": "globex"},
        "seller_agent_id": "seller-agent", "input": {"text": "..."},
        "payment": {"currency": "USD", "max_amount": 300, "payment_authorization_id": "pay-0001"},
        "execution_constraints": {"deadline_at": "2026-11-24T00:00:00Z"},
        "callback": {"url": "https://buyer.example/receipts", "auth_reference": "secret-ref"},
        "idempotency_key": "idem-00000001", "requested_at": "2026-11-23T12:00:00Z"
    })
}

pub fn receipt() -> Value {
    json!({
        "protocol_version": "agenta.delegation.v0", "message_type": "execution_receipt",
        "receipt_id": "rcpt-0000001", "request_id": "req-00000001",
        "offer_id": "offer.summarize-1", "offer_version": "3",
        "seller_agent_id": "seller-agent", "buyer_agent_id": "buyer-agent",
        "status": "completed", "result": {"summary": "short"},
        "artifacts": [{"artifact_type": "result_payload", "uri": "https://seller.example/r/1",
                       "digest": "sha256:00ff"}],
        "financials": {"currency": "USD", "final_amount": 250, "payment_capture_id": "cap-0001"},
        "issued_at": "2026-11-23T12:01:00Z"
    })
}

pub fn verification() -> Value {
    json!({
        "protocol_version": "agenta.delegation.v0", "message_type": "verification_result",
        "verification_id": "ver-0000001", "request_id": "req-00000001", "receipt_id": "rcpt-0000001",
        "verifier_agent": {"agent_id": "verifier-1", "organization_id": "globex"},
        "decision": "pass", "score": 0.9,
        "checks": [{"check_id": "len", "description": "under 120 words", "status": "pass"}],
        "verified_at": "2026-11-23T12:02:00Z"
    })
}

pub fn examples() -> Vec<(MessageType, Value)> {
    vec![
        (MessageType::Offer, offer()),
        (MessageType::ExecutionRequest, request()),
        (MessageType::ExecutionReceipt, receipt()),
        (MessageType::VerificationResult, verification()),
    ]
}
