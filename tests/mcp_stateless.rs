//! MCP 2026-07-28, the stateless revision, on `/mcp` (issue 33): each
//! request stands alone with its DCT in `Authorization`, its version,
//! client info and capabilities in `_meta`, mirrored in headers that must
//! agree with the body. dgw serves it in front of a session-revision
//! upstream (the SDK v1 echo server speaks 2025-11-25), with the same
//! enforcement and charging as a session's call; and every hostile
//! variation is refused with the revision's error under the request's id.

// Integration tests: a failed unwrap is the test failing loudly, and
// clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]
mod support;

use serde_json::{json, Value};
use support::mcp::*;
use support::*;

const RULES: &str = r#"
[[upstreams.tools]]
name = "echo"
capability = "demo:echo"
resource = "/text"
cost_microcents = 10
"#;

const V: &str = "2026-07-28";

struct Setup {
    _dir: tempfile::TempDir,
    _echo: Killed,
    gw: Gateway,
    root: delegateos::Keypair,
}

fn setup(anonymous: bool) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let (echo, port) = echo_server_on_port(&[]);
    let root = seed(1);
    let extra = format!(
        "[[upstreams]]\nname = \"web\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n{RULES}\n[mcp]\nanonymous_sessions = {anonymous}\n"
    );
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let gw = Gateway::start(&config);
    Setup {
        _dir: dir,
        _echo: echo,
        gw,
        root,
    }
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientInfo": {"name": "rust-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

/// POSTs `body` with `headers`; (status, answer or Null).
fn post(gw: &Gateway, headers: &[(&str, &str)], body: &Value) -> (u16, Value) {
    let (status, _, bytes) = http_exchange(
        &gw.addr,
        "POST",
        "/mcp",
        headers,
        body.to_string().as_bytes(),
    );
    let value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|_| panic!("{bytes:?}"))
    };
    (status, value)
}

/// A well-formed stateless request: headers mirroring the body.
fn request(
    gw: &Gateway,
    auth: Option<&str>,
    id: u64,
    method: &str,
    mut params: Value,
) -> (u16, Value) {
    params["_meta"] = meta();
    let name = params
        .get("name")
        .or(params.get("uri"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut headers = vec![("MCP-Protocol-Version", V), ("Mcp-Method", method)];
    if let Some(n) = &name {
        headers.push(("Mcp-Name", n));
    }
    let auth = auth.map(|t| format!("DCT {t}"));
    if let Some(a) = &auth {
        headers.push(("Authorization", a));
    }
    post(
        gw,
        &headers,
        &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
    )
}

fn calls_forwarded(gw: &Gateway) -> u64 {
    gw.metrics()
        .lines()
        .filter(|l| {
            l.starts_with("dgw_mcp_tool_calls_total")
                && l.contains("outcome=\"forwarded\"")
                && l.contains("tool=\"echo\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

#[test]
fn a_stateless_client_through_dgw_to_a_session_upstream_is_enforced_and_charged_like_a_session() {
    let s = setup(false);
    let granted = root_token(&s.root, &seed(2), &["demo:echo:*"], 1000, 3600).encode();
    let other = root_token(&s.root, &seed(3), &["demo:other:*"], 1000, 3600).encode();

    // server/discover: dgw's own answer, the versions it speaks.
    let (status, a) = request(&s.gw, Some(&granted), 1, "server/discover", json!({}));
    assert_eq!(status, 200, "{a}");
    assert_eq!(a["id"], 1);
    assert_eq!(a["result"]["supportedVersions"][0], V, "{a}");
    assert!(a["result"]["supportedVersions"]
        .as_array()
        .unwrap()
        .contains(&json!("2025-11-25")));
    assert!(a["result"]["capabilities"]["tools"].is_object(), "{a}");
    assert_eq!(a["result"]["serverInfo"]["name"], "dgw");
    assert_eq!(a["result"]["resultType"], "complete");

    // tools/list is filtered per credential, and never for a shared cache.
    let (status, a) = request(&s.gw, Some(&granted), 2, "tools/list", json!({}));
    assert_eq!(status, 200, "{a}");
    let names: Vec<_> = a["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["echo"], "{a}");
    assert_eq!(a["result"]["cacheScope"], "private");
    assert_eq!(a["result"]["ttlMs"], 0);
    assert_eq!(a["result"]["resultType"], "complete");
    assert_eq!(
        a["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "dgw"
    );
    let (_, a) = request(&s.gw, Some(&other), 3, "tools/list", json!({}));
    assert_eq!(a["result"]["tools"], json!([]), "{a}");

    // A granted call goes through and is counted as a session's would be.
    let before = calls_forwarded(&s.gw);
    let (status, a) = request(
        &s.gw,
        Some(&granted),
        4,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    );
    assert_eq!(status, 200, "{a}");
    assert_eq!(text_of(&a), "hi");
    assert_eq!(a["result"]["resultType"], "complete");
    assert_eq!(calls_forwarded(&s.gw), before + 1);
    // The same call on a session: the same answer, charged the same way.
    let mut session = McpHttp::connect(&s.gw.addr, Some(&granted));
    assert_eq!(
        text_of(&session.call("echo", json!({"text": "hi"}), None)),
        "hi"
    );
    assert_eq!(calls_forwarded(&s.gw), before + 2);

    // Another credential's call is denied as on a session, under its id.
    let (status, a) = request(
        &s.gw,
        Some(&other),
        5,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    );
    assert_eq!(status, 200, "{a}");
    assert_eq!(a["id"], 5);
    assert_eq!(denial_type(&a), "capability_not_granted");
    assert_eq!(calls_forwarded(&s.gw), before + 2);

    // The budget is the DCT's wherever the calls came from: 1000 at 10 a
    // call leaves room for 98 more; the 99th is refused.
    for i in 0..98 {
        let (_, a) = request(
            &s.gw,
            Some(&granted),
            100 + i,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "x"}}),
        );
        assert_eq!(text_of(&a), "x", "{a}");
    }
    let (_, a) = request(
        &s.gw,
        Some(&granted),
        999,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "x"}}),
    );
    assert_eq!(denial_type(&a), "budget_exceeded", "{a}");
}

#[test]
fn hostile_stateless_requests_are_refused_with_the_revisions_errors_under_their_id() {
    let s = setup(false);
    let token = root_token(&s.root, &seed(2), &["demo:echo:*"], 1000, 3600).encode();
    let auth = format!("DCT {token}");
    let call = |id: u64, name: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": {"text": "hi"}, "_meta": meta()}})
    };
    let base = |extra: &[(&'static str, &'static str)]| {
        let mut h: Vec<(&str, &str)> = vec![("Authorization", auth.as_str())];
        h.extend_from_slice(extra);
        h
    };
    let refused = |status: u16, a: &Value, id: u64, code: i64| {
        assert_eq!(status, 400, "{a}");
        assert_eq!(a["id"], id, "{a}");
        assert_eq!(a["error"]["code"], code, "{a}");
    };

    // Mcp-Method disagreeing with the body.
    let (st, a) = post(
        &s.gw,
        &base(&[
            ("MCP-Protocol-Version", V),
            ("Mcp-Method", "tools/list"),
            ("Mcp-Name", "echo"),
        ]),
        &call(11, "echo"),
    );
    refused(st, &a, 11, -32020);
    // Method values are case-sensitive.
    let (st, a) = post(
        &s.gw,
        &base(&[
            ("MCP-Protocol-Version", V),
            ("Mcp-Method", "TOOLS/CALL"),
            ("Mcp-Name", "echo"),
        ]),
        &call(12, "echo"),
    );
    refused(st, &a, 12, -32020);
    // Mcp-Name naming another tool than the body calls.
    let (st, a) = post(
        &s.gw,
        &base(&[
            ("MCP-Protocol-Version", V),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "count"),
        ]),
        &call(13, "echo"),
    );
    refused(st, &a, 13, -32020);
    // Mcp-Name missing, or given twice.
    let (st, a) = post(
        &s.gw,
        &base(&[("MCP-Protocol-Version", V), ("Mcp-Method", "tools/call")]),
        &call(14, "echo"),
    );
    refused(st, &a, 14, -32020);
    let (st, a) = post(
        &s.gw,
        &base(&[
            ("MCP-Protocol-Version", V),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "echo"),
            ("Mcp-Name", "echo"),
        ]),
        &call(15, "echo"),
    );
    refused(st, &a, 15, -32020);
    // An oversized Mcp-Name.
    let long: &'static str = Box::leak("e".repeat(9000).into_boxed_str());
    let (st, a) = post(
        &s.gw,
        &base(&[
            ("MCP-Protocol-Version", V),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", long),
        ]),
        &call(16, "echo"),
    );
    refused(st, &a, 16, -32020);
    // Bad base64 in the sentinel form.
    let (st, a) = post(
        &s.gw,
        &base(&[
            ("MCP-Protocol-Version", V),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "=?base64?not base64!?="),
        ]),
        &call(17, "echo"),
    );
    refused(st, &a, 17, -32020);
    // A 2026-07-28 request without _meta.
    let (st, a) = post(
        &s.gw,
        &base(&[("MCP-Protocol-Version", V), ("Mcp-Method", "tools/list")]),
        &json!({"jsonrpc": "2.0", "id": 18, "method": "tools/list", "params": {}}),
    );
    refused(st, &a, 18, -32602);
    // The header and _meta naming different versions.
    let mut body = call(19, "echo");
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    let (st, a) = post(
        &s.gw,
        &base(&[
            ("MCP-Protocol-Version", V),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "echo"),
        ]),
        &body,
    );
    refused(st, &a, 19, -32020);
    // A version dgw does not speak: the revision's error, listing them.
    let mut body = call(20, "echo");
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let (st, a) = post(
        &s.gw,
        &base(&[
            ("MCP-Protocol-Version", "2099-01-01"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "echo"),
        ]),
        &body,
    );
    refused(st, &a, 20, -32022);
    assert_eq!(a["error"]["data"]["requested"], "2099-01-01");
    assert_eq!(a["error"]["data"]["supported"][0], V);
    // A batch.
    let (st, a) = post(
        &s.gw,
        &base(&[
            ("MCP-Protocol-Version", V),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "echo"),
        ]),
        &json!([call(21, "echo")]),
    );
    assert_eq!(st, 400, "{a}");
    // Methods the revision removed: 404 and -32601.
    for (id, method) in [(22, "ping"), (23, "logging/setLevel"), (24, "initialize")] {
        let (st, a) = request(&s.gw, Some(&token), id, method, json!({}));
        assert_eq!(
            (st, a["id"].clone(), a["error"]["code"].clone()),
            (404, json!(id), json!(-32601)),
            "{method}: {a}"
        );
    }
    // No credential: this gateway serves no anonymous callers.
    let (st, a) = request(&s.gw, None, 25, "tools/list", json!({}));
    assert_eq!(st, 401, "{a}");
    assert_eq!(a["id"], 25);
    assert_eq!(a["error"]["data"]["type"], "credential_required");
    // None of it reached the upstream.
    assert_eq!(calls_forwarded(&s.gw), 0);
}

#[test]
fn a_session_request_with_an_unsupported_version_header_is_answered_under_its_id() {
    let s = setup(true);
    let (st, a) = post(
        &s.gw,
        &[("MCP-Protocol-Version", "1999-01-01")],
        &json!({"jsonrpc": "2.0", "id": 42, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
    );
    assert_eq!(st, 400, "{a}");
    assert_eq!(a["id"], 42, "{a}");
    assert_eq!(a["error"]["data"]["type"], "unsupported_protocol_version");
}

#[test]
fn session_refusals_answer_under_the_requests_id() {
    let s = setup(false);
    let token = root_token(&s.root, &seed(2), &["demo:echo:*"], 1000, 3600).encode();
    let auth = format!("DCT {token}");
    let list = |id: u64| json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
    // No session.
    let (st, a) = post(&s.gw, &[("Authorization", auth.as_str())], &list(31));
    assert_eq!((st, a["id"].clone()), (400, json!(31)), "{a}");
    assert_eq!(a["error"]["data"]["type"], "session_required");
    // An unknown session.
    let (st, a) = post(
        &s.gw,
        &[("Authorization", auth.as_str()), ("Mcp-Session-Id", "nope")],
        &list(32),
    );
    assert_eq!((st, a["id"].clone()), (404, json!(32)), "{a}");
    // initialize without a credential on a gateway with no anonymous sessions.
    let (st, a) = post(
        &s.gw,
        &[],
        &json!({"jsonrpc": "2.0", "id": "init-1", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
    );
    assert_eq!((st, a["id"].clone()), (401, json!("init-1")), "{a}");
    assert_eq!(a["error"]["data"]["type"], "credential_required");
}
