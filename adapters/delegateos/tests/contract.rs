//! Task contracts (§5): signing, tampering, binding to tokens; and the §9 messages.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use delegateos::contract::{BindingError, ContractDraft, ContractError, TaskContract};
use delegateos::dct::AttenuateParams;
use delegateos::messages::{CompleteParams, DelegateParams, DelegateResponse, RevokeParams};
use delegateos::{CheckFunctionRegistry, ContractId};
use serde_json::{json, Value};
use support::*;

pub fn draft_json() -> Value {
    json!({
        "task": {
            "title": "Summarize the design docs",
            "description": "Read /project/docs and write a summary",
            "inputs": {"path": "/project/docs", "maxWords": 300},
            "outputSchema": {"type": "object", "required": ["summary"], "properties": {"summary": {"type": "string"}}}
        },
        "verification": {"method": "composite", "mode": "all_pass", "steps": [
            {"method": "schema_match", "schema": {"type": "object"}},
            {"method": "deterministic_check", "checkName": "string_length", "checkParams": {"field": "summary", "min": 10}}
        ]},
        "constraints": {
            "maxBudgetMicrocents": 5000,
            "deadline": "2026-02-18T00:00:00Z",
            "maxChainDepth": 2,
            "requiredCapabilities": ["docs:read"]
        }
    })
}

fn signed() -> TaskContract {
    let draft = ContractDraft::parse(draft_json().to_string().as_bytes()).unwrap();
    draft
        .sign(
            &key(1),
            ct(1),
            ts("2026-02-17T10:00:00Z"),
            &CheckFunctionRegistry::with_builtins(),
        )
        .unwrap()
}

#[test]
fn sign_parse_verify_round_trip() {
    let c = signed();
    assert_eq!(c.issuer, *key(1).principal_id());
    assert_eq!(c.id, ct(1));
    c.verify_signature().unwrap();
    let text = serde_json::to_string(&c).unwrap();
    let back = TaskContract::parse(text.as_bytes()).unwrap();
    back.verify_signature().unwrap();
    assert_eq!(back, c);
    let json: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["version"], "0.1");
    assert_eq!(
        json["constraints"]["requiredCapabilities"],
        json!(["docs:read"])
    );
}

#[test]
fn tampering_any_field_breaks_the_signature() {
    let good: Value = serde_json::to_value(signed()).unwrap();
    let edits: Vec<(&str, Value)> = vec![
        ("/id", json!(ct(2))),
        ("/issuer", json!(key(2).principal_id())),
        ("/createdAt", json!("2026-02-17T10:00:01Z")),
        ("/task/title", json!("Summarise the design docs")),
        ("/task/description", json!("")),
        ("/task/inputs/maxWords", json!(301)),
        ("/task/outputSchema/required/0", json!("summar")),
        ("/verification/mode", json!("majority")),
        ("/verification/steps/1/checkParams/min", json!(9)),
        ("/constraints/maxBudgetMicrocents", json!(5001)),
        ("/constraints/deadline", json!("2026-02-18T00:00:01Z")),
        ("/constraints/maxChainDepth", json!(3)),
        ("/constraints/requiredCapabilities/0", json!("docs:write")),
    ];
    for (ptr, v) in edits {
        let mut j = good.clone();
        *j.pointer_mut(ptr).unwrap() = v;
        let c = TaskContract::parse(j.to_string().as_bytes()).unwrap();
        assert!(
            matches!(c.verify_signature(), Err(ContractError::Signature(_))),
            "{ptr}"
        );
    }
    // Adding a field is refused outright; so is another version.
    let mut j = good.clone();
    j["task"]["extra"] = json!(1);
    assert!(matches!(
        TaskContract::parse(j.to_string().as_bytes()),
        Err(ContractError::Structure(_))
    ));
    let mut j = good.clone();
    j["version"] = json!("0.2");
    assert!(TaskContract::parse(j.to_string().as_bytes())
        .unwrap_err()
        .to_string()
        .contains("0.2"));
    let mut j = good;
    j["signature"] = json!("AAAA");
    assert!(TaskContract::parse(j.to_string().as_bytes())
        .unwrap()
        .verify_signature()
        .is_err());
}

#[test]
fn drafts_with_invalid_content_are_not_signed() {
    let reg = CheckFunctionRegistry::with_builtins();
    let mut j = draft_json();
    j["verification"]["steps"][1]["checkName"] = json!("no_such_check");
    let err = ContractDraft::parse(j.to_string().as_bytes())
        .unwrap()
        .sign(&key(1), ct(1), ts(NOW), &reg)
        .unwrap_err();
    assert!(matches!(err, ContractError::Spec(_)), "{err}");
    let mut j = draft_json();
    j["task"]["outputSchema"] = json!({"type": "nonsense"});
    let err = ContractDraft::parse(j.to_string().as_bytes())
        .unwrap()
        .sign(&key(1), ct(1), ts(NOW), &reg)
        .unwrap_err();
    assert!(matches!(err, ContractError::OutputSchema(_)), "{err}");
    let mut j = draft_json();
    j["issuer"] = json!(key(2).principal_id());
    let err = ContractDraft::parse(j.to_string().as_bytes())
        .unwrap()
        .sign(&key(1), ct(1), ts(NOW), &reg)
        .unwrap_err();
    assert!(matches!(err, ContractError::WrongIssuer { .. }));
    let mut j = draft_json();
    j["id"] = json!("ct_ABCDEF123456");
    assert!(ContractDraft::parse(j.to_string().as_bytes()).is_err());
    assert!(ContractDraft::parse(br#"{"task":1}"#).is_err());
    assert!(ContractDraft::parse(b"{\"task\":{},\"task\":{}}").is_err());
}

#[test]
fn contract_binding() {
    let cast = Cast::new();
    let mut c = signed();
    let verified = |t: &delegateos::Dct| {
        delegateos::Dct::decode(&t.encode())
            .unwrap()
            .verify_chain(&cast.roots())
            .unwrap()
    };
    // The cast's root token is bound to ct(1) and grants docs:read and docs:write.
    c.check_binding(&verified(&cast.root_token())).unwrap();
    // Bound to another contract.
    let other = cast
        .root_token()
        .attenuate(
            &cast.alice,
            AttenuateParams {
                delegatee: cast.bob.principal_id().clone(),
                delegation_id: del(2),
                contract_id: ct(2),
                allowed_capabilities: None,
                max_budget_microcents: None,
                expires_at: None,
                max_chain_depth: None,
            },
        )
        .unwrap();
    let e = c.check_binding(&verified(&other)).unwrap_err();
    assert_eq!(
        e,
        BindingError::ContractMismatch {
            token: ct(2),
            contract: ct(1)
        }
    );
    assert_eq!(e.reason(), "contract_mismatch");
    // A required capability the token does not grant.
    c.constraints.required_capabilities =
        vec!["docs:read".parse().unwrap(), "web:search".parse().unwrap()];
    let e = c.check_binding(&verified(&cast.root_token())).unwrap_err();
    assert!(matches!(e, BindingError::MissingCapability(ref r) if r.to_string() == "web:search"));
    assert_eq!(e.reason(), "capability_not_granted");
    // Narrowed away by an attenuation: the effective capabilities count.
    c.constraints.required_capabilities = vec!["docs:write".parse().unwrap()];
    let narrowed = cast
        .root_token()
        .attenuate(
            &cast.alice,
            AttenuateParams {
                delegatee: cast.bob.principal_id().clone(),
                delegation_id: del(2),
                contract_id: ct(1),
                allowed_capabilities: Some(vec![cap("docs:read:/project/**")]),
                max_budget_microcents: None,
                expires_at: None,
                max_chain_depth: None,
            },
        )
        .unwrap();
    assert!(c.check_binding(&verified(&cast.root_token())).is_ok());
    assert!(c.check_binding(&verified(&narrowed)).is_err());
    // Custom namespaces keep their colon.
    let r: delegateos::contract::RequiredCapability = "acme:docs:read".parse().unwrap();
    assert_eq!(
        (r.namespace.as_str(), r.action.as_str()),
        ("acme:docs", "read")
    );
    assert!("docs"
        .parse::<delegateos::contract::RequiredCapability>()
        .is_err());
}

#[test]
fn section_9_messages_round_trip() {
    // §9.2 and §9.3, verbatim.
    let accept = json!({"accepted": true, "delegationId": "del_f7e8d9c0b1a2", "estimatedDurationMs": 30000, "estimatedCostMicrocents": 50000});
    let parsed: DelegateResponse = serde_json::from_value(accept.clone()).unwrap();
    assert!(matches!(parsed, DelegateResponse::Accept(_)));
    assert_eq!(serde_json::to_value(&parsed).unwrap(), accept);
    let reject = json!({"accepted": false, "reason": "capability_mismatch", "details": "Agent does not support web:search"});
    let parsed: DelegateResponse = serde_json::from_value(reject.clone()).unwrap();
    assert!(matches!(parsed, DelegateResponse::Reject(_)));
    assert_eq!(serde_json::to_value(&parsed).unwrap(), reject);
    // An accept with a reject's shape, or the reverse, does not parse.
    assert!(serde_json::from_value::<DelegateResponse>(
        json!({"accepted": true, "reason": "x", "details": "y"})
    )
    .is_err());
    assert!(serde_json::from_value::<DelegateResponse>(
        json!({"accepted": false, "delegationId": "del_f7e8d9c0b1a2"})
    )
    .is_err());
    assert_eq!(
        serde_json::to_value(DelegateResponse::accept(del(1))).unwrap(),
        json!({"accepted": true, "delegationId": del(1)})
    );

    // §9.1 with a real contract and token.
    let cast = Cast::new();
    let delegate = json!({
        "contract": signed(),
        "dct": cast.root_token().encode(),
        "dctFormat": "delegateos-sjt-v1",
        "delegationId": "del_f7e8d9c0b1a2",
        "parentDelegationId": "del_000000000000"
    });
    let parsed: DelegateParams = serde_json::from_value(delegate.clone()).unwrap();
    assert_eq!(
        parsed.contract.id,
        ContractId::parse("ct_010101010101").unwrap()
    );
    assert_eq!(serde_json::to_value(&parsed).unwrap(), delegate);

    // §9.5.
    let entry = delegateos::RevocationEntry::sign(
        &key(1),
        &cast.root_token().revocation_ids()[0],
        ts(NOW),
        delegateos::RevocationScope::Block,
    )
    .unwrap();
    let revoke = json!({"revocation": entry});
    let parsed: RevokeParams = serde_json::from_value(revoke.clone()).unwrap();
    assert_eq!(serde_json::to_value(&parsed).unwrap(), revoke);
    assert!(
        serde_json::from_value::<RevokeParams>(json!({"revocation": entry, "extra": 1})).is_err()
    );

    // §9.4 is covered with real attestations in tests/attestation.rs.
    assert!(
        serde_json::from_value::<CompleteParams>(json!({"delegationId": "del_f7e8d9c0b1a2"}))
            .is_err()
    );
}
