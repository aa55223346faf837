//! Attestations (§7): signing, tampering, §7.3 verification and the
//! recursive verification of child attestations.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;

use delegateos::attestation::{
    verify_attestation, Attestation, AttestationContext, AttestationDraft, AttestationReport,
    FailureKind,
};
use delegateos::contract::{ContractDraft, TaskContract};
use delegateos::messages::CompleteParams;
use delegateos::{AttestationId, CheckFunctionRegistry, ContractId, Keypair};
use serde_json::{json, Value};
use support::*;

fn contract(id: ContractId, budget: u64) -> TaskContract {
    let draft = json!({
        "task": {
            "title": "Count words", "description": "Count the words of a document", "inputs": {},
            "outputSchema": {"type": "object", "required": ["words"], "properties": {"words": {"type": "integer"}}}
        },
        "verification": {"method": "deterministic_check", "checkName": "field_exists", "checkParams": {"fields": ["words"]}},
        "constraints": {"maxBudgetMicrocents": budget, "deadline": "2026-03-01T00:00:00Z", "maxChainDepth": 2, "requiredCapabilities": []}
    });
    ContractDraft::parse(draft.to_string().as_bytes())
        .unwrap()
        .sign(
            &key(1),
            id,
            ts(NOW),
            &CheckFunctionRegistry::with_builtins(),
        )
        .unwrap()
}

fn att_id(n: u8) -> AttestationId {
    AttestationId::from_bytes([n; 6])
}

fn attest(
    signer: &Keypair,
    n: u8,
    contract: &ContractId,
    output: Value,
    cost: u64,
    children: &[u8],
) -> Attestation {
    let draft = json!({
        "contractId": contract,
        "delegationId": del(n),
        "type": "completion",
        "result": {"success": true, "output": output, "costMicrocents": cost, "durationMs": 1200},
        "childAttestations": children.iter().map(|c| att_id(*c)).collect::<Vec<_>>()
    });
    AttestationDraft::parse(draft.to_string().as_bytes())
        .unwrap()
        .sign(signer, att_id(n), ts(NOW))
        .unwrap()
}

fn verify(
    att: &Attestation,
    contracts: &[TaskContract],
    children: &[Attestation],
) -> AttestationReport {
    let contracts: BTreeMap<_, _> = contracts
        .iter()
        .map(|c| (c.id.clone(), c.clone()))
        .collect();
    let children: BTreeMap<_, _> = children.iter().map(|a| (a.id.clone(), a.clone())).collect();
    let registry = CheckFunctionRegistry::with_builtins();
    verify_attestation(
        att,
        &AttestationContext {
            contracts: &contracts,
            children: &children,
            registry: &registry,
        },
    )
    .unwrap()
}

fn failure(report: &AttestationReport) -> (AttestationId, FailureKind) {
    assert!(!report.valid);
    let r = report.reason.as_ref().unwrap();
    assert!(!r.detail.is_empty());
    (r.attestation_id.clone(), r.kind)
}

#[test]
fn a_good_attestation_verifies() {
    let c = contract(ct(1), 1000);
    let a = attest(&key(2), 1, &c.id, json!({"words": 42}), 900, &[]);
    assert_eq!(
        a.result.output_hash.as_deref().unwrap(),
        delegateos::signing::hash_id(&json!({"words": 42})).unwrap()
    );
    let report = verify(&a, &[c], &[]);
    assert!(report.valid, "{report:?}");
    assert!(report.verification.unwrap().passed);
    // Round trip through JSON, and as §9.4 params.
    let text = serde_json::to_string(&a).unwrap();
    assert_eq!(Attestation::parse(text.as_bytes()).unwrap(), a);
    let complete = json!({"delegationId": del(1), "attestation": a});
    let parsed: CompleteParams = serde_json::from_value(complete.clone()).unwrap();
    assert_eq!(serde_json::to_value(parsed).unwrap(), complete);
}

#[test]
fn each_section_7_3_failure() {
    let c = contract(ct(1), 1000);
    let signer = key(2);
    // 1. Signature: tampered field by field.
    let good =
        serde_json::to_value(attest(&signer, 1, &c.id, json!({"words": 42}), 900, &[])).unwrap();
    for (ptr, v) in [
        ("/id", json!(att_id(9))),
        ("/contractId", json!(ct(1))), // unchanged value: must still verify (control)
        ("/delegationId", json!(del(9))),
        ("/principal", json!(key(3).principal_id())),
        ("/createdAt", json!("2026-02-17T10:30:00.001Z")),
        ("/type", json!("delegation_verification")),
        ("/result/success", json!(false)),
        ("/result/costMicrocents", json!(899)),
        ("/result/durationMs", json!(1)),
        ("/childAttestations", json!([att_id(5)])),
    ] {
        let mut j = good.clone();
        *j.pointer_mut(ptr).unwrap() = v;
        let a = Attestation::parse(j.to_string().as_bytes()).unwrap();
        let report = verify(&a, std::slice::from_ref(&c), &[]);
        if ptr == "/contractId" {
            assert!(report.valid, "control");
        } else {
            assert_eq!(failure(&report).1, FailureKind::InvalidSignature, "{ptr}");
        }
    }
    // Output hash: the output changed, hash not (re-signed so the signature holds).
    let mut a = attest(&signer, 1, &c.id, json!({"words": 42}), 900, &[]);
    a.result.output = Some(json!({"words": 41}));
    let a = resign_att(a, &signer);
    assert_eq!(
        failure(&verify(&a, std::slice::from_ref(&c), &[])).1,
        FailureKind::OutputHashMismatch
    );
    // No output on success.
    let mut a = attest(&signer, 1, &c.id, json!({"words": 42}), 900, &[]);
    a.result.output = None;
    a.result.output_hash = None;
    assert_eq!(
        failure(&verify(
            &resign_att(a, &signer),
            std::slice::from_ref(&c),
            &[]
        ))
        .1,
        FailureKind::OutputMissing
    );
    // 2. Output schema.
    let a = attest(&signer, 1, &c.id, json!({"words": "many"}), 900, &[]);
    assert_eq!(
        failure(&verify(&a, std::slice::from_ref(&c), &[])).1,
        FailureKind::SchemaMismatch
    );
    // 3. Verification spec (field_exists on a schema-valid output needs a stricter contract).
    let mut strict = json!({
        "task": {"title": "t", "description": "d", "inputs": {}, "outputSchema": {"type": "object"}},
        "verification": {"method": "deterministic_check", "checkName": "field_exists", "checkParams": {"fields": ["words", "lines"]}},
        "constraints": {"maxBudgetMicrocents": 1000, "deadline": "2026-03-01T00:00:00Z", "maxChainDepth": 2, "requiredCapabilities": []}
    });
    strict["id"] = json!(ct(7));
    let strict = ContractDraft::parse(strict.to_string().as_bytes())
        .unwrap()
        .sign(
            &key(1),
            ct(7),
            ts(NOW),
            &CheckFunctionRegistry::with_builtins(),
        )
        .unwrap();
    let a = attest(&signer, 1, &strict.id, json!({"words": 3}), 10, &[]);
    let report = verify(&a, &[strict], &[]);
    assert_eq!(failure(&report).1, FailureKind::VerificationFailed);
    assert!(report.reason.unwrap().detail.contains("lines"));
    assert!(!report.verification.unwrap().passed);
    // 4. Cost over budget.
    let a = attest(&signer, 1, &c.id, json!({"words": 42}), 1001, &[]);
    assert_eq!(
        failure(&verify(&a, std::slice::from_ref(&c), &[])).1,
        FailureKind::BudgetExceeded
    );
    // A reported failure is a valid attestation of a failure: no output is judged.
    let mut a = attest(&signer, 1, &c.id, json!({"words": 42}), 10, &[]);
    a.result.success = false;
    a.result.output = None;
    a.result.output_hash = None;
    let report = verify(&resign_att(a, &signer), std::slice::from_ref(&c), &[]);
    assert!(report.valid);
    assert!(report.verification.is_none());
    // Verified against the wrong contract.
    let other = contract(ct(2), 1000);
    let a = attest(&signer, 1, &other.id, json!({"words": 42}), 10, &[]);
    let contracts: BTreeMap<_, _> = [(other.id.clone(), c.clone())].into();
    let registry = CheckFunctionRegistry::with_builtins();
    let report = verify_attestation(
        &a,
        &AttestationContext {
            contracts: &contracts,
            children: &BTreeMap::new(),
            registry: &registry,
        },
    )
    .unwrap();
    assert_eq!(failure(&report).1, FailureKind::ContractMismatch);
    // No contract at all is not a verdict but an error.
    let report = verify_attestation(
        &a,
        &AttestationContext {
            contracts: &BTreeMap::new(),
            children: &BTreeMap::new(),
            registry: &registry,
        },
    );
    assert!(report.is_err());
}

fn resign_att(mut a: Attestation, signer: &Keypair) -> Attestation {
    let body = delegateos::signing::without_signature(&a).unwrap();
    a.signature = delegateos::signing::sign(signer, &body).unwrap();
    a
}

#[test]
fn drafts_are_checked_when_signed() {
    let mut draft = json!({
        "contractId": ct(1), "delegationId": del(1), "type": "completion",
        "result": {"success": true, "output": {"words": 1}, "outputHash": "wrong", "costMicrocents": 1, "durationMs": 1},
        "childAttestations": []
    });
    let err = AttestationDraft::parse(draft.to_string().as_bytes())
        .unwrap()
        .sign(&key(2), att_id(1), ts(NOW))
        .unwrap_err();
    assert!(err.to_string().contains("outputHash"));
    draft["result"]["outputHash"] =
        json!(delegateos::signing::hash_id(&json!({"words": 1})).unwrap());
    draft["principal"] = json!(key(3).principal_id());
    let err = AttestationDraft::parse(draft.to_string().as_bytes())
        .unwrap()
        .sign(&key(2), att_id(1), ts(NOW))
        .unwrap_err();
    assert!(err.to_string().contains("not"));
    draft["principal"] = json!(key(2).principal_id());
    draft["result"]["costMicrocents"] = json!(9_007_199_254_740_993u64);
    assert!(AttestationDraft::parse(draft.to_string().as_bytes())
        .unwrap()
        .sign(&key(2), att_id(1), ts(NOW))
        .is_err());
    draft["type"] = json!("guess");
    assert!(AttestationDraft::parse(draft.to_string().as_bytes()).is_err());
}

#[test]
fn children_are_verified_recursively_and_failures_name_them() {
    let parent_contract = contract(ct(1), 10_000);
    let child_contract = contract(ct(2), 500);
    let (alice, bob, carol) = (key(2), key(3), key(4));
    let grandchild = attest(&carol, 3, &child_contract.id, json!({"words": 1}), 100, &[]);
    let child = attest(&bob, 2, &child_contract.id, json!({"words": 2}), 400, &[3]);
    let parent = attest(
        &alice,
        1,
        &parent_contract.id,
        json!({"words": 3}),
        1000,
        &[2],
    );
    let contracts = [parent_contract.clone(), child_contract.clone()];

    let report = verify(&parent, &contracts, &[child.clone(), grandchild.clone()]);
    assert!(report.valid, "{report:?}");
    assert_eq!(report.verified_children, vec![att_id(3), att_id(2)]);

    // Children not supplied are not followed (v0.1 verifies one level).
    let report = verify(&parent, &contracts, &[]);
    assert!(report.valid);
    assert!(report.verified_children.is_empty());

    // A tampered grandchild: the failure names the grandchild.
    let mut bad = grandchild.clone();
    bad.result.duration_ms += 1;
    assert_eq!(
        failure(&verify(&parent, &contracts, &[child.clone(), bad])),
        (att_id(3), FailureKind::InvalidSignature)
    );
    // A child over its own contract's budget.
    let pricey = attest(&bob, 2, &child_contract.id, json!({"words": 2}), 501, &[]);
    assert_eq!(
        failure(&verify(&parent, &contracts, &[pricey])),
        (att_id(2), FailureKind::BudgetExceeded)
    );
    // A child whose contract is not supplied is checked for signature and hash.
    let report = verify(
        &parent,
        std::slice::from_ref(&parent_contract),
        &[child.clone(), grandchild.clone()],
    );
    assert!(report.valid);
    // Children costing more together than the parent reports.
    let cheap_parent = attest(
        &alice,
        1,
        &parent_contract.id,
        json!({"words": 3}),
        399,
        &[2],
    );
    assert_eq!(
        failure(&verify(
            &cheap_parent,
            &contracts,
            &[child.clone(), grandchild.clone()]
        )),
        (att_id(1), FailureKind::ChildCostExceedsParent)
    );
    // A cycle.
    let looping = attest(
        &carol,
        3,
        &child_contract.id,
        json!({"words": 1}),
        100,
        &[2],
    );
    assert_eq!(
        failure(&verify(&parent, &contracts, &[child, looping])),
        (att_id(3), FailureKind::ChildCycle)
    );
    let own = attest(
        &alice,
        1,
        &parent_contract.id,
        json!({"words": 3}),
        1000,
        &[1],
    );
    let report = verify(&own, &contracts, std::slice::from_ref(&own));
    assert_eq!(failure(&report).1, FailureKind::ChildCycle);
}

#[test]
fn deep_child_chains_stop_at_the_limit() {
    let c = contract(ct(1), u64::from(u32::MAX));
    let signer = key(2);
    let mut chain = Vec::new();
    for n in (1..=40u8).rev() {
        let children = if n < 40 { vec![n + 1] } else { vec![] };
        chain.push(attest(
            &signer,
            n,
            &c.id,
            json!({"words": 1}),
            1000 - u64::from(n),
            &children,
        ));
    }
    let top = chain.last().unwrap().clone();
    assert_eq!(top.id, att_id(1));
    let report = verify(&top, &[c], &chain);
    assert_eq!(failure(&report).1, FailureKind::ChildDepthExceeded);
}
