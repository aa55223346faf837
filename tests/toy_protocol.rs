//! Adding a protocol, proven from outside: a toy protocol in its own crate
//! (`tests/fixtures/toy-protocol`: a shared secret under `Authorization:
//! Toy …` that grants one capability under a budget) exports one
//! registration value, and a gateway built from the binary's list plus that
//! entry gives it, with no other edit, a config section (a bad key refused
//! by name), a reload, an HTTP route, state through the state traits, and
//! its credential enforced by the MCP, JSON-RPC and gRPC fronts, charged
//! and audited. The gateway runs in this process and is spoken to over real
//! sockets.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use delegate_gateway::config::{Config, Modules};
use delegate_gateway::grpc::pb;
use delegate_gateway::grpc::pb::delegation_gateway_client::DelegationGatewayClient;
use delegate_gateway::protocol::{Protocol, Translation};
use delegate_gateway::serve::{Extensions, Listening};
use delegateos::attestation::Attestation;
use serde_json::{json, Value};
use support::mcp::tests_dir;
use support::*;
use tonic::Code;
use tonic_types::StatusExt;

/// The secret `[toy]` names first, and the one a reload brings.
const SECRET: &str = "open-sesame";
const ROTATED: &str = "sesame-rotated";
/// The administrator who reloads.
const ADMIN: &str = "ops-secret-0123456789";

/// The binary's list plus the toy: the toy never ships in the real list.
fn modules() -> Modules {
    Modules::with(&[&toy_protocol::MODULE])
}

/// `[toy]` with `secret`, and an administrator to reload.
fn toy_section(secret: &str) -> String {
    let digest: String = delegate_gateway::caller::AdminToken::digest(ADMIN)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        "[toy]\nsecret = {secret:?}\ntenant = \"toys\"\nbudget_microcents = 1000\n\
         [[admin.tokens]]\nname = \"ops\"\nsha256 = \"{digest}\"\n"
    )
}

/// A gateway config with an echo upstream, gRPC and `[toy]` (`toy`).
fn config_with(dir: &Path, toy: &str) -> std::path::PathBuf {
    let echo = tests_dir().join("mcp/echo-server.mjs");
    let extra = format!(
        "grpc = \"127.0.0.1:0\"\n[[upstreams]]\nname = \"local\"\ncommand = [\"node\", {echo:?}]\n\
         [[upstreams.tools]]\nname = \"echo\"\ncapability = \"demo:echo\"\nresource = \"/text\"\ncost_microcents = 10\n{toy}"
    );
    gateway_config(
        dir,
        &[
            ("acme", seed(1).principal_id()),
            ("toys", seed(2).principal_id()),
        ],
        &extra,
    )
}

/// Starts the configured gateway in this process, built from [`modules`].
fn start(config: &Path) -> Listening {
    let config = Config::load_with(config, modules()).unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let extensions = Extensions {
            listening: Some(tx),
        };
        if let Err(e) = rt.block_on(delegate_gateway::serve::run_with(config, extensions)) {
            panic!("the gateway stopped: {e}");
        }
    });
    rx.blocking_recv().expect("the gateway listens")
}

fn post(
    addr: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, Vec<(String, String)>, Value) {
    let (status, h, bytes) =
        http_exchange(addr, "POST", path, headers, body.to_string().as_bytes());
    let value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    (status, h, value)
}

/// `[toy]` is the toy's own: its keys are checked by it and refused by
/// name; a gateway without the toy in its list refuses the section.
#[test]
fn the_toy_section_is_read_and_checked_by_the_toy() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |toy: &str, modules: Modules| {
        let config = config_with(dir.path(), toy);
        Config::load_with(&config, modules).unwrap_err().to_string()
    };
    let good = toy_section(SECRET);
    assert!(Config::load_with(&config_with(dir.path(), &good), modules()).is_ok());
    for (from, to, key) in [
        ("budget_microcents", "budget_microcent", "budget_microcent"),
        ("tenant = \"toys\"", "tenant = \"nobody\"", "`toy.tenant`"),
        (SECRET, "short", "`toy.secret`"),
        (
            "budget_microcents = 1000",
            "budget_microcents = -1",
            "budget_microcents",
        ),
    ] {
        let e = refused(&good.replace(from, to), modules());
        assert!(e.contains(key), "{key}: {e}");
    }
    // The shipped list has no toy: its section is nobody's.
    let e = refused(&good, Modules::shipped());
    assert!(e.contains("`toy`"), "{e}");
}

#[test]
fn a_toy_protocol_registered_in_one_line_is_enforced_by_every_front() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_with(dir.path(), &toy_section(SECRET));
    let at = start(&config);
    let http = at.http.to_string();
    let toy = format!("Toy {SECRET}");
    let wrong = "Toy not-the-secret";

    // MCP: a session opened with the toy credential; its calls are
    // authorized, reserved and settled through the pipeline.
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "toy", "version": "1"}}});
    let open = |auth: &str| {
        let (status, h, body) = post(&http, "/mcp", &[("Authorization", auth)], &init);
        assert_eq!(status, 200, "{body}");
        h.iter()
            .find(|(k, _)| k == "mcp-session-id")
            .map(|(_, v)| v.clone())
            .expect("a session")
    };
    let call = |auth: &str, text: &str| {
        // A session is bound to the credential it was opened with.
        let session = open(auth);
        let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                             "params": {"name": "echo", "arguments": {"text": text}}});
        post(
            &http,
            "/mcp",
            &[("Authorization", auth), ("Mcp-Session-Id", &session)],
            &message,
        )
        .2
    };
    let r = call(&toy, "/hello");
    assert_eq!(r["result"]["content"][0]["text"], "/hello", "{r}");
    let r = call(wrong, "/hello");
    assert_eq!(r["error"]["code"], -32001, "{r}");
    assert_eq!(r["error"]["data"]["type"], "UNKNOWN_SECRET");
    assert_eq!(r["error"]["data"]["protocol"], "toy");

    // JSON-RPC: dgw/authorize with the toy credential in the header; the
    // reservation is the toy holder's to settle.
    let rpc = |auth: &str, method: &str, params: Value| {
        let message = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        post(&http, "/rpc", &[("Authorization", auth)], &message).2
    };
    let ask = |resource: &str, cost: u64| json!({"namespace": "demo", "action": "echo", "resource": resource, "costMicrocents": cost});
    let r = rpc(&toy, "dgw/authorize", ask("/a", 500));
    assert_eq!(r["result"]["allowed"], true, "{r}");
    assert_eq!(r["result"]["protocol"], "toy");
    assert_eq!(r["result"]["tenant"], "toys");
    let reservation = r["result"]["reservationId"].clone();
    let r = rpc(
        &toy,
        "delegateos/settle",
        json!({"reservationId": reservation, "actualMicrocents": 400}),
    );
    assert_eq!(r["result"]["settled"], true, "{r}");
    // 10 (MCP) + 400 spent of 1,000: 600 more does not fit.
    let r = rpc(&toy, "dgw/authorize", ask("/a", 600));
    assert_eq!(r["error"]["data"]["type"], "budget_exceeded", "{r}");
    assert_eq!(r["error"]["data"]["protocol"], "toy");
    let r = rpc(
        &toy,
        "dgw/authorize",
        json!({"namespace": "docs", "action": "read", "resource": "/a"}),
    );
    assert_eq!(r["error"]["data"]["type"], "capability_not_granted", "{r}");
    let r = rpc(wrong, "dgw/authorize", ask("/a", 1));
    assert_eq!(r["error"]["data"]["type"], "UNKNOWN_SECRET", "{r}");

    // gRPC: Authorize with the toy credential in the metadata.
    let grpc = at.grpc.expect("gRPC listens");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let grpc_reservation = rt.block_on(async {
        let mut client = DelegationGatewayClient::connect(format!("http://{grpc}"))
            .await
            .unwrap();
        let request = |auth: &str, cost: u64| {
            let mut r = tonic::Request::new(pb::AuthorizeRequest {
                credential_json: String::new(),
                dct: String::new(),
                request: Some(pb::CapabilityRequest {
                    namespace: "demo".into(),
                    action: "echo".into(),
                    resource: "/b".into(),
                }),
                cost_microcents: cost,
            });
            r.metadata_mut()
                .insert("authorization", auth.parse().unwrap());
            r
        };
        let allowed = client
            .authorize(request(&toy, 100))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(allowed.tenant, "toys");
        assert!(allowed.reservation_id.starts_with("res_"));
        assert!(
            allowed.scope.is_none(),
            "a toy grant has no DelegateOS scope"
        );
        let denied = client.authorize(request(wrong, 1)).await.unwrap_err();
        assert_eq!(denied.code(), Code::PermissionDenied);
        let info = denied.get_error_details().error_info().cloned().unwrap();
        assert_eq!(
            (info.reason.as_str(), info.domain.as_str()),
            ("UNKNOWN_SECRET", "toy")
        );
        let exhausted = client.authorize(request(&toy, 1_000)).await.unwrap_err();
        assert_eq!(exhausted.code(), Code::ResourceExhausted);
        allowed.reservation_id
    });
    // The pipeline's own settle and release under their neutral names.
    let r = rpc(
        &toy,
        "dgw/release",
        json!({"reservationId": grpc_reservation}),
    );
    assert_eq!(r["result"]["released"], true, "{r}");
    assert_eq!(r["result"]["releasedMicrocents"], 100, "{r}");
    let r = rpc(
        &toy,
        "dgw/release",
        json!({"reservationId": grpc_reservation}),
    );
    assert!(r["error"].is_object(), "released once only: {r}");

    // Metrics count the toy's decisions under its own name.
    let (_, _, metrics) = http_exchange(&http, "GET", "/metrics", &[], b"");
    let metrics = String::from_utf8(metrics).unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.contains("protocol=\"toy\"") && l.contains("UNKNOWN_SECRET")),
        "{metrics}"
    );

    // State through the state traits, served on the toy's own HTTP route:
    // it counted its three grants (MCP, JSON-RPC, gRPC) in the record store.
    let status = || {
        let (code, _, body) = http_exchange(&http, "GET", "/toy/status", &[], b"");
        assert_eq!(code, 200);
        serde_json::from_slice::<Value>(&body).unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while status()["grants"] != 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(status(), json!({"grants": 3}));
    let (code, _, _) = http_exchange(&http, "GET", "/toy/nothing", &[], b"");
    assert_eq!(code, 404);

    // Audited: each grant is a toy event in the audit sink.
    let admin = format!("Bearer {ADMIN}");
    let r = rpc(&admin, "dgw/audit", json!({"limit": 1000}));
    let granted = r["result"]["events"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .filter(|e| e["protocol"] == "toy" && e["event"] == "granted")
        .count();
    assert_eq!(granted, 3, "{r}");

    // A reload: the toy applies its section (a new secret); the old one
    // is refused from then on.
    std::fs::write(
        &config,
        std::fs::read_to_string(&config)
            .unwrap()
            .replace(SECRET, ROTATED),
    )
    .unwrap();
    let r = rpc(&admin, "dgw/reload", json!({}));
    assert!(
        r["result"]["applied"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .contains(&json!("toy")),
        "{r}"
    );
    let r = rpc(&toy, "dgw/authorize", ask("/a", 1));
    assert_eq!(r["error"]["data"]["type"], "UNKNOWN_SECRET", "{r}");
    let r = rpc(&format!("Toy {ROTATED}"), "dgw/authorize", ask("/a", 1));
    assert_eq!(r["result"]["allowed"], true, "{r}");
    let r = rpc(
        &format!("Toy {ROTATED}"),
        "dgw/settle",
        json!({"reservationId": r["result"]["reservationId"], "actualMicrocents": 1}),
    );
    assert_eq!(r["result"]["settled"], true, "{r}");
    assert_eq!(r["result"]["chargedMicrocents"], 1, "{r}");
    // A section the toy refuses refuses the reload whole.
    std::fs::write(
        &config,
        std::fs::read_to_string(&config)
            .unwrap()
            .replace(ROTATED, "short"),
    )
    .unwrap();
    let r = rpc(&admin, "dgw/reload", json!({}));
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("toy.secret"))
            || r.to_string().contains("toy.secret"),
        "{r}"
    );
    let r = rpc(&format!("Toy {ROTATED}"), "dgw/authorize", ask("/a", 1));
    assert_eq!(r["result"]["allowed"], true, "{r}");
}

/// The seam's other roles: a protocol's receipt becomes a DelegateOS
/// attestation the gateway signs (and the pivot verifies), and back; a
/// protocol without receipts has no translation job.
#[test]
fn a_toy_receipt_becomes_a_signed_delegateos_attestation_and_back() {
    let receipt = json!({"contract": ct(1), "delegation": del(1), "ok": true,
                         "answer": {"words": 3}, "cost": 40, "ms": 12});
    let draft = toy_protocol::receipt_to_attestation(&receipt).unwrap();
    let gateway = seed(7);
    let signed = draft
        .sign(
            &gateway,
            delegateos::AttestationId::from_bytes([0, 0, 0, 0, 0, 9]),
            at(0),
        )
        .unwrap();
    assert_eq!(&signed.principal, gateway.principal_id());
    let reparsed = Attestation::parse(&serde_json::to_vec(&signed).unwrap()).unwrap();
    assert_eq!(reparsed, signed, "a valid DelegateOS attestation");
    assert_eq!(toy_protocol::attestation_to_receipt(&signed), receipt);
    match toy_protocol::receipt_to_attestation(&json!({"ok": true})) {
        Err(Translation::Invalid { reason, .. }) => assert_eq!(reason, "BAD_RECEIPT"),
        other => panic!("{other:?}"),
    }
    // Talos has no receipts: its protocol says so rather than guess.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let memory = delegate_gateway::state::open(
        delegate_gateway::state::Backend::Ephemeral,
        delegate_gateway::state::BudgetSettings {
            reservation_ttl: std::time::Duration::from_secs(60),
            lease: delegate_gateway::budget::LeasePolicy::OFF,
            max_open: 10,
        },
    )
    .unwrap();
    let talos = rt.block_on(async {
        let revocations = Arc::new(
            delegate_gateway::revocations::Revocations::load(memory.revocations.clone())
                .await
                .unwrap(),
        );
        dgw_proto_talos::Talos::new(
            &[],
            revocations,
            memory.replay.clone(),
            memory.audit.clone(),
            Arc::new(seed(8)),
        )
        .await
        .unwrap()
    });
    assert!(
        Arc::new(talos).translates().is_none(),
        "a protocol without receipts has no translation job"
    );
}
