//! The protocol seam, proven from outside: a toy protocol (a shared secret
//! under `Authorization: Toy …` that grants one capability under a small
//! budget) is one type and one registration line, and the MCP, JSON-RPC
//! and gRPC fronts enforce it without knowing it: the gateway runs in this
//! process with the toy registered, and is spoken to over real sockets.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use async_trait::async_trait;
use delegate_gateway::budget::BudgetKey;
use delegate_gateway::gatekeeper::GateError;
use delegate_gateway::grpc::pb;
use delegate_gateway::grpc::pb::delegation_gateway_client::DelegationGatewayClient;
use delegate_gateway::protocol::capabilities::Capabilities;
use delegate_gateway::protocol::{
    Call, Credential, Decision, Denial, Grant, Protocol, ProtocolId, ProtocolInfo, Translation,
};
use delegate_gateway::serve::{Extensions, Listening};
use delegateos::attestation::{Attestation, AttestationDraft};
use serde_json::{json, Value};
use support::mcp::tests_dir;
use support::*;
use tonic::Code;
use tonic_types::StatusExt;

const TOY: ProtocolId = ProtocolId::new(&ProtocolInfo {
    name: "toy",
    title: "Toy",
    denial_message: None,
});

/// The one secret the toy knows.
const SECRET: &str = "open-sesame";

/// The toy adapter: the whole of what adding a protocol takes.
struct Toy;

#[async_trait]
impl Protocol for Toy {
    fn id(&self) -> ProtocolId {
        TOY
    }

    fn scheme(&self) -> Option<&'static str> {
        Some("Toy")
    }

    fn read_header(&self, credentials: &str) -> Result<Credential, Denial> {
        Ok(Credential::new(credentials, ()))
    }

    /// A toy receipt, `{"contract", "delegation", "ok", "answer", "cost",
    /// "ms"}`, as a DelegateOS completion attestation.
    fn to_attestation(&self, receipt: &Value) -> Result<AttestationDraft, Translation> {
        let invalid = |detail: &str| Translation::Invalid {
            reason: "BAD_RECEIPT",
            detail: detail.to_owned(),
        };
        let field = |k: &str| receipt.get(k).ok_or_else(|| invalid(k));
        serde_json::from_value(json!({
            "contractId": field("contract")?, "delegationId": field("delegation")?,
            "type": "completion",
            "result": {"success": field("ok")?, "output": field("answer")?,
                       "costMicrocents": field("cost")?, "durationMs": field("ms")?},
        }))
        .map_err(|e| invalid(&e.to_string()))
    }

    /// And back.
    fn receipt_of(&self, a: &Attestation) -> Result<Value, Translation> {
        Ok(
            json!({"contract": a.contract_id, "delegation": a.delegation_id,
                  "ok": a.result.success, "answer": a.result.output,
                  "cost": a.result.cost_microcents, "ms": a.result.duration_ms}),
        )
    }

    async fn grant(
        &self,
        credential: &Credential,
        _call: &Call<'_>,
    ) -> Result<Decision<Grant>, GateError> {
        if credential.presented() != SECRET {
            return Ok(Decision::Denied(Denial::protocol(
                TOY,
                "UNKNOWN_SECRET",
                "not a toy secret",
            )));
        }
        Ok(Decision::Allowed(Grant {
            protocol: TOY,
            tenant: "toys".into(),
            levels: BudgetKey::for_path("toy:root", &["secret".to_owned()], 1_000),
            chain: Vec::new(),
            authority: Box::new(Capabilities(vec!["demo:echo:*".parse().unwrap()])),
            requests: None,
            scope: None,
            context: Box::new(()),
            within: None,
        }))
    }
}

/// Starts the configured gateway in this process with the toy registered.
fn start(config: &std::path::Path) -> Listening {
    let config = delegate_gateway::config::Config::load(config).unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let extensions = Extensions {
            protocols: vec![Arc::new(Toy)],
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

#[test]
fn a_toy_protocol_registered_in_one_line_is_enforced_by_every_front() {
    let dir = tempfile::tempdir().unwrap();
    let echo = tests_dir().join("mcp/echo-server.mjs");
    let extra = format!(
        "grpc = \"127.0.0.1:0\"\n[[upstreams]]\nname = \"local\"\ncommand = [\"node\", {echo:?}]\n\
         [[upstreams.tools]]\nname = \"echo\"\ncapability = \"demo:echo\"\nresource = \"/text\"\ncost_microcents = 10\n"
    );
    let config = gateway_config(dir.path(), &[("acme", seed(1).principal_id())], &extra);
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
    rt.block_on(async {
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
    });

    // Metrics count the toy's decisions under its own name.
    let (_, _, metrics) = http_exchange(&http, "GET", "/metrics", &[], b"");
    let metrics = String::from_utf8(metrics).unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.contains("protocol=\"toy\"") && l.contains("UNKNOWN_SECRET")),
        "{metrics}"
    );
}

/// The seam's other roles: a protocol's receipt becomes a DelegateOS
/// attestation the gateway signs (and the pivot verifies), and back; a
/// protocol without receipts says so.
#[test]
fn a_toy_receipt_becomes_a_signed_delegateos_attestation_and_back() {
    let receipt = json!({"contract": ct(1), "delegation": del(1), "ok": true,
                         "answer": {"words": 3}, "cost": 40, "ms": 12});
    let draft = Toy.to_attestation(&receipt).unwrap();
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
    assert_eq!(Toy.receipt_of(&signed).unwrap(), receipt);
    match Toy.to_attestation(&json!({"ok": true})) {
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
        delegate_gateway::protocols::talos::Talos::new(
            &[],
            revocations,
            memory.replay.clone(),
            memory.audit.clone(),
            Arc::new(seed(8)),
        )
        .await
        .unwrap()
    });
    assert_eq!(
        talos.to_attestation(&receipt).unwrap_err(),
        Translation::Unsupported("receipts")
    );
}
