//! Server-to-client traffic through dgw (issue 33): an upstream's requests
//! to a caller (sampling, elicitation) reach exactly the caller whose call
//! caused them, on that call's event stream, and only that caller's answer
//! goes back; policy refuses what an upstream may not ask; a notification
//! flood is bounded and counted. Callers are the official TypeScript SDK
//! client (tests/mcp/relay-callers.mjs) and raw HTTP; upstreams are the
//! conformance upstream (SDK v2) and a hostile raw one
//! (tests/mcp/hostile-upstream.mjs).

// Integration tests: a failed unwrap is the test failing loudly, and
// clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]
mod support;

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use support::mcp::*;
use support::*;

/// dgw in front of the upstream started by `script` (over HTTP), with
/// `policy` as its `server_requests`; the upstream, dgw and a DCT granting
/// every tool.
fn through(script: &str, policy: &str) -> (tempfile::TempDir, Killed, Gateway, String) {
    let mut upstream = Command::new("node");
    upstream.arg(tests_dir().join(script));
    let (upstream, port) = spawn_listening(upstream, "listening ");
    let (dir, gateway, token) =
        gateway(&format!("url = \"http://127.0.0.1:{port}/mcp\"\n{policy}"));
    (dir, upstream, gateway, token)
}

/// dgw in front of one upstream reached as `reach` says.
fn gateway(reach: &str) -> (tempfile::TempDir, Gateway, String) {
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let extra = format!(
        r#"
[[upstreams]]
name = "up"
timeout = "20s"
{reach}

[[upstreams.tools]]
name = "*"
capability = "relay:call"
fixed_resource = "*"
cost_microcents = 1
"#
    );
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let gateway = Gateway::start(&config);
    let token = root_token(&root, &seed(2), &["relay:call:*"], 1_000_000, 3600).encode();
    (dir, gateway, token)
}

/// dgw's `/mcp`.
fn url(gw: &Gateway) -> String {
    format!("http://{}/mcp", gw.addr)
}

/// Runs tests/mcp/relay-callers.mjs in `mode` against `target` (a URL,
/// or for `stdio` how to launch `dgw mcp`); what it printed.
fn callers(mode: &str, target: &str, token: &str, tool: &str) -> serde_json::Value {
    let out = Command::new("node")
        .arg(tests_dir().join("mcp/relay-callers.mjs"))
        .args([mode, target, token, tool])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The sum of a counter's samples whose labels contain every one of `with`.
fn counted(gw: &Gateway, name: &str, with: &[&str]) -> f64 {
    gw.metrics()
        .lines()
        .filter(|l| l.starts_with(name) && with.iter().all(|w| l.contains(w)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Two SDK clients call an eliciting tool at once: each is asked only its
/// own question and its own answer makes its own result.
#[test]
fn two_callers_at_once_each_answer_only_their_own_elicitation() {
    let (_d, _u, gw, token) = through("mcp/conformance-upstream.mjs", "");
    let out = callers("two", &url(&gw), &token, "test_elicitation");
    for (me, other) in [("A", "B"), ("B", "A")] {
        let asked = &out[me]["asked"];
        assert_eq!(asked, &serde_json::json!([format!("for {me}")]), "{out}");
        let text = out[me]["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(&format!("\"username\":\"{me}\"")), "{text}");
        assert!(
            !text.contains(&format!("\"username\":\"{other}\"")),
            "{text}"
        );
    }
    assert_eq!(
        counted(
            &gw,
            "dgw_mcp_server_requests_total",
            &["elicitation/create", "relayed"]
        ),
        2.0
    );
}

/// Another session answering a caller's request is refused; the caller's
/// own answer goes back; a replay of it is refused.
#[test]
fn a_caller_cannot_answer_another_callers_request() {
    let (_d, _u, gw, token) = through("mcp/conformance-upstream.mjs", "");
    let out = callers("cross", &url(&gw), &token, "test_elicitation");
    assert_eq!(out["contentType"], "text/event-stream", "{out}");
    assert_eq!(out["asked"]["method"], "elicitation/create", "{out}");
    assert!(
        out["asked"]["id"].as_str().unwrap().starts_with("dgw-"),
        "{out}"
    );
    assert_eq!(out["other"]["status"], 400, "{out}");
    assert!(
        out["other"]["body"]
            .as_str()
            .unwrap()
            .contains("unknown_server_request"),
        "{out}"
    );
    assert_eq!(out["own"]["status"], 202, "{out}");
    assert_eq!(out["replayed"]["status"], 400, "{out}");
    let text = out["result"]["result"]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("\"username\":\"A\""), "{out}");
    assert!(
        !text.contains("mallory") && !text.contains("replay"),
        "{out}"
    );
    assert_eq!(
        counted(&gw, "dgw_mcp_server_requests_total", &["answer_refused"]),
        2.0
    );
}

/// By default dgw declares no sampling upstream, and an upstream that asks
/// anyway is refused with a typed error, counted; the caller never sees it.
#[test]
fn sampling_is_refused_by_default_policy() {
    let (_d, _u, gw, token) = through("mcp/hostile-upstream.mjs", "");
    let out = callers("two", &url(&gw), &token, "caps");
    let declared: serde_json::Value =
        serde_json::from_str(out["A"]["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        declared,
        serde_json::json!({"elicitation": {}, "roots": {}})
    );

    let out = callers("two", &url(&gw), &token, "sample");
    for me in ["A", "B"] {
        assert_eq!(out[me]["asked"], serde_json::json!([]), "{out}");
        let text = out[me]["result"]["content"][0]["text"].as_str().unwrap();
        let got: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(
            got["error"]["data"]["type"], "server_request_refused",
            "{text}"
        );
    }
    assert_eq!(
        counted(
            &gw,
            "dgw_mcp_server_requests_total",
            &["sampling/createMessage", "server_request_refused"]
        ),
        2.0
    );
}

/// With `sampling = true` the same request reaches the caller.
#[test]
fn sampling_allowed_by_policy_reaches_its_caller() {
    let (_d, _u, gw, token) = through(
        "mcp/hostile-upstream.mjs",
        "server_requests = { sampling = true, roots = false }",
    );
    let out = callers("two", &url(&gw), &token, "caps");
    let declared: serde_json::Value =
        serde_json::from_str(out["A"]["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        declared,
        serde_json::json!({"sampling": {}, "elicitation": {}})
    );
    let out = callers("two", &url(&gw), &token, "sample");
    for me in ["A", "B"] {
        assert_eq!(out[me]["asked"].as_array().unwrap().len(), 1, "{out}");
        let text = out[me]["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(&format!("from {me}")), "{text}");
    }
}

/// An upstream flooding a caller that does not read: dgw's queue for the
/// call stays bounded, the excess is dropped and counted, and the call
/// still ends (forwarded and charged once).
#[test]
fn a_notification_flood_is_dropped_and_counted_not_stored() {
    let (_d, _u, gw, token) = through("mcp/hostile-upstream.mjs", "");
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let auth = format!("DCT {token}");
    let (status, headers, _) = http_exchange(
        &gw.addr,
        "POST",
        "/mcp",
        &[("Authorization", &auth), ("Accept", "application/json")],
        init.to_string().as_bytes(),
    );
    assert_eq!(status, 200);
    let session = headers
        .iter()
        .find(|(k, _)| k == "mcp-session-id")
        .map(|(_, v)| v.clone())
        .unwrap();
    // 40 000 notifications of 500 bytes (20 MB), to a caller that never
    // reads its stream.
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "flood", "arguments": {"count": 40000, "size": 500}}})
    .to_string();
    let mut silent = std::net::TcpStream::connect(&gw.addr).unwrap();
    write!(
        silent,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: {auth}\r\nMcp-Session-Id: {session}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{call}",
        gw.addr,
        call.len()
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while counted(
        &gw,
        "dgw_mcp_tool_calls_total",
        &["tool=\"flood\"", "forwarded"],
    ) < 1.0
    {
        assert!(Instant::now() < deadline, "{}", gw.metrics());
        std::thread::sleep(Duration::from_millis(100));
    }
    let dropped = counted(
        &gw,
        "dgw_mcp_relay_dropped_total",
        &["upstream=\"up\"", "full"],
    );
    assert!(dropped > 30_000.0, "dropped {dropped}");
    drop(silent);
}

/// A shared stdio upstream has one stream for every caller: dgw declares
/// it no client capability and refuses its requests to callers, typed and
/// counted, even what policy allows (docs/mcp.md, per transport).
#[test]
fn a_stdio_upstreams_requests_are_refused_as_unattributable() {
    let script = tests_dir().join("mcp/hostile-upstream.mjs");
    let (_d, gw, token) = gateway(&format!(
        "command = [\"node\", {:?}, \"--stdio\"]\nserver_requests = {{ sampling = true }}",
        script.display().to_string()
    ));
    let out = callers("two", &url(&gw), &token, "caps");
    assert_eq!(out["A"]["result"]["content"][0]["text"], "{}", "{out}");
    let out = callers("two", &url(&gw), &token, "sample");
    for me in ["A", "B"] {
        assert_eq!(out[me]["asked"], serde_json::json!([]), "{out}");
        let text = out[me]["result"]["content"][0]["text"].as_str().unwrap();
        let got: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(
            got["error"]["data"]["type"], "server_request_unattributable",
            "{text}"
        );
    }
    assert_eq!(
        counted(
            &gw,
            "dgw_mcp_server_requests_total",
            &["sampling/createMessage", "server_request_unattributable"]
        ),
        2.0
    );
}

/// A caller whose connection drops mid-answer resumes it with `GET /mcp`
/// and `Last-Event-ID`: it gets the events after that one and the answer,
/// not the ones it saw; only its own session (and credential) can.
#[test]
fn a_dropped_stream_resumes_after_the_last_event_seen() {
    let (_d, _u, gw, token) = through("mcp/conformance-upstream.mjs", "");
    let auth = format!("DCT {token}");
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let open = || {
        let (status, headers, _) = http_exchange(
            &gw.addr,
            "POST",
            "/mcp",
            &[("Authorization", &auth), ("Accept", "application/json")],
            init.to_string().as_bytes(),
        );
        assert_eq!(status, 200);
        headers
            .iter()
            .find(|(k, _)| k == "mcp-session-id")
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    let (session, other) = (open(), open());
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": "p"}}})
    .to_string();
    let mut s = std::net::TcpStream::connect(&gw.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: {auth}\r\nMcp-Session-Id: {session}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{call}",
        gw.addr,
        call.len()
    )
    .unwrap();
    // Read until the first event is complete, then drop the connection.
    let mut seen = Vec::new();
    let first_id = loop {
        let mut buf = [0u8; 4096];
        let n = std::io::Read::read(&mut s, &mut buf).unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen);
        if let Some(at) = text.find("\nid: ") {
            if let Some(end) = text[at + 5..].find('\n') {
                if text[at..].contains("\n\n") {
                    break text[at + 5..at + 5 + end].trim().to_owned();
                }
            }
        }
    };
    let seen = String::from_utf8_lossy(&seen).into_owned();
    assert!(seen.contains("text/event-stream"), "{seen}");
    assert!(seen.contains("\"progress\":0"), "{seen}");
    drop(s);

    let resume = |session: &str, auth: &str| {
        http_exchange(
            &gw.addr,
            "GET",
            "/mcp",
            &[
                ("Authorization", auth),
                ("Mcp-Session-Id", session),
                ("Last-Event-ID", &first_id),
                ("Accept", "text/event-stream"),
            ],
            b"",
        )
    };
    // Another credential cannot resume this session's stream; another
    // session has no such stream.
    let stranger = format!(
        "DCT {}",
        root_token(&seed(1), &seed(7), &["relay:call:*"], 1_000, 3600).encode()
    );
    assert_eq!(resume(&session, &stranger).0, 403);
    let (status, _, body) = resume(&other, &auth);
    assert_eq!(status, 404, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("unknown_event_id"));

    let (status, headers, body) = resume(&session, &auth);
    let body = String::from_utf8_lossy(&body);
    assert_eq!(status, 200, "{body}");
    assert!(
        headers
            .iter()
            .any(|(k, v)| k == "content-type" && v.starts_with("text/event-stream")),
        "{headers:?}"
    );
    assert!(!body.contains("\"progress\":0"), "{body}");
    assert!(body.contains("\"progress\":50"), "{body}");
    assert!(body.contains("\"progress\":100"), "{body}");
    assert!(
        body.contains("\"result\"") && body.contains("\"content\""),
        "{body}"
    );
    // GET without Last-Event-ID opens no stream.
    let (status, _, _) = http_exchange(
        &gw.addr,
        "GET",
        "/mcp",
        &[("Authorization", &auth), ("Mcp-Session-Id", &session)],
        b"",
    );
    assert_eq!(status, 405);
}

/// Downstream stdio (`dgw mcp`, one session per process): the upstream's
/// elicitation reaches the host's client on its stdout, under dgw's ID,
/// and the client's answer goes back.
#[test]
fn a_dgw_mcp_host_answers_its_upstreams_elicitation() {
    let mut upstream = Command::new("node");
    upstream.arg(tests_dir().join("mcp/conformance-upstream.mjs"));
    let (_upstream, port) = spawn_listening(upstream, "listening ");
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let extra = format!(
        "[[upstreams]]\nname = \"up\"\nurl = \"http://127.0.0.1:{port}/mcp\"\ntimeout = \"20s\"\n[[upstreams.tools]]\nname = \"*\"\ncapability = \"relay:call\"\nfixed_resource = \"*\"\ncost_microcents = 1\n"
    );
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let token = root_token(&root, &seed(2), &["relay:call:*"], 1_000_000, 3600).encode();
    let launch = serde_json::json!({
        "command": env!("CARGO_BIN_EXE_dgw"),
        "args": ["mcp", "--config", config],
        "env": {"DGW_DCT": token},
    });
    let out = callers("stdio", &launch.to_string(), "-", "test_elicitation");
    assert_eq!(out["asked"], serde_json::json!(["for S"]), "{out}");
    let text = out["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("\"username\":\"S\""), "{out}");
}
