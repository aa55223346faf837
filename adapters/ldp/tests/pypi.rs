//! The PyPI package `ldp-protocol` 0.2.0's wire shape: one body model
//! holding every member of the union, those of other types `null`
//! (`pypi/messages.json`, written by that package: `pypi/generate.py`).
//! Such nulls are dropped; a member of another type with a value, or a
//! name no type has, is still refused (decision 167).

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

use ldp::message::{
    members, Body, DelegationContract, Envelope, LdpError, PolicyEnvelope, Provenance,
    SessionConfig, TYPES,
};
use ldp::mode::PayloadMode;
use ldp::{signing, Reason};
use serde_json::{json, Value};

const SECRET: &[u8] = b"a-shared-secret-of-32-bytes-0123";

fn pypi_messages() -> Vec<Value> {
    serde_json::from_str(include_str!("pypi/messages.json")).unwrap()
}

/// Every message the package writes parses, its signature (made by the
/// package) verifies, and what dgw would send on holds no null of
/// another type.
#[test]
fn every_message_the_pypi_package_writes_parses_and_verifies() {
    let messages = pypi_messages();
    let kinds: Vec<&str> = messages
        .iter()
        .map(|m| m["body"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, TYPES);
    for m in messages {
        let kind = m["body"]["type"].as_str().unwrap().to_owned();
        let e = Envelope::from_value(m.clone()).unwrap_or_else(|r| panic!("{kind}: {r}"));
        assert_eq!(e.body.kind(), kind);
        signing::verify(&e, SECRET, false).unwrap_or_else(|r| panic!("{kind}: {r}"));
        let again = serde_json::to_value(&e).unwrap();
        for name in again["body"].as_object().unwrap().keys() {
            assert!(
                name == "type" || members(&kind).contains(&name.as_str()),
                "{kind} re-serialized with {name}"
            );
        }
    }
}

/// Each type with each other type's member: dropped when null, refused
/// when it carries a value; a null name no type has is refused.
#[test]
fn other_types_members_pass_only_as_null() {
    let hello = pypi_messages().remove(0);
    let names: Vec<&str> = TYPES
        .iter()
        .flat_map(|t| members(t).iter().copied())
        .collect();
    for message in pypi_messages() {
        let kind = message["body"]["type"].as_str().unwrap().to_owned();
        let own = members(&kind);
        for name in names.iter().filter(|n| !own.contains(n)) {
            let mut m = message.clone();
            m["body"][*name] = Value::Null;
            assert!(
                Envelope::from_value(m.clone()).is_ok(),
                "{kind} {name}: null"
            );
            m["body"][*name] = json!("x");
            let r = Envelope::from_value(m).unwrap_err();
            assert_eq!(r.reason, Reason::Malformed, "{kind} {name}: a value");
            assert!(r.detail.contains(name), "{r}");
        }
        let mut m = message.clone();
        m["body"]["surprise"] = Value::Null;
        assert_eq!(
            Envelope::from_value(m).unwrap_err().reason,
            Reason::Malformed,
            "{kind}: an unknown null"
        );
    }
    // A null for the type's own required member is still missing.
    let mut m = hello.clone();
    m["body"]["delegate_id"] = Value::Null;
    assert_eq!(
        Envelope::from_value(m).unwrap_err().reason,
        Reason::Malformed
    );
    // A TASK_RESULT whose provenance is null has none.
    let mut m = pypi_messages().remove(7);
    m["body"]["provenance"] = Value::Null;
    assert_eq!(
        Envelope::from_value(m).unwrap_err().reason,
        Reason::MissingProvenance
    );
    // The package's model takes a TASK_FAILED error as a bare string (its
    // constructors never write one): only the typed error is read.
    let mut m = pypi_messages().remove(8);
    m["body"]["error"] = json!("boom");
    assert_eq!(
        Envelope::from_value(m).unwrap_err().reason,
        Reason::Malformed
    );
    // Nulls inside a member are the member's business (unchanged).
    let mut m = pypi_messages().remove(2);
    m["body"]["config"]["surprise"] = Value::Null;
    assert_eq!(
        Envelope::from_value(m).unwrap_err().reason,
        Reason::Malformed
    );
}

/// [`members`] lists exactly what each [`Body`] variant serializes with
/// every optional member set.
#[test]
fn the_members_table_is_in_step_with_the_body_type() {
    let error = LdpError {
        code: "c".into(),
        category: "runtime".into(),
        message: "m".into(),
        severity: "error".into(),
        retryable: false,
        partial_output: None,
    };
    let provenance: Provenance = serde_json::from_value(json!({
        "produced_by": "ldp:delegate:b", "model_version": "1", "payload_mode_used": "text"}))
    .unwrap();
    let config: SessionConfig = serde_json::from_value(json!({})).unwrap();
    let full = [
        Body::Hello {
            delegate_id: "a".into(),
            supported_modes: vec![],
        },
        Body::CapabilityManifest {
            capabilities: json!({}),
        },
        Body::SessionPropose { config },
        Body::SessionAccept {
            session_id: "s".into(),
            negotiated_mode: PayloadMode::Text,
            fallback_chain: Some(vec![]),
        },
        Body::SessionReject {
            reason: "r".into(),
            error: Some(error.clone()),
        },
        Body::TaskSubmit {
            task_id: "t".into(),
            skill: "s".into(),
            input: json!({}),
            contract: Some(DelegationContract {
                contract_id: "c".into(),
                objective: "o".into(),
                success_criteria: vec![],
                policy: PolicyEnvelope::default(),
                deadline: None,
                created_at: "2026-03-15T10:00:00Z".into(),
            }),
        },
        Body::TaskUpdate {
            task_id: "t".into(),
            progress: Some(0.5),
            message: Some("m".into()),
        },
        Body::TaskResult {
            task_id: "t".into(),
            output: json!({}),
            provenance,
        },
        Body::TaskFailed {
            task_id: "t".into(),
            error,
        },
        Body::TaskCancel {
            task_id: "t".into(),
        },
        Body::Attestation {
            claim: json!({}),
            evidence: json!({}),
        },
        Body::SessionClose {
            reason: Some("r".into()),
        },
    ];
    for body in full {
        let v = serde_json::to_value(&body).unwrap();
        let mut keys: Vec<&str> = v
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "type")
            .collect();
        let mut listed = members(body.kind()).to_vec();
        keys.sort_unstable();
        listed.sort_unstable();
        assert_eq!(keys, listed, "{}", body.kind());
    }
}
