//! Talos end to end: a Talos-capability `tools/call` through the real `dgw`
//! to the reference filesystem MCP server is allowed, charged and audited;
//! its replay is denied and never reaches the upstream, also after a
//! restart; scope, revocation and budget denials carry their reasons.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use delegateos::KeyFile;
use serde_json::{json, Value};
use support::mcp::*;
use support::talos_caps::{capability, did, iso};
use support::*;
use talos::audit::{AuditEvent, EventType};
use talos::revocation::TalosRevocation;
use time::OffsetDateTime;

/// A tools/call with the Talos envelope beside `method` (§3.1).
fn call(id: u64, path: &str, cap: &Value, correlation: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "read_text_file", "arguments": {"path": path}},
           "_talos_capability": cap, "_talos_correlation_id": correlation,
           "_talos_session_id": "sess-1", "_talos_timestamp": iso(0), "_talos_version": 1})
}

fn talos_type(answer: &Value) -> String {
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    answer["error"]["data"]["type"].as_str().unwrap().to_owned()
}

#[test]
fn a_talos_capability_through_dgw_is_allowed_charged_audited_and_never_replayed() {
    let files = Files::new();
    let root = seed(1);
    let issuer = seed(7);
    let talos_toml = format!(
        "\n[[talos.issuers]]\ndid = {:?}\nkey = {:?}\ntenant = \"acme\"\nbudget_microcents = 200\n",
        did(&issuer),
        hex::encode(issuer.public_key().to_bytes())
    );
    let config = mcp_gateway_config(
        &files.dir,
        &[("acme", root.principal_id())],
        &format!("{}{talos_toml}", files.upstream_toml()),
    );
    let mut gw = Gateway::start(&config);
    let cap = capability(&issuer, &files.root.display().to_string());
    let mut mcp = McpHttp::connect(&gw.addr, None);
    let send = |mcp: &mut McpHttp, message: Value| -> Value {
        let (status, answer) = mcp.post(&message, None);
        assert_eq!(status, 200, "{answer}");
        answer
    };

    // Allowed, and the upstream never sees a _talos_ field.
    let a = send(&mut mcp, call(1, &files.path("a.txt"), &cap, "corr-1"));
    assert_eq!(text_of(&a), "hello from a\n");
    let seen = files.upstream_calls();
    assert_eq!(seen.len(), 1);
    assert!(
        !serde_json::to_string(&seen).unwrap().contains("_talos_"),
        "{seen:?}"
    );
    // Replayed: denied, and the upstream does not see it.
    let r = send(&mut mcp, call(2, &files.path("a.txt"), &cap, "corr-1"));
    assert_eq!(talos_type(&r), "REPLAY");
    assert!(r["error"]["message"].as_str().unwrap().contains("REPLAY"));
    // Outside the scope.
    let r = send(&mut mcp, call(3, "/etc/passwd", &cap, "corr-2"));
    assert_eq!(talos_type(&r), "SCOPE_MISMATCH");
    // A forged capability.
    let mut forged = cap.clone();
    forged["scope"] = json!("tool:read_text_file");
    let r = send(&mut mcp, call(4, "/etc/passwd", &forged, "corr-3"));
    assert_eq!(talos_type(&r), "SIGNATURE_INVALID");
    // The second call fits the budget (200 = 2 × 100); the third does not.
    let a = send(&mut mcp, call(5, &files.path("sub/b.txt"), &cap, "corr-4"));
    assert_eq!(text_of(&a), "hello from b\n");
    let r = send(&mut mcp, call(6, &files.path("a.txt"), &cap, "corr-5"));
    assert_eq!(talos_type(&r), "budget_exceeded");
    assert_eq!(files.upstream_calls().len(), 2);
    // Unknown tools, whether no upstream offers them or no rule names them.
    for tool in ["no_such_tool", "edit_file"] {
        let mut c = call(10, &files.path("a.txt"), &cap, &format!("corr-{tool}"));
        c["params"]["name"] = json!(tool);
        assert_eq!(talos_type(&send(&mut mcp, c)), "UNKNOWN_TOOL", "{tool}");
    }
    // No version but 1.
    let mut v2 = call(7, &files.path("a.txt"), &cap, "corr-6");
    v2["_talos_version"] = json!(2);
    assert_eq!(talos_type(&send(&mut mcp, v2)), "INVALID_FRAME");

    let m = gw.metrics();
    assert!(
        m.contains(r#"dgw_denials_total{protocol="talos",type="REPLAY"} 1"#),
        "{m}"
    );
    assert!(m.contains(r#"dgw_mcp_tool_calls_total{protocol="talos",upstream="files",tool="read_text_file",outcome="forwarded"} 2"#), "{m}");

    // After a restart the replay window stays shut.
    assert!(gw.terminate().success());
    let gw = Gateway::start(&config);
    let mut mcp = McpHttp::connect(&gw.addr, None);
    let r = send(&mut mcp, call(9, &files.path("a.txt"), &cap, "corr-1"));
    assert_eq!(talos_type(&r), "REPLAY");
    assert_eq!(files.upstream_calls().len(), 2);

    // Revoked by its issuer through JSON-RPC: denied from then on.
    let now = OffsetDateTime::now_utc().unix_timestamp();
    let forged_rev =
        TalosRevocation::sign(&seed(9), &did(&issuer), "cap_00112233445566778899aabb", now);
    let e = gw.err("talos/revoke", json!({"revocation": forged_rev}));
    assert_eq!(e["data"]["type"], "SIGNATURE_INVALID", "{e}");
    let rev = TalosRevocation::sign(&issuer, &did(&issuer), "cap_00112233445566778899aabb", now);
    let r = gw.ok("talos/revoke", json!({"revocation": rev}));
    assert_eq!(r["newlyRecorded"], true);
    let r = send(&mut mcp, call(8, &files.path("a.txt"), &cap, "corr-7"));
    assert_eq!(talos_type(&r), "REVOKED");

    // Signed audit events: GRANT and INVOKE for each allowed call, DENY with
    // the reason, REVOKE; each signed by the gateway's key.
    let events: Vec<AuditEvent> =
        serde_json::from_value(gw.ok("dgw/audit", json!({}))["events"].clone()).unwrap();
    let gateway = KeyFile::parse(&std::fs::read(files.dir.join("data/gateway.key")).unwrap())
        .unwrap()
        .public_key();
    assert!(events.iter().all(|e| e.verify(&gateway)), "{events:?}");
    let kinds: Vec<(EventType, Option<String>)> = events
        .iter()
        .map(|e| (e.event_type, e.denial_reason.clone()))
        .collect();
    for wanted in [
        (EventType::Grant, None),
        (EventType::Invoke, None),
        (EventType::Deny, Some("REPLAY".to_owned())),
        (EventType::Deny, Some("SCOPE_MISMATCH".to_owned())),
        (EventType::Deny, Some("UNKNOWN_TOOL".to_owned())),
        (EventType::Deny, Some("INVALID_FRAME".to_owned())),
        (EventType::Revoke, None),
        (EventType::Deny, Some("REVOKED".to_owned())),
    ] {
        assert!(kinds.contains(&wanted), "{wanted:?} not in {kinds:?}");
    }
    let invoke = events
        .iter()
        .find(|e| e.event_type == EventType::Invoke)
        .unwrap();
    assert_eq!(invoke.response_hash.as_ref().map(String::len), Some(64));
    assert_eq!(invoke.agent_id, did(&seed(2)));
    assert_eq!(invoke.request_hash.len(), 64);
}

/// The same pipeline on the other fronts: a Talos envelope in
/// `dgw/authorize`'s params (JSON-RPC) and in `credential_json` (gRPC) is
/// authorized, reserved against the capability's budget, and never
/// replayed.
#[test]
fn a_talos_capability_is_enforced_over_json_rpc_and_grpc_too() {
    use delegate_gateway::grpc::pb;
    use delegate_gateway::grpc::pb::delegation_gateway_client::DelegationGatewayClient;
    use tonic_types::StatusExt;

    let dir = tempfile::tempdir().unwrap();
    let (root, issuer) = (seed(1), seed(7));
    let extra = format!(
        "grpc = \"127.0.0.1:0\"\n[[talos.issuers]]\ndid = {:?}\nkey = {:?}\ntenant = \"acme\"\nbudget_microcents = 200\n",
        did(&issuer),
        hex::encode(issuer.public_key().to_bytes())
    );
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let gw = Gateway::start(&config);
    let cap = capability(&issuer, "/project");
    let envelope = |correlation: &str| {
        json!({"_talos_capability": cap, "_talos_correlation_id": correlation,
               "_talos_session_id": "sess-1", "_talos_timestamp": iso(0), "_talos_version": 1})
    };
    let ask = |correlation: &str, resource: &str, cost: u64| {
        let mut p = envelope(correlation);
        p["namespace"] = json!("read_text_file");
        p["action"] = json!("read");
        p["resource"] = json!(resource);
        p["costMicrocents"] = json!(cost);
        p
    };
    // JSON-RPC.
    let a = gw.ok("dgw/authorize", ask("rpc-1", "/project/a", 50));
    assert_eq!(
        (a["protocol"].as_str(), a["tenant"].as_str()),
        (Some("talos"), Some("acme"))
    );
    assert!(a["reservationId"].as_str().unwrap().starts_with("res_"));
    let e = gw.err("dgw/authorize", ask("rpc-1", "/project/a", 50));
    assert_eq!(
        (e["data"]["type"].as_str(), e["data"]["protocol"].as_str()),
        (Some("REPLAY"), Some("talos"))
    );
    let e = gw.err("dgw/authorize", ask("rpc-2", "/etc/passwd", 1));
    assert_eq!(e["data"]["type"], "SCOPE_MISMATCH", "{e}");

    // gRPC.
    let addr = gw.grpc.clone().expect("gRPC listens");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = DelegationGatewayClient::connect(format!("http://{addr}"))
            .await
            .unwrap();
        let request = |correlation: &str, cost: u64| pb::AuthorizeRequest {
            credential_json: envelope(correlation).to_string(),
            dct: String::new(),
            request: Some(pb::CapabilityRequest {
                namespace: "read_text_file".into(),
                action: "read".into(),
                resource: "/project/b".into(),
            }),
            cost_microcents: cost,
        };
        let allowed = c
            .authorize(request("grpc-1", 100))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(allowed.tenant, "acme");
        let replay = c.authorize(request("grpc-1", 1)).await.unwrap_err();
        assert_eq!(replay.code(), tonic::Code::PermissionDenied);
        let info = replay.get_error_details().error_info().cloned().unwrap();
        assert_eq!(
            (info.reason.as_str(), info.domain.as_str()),
            ("REPLAY", "talos")
        );
        // 50 + 100 held of 200: 100 more does not fit.
        let over = c.authorize(request("grpc-2", 100)).await.unwrap_err();
        assert_eq!(over.code(), tonic::Code::ResourceExhausted);
        let mut bad = request("grpc-3", 1);
        bad.credential_json = "[1]".into();
        let e = c.authorize(bad).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
    });
}

/// A request carrying two protocols' credentials is refused, whichever
/// would have allowed it: which authority applies would be a guess
/// (decision 77). The upstream never sees it.
#[test]
fn a_call_with_a_dct_and_a_talos_envelope_is_refused_as_ambiguous() {
    let files = Files::new();
    let root = seed(1);
    let issuer = seed(7);
    let talos_toml = format!(
        "\n[[talos.issuers]]\ndid = {:?}\nkey = {:?}\ntenant = \"acme\"\nbudget_microcents = 200\n",
        did(&issuer),
        hex::encode(issuer.public_key().to_bytes())
    );
    let config = mcp_gateway_config(
        &files.dir,
        &[("acme", root.principal_id())],
        &format!("{}{talos_toml}", files.upstream_toml()),
    );
    let gw = Gateway::start(&config);
    let cap = capability(&issuer, &files.root.display().to_string());
    let dct = files.read_token(&root, 300, 3600).encode();
    let mut both = call(1, &files.path("a.txt"), &cap, "corr-both");
    both["params"]["_delegateos"] = json!({"dct": dct});
    let mut mcp = McpHttp::connect(&gw.addr, None);
    let (status, answer) = mcp.post(&both, None);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    assert_eq!(answer["error"]["data"]["type"], "ambiguous_credentials");
    assert!(files.upstream_calls().is_empty());
}
