//! Motebit's offline and method surfaces: `dgw motebit verify|verdict` on
//! the reference's corpus and fixtures (vendored in adapters/motebit),
//! `motebit/verify`, `motebit/verdict` and `motebit/receipt` over JSON-RPC
//! and gRPC, and both directions against a JavaScript peer written from
//! the texts (tests/interop/motebit-peer.mjs).

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use support::*;

fn interop(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("adapters/motebit/tests/interop")
        .join(rel)
}

fn corpus() -> Vec<Value> {
    let text =
        std::fs::read_to_string(interop("spec/conformance/verification-verdict/corpus.json"))
            .unwrap();
    serde_json::from_str::<Value>(&text).unwrap()["cases"]
        .as_array()
        .unwrap()
        .clone()
}

/// The artifacts the reference minted and judged itself, with its
/// verdicts (adapters/motebit/tests/minted/), including those off the
/// schemas.
fn minted() -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("adapters/motebit/tests/minted/reference-verdicts.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Whether dgw must refuse a minted case (exit 2, `malformed`): the
/// reference threw on it, or a part of it is not a JSON object.
fn refused(case: &Value) -> bool {
    case.get("throws").is_some() || case.get("dgw_refuses").is_some()
}

fn write(dir: &Path, name: &str, value: &Value) -> String {
    let p = dir.join(name);
    std::fs::write(&p, value.to_string()).unwrap();
    p.display().to_string()
}

/// Runs the JavaScript Motebit peer.
fn peer(command: &str, input: &Value) -> Value {
    node_script("interop/motebit-peer.mjs", command, input)
}

/// Every corpus case through the CLI: the verdict printed deep-equals the
/// expected one; exit 0 exactly when integrity is verified.
#[test]
fn cli_verdicts_match_the_corpus() {
    let dir = tempfile::tempdir().unwrap();
    for case in corpus() {
        let file = write(dir.path(), "case.json", &case);
        let out = run(&["motebit", "verdict", &file]);
        let printed: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", stderr(&out)));
        assert_eq!(printed, case["expected"], "{}", case["name"]);
        let verified = case["expected"]["integrity"] == "verified";
        assert_eq!(
            out.status.code(),
            Some(if verified { 0 } else { 1 }),
            "{}",
            case["name"]
        );
    }
    // A bare receipt gives the same verdict as its case.
    let case = &corpus()[0];
    let file = write(dir.path(), "receipt.json", &case["input"]["receipt"]);
    assert_eq!(json(&run(&["motebit", "verdict", &file])), case["expected"]);
    // A receipt with nothing but its task_id is judged as the reference
    // judges it: no key to verify with.
    let p = dir.path().join("member.json");
    std::fs::write(&p, r#"{"task_id": "t"}"#).unwrap();
    let out = run(&["motebit", "verdict", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(json(&out)["repair"]["code"], "integrity.no_key");
    // Not the artifact's shape at all: exit 2 and a message, never a verdict.
    for (name, bad) in [
        ("array.json", "[1, 2]"),
        ("junk.json", "{not json"),
        ("neither.json", r#"{"id": "t"}"#),
        ("dup.json", r#"{"task_id": "t", "task_id": "u"}"#),
        ("kind.json", r#"{"kind": "receipts", "input": {}}"#),
        ("subject.json", r#"{"kind": "succession", "input": {}}"#),
        (
            "part.json",
            r#"{"kind": "receipt", "input": {"receipt": 7}}"#,
        ),
    ] {
        let p = dir.path().join(name);
        std::fs::write(&p, bad).unwrap();
        let out = run(&["motebit", "verdict", p.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stdout(&out));
        assert!(out.stdout.is_empty(), "{name}");
        assert!(stderr(&out).starts_with("dgw:"), "{name}: {}", stderr(&out));
    }
}

/// Every artifact the reference minted and judged, off the schemas too
/// (a `suite` removed after signing or never signed, members missing, of
/// another type, unknown): `dgw motebit verdict` prints the reference's
/// verdict and exits 0/1 by integrity; where the reference throws, or a
/// part is not a JSON object, it prints nothing and exits 2. `dgw motebit
/// verify` judges each bare receipt or token that names its kind (exit 0,
/// or 1 with the reason), never exit 2.
#[test]
fn cli_judges_what_the_reference_judges() {
    let dir = tempfile::tempdir().unwrap();
    let (mut judged, mut refusals) = (0, 0);
    for case in minted() {
        let name = case["name"].as_str().unwrap();
        let file = write(dir.path(), "case.json", &case);
        let out = run(&["motebit", "verdict", &file]);
        if refused(&case) {
            assert_eq!(out.status.code(), Some(2), "{name}: {}", stdout(&out));
            assert!(out.stdout.is_empty(), "{name}");
            assert!(
                stderr(&out).starts_with("dgw: malformed"),
                "{name}: {}",
                stderr(&out)
            );
            refusals += 1;
            continue;
        }
        let printed: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{name}: {}", stderr(&out)));
        if case.get("dgw_diverges").is_some() {
            // Strict Ed25519 (decision 174): the forgery is not verified.
            assert_eq!(printed["integrity"], "invalid", "{name}");
            assert_eq!(out.status.code(), Some(1), "{name}");
            continue;
        }
        assert_eq!(printed, case["expected"], "{name}");
        let verified = case["expected"]["integrity"] == "verified";
        assert_eq!(
            out.status.code(),
            Some(if verified { 0 } else { 1 }),
            "{name}"
        );
        judged += 1;
        if !name.starts_with("off-") {
            continue;
        }
        let (artifact, names_its_kind) = match case["kind"].as_str().unwrap() {
            "receipt" => (&case["input"]["receipt"], "task_id"),
            _ => (&case["input"]["token"], "delegator_id"),
        };
        let out = run(&["motebit", "verify", &write(dir.path(), "a.json", artifact)]);
        if artifact.get(names_its_kind).is_none() {
            // A bare artifact without the member naming its kind is not
            // recognisable as one (its case above was judged).
            assert_eq!(out.status.code(), Some(2), "{name}: {}", stdout(&out));
            continue;
        }
        let report = json(&out);
        if report["verified"] == true {
            // Off the reference's own expectations, yet all the gateway asks.
            assert_eq!(out.status.code(), Some(0), "{name}");
            continue;
        }
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr(&out));
        let error = &report["report"]["error"];
        assert!(error["type"].is_string(), "{name}: {report}");
        if [
            "off-receipt-suite-removed",
            "off-receipt-suite-never",
            "off-token-suite-removed",
            "off-token-suite-never",
        ]
        .iter()
        .any(|p| name.starts_with(p))
        {
            assert_eq!(error["type"], "wrong_suite", "{name}: {report}");
        }
    }
    assert_eq!((judged, refusals), (117, 11));
}

/// JSON-RPC `motebit/verdict` and `motebit/verify` answer every minted
/// case as the CLI does: the reference's verdict, or `malformed`.
#[test]
fn rpc_judges_what_the_reference_judges() {
    let dir = tempfile::tempdir().unwrap();
    let config = gateway_config(dir.path(), &[("acme", seed(1).principal_id())], "");
    let gw = Gateway::start(&config);
    for case in minted() {
        let name = case["name"].as_str().unwrap();
        if refused(&case) {
            let e = gw.err("motebit/verdict", json!({"artifact": case}));
            assert_eq!(e["data"]["type"], "malformed", "{name}: {e}");
            continue;
        }
        let v = gw.ok("motebit/verdict", json!({"artifact": case}));
        if case.get("dgw_diverges").is_some() {
            assert_eq!(v["integrity"], "invalid", "{name}");
            continue;
        }
        assert_eq!(v, case["expected"], "{name}");
    }
    let suite_removed = minted()
        .into_iter()
        .find(|c| c["name"] == "off-receipt-suite-removed-after-signing")
        .unwrap();
    let report = gw.ok(
        "motebit/verify",
        json!({"artifact": suite_removed["input"]["receipt"]}),
    );
    assert_eq!(
        (&report["verified"], &report["report"]["error"]["type"]),
        (&json!(false), &json!("wrong_suite")),
        "{report}"
    );
}

#[test]
fn cli_verify_fixtures_tampering_and_known_keys() {
    let dir = tempfile::tempdir().unwrap();
    for rel in [
        "examples/python-receipt-verifier/fixtures/example-receipt.json",
        "examples/python-receipt-verifier/fixtures/sovereign-receipt-payment-denied.json",
        "examples/python-receipt-verifier/fixtures/sovereign-receipt-research-complete.json",
        "examples/python-receipt-verifier/fixtures/sovereign-receipt.json",
        "packages/verify/examples/sample-receipt.json",
    ] {
        let out = run(&["motebit", "verify", interop(rel).to_str().unwrap()]);
        assert!(out.status.success(), "{rel}: {}", stdout(&out));
        assert_eq!(json(&out)["report"]["keySource"], "embedded");
    }
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(interop("packages/verify/examples/sample-receipt.json")).unwrap(),
    )
    .unwrap();
    let mut tampered = fixture.clone();
    tampered["result"] = json!("5");
    let out = run(&["motebit", "verify", &write(dir.path(), "t.json", &tampered)]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["report"]["error"]["type"], "bad_signature");
    // A known key for its motebit_id that is not its embedded key.
    let keys = json!({fixture["motebit_id"].as_str().unwrap(): "8a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c"});
    let out = run(&[
        "motebit",
        "verify",
        &write(dir.path(), "f.json", &fixture),
        "--known-keys",
        &write(dir.path(), "k.json", &keys),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["report"]["keySource"], "external");
    assert_eq!(json(&out)["report"]["error"]["type"], "key_mismatch");
    let out = run(&[
        "motebit",
        "verify",
        &write(dir.path(), "bad-keys.json", &json!({"x": "ABC"})),
    ]);
    assert_eq!(out.status.code(), Some(2));

    // A delegation chain and a receipt sequence.
    let now = (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as u64;
    let hex = |n: u8| motebit::encoding::key_hex(&seed(n).public_key());
    let token = |from: u8, to: u8, scope: &str| {
        let mut v = json!({
            "delegator_id": format!("agent-{from}"), "delegator_public_key": hex(from),
            "delegate_id": format!("agent-{to}"), "delegate_public_key": hex(to),
            "scope": scope, "issued_at": now, "expires_at": now + 60_000, "suite": motebit::SUITE});
        motebit::encoding::sign(&seed(from), &mut v).unwrap();
        v
    };
    let chain = json!([token(1, 2, "a,b"), token(2, 3, "a")]);
    let out = run(&[
        "motebit",
        "verify",
        &write(dir.path(), "chain.json", &chain),
    ]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(json(&out)["kind"], "delegation_chain");
    let widened = json!([token(1, 2, "a"), token(2, 3, "a,b")]);
    let out = run(&[
        "motebit",
        "verify",
        &write(dir.path(), "wide.json", &widened),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["report"]["error"]["type"], "scope_widened");
    let receipt = |n: u8, submitted: u64, completed: u64| {
        let mut r = json!({
            "task_id": format!("t{submitted}"), "motebit_id": "m", "device_id": "d",
            "submitted_at": submitted, "completed_at": completed, "status": "completed",
            "result": "", "tools_used": [], "memories_formed": 0,
            "prompt_hash": motebit::encoding::sha256_hex(b""), "result_hash": motebit::encoding::sha256_hex(b""),
            "public_key": hex(n), "suite": motebit::SUITE});
        motebit::encoding::sign(&seed(n), &mut r).unwrap();
        r
    };
    let ordered = json!([receipt(1, 0, 10), receipt(2, 10, 20)]);
    let out = run(&[
        "motebit",
        "verify",
        &write(dir.path(), "seq.json", &ordered),
    ]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(json(&out)["kind"], "receipt_sequence");
    let overlapping = json!([receipt(1, 0, 10), receipt(2, 5, 20)]);
    let out = run(&[
        "motebit",
        "verify",
        &write(dir.path(), "seq2.json", &overlapping),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["report"]["error"]["type"], "out_of_order");
    assert_eq!(json(&out)["report"]["index"], 1);
}

/// Receipts signed by the JavaScript peer verify in dgw, and a receipt the
/// gateway makes of a DelegateOS attestation verifies in the peer.
#[test]
fn receipts_cross_between_dgw_and_the_javascript_peer() {
    let dir = tempfile::tempdir().unwrap();
    let result = "42 words";
    let theirs = peer(
        "sign-receipt",
        &json!({"seed": 6, "receipt": {
        "task_id": "t-js", "motebit_id": "js-agent", "device_id": "d", "submitted_at": 1,
        "completed_at": 2, "status": "completed", "result": result, "tools_used": [],
        "memories_formed": 0, "prompt_hash": motebit::encoding::sha256_hex(b"p"),
        "result_hash": motebit::encoding::sha256_hex(result.as_bytes())}}),
    );
    let out = run(&["motebit", "verify", &write(dir.path(), "js.json", &theirs)]);
    assert!(out.status.success(), "{}", stdout(&out));

    let gw_dir = tempfile::tempdir().unwrap();
    let config = gateway_config(gw_dir.path(), &[("acme", seed(1).principal_id())], "");
    let gw = Gateway::start(&config);
    let att = attestation(&seed(3), 1, del(1), json!({"words": 42}), 500, true);
    let ours = gw.ok("motebit/receipt", json!({"attestation": att}));
    assert_eq!(peer("verify", &ours), json!({"valid": true, "errors": []}));
    assert_eq!(ours["result"], json!(r#"{"words":42}"#));
    let verdict = gw.ok("motebit/verdict", json!({"artifact": ours}));
    assert_eq!(
        (
            verdict["integrity"].as_str(),
            verdict["identityBinding"].as_str()
        ),
        (Some("verified"), Some("sovereign"))
    );
    // The peer catches what dgw catches.
    let mut forged = ours.clone();
    forged["status"] = json!("failed");
    assert_eq!(peer("verify", &forged)["valid"], false);
    let report = gw.ok("motebit/verify", json!({"artifact": forged}));
    assert_eq!(report["verified"], false);
    // An attestation whose signature fails is not vouched for.
    let mut bad = att.clone();
    bad["result"]["costMicrocents"] = json!(1);
    let e = gw.err("motebit/receipt", json!({"attestation": bad}));
    assert_eq!(e["data"]["type"], "signature_invalid", "{e}");
    // Malformed params are typed errors.
    let e = gw.err("motebit/verify", json!({"artifact": 7}));
    assert_eq!(e["data"]["type"], "malformed", "{e}");
    let e = gw.err("motebit/verify", json!({"receipt": {}}));
    assert_eq!(e["data"]["type"], "invalid_params", "{e}");
    let e = gw.err(
        "motebit/pin",
        json!({"motebit_id": "x", "public_key": "00"}),
    );
    assert_eq!(e["data"]["type"], "admin_required", "{e}");
}

/// The gRPC twins: `CallProtocol` serves the same methods, refusals typed
/// with an ErrorInfo in Motebit's domain.
#[tokio::test(flavor = "multi_thread")]
async fn grpc_call_protocol_twins() {
    use delegate_gateway::grpc::pb;
    use delegate_gateway::grpc::pb::delegation_gateway_client::DelegationGatewayClient;
    use tonic_types::StatusExt;

    let dir = tempfile::tempdir().unwrap();
    let config = gateway_config(
        dir.path(),
        &[("acme", seed(1).principal_id())],
        "grpc = \"127.0.0.1:0\"\n",
    );
    let gw = tokio::task::spawn_blocking(move || Gateway::start(&config))
        .await
        .unwrap();
    let mut client =
        DelegationGatewayClient::connect(format!("http://{}", gw.grpc.clone().unwrap()))
            .await
            .unwrap();
    let call = |method: &str, params: Value| {
        tonic::Request::new(pb::CallProtocolRequest {
            method: method.into(),
            params_json: params.to_string(),
        })
    };
    for case in corpus().into_iter().chain(minted()) {
        let answer = client
            .call_protocol(call("motebit/verdict", json!({"artifact": case})))
            .await;
        if refused(&case) {
            let status = answer.unwrap_err();
            let info = status.get_error_details().error_info().cloned();
            assert_eq!(
                info.map(|i| i.reason),
                Some("MALFORMED".into()),
                "{}",
                case["name"]
            );
            continue;
        }
        let v: Value = serde_json::from_str(&answer.unwrap().into_inner().result_json).unwrap();
        if case.get("dgw_diverges").is_some() {
            assert_eq!(v["integrity"], "invalid", "{}", case["name"]);
            continue;
        }
        assert_eq!(v, case["expected"], "{}", case["name"]);
    }
    // A receipt whose suite was removed after signing: judged, not refused.
    let suite_removed = minted()
        .into_iter()
        .find(|c| c["name"] == "off-receipt-suite-removed-after-signing")
        .unwrap();
    let r = client
        .call_protocol(call(
            "motebit/verify",
            json!({"artifact": suite_removed["input"]["receipt"]}),
        ))
        .await
        .unwrap()
        .into_inner();
    let report: Value = serde_json::from_str(&r.result_json).unwrap();
    assert_eq!(report["report"]["error"]["type"], "wrong_suite", "{report}");
    let refused = client
        .call_protocol(call("motebit/verify", json!({"artifact": {"id": "t"}})))
        .await
        .unwrap_err();
    let info = refused
        .get_error_details()
        .error_info()
        .cloned()
        .expect("an ErrorInfo");
    assert_eq!(
        (info.reason.as_str(), info.domain.as_str()),
        ("MALFORMED", "motebit"),
        "{refused:?}"
    );
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    tokio::task::spawn_blocking(move || drop(gw)).await.unwrap();
}
