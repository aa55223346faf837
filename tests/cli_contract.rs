//! `dgw contract`, `dgw check` and `dgw attestation`, as a user drives them,
//! with contracts and attestations signed by the Node peer too.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use support::*;

fn write(dir: &Path, name: &str, value: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
    path
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn verification() -> Value {
    json!({"method": "composite", "mode": "weighted", "weights": [0.5, 0.5], "passThreshold": 1.0, "steps": [
        {"method": "deterministic_check", "checkName": "regex_match", "checkParams": {"pattern": "^#", "field": "summary"}},
        {"method": "deterministic_check", "checkName": "array_length", "checkParams": {"field": "sources", "min": 1}}
    ]})
}

fn new_contract(dir: &Path, key: &Path) -> (PathBuf, Value) {
    let schema = write(
        dir,
        "schema.json",
        &json!({"type": "object", "required": ["summary", "sources"]}),
    );
    let o = run(&[
        "contract",
        "new",
        "--title",
        "Summarize",
        "--description",
        "Summarize the docs",
        "--input",
        "path=/project/docs",
        "--input",
        "maxWords=300",
        "--output-schema",
        &format!("@{}", p(&schema)),
        "--verification",
        &verification().to_string(),
        "--budget",
        "5000",
        "--ttl",
        "2h",
        "--max-depth",
        "2",
        "--require",
        "docs:read",
        "--key",
        p(key),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let contract = json(&o);
    (write(dir, "contract.json", &contract), contract)
}

#[test]
fn contract_new_sign_verify() {
    let dir = tempfile::tempdir().unwrap();
    let (key, kp) = key_file(dir.path(), "issuer", 1);
    // A draft, then signed.
    let o = run(&[
        "contract",
        "new",
        "--title",
        "T",
        "--output-schema",
        "{}",
        "--verification",
        r#"{"method":"schema_match","schema":{"type":"string"}}"#,
        "--budget",
        "10",
        "--deadline",
        "2026-12-01T00:00:00Z",
        "--max-depth",
        "1",
        "--input",
        "n=3",
        "--input",
        "word=hello",
    ]);
    let draft = json(&o);
    assert!(draft.get("signature").is_none() && draft.get("issuer").is_none());
    assert_eq!(draft["task"]["inputs"], json!({"n": 3, "word": "hello"}));
    let draft_path = write(dir.path(), "draft.json", &draft);
    let o = run(&["contract", "sign", "--key", p(&key), p(&draft_path)]);
    let signed = json(&o);
    assert_eq!(signed["issuer"], json!(kp.principal_id()));
    assert!(signed["id"].as_str().unwrap().starts_with("ct_"));
    let signed_path = write(dir.path(), "signed.json", &signed);
    let o = run(&["contract", "verify", p(&signed_path), "--json"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(json(&o)["valid"], true);
    // Another issuer required: exit 1.
    let other = delegateos::Keypair::from_seed([9; 32]);
    let o = run(&[
        "contract",
        "verify",
        p(&signed_path),
        "--issuer",
        other.principal_id().as_str(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    // Tampered: exit 1, with a reason.
    let mut tampered = signed.clone();
    tampered["constraints"]["maxBudgetMicrocents"] = json!(11);
    let t = write(dir.path(), "tampered.json", &tampered);
    let o = run(&["contract", "verify", p(&t), "--json"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(json(&o)["valid"], false);
    assert!(json(&o)["reason"].as_str().unwrap().contains("signature"));
    let human = run(&["contract", "verify", p(&t)]);
    assert!(stdout(&human).starts_with("INVALID"));
    // Not a contract at all: exit 2.
    let junk = write(dir.path(), "junk.json", &json!({"hello": 1}));
    assert_eq!(
        run(&["contract", "verify", p(&junk)]).status.code(),
        Some(2)
    );
    // A draft with an unknown check is refused before signing.
    let o = run(&[
        "contract",
        "new",
        "--title",
        "T",
        "--output-schema",
        "{}",
        "--verification",
        r#"{"method":"deterministic_check","checkName":"vibes"}"#,
        "--budget",
        "10",
        "--ttl",
        "1h",
        "--max-depth",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("vibes"));
}

#[test]
fn check_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let (key, _) = key_file(dir.path(), "issuer", 1);
    let (contract, _) = new_contract(dir.path(), &key);
    let good = write(
        dir.path(),
        "good.json",
        &json!({"summary": "# Title", "sources": ["a"]}),
    );
    let o = run(&[
        "check",
        "--contract",
        p(&contract),
        "--output",
        p(&good),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json(&o), json!({"passed": true, "score": 1.0}));
    let half = write(
        dir.path(),
        "half.json",
        &json!({"summary": "# Title", "sources": []}),
    );
    let o = run(&[
        "check",
        "--contract",
        p(&contract),
        "--output",
        p(&half),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(json(&o)["passed"], false);
    assert_eq!(json(&o)["score"], 0.5);
    // From standard input, human output.
    let o = run_with_stdin(
        &["check", "--contract", p(&contract), "--output", "-"],
        r##"{"summary":"# t","sources":[1]}"##,
    );
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).starts_with("PASSED"));
    // An invalid spec: exit 2.
    let mut bad: Value = serde_json::from_slice(&std::fs::read(&contract).unwrap()).unwrap();
    bad["verification"]["weights"] = json!([0.5, 0.502]);
    let bad = write(dir.path(), "bad.json", &bad);
    let o = run(&[
        "check",
        "--contract",
        p(&bad),
        "--output",
        p(&good),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("weights sum"), "{}", stderr(&o));
    // Output that is not JSON: exit 2.
    let o = run_with_stdin(
        &["check", "--contract", p(&contract), "--output", "-"],
        "{not json",
    );
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn attestation_sign_and_verify_with_children() {
    let dir = tempfile::tempdir().unwrap();
    let (issuer, _) = key_file(dir.path(), "issuer", 1);
    let (worker, _) = key_file(dir.path(), "worker", 2);
    let (helper, _) = key_file(dir.path(), "helper", 3);
    let (contract_path, contract) = new_contract(dir.path(), &issuer);
    let output = json!({"summary": "# Summary", "sources": ["/project/docs/a.md"]});

    let child_draft = write(
        dir.path(),
        "child-draft.json",
        &json!({
            "contractId": contract["id"], "delegationId": "del_000000000002", "type": "completion",
            "result": {"success": true, "output": output, "costMicrocents": 1000, "durationMs": 10}
        }),
    );
    let child = json(&run(&[
        "attestation",
        "sign",
        "--key",
        p(&helper),
        p(&child_draft),
    ]));
    let child_path = write(dir.path(), "child.json", &child);

    let draft = write(
        dir.path(),
        "draft.json",
        &json!({
            "contractId": contract["id"], "delegationId": "del_000000000001", "type": "completion",
            "result": {"success": true, "output": output, "costMicrocents": 4000, "durationMs": 1500},
            "childAttestations": [child["id"]]
        }),
    );
    let o = run(&["attestation", "sign", "--key", p(&worker), p(&draft)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let att = json(&o);
    assert!(att["id"].as_str().unwrap().starts_with("att_"));
    assert_eq!(
        att["result"]["outputHash"],
        json!(delegateos::signing::hash_id(&output).unwrap())
    );
    let att_path = write(dir.path(), "att.json", &att);

    let o = run(&[
        "attestation",
        "verify",
        p(&att_path),
        "--contract",
        p(&contract_path),
        "--child",
        p(&child_path),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let report = json(&o);
    assert_eq!(report["valid"], true);
    assert_eq!(report["reason"], Value::Null);
    assert_eq!(report["verification"]["passed"], true);
    assert_eq!(report["verifiedChildren"], json!([child["id"]]));

    // A tampered child is named in the reason.
    let mut bad_child = child.clone();
    bad_child["result"]["costMicrocents"] = json!(999);
    let bad_child_path = write(dir.path(), "bad-child.json", &bad_child);
    let o = run(&[
        "attestation",
        "verify",
        p(&att_path),
        "--contract",
        p(&contract_path),
        "--child",
        p(&bad_child_path),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let report = json(&o);
    assert_eq!(report["valid"], false);
    assert_eq!(report["reason"]["attestationId"], child["id"]);
    assert_eq!(report["reason"]["type"], "invalid_signature");

    // An output that fails the contract's verification.
    let weak = write(
        dir.path(),
        "weak.json",
        &json!({
            "contractId": contract["id"], "delegationId": "del_000000000001", "type": "completion",
            "result": {"success": true, "output": {"summary": "no heading", "sources": []}, "costMicrocents": 1, "durationMs": 1}
        }),
    );
    let weak = write(
        dir.path(),
        "weak-signed.json",
        &json(&run(&[
            "attestation",
            "sign",
            "--key",
            p(&worker),
            p(&weak),
        ])),
    );
    let o = run(&[
        "attestation",
        "verify",
        p(&weak),
        "--contract",
        p(&contract_path),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(json(&o)["reason"]["type"], "verification_failed");
    assert_eq!(json(&o)["verification"]["passed"], false);

    // Wrong or missing contract, malformed input: exit 2.
    let o = run(&[
        "attestation",
        "verify",
        p(&att_path),
        "--contract",
        p(&att_path),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let mut bad_spec = contract.clone();
    bad_spec["verification"]["steps"][0]["checkName"] = json!("nope");
    let bad_spec = write(dir.path(), "bad-spec.json", &bad_spec);
    let o = run(&[
        "attestation",
        "verify",
        p(&att_path),
        "--contract",
        p(&bad_spec),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    let human = run(&[
        "attestation",
        "verify",
        p(&att_path),
        "--contract",
        p(&contract_path),
    ]);
    assert!(stdout(&human).starts_with("VALID"), "{}", stdout(&human));
}

#[test]
fn contracts_and_attestations_signed_in_typescript_verify_here() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = delegateos::Keypair::from_seed([1; 32]);
    let worker = delegateos::Keypair::from_seed([2; 32]);
    let contract = node_peer(
        "sign",
        &json!({"seed": seed_b64(1), "value": {
            "id": "ct_0123456789ab", "version": "0.1", "issuer": issuer.principal_id(), "createdAt": "2026-02-17T10:00:00.000Z",
            "task": {"title": "Résumé ✓", "description": "unicode 😀", "inputs": {"ratio": 0.1, "big": 1e21},
                     "outputSchema": {"type": "object"}},
            "verification": {"method": "deterministic_check", "checkName": "exit_code", "checkParams": {"expected": 0}},
            "constraints": {"maxBudgetMicrocents": 100, "deadline": "2026-03-01T00:00:00Z", "maxChainDepth": 1,
                            "requiredCapabilities": ["code:execute"]}
        }}),
    );
    let contract_path = write(dir.path(), "contract.json", &contract);
    let o = run(&["contract", "verify", p(&contract_path), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));

    let output = json!({"exitCode": 0, "stdout": "ok"});
    let att = node_peer(
        "sign",
        &json!({"seed": seed_b64(2), "value": {
            "id": "att_0123456789ab", "version": "0.1", "contractId": "ct_0123456789ab", "delegationId": "del_0123456789ab",
            "principal": worker.principal_id(), "createdAt": "2026-02-17T11:00:00.000Z", "type": "completion",
            "result": {"success": true, "output": output, "outputHash": delegateos::signing::hash_id(&output).unwrap(),
                       "costMicrocents": 90, "durationMs": 5},
            "childAttestations": []
        }}),
    );
    let att_path = write(dir.path(), "att.json", &att);
    let o = run(&[
        "attestation",
        "verify",
        p(&att_path),
        "--contract",
        p(&contract_path),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert_eq!(
        json(&o)["verification"],
        json!({"passed": true, "score": 1.0})
    );
}
