//! Every message type against its published schema: a complete valid
//! example of each passes; removing any required member, adding an unknown
//! one (at the top and nested), breaking a pattern, a format or a constant
//! fails with `schema_validation_failure` at the right JSON Pointer.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod examples;

use agenta::{FailureMode, MessageType, Schemas};
use examples::*;
use serde_json::{json, Value};

/// The pointers of a failure's violations.
fn pointers(schemas: &Schemas, t: MessageType, message: &Value) -> Vec<String> {
    let failure = schemas.validate(t, message).unwrap_err();
    assert_eq!(failure.failure_mode(), FailureMode::SchemaValidationFailure);
    assert!(!failure.violations.is_empty());
    failure.violations.into_iter().map(|v| v.pointer).collect()
}

#[test]
fn a_complete_example_of_each_message_passes() {
    let schemas = Schemas::new().unwrap();
    for (t, m) in examples() {
        schemas
            .validate(t, &m)
            .unwrap_or_else(|e| panic!("{t:?}: {e:?}"));
        assert_eq!(schemas.validate_any(&m).unwrap(), t);
    }
}

#[test]
fn every_required_member_is_required() {
    let schemas = Schemas::new().unwrap();
    for (t, m) in examples() {
        let schema: Value = serde_json::from_str(t.schema_text()).unwrap();
        let required = schema["required"].as_array().unwrap();
        assert!(required.len() >= 10, "{t:?}");
        for name in required {
            let mut broken = m.clone();
            broken
                .as_object_mut()
                .unwrap()
                .remove(name.as_str().unwrap());
            assert_eq!(
                pointers(&schemas, t, &broken),
                vec![""],
                "{t:?} without {name}"
            );
        }
    }
}

#[test]
fn unknown_members_are_refused_at_the_top_and_nested() {
    let schemas = Schemas::new().unwrap();
    for (t, m) in examples() {
        let mut extra = m.clone();
        extra["surprise"] = json!(1);
        assert_eq!(pointers(&schemas, t, &extra), vec![""], "{t:?}");
    }
    let mut o = offer();
    o["seller_agent"]["wallet"] = json!("0x");
    assert_eq!(
        pointers(&schemas, MessageType::Offer, &o),
        vec!["/seller_agent"]
    );
    let mut r = request();
    r["payment"]["tip"] = json!(5);
    assert_eq!(
        pointers(&schemas, MessageType::ExecutionRequest, &r),
        vec!["/payment"]
    );
    let mut c = receipt();
    c["artifacts"][0]["size"] = json!(5);
    assert_eq!(
        pointers(&schemas, MessageType::ExecutionReceipt, &c),
        vec!["/artifacts/0"]
    );
    let mut v = verification();
    v["checks"][0]["weight"] = json!(1);
    assert_eq!(
        pointers(&schemas, MessageType::VerificationResult, &v),
        vec!["/checks/0"]
    );
}

#[test]
fn patterns_formats_constants_and_ranges_are_checked() {
    let schemas = Schemas::new().unwrap();
    let cases: Vec<(MessageType, Value, &str)> = vec![
        (
            MessageType::Offer,
            json!({"offer_id": "short"}),
            "/offer_id",
        ),
        (
            MessageType::Offer,
            json!({"valid_from": "yesterday"}),
            "/valid_from",
        ),
        (
            MessageType::Offer,
            json!({"protocol_version": "agenta.delegation.v1"}),
            "/protocol_version",
        ),
        (
            MessageType::ExecutionRequest,
            json!({"requested_at": "2026-13-40T99:00:00Z"}),
            "/requested_at",
        ),
        (
            MessageType::ExecutionRequest,
            json!({"message_type": "offer"}),
            "/message_type",
        ),
        (
            MessageType::ExecutionReceipt,
            json!({"status": "done"}),
            "/status",
        ),
        (
            MessageType::VerificationResult,
            json!({"score": 1.5}),
            "/score",
        ),
        (
            MessageType::VerificationResult,
            json!({"checks": []}),
            "/checks",
        ),
    ];
    for (t, patch, pointer) in cases {
        let mut m = examples().into_iter().find(|(x, _)| *x == t).unwrap().1;
        for (k, v) in patch.as_object().unwrap() {
            m[k] = v.clone();
        }
        assert_eq!(pointers(&schemas, t, &m), vec![pointer], "{t:?} {patch}");
    }
    let mut o = offer();
    o["pricing"]["amount"] = json!(-1);
    assert_eq!(
        pointers(&schemas, MessageType::Offer, &o),
        vec!["/pricing/amount"]
    );
    let mut r = request();
    r["payment"]["currency"] = json!("usd");
    assert_eq!(
        pointers(&schemas, MessageType::ExecutionRequest, &r),
        vec!["/payment/currency"]
    );
}

#[test]
fn a_message_of_no_known_type_fails_at_its_message_type() {
    let schemas = Schemas::new().unwrap();
    let failure = schemas
        .validate_any(&json!({"message_type": "invoice"}))
        .unwrap_err();
    assert_eq!(failure.violations[0].pointer, "/message_type");
}

/// What passes its schema reads as its type, and writes back the same.
#[test]
fn each_message_reads_as_its_type_and_back() {
    use agenta::{ExecutionReceipt, ExecutionRequest, Offer, VerificationResult};
    let schemas = Schemas::new().unwrap();
    let o: Offer = schemas.parse(&offer()).unwrap();
    assert_eq!(o.pricing.amount, 250);
    assert_eq!(serde_json::to_value(&o).unwrap(), offer());
    let r: ExecutionRequest = schemas.parse(&request()).unwrap();
    assert_eq!(r.payment.max_amount, 300);
    assert_eq!(serde_json::to_value(&r).unwrap(), request());
    let c: ExecutionReceipt = schemas.parse(&receipt()).unwrap();
    assert_eq!(c.status(), Some(agenta::Status::Completed));
    assert_eq!(serde_json::to_value(&c).unwrap(), receipt());
    let v: VerificationResult = schemas.parse(&verification()).unwrap();
    assert_eq!(v.checks.len(), 1);
    assert_eq!(serde_json::to_value(&v).unwrap(), verification());
    // A message that fails its schema is never read.
    let mut bad = request();
    bad["payment"]["max_amount"] = json!(-5);
    let failure = schemas.parse::<ExecutionRequest>(&bad).unwrap_err();
    assert_eq!(failure.violations[0].pointer, "/payment/max_amount");
}
