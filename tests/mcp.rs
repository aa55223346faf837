//! MCP egress end to end: the real `dgw` in front of real MCP servers
//! (`@modelcontextprotocol/server-filesystem` and an SDK-built echo server,
//! from `tests/package.json`), spoken to by a raw HTTP client, the official
//! TypeScript SDK client, and a Rust client over `dgw mcp`'s stdio.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use delegateos::{RevocationEntry, RevocationScope};
use serde_json::{json, Value};
use support::mcp::*;
use support::*;

#[test]
fn the_filesystem_server_behind_dgw_allows_exactly_what_the_dct_grants() {
    let files = Files::new();
    let root = seed(1);
    let gw = files.gateway(&root);
    let token = files.read_token(&root, 10_000, 3600).encode();
    let dct = Some(token.as_str());
    let mut mcp = McpHttp::connect(&gw.addr, None);

    // tools/list: unmapped tools are never offered; with a read-only DCT,
    // neither is write_file.
    let all = mcp.tool_names(None);
    for t in [
        "read_text_file",
        "read_multiple_files",
        "write_file",
        "list_allowed_directories",
    ] {
        assert!(all.contains(&t.to_owned()), "{t} in {all:?}");
    }
    assert!(!all.contains(&"edit_file".to_owned()), "{all:?}");
    let mine = mcp.tool_names(dct);
    assert!(mine.contains(&"read_text_file".to_owned()), "{mine:?}");
    assert!(
        mine.contains(&"list_allowed_directories".to_owned()),
        "{mine:?}"
    );
    assert!(!mine.contains(&"write_file".to_owned()), "{mine:?}");

    // Allowed: a read inside the granted directory, and several at once.
    let a = mcp.call("read_text_file", json!({"path": files.path("a.txt")}), dct);
    assert_eq!(text_of(&a), "hello from a\n");
    let many = mcp.call(
        "read_multiple_files",
        json!({"paths": [files.path("a.txt"), files.path("sub/b.txt")]}),
        dct,
    );
    assert!(text_of(&many).contains("hello from b"), "{many}");
    // An open tool needs no DCT.
    let open = mcp.call("list_allowed_directories", json!({}), None);
    assert!(text_of(&open).contains(&files.root.display().to_string()));
    let forwarded = files.upstream_calls().len();
    assert_eq!(forwarded, 3);

    // Denied, each with its type, and none reaches the upstream.
    let passwd = mcp.call("read_text_file", json!({"path": "/etc/passwd"}), dct);
    assert_eq!(denial_type(&passwd), "capability_not_granted");
    assert_eq!(
        passwd["error"]["data"]["requested"],
        json!({"namespace": "docs", "action": "read", "resource": "/etc/passwd"})
    );
    assert_eq!(
        passwd["error"]["data"]["granted"][0]["resource"],
        format!("{}/**", files.root.display())
    );
    let escape = mcp.call(
        "read_text_file",
        json!({"path": format!("{}/../../etc/passwd", files.root.display())}),
        dct,
    );
    // A `..` segment is refused before any grant is consulted (issue 15).
    assert_eq!(denial_type(&escape), "invalid_resource");
    let one_bad = mcp.call(
        "read_multiple_files",
        json!({"paths": [files.path("a.txt"), "/etc/passwd"]}),
        dct,
    );
    assert_eq!(denial_type(&one_bad), "capability_not_granted");
    let write = mcp.call(
        "write_file",
        json!({"path": files.path("new.txt"), "content": "x"}),
        dct,
    );
    assert_eq!(denial_type(&write), "capability_not_granted");
    let unmapped = mcp.call(
        "edit_file",
        json!({"path": files.path("a.txt"), "edits": []}),
        dct,
    );
    assert_eq!(denial_type(&unmapped), "tool_not_mapped");
    let no_path = mcp.call("read_text_file", json!({}), dct);
    assert_eq!(denial_type(&no_path), "resource_missing");
    let no_dct = mcp.call("read_text_file", json!({"path": files.path("a.txt")}), None);
    assert_eq!(denial_type(&no_dct), "dct_required");
    let expired = files.read_token(&root, 10_000, -5).encode();
    let e = mcp.call(
        "read_text_file",
        json!({"path": files.path("a.txt")}),
        Some(&expired),
    );
    assert_eq!(denial_type(&e), "expired");
    let stranger = root_token(&seed(9), &seed(2), &["docs:read:/**"], 100, 60).encode();
    let e = mcp.call(
        "read_text_file",
        json!({"path": files.path("a.txt")}),
        Some(&stranger),
    );
    assert_eq!(denial_type(&e), "invalid_signature");
    let unknown = mcp.call("no_such_tool", json!({}), dct);
    assert_eq!(unknown["error"]["code"], -32602);
    assert_eq!(unknown["error"]["data"]["type"], "unknown_tool");

    // Revoked through the JSON-RPC front: denied from that moment.
    let revoked = files.read_token(&root, 10_000, 3600);
    let rev = RevocationEntry::sign(
        &root,
        &revoked.revocation_ids()[0],
        at(0),
        RevocationScope::Block,
    )
    .unwrap();
    let r = gw.ok("delegateos/revoke", json!({"revocation": rev}));
    assert_eq!(r["newlyRecorded"], true);
    let e = mcp.call(
        "read_text_file",
        json!({"path": files.path("a.txt")}),
        Some(&revoked.encode()),
    );
    assert_eq!(denial_type(&e), "revoked");
    assert!(!files.root.join("new.txt").exists());
    let seen = files.upstream_calls();
    assert_eq!(
        seen.len(),
        forwarded,
        "a denied call reached the upstream: {seen:?}"
    );
    // `_delegateos` never leaves dgw.
    assert!(seen.iter().all(|p| p.get("_delegateos").is_none()));

    // The metrics moved.
    let m = gw.metrics();
    assert!(
        m.contains(r#"dgw_mcp_tool_calls_total{protocol="delegateos",upstream="files",tool="read_text_file",outcome="forwarded"} 1"#),
        "{m}"
    );
    assert!(
        m.contains(r#"tool="read_text_file",outcome="denied"}"#),
        "{m}"
    );
    assert!(
        m.contains(r#"dgw_mcp_upstream_up{upstream="files"} 1"#),
        "{m}"
    );
    assert!(
        m.contains(r#"dgw_mcp_tool_calls_total{protocol="open",upstream="files",tool="list_allowed_directories",outcome="forwarded"} 1"#),
        "{m}"
    );
    assert!(
        m.lines().any(|l| l
            .strip_prefix("dgw_mcp_gateway_duration_seconds_count ")
            .is_some_and(|n| n != "0")),
        "the call's own time is recorded: {m}"
    );
    assert!(
        m.lines().any(|l| l
            .strip_prefix(r#"dgw_mcp_upstream_duration_seconds_count{upstream="files"} "#)
            .is_some_and(|n| n != "0")),
        "{m}"
    );
}

#[test]
fn a_dct_presented_once_per_session_is_enforced_and_charged_like_a_per_call_one() {
    let files = Files::new();
    let root = seed(1);
    let gw = files.gateway(&root);
    // Three calls' worth.
    let token = files.read_token(&root, 300, 3600).encode();

    // Session A presents the DCT in initialize params (`_delegateos`).
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
        "_delegateos": {"dct": token, "format": "delegateos-sjt-v1"}}});
    let (status, h, body) =
        http_exchange(&gw.addr, "POST", "/mcp", &[], init.to_string().as_bytes());
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let session = h
        .iter()
        .find(|(k, _)| k == "mcp-session-id")
        .unwrap()
        .1
        .clone();
    let mut a = McpHttp {
        addr: &gw.addr,
        session,
        next_id: 10,
        opened_with: None,
    };
    assert!(!a.tool_names(None).contains(&"write_file".to_owned()));
    for _ in 0..2 {
        let r = a.call("read_text_file", json!({"path": files.path("a.txt")}), None);
        assert_eq!(text_of(&r), "hello from a\n");
    }

    // Session B presents it in the Authorization header.
    let mut b = McpHttp::connect(&gw.addr, None);
    let r = b.call(
        "read_text_file",
        json!({"path": files.path("a.txt")}),
        Some(&token),
    );
    assert_eq!(text_of(&r), "hello from a\n");
    let e = b.call(
        "read_text_file",
        json!({"path": files.path("a.txt")}),
        Some(&token),
    );
    assert_eq!(denial_type(&e), "budget_exceeded");
    let e = a.call("read_text_file", json!({"path": files.path("a.txt")}), None);
    assert_eq!(denial_type(&e), "budget_exceeded");
    assert_eq!(files.upstream_calls().len(), 3);
    let budget = gw.ok(
        "delegateos/budget",
        json!({"delegationId": del(1).to_string()}),
    );
    assert_eq!(budget["chains"][0][0]["spentMicrocents"], 300, "{budget}");

    // `_delegateos.delegationId` must name the token's own delegation.
    let cap = format!("docs:read:{}/**", files.root.display());
    let fresh = root_token_for(&root, &seed(2), &[cap.as_str()], 300, 3600, del(3)).encode();
    let mut c = McpHttp::connect(&gw.addr, None);
    let r = c.request(
        "tools/call",
        json!({"name": "read_text_file", "arguments": {"path": files.path("a.txt")},
               "_delegateos": {"dct": fresh, "delegationId": del(7).to_string()}}),
        None,
    );
    assert_eq!(r["error"]["data"]["type"], "delegation_mismatch", "{r}");
    assert_eq!(files.upstream_calls().len(), 3);
    // A `format` other than ours (DelegateOS 0.3's Biscuit) is refused by name.
    let r = c.request(
        "tools/call",
        json!({"name": "read_text_file", "arguments": {"path": files.path("a.txt")},
               "_delegateos": {"dct": fresh, "format": "delegateos-biscuit-v1"}}),
        None,
    );
    assert_eq!(r["error"]["code"], -32001, "{r}");
    assert_eq!(
        r["error"]["data"]["type"], "unsupported_token_format",
        "{r}"
    );
    assert_eq!(files.upstream_calls().len(), 3);
    // Nothing was held against that delegation: the mismatch is refused
    // before anything is reserved, so no budget node exists for it.
    let budget = gw.call(
        "delegateos/budget",
        json!({"delegationId": del(3).to_string()}),
    );
    let held = budget["result"]["chains"][0][0]["reservedMicrocents"].as_u64();
    assert!(
        held == Some(0) || budget["error"]["data"]["type"] == "not_found",
        "{budget}"
    );
}

#[test]
fn concurrent_calls_at_a_small_budget_reach_the_upstream_exactly_as_often_as_it_affords() {
    let files = Files::new();
    let root = seed(1);
    let gw = files.gateway(&root);
    let token = files.read_token(&root, 700, 3600).encode();
    let path = files.path("a.txt");
    let addr = gw.addr.clone();
    let mcp = McpHttp::connect(&addr, None);
    let session = mcp.session.clone();
    let outcomes: Vec<Value> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..20)
            .map(|i| {
                let (token, path, addr, session) = (&token, &path, &addr, &session);
                s.spawn(move || {
                    let mut c = McpHttp {
                        addr,
                        session: session.clone(),
                        next_id: 100 * i,
                        opened_with: None,
                    };
                    c.request(
                        "tools/call",
                        json!({"name": "read_text_file", "arguments": {"path": path},
                               "_delegateos": {"dct": token}}),
                        None,
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ok = outcomes
        .iter()
        .filter(|o| o.get("result").is_some())
        .count();
    let over = outcomes
        .iter()
        .filter(|o| o["error"]["data"]["type"] == "budget_exceeded")
        .count();
    assert_eq!((ok, over), (7, 13), "{outcomes:?}");
    assert_eq!(files.upstream_calls().len(), 7);
}

/// Tool calls under a budget lease skip their own disk sync; killing dgw
/// then charges the lease's ceiling, which covers every call the upstream
/// saw, and a clean stop after that charges nothing more.
#[test]
fn a_crash_after_leased_calls_charges_every_call_the_upstream_saw() {
    let files = Files::new();
    let root = seed(1);
    let config = mcp_gateway_config(
        &files.dir,
        &[("acme", root.principal_id())],
        // No snapshot during the test: one would void the lease.
        &format!(
            "[budget]\nlease_fraction = 0.5\nsnapshot_interval = \"1h\"\n{}",
            files.upstream_toml()
        ),
    );
    let mut gw = Gateway::start(&config);
    let token = files.read_token(&root, 100_000, 3600).encode();
    let path = files.path("a.txt");
    let call = |addr: &str| {
        let mut mcp = McpHttp::connect(addr, None);
        for _ in 0..10 {
            let answer = mcp.request(
                "tools/call",
                json!({"name": "read_text_file", "arguments": {"path": path},
                       "_delegateos": {"dct": token}}),
                None,
            );
            assert!(answer.get("result").is_some(), "{answer}");
        }
    };
    call(&gw.addr);
    // The first call raised the ceiling to 100 + (100,000 − 100) / 2 =
    // 50,050 with one sync; the other nine fell under it.
    assert!(
        gw.metrics().contains("dgw_budget_leases_total 1\n"),
        "{}",
        gw.metrics()
    );
    gw.kill();
    assert_eq!(files.upstream_calls().len(), 10);

    let committed = |gw: &Gateway| {
        let b = gw.ok(
            "delegateos/budget",
            json!({"delegationId": del(1).to_string()}),
        );
        let level = &b["chains"][0][0];
        level["spentMicrocents"].as_u64().unwrap() + level["reservedMicrocents"].as_u64().unwrap()
    };
    let mut gw = Gateway::start(&config);
    assert_eq!(committed(&gw), 50_050);
    assert!(
        gw.metrics().lines().any(
            |l| l.starts_with("dgw_budget_lease_charged_microcents_total ")
                && l.split(' ').nth(1).unwrap().parse::<u64>().unwrap() >= 50_050 - 1_000
        ),
        "{}",
        gw.metrics()
    );

    // After recovery, calls lease anew; a clean stop voids the lease.
    call(&gw.addr);
    assert!(gw.terminate().success());
    let gw = Gateway::start(&config);
    assert_eq!(committed(&gw), 50_050 + 1_000);
    assert_eq!(files.upstream_calls().len(), 20);
}

#[test]
fn the_typescript_sdk_client_lists_and_calls_through_dgw() {
    let files = Files::new();
    let root = seed(1);
    let gw = files.gateway(&root);
    let token = files.read_token(&root, 10_000, 3600).encode();
    let calls = json!([
        {"name": "read_text_file", "arguments": {"path": files.path("sub/b.txt")}},
        {"name": "read_text_file", "arguments": {"path": "/etc/passwd"}},
        {"name": "write_file", "arguments": {"path": files.path("x"), "content": "x"}},
    ]);
    let out = sdk_client(&gw, &token, &calls);
    assert_eq!(out["server"]["name"], "dgw");
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(tools.contains(&"read_text_file"), "{tools:?}");
    assert!(!tools.contains(&"write_file"), "{tools:?}");
    assert_eq!(
        out["calls"][0]["result"]["content"][0]["text"], "hello from b\n",
        "{out}"
    );
    for denied in [1, 2] {
        let e = &out["calls"][denied]["error"];
        assert_eq!(e["code"], -32001, "{out}");
        assert_eq!(e["data"]["type"], "capability_not_granted", "{out}");
    }
    assert_eq!(files.upstream_calls().len(), 1);
}

/// Runs the TypeScript SDK client (`tests/mcp/sdk-client.mjs`) against
/// the gateway's `/mcp` and returns what it printed.
fn sdk_client(gw: &Gateway, token: &str, calls: &Value) -> Value {
    let out = Command::new("node")
        .arg(tests_dir().join("mcp/sdk-client.mjs"))
        .arg(format!("http://{}/mcp", gw.addr))
        .arg(token)
        .arg(calls.to_string())
        .output()
        .unwrap();
    json_of_success(&out)
}

/// `dgw mcp` as a child process, spoken to line by line.
struct StdioClient {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl StdioClient {
    fn start(config: &Path) -> Self {
        let mut child = dgw()
            .args(["mcp", "--config", config.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        assert_eq!(answer["id"], id, "{answer}");
        answer
    }
}

#[test]
fn a_rust_client_over_dgw_mcp_stdio() {
    let files = Files::new();
    let root = seed(1);
    let config = mcp_gateway_config(
        &files.dir,
        &[("acme", root.principal_id())],
        &files.upstream_toml(),
    );
    let token = files.read_token(&root, 10_000, 3600).encode();
    let mut c = StdioClient::start(&config);
    let init = c.request(
        1,
        "initialize",
        json!({
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "rust-stdio", "version": "1"},
        "_delegateos": {"dct": token}}),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "dgw", "{init}");
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let list = c.request(2, "tools/list", json!({}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"read_text_file") && !names.contains(&"write_file"),
        "{names:?}"
    );
    let a = c.request(
        3,
        "tools/call",
        json!({"name": "read_text_file", "arguments": {"path": files.path("a.txt")}}),
    );
    assert_eq!(text_of(&a), "hello from a\n");
    let e = c.request(
        4,
        "tools/call",
        json!({"name": "read_text_file", "arguments": {"path": "/etc/passwd"}}),
    );
    assert_eq!(denial_type(&e), "capability_not_granted");
    let e = c.request(5, "resources/read", json!({"uri": "file:///etc/passwd"}));
    assert_eq!(e["error"]["data"]["type"], "method_not_found", "{e}");
    let p = c.request(6, "ping", json!({}));
    assert_eq!(p["result"], json!({}));
    drop(c.stdin);
    let status = c.child.wait().unwrap();
    assert!(status.success());
    assert_eq!(files.upstream_calls().len(), 1);
    // Its decisions name the MCP front and a request ID each, as over HTTP.
    let log = files.dir.join("data/audit");
    let exported = run(&["audit", "export", log.to_str().unwrap()]);
    let decisions: Vec<(Value, Value, bool)> = stdout(&exported)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["event"].clone())
        .filter(|e| e["event"] == "decision")
        .map(|e| {
            (
                e["front"].clone(),
                e["tool"].clone(),
                e["requestId"].is_string(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            (json!("mcp"), json!("read_text_file"), true),
            (json!("mcp"), json!("read_text_file"), true)
        ],
        "{}",
        stdout(&exported)
    );
}

/// A child process killed when dropped, so a failing test leaves none behind
/// (one would hold the test harness's output open).
/// Starts the SDK echo server on Streamable HTTP; returns it and its URL.
fn echo_http_server() -> (Killed, String) {
    let (server, port) = echo_server_on_port(&[]);
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

#[test]
fn http_and_stdio_upstreams_together_with_clashing_names_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let (_web, url) = echo_http_server();
    let echo = tests_dir().join("mcp/echo-server.mjs");
    let rules = r#"
[[upstreams.tools]]
name = "echo"
capability = "demo:echo"
resource = "/text"
cost_microcents = 10
[[upstreams.tools]]
name = "c*"
open = true
"#;
    let extra = format!(
        "[[upstreams]]\nname = \"web\"\nurl = {url:?}\n{rules}\n[[upstreams]]\nname = \"local\"\ncommand = [\"node\", {echo:?}]\n{rules}"
    );
    let config = mcp_gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let gw = Gateway::start(&config);
    let token = root_token(&root, &seed(2), &["demo:echo:*"], 1000, 3600).encode();
    let mut mcp = McpHttp::connect(&gw.addr, Some(&token));
    let mut names = mcp.tool_names(Some(&token));
    names.sort();
    assert_eq!(
        names,
        [
            "local__cancellations",
            "local__count",
            "local__crash",
            "local__echo",
            "web__cancellations",
            "web__count",
            "web__crash",
            "web__echo"
        ]
    );
    let a = mcp.call("web__echo", json!({"text": "over http"}), Some(&token));
    assert_eq!(text_of(&a), "over http");
    let a = mcp.call("local__echo", json!({"text": "over stdio"}), Some(&token));
    assert_eq!(text_of(&a), "over stdio");

    // The stdio upstream dies mid-call: the caller hears so, and dgw
    // restarts it.
    let crash = mcp.call("local__crash", json!({}), None);
    assert_eq!(crash["error"]["code"], -32603, "{crash}");
    assert_eq!(
        crash["error"]["data"]["type"], "upstream_no_answer",
        "{crash}"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let a = mcp.call("local__count", json!({}), None);
        if a.get("result").is_some() {
            // A fresh process: its first call.
            assert_eq!(text_of(&a), "1");
            break;
        }
        assert_eq!(a["error"]["data"]["type"], "upstream_unavailable", "{a}");
        assert!(Instant::now() < deadline, "the upstream was not restarted");
        std::thread::sleep(Duration::from_millis(100));
    }
    let budget = gw.ok(
        "delegateos/budget",
        json!({"delegationId": del(1).to_string()}),
    );
    assert_eq!(budget["chains"][0][0]["spentMicrocents"], 20, "{budget}");
}

#[test]
fn the_mcp_endpoint_refuses_bad_sessions_and_bad_messages() {
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let config = mcp_gateway_config(dir.path(), &[("acme", root.principal_id())], "");
    let gw = Gateway::start(&config);
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let (status, _, body) = http_exchange(&gw.addr, "POST", "/mcp", &[], list.as_bytes());
    assert_eq!(status, 400);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["error"]["data"]["type"], "session_required");
    let (status, _, body) = http_exchange(
        &gw.addr,
        "POST",
        "/mcp",
        &[("Mcp-Session-Id", "nope")],
        list.as_bytes(),
    );
    assert_eq!(status, 404);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["error"]["data"]["type"], "session_not_found");
    let (status, _, body) = http_exchange(&gw.addr, "POST", "/mcp", &[], b"{not json");
    assert_eq!(status, 400);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["error"]["code"], -32700);
    let (status, _, _) = http_exchange(&gw.addr, "GET", "/mcp", &[], b"");
    assert_eq!(status, 405);
    let (status, _, body) = http_exchange(
        &gw.addr,
        "POST",
        "/mcp",
        &[("MCP-Protocol-Version", "1999-01-01")],
        list.as_bytes(),
    );
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));

    // A session's life: initialize (with a bad DCT: refused, no session),
    // then a good one, then DELETE.
    let bad = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"},
        "_delegateos": {"dct": "garbage"}}});
    let (status, h, body) =
        http_exchange(&gw.addr, "POST", "/mcp", &[], bad.to_string().as_bytes());
    assert_eq!(status, 200);
    assert!(h.iter().all(|(k, _)| k != "mcp-session-id"));
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["error"]["data"]["type"], "malformed_token", "{v}");
    let mcp = McpHttp::connect(&gw.addr, None);
    let id = mcp.session.clone();
    let (status, _, _) = http_exchange(&gw.addr, "DELETE", "/mcp", &[("Mcp-Session-Id", &id)], b"");
    assert_eq!(status, 204);
    let (status, _, _) = http_exchange(
        &gw.addr,
        "POST",
        "/mcp",
        &[("Mcp-Session-Id", &id)],
        list.as_bytes(),
    );
    assert_eq!(status, 404);
}

/// Tool rules for the echo server's `wait` (enforced, 25 µ¢) and its
/// `c*` tools (open).
const WAIT_RULES: &str = r#"
[[upstreams.tools]]
name = "wait"
capability = "demo:wait"
fixed_resource = "/wait"
cost_microcents = 25
[[upstreams.tools]]
name = "c*"
open = true
"#;

/// Asks `cancellations` until the upstream reports one (its cancellation
/// notification races the next call), within a generous deadline.
fn await_one_cancellation(mut ask: impl FnMut() -> Value) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let a = ask();
        match text_of(&a).as_str() {
            "1" => return,
            "0" => {}
            other => panic!("{other:?}: {a}"),
        }
        assert!(
            Instant::now() < deadline,
            "the upstream never saw the cancellation"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_call_the_typescript_sdk_client_cancels_is_cancelled_upstream_and_charged() {
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let (_web, url) = echo_http_server();
    let extra = format!("[[upstreams]]\nname = \"web\"\nurl = {url:?}\n{WAIT_RULES}");
    let config = mcp_gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let gw = Gateway::start(&config);
    let token = root_token(&root, &seed(2), &["demo:wait:*"], 1000, 3600).encode();
    let calls = json!([{"name": "wait", "arguments": {"ms": 60_000}, "abortAfterMs": 300}]);
    let out = sdk_client(&gw, &token, &calls);
    assert_eq!(out["calls"][0]["aborted"], true, "{out}");

    // The upstream was told, under the ID dgw gave the call there.
    let mut mcp = McpHttp::connect(&gw.addr, None);
    await_one_cancellation(|| mcp.call("cancellations", json!({}), None));
    // The upstream may have acted before it stopped: charged in full (once
    // dgw has told the upstream, which the poll above may see first).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let budget = gw.ok(
            "delegateos/budget",
            json!({"delegationId": del(1).to_string()}),
        );
        let level = &budget["chains"][0][0];
        if level["spentMicrocents"] == 25 {
            assert_eq!(level["reservedMicrocents"], 0, "{budget}");
            break;
        }
        assert_eq!(level["reservedMicrocents"], 25, "{budget}");
        assert!(Instant::now() < deadline, "never settled: {budget}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let m = gw.metrics();
    assert!(
        m.contains(r#"dgw_mcp_tool_calls_total{protocol="delegateos",upstream="web",tool="wait",outcome="cancelled"} 1"#),
        "{m}"
    );
    assert!(
        m.contains(r#"dgw_requests_total{front="mcp",method="tools/call",outcome="cancelled"} 1"#),
        "{m}"
    );
}

#[test]
fn a_call_cancelled_over_dgw_mcp_stdio_gets_no_answer_and_stops_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let echo = tests_dir().join("mcp/echo-server.mjs");
    let extra =
        format!("[[upstreams]]\nname = \"local\"\ncommand = [\"node\", {echo:?}]\n{WAIT_RULES}");
    let config = mcp_gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let token = root_token(&root, &seed(2), &["demo:wait:*"], 1000, 3600).encode();
    let mut c = StdioClient::start(&config);
    c.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "rust-stdio", "version": "1"},
               "_delegateos": {"dct": token}}),
    );
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    c.send(
        &json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
                   "params": {"name": "wait", "arguments": {"ms": 60_000}}}),
    );
    // Cancelling a request that is not in flight changes nothing.
    c.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": "not-sent"}}),
    );
    // Until dgw has the call in flight, a cancellation would find nothing:
    // ask the upstream's call counter until the wait is running there.
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut id, mut counts) = (10, 0);
    loop {
        id += 1;
        counts += 1;
        let a = c.request(id, "tools/call", json!({"name": "count", "arguments": {}}));
        let served: u64 = text_of(&a).parse().unwrap();
        if served == counts + 1 {
            break; // every count so far, and the wait
        }
        assert_eq!(served, counts, "{a}");
        assert!(Instant::now() < deadline, "the wait never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    c.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": "slow", "reason": "changed my mind"}}),
    );
    // Every line read from here on answers the request just sent (the
    // helper asserts its ID), so an answer to "slow" would fail the test.
    await_one_cancellation(|| {
        id += 1;
        c.request(
            id,
            "tools/call",
            json!({"name": "cancellations", "arguments": {}}),
        )
    });
    let p = c.request(100, "ping", json!({}));
    assert_eq!(p["result"], json!({}));
    drop(c.stdin);
    assert!(c.child.wait().unwrap().success());
}
