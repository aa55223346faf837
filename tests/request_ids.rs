//! Request IDs (issue 21): taken from the caller's `X-Request-Id` (or made),
//! answered back, sent on to the upstream, and written in the audit log's
//! records, on JSON-RPC, MCP and gRPC.

mod support;

use serde_json::{json, Value};
use support::mcp::*;
use support::*;

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_id_travels_from_the_caller_to_the_upstream_and_the_audit_log() {
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let (_upstream, port) = echo_server_on_port(&[]);
    let extra = format!(
        "grpc = \"127.0.0.1:0\"\n[[upstreams]]\nname = \"web\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n[[upstreams.tools]]\nname = \"request_id\"\nopen = true\n"
    );
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let mut gw = Gateway::start(&config);
    let token = root_token(&root, &seed(2), &["docs:read:/project/**"], 1_000, 3600).encode();

    // JSON-RPC: the caller's ID is answered back and recorded.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "delegateos/authorize",
        "params": {"dct": token, "namespace": "docs", "action": "read",
                   "resource": "/project/a", "costMicrocents": 0}});
    let (status, headers, _) = http_exchange(
        &gw.addr,
        "POST",
        "/rpc",
        &[("X-Request-Id", "trace-42")],
        body.to_string().as_bytes(),
    );
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "x-request-id"), Some("trace-42"));
    // One a log or header could be bent with is replaced by a new one.
    let (_, headers, _) = http_exchange(
        &gw.addr,
        "POST",
        "/rpc",
        &[("X-Request-Id", "evil id <script>")],
        body.to_string().as_bytes(),
    );
    let made = header(&headers, "x-request-id").unwrap().to_owned();
    assert_eq!(made.len(), 20, "{made}");
    assert!(made.bytes().all(|b| b.is_ascii_hexdigit()));

    // MCP: the upstream's request carries it.
    let mcp = McpHttp::connect(&gw.addr, Some(&token));
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "request_id", "arguments": {}}});
    let auth = format!("DCT {token}");
    let (status, headers, answer) = http_exchange(
        &gw.addr,
        "POST",
        "/mcp",
        &[
            ("Mcp-Session-Id", mcp.session.as_str()),
            ("Authorization", auth.as_str()),
            ("X-Request-Id", "mcp-7"),
        ],
        call.to_string().as_bytes(),
    );
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "x-request-id"), Some("mcp-7"));
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(text_of(&answer), "mcp-7", "the upstream saw it: {answer}");

    // gRPC: metadata in, metadata out.
    let grpc = gw.grpc.clone().unwrap();
    let mut client =
        delegate_gateway::grpc::pb::delegation_gateway_client::DelegationGatewayClient::connect(
            format!("http://{grpc}"),
        )
        .await
        .unwrap();
    let mut request = tonic::Request::new(delegate_gateway::grpc::pb::AuthorizeRequest {
        credential_json: String::new(),
        dct: token.clone(),
        request: Some(delegate_gateway::grpc::pb::CapabilityRequest {
            namespace: "docs".into(),
            action: "read".into(),
            resource: "/elsewhere".into(),
        }),
        cost_microcents: 0,
    });
    request
        .metadata_mut()
        .insert("x-request-id", "grpc-9".parse().unwrap());
    let status = client.authorize(request).await.unwrap_err();
    assert_eq!(
        status
            .metadata()
            .get("x-request-id")
            .map(|v| v.to_str().unwrap()),
        Some("grpc-9")
    );

    // The audit log's decisions name them.
    assert!(gw.terminate().success());
    let log = dir.path().join("data/audit");
    let exported = run(&["audit", "export", log.to_str().unwrap()]);
    let decisions: Vec<(String, bool)> = stdout(&exported)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["event"].clone())
        .filter(|e| e["event"] == "decision")
        .map(|e| {
            (
                e["requestId"].as_str().unwrap_or_default().to_owned(),
                e["allowed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            ("trace-42".to_owned(), true),
            (made, true),
            ("grpc-9".to_owned(), false)
        ],
        "{}",
        stdout(&exported)
    );
}
