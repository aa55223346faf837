//! dgw in front of an upstream that speaks only MCP 2026-07-28 (issue 33):
//! the official TypeScript SDK v2's strict modern handler
//! (tests/mcp/conformance-upstream.mjs `--modern-only`, which refuses
//! `initialize`). dgw learns what it speaks from `server/discover` and
//! `initialize` (docs/decisions.md 450) and opens no session with it; what an
//! upstream lying about its revision gets. The SDK clients' end-to-end
//! runs against it are in tests/mcp_sdk_clients.rs.

// Integration tests: a failed unwrap is the test failing loudly, and
// clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]
mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use support::mcp::*;
use support::*;

const RULES: &str = r#"
[[upstreams.tools]]
name = "test_input_required_result_request_state"
capability = "conformance:call"
fixed_resource = "*"
cost_microcents = 600

[[upstreams.tools]]
name = "test_input_required_result_elicitation"
capability = "conformance:call"
fixed_resource = "*"
cost_microcents = 1
"#;

/// dgw in front of `script` (with `args`), the upstream named `up`.
fn through(script: &str, args: &[&str]) -> (tempfile::TempDir, Killed, Gateway) {
    let dir = tempfile::tempdir().unwrap();
    let mut upstream = Command::new(node22());
    upstream.arg(tests_dir().join(script)).args(args);
    let (upstream, port) = spawn_listening(upstream, "listening ");
    let root = seed(1);
    let extra = format!(
        "[[upstreams]]\nname = \"up\"\nurl = \"http://127.0.0.1:{port}/mcp\"\ntimeout = \"20s\"\n{RULES}"
    );
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let gw = Gateway::start(&config);
    (dir, upstream, gw)
}

fn dct(n: u8, budget: u64) -> String {
    root_token(&seed(1), &seed(n), &["conformance:call:*"], budget, 3600).encode()
}

/// A session caller (2025-06-18) to a 2026-07-28-only upstream: dgw
/// declares no client capabilities for it, so the upstream does not ask
/// it for input (the revision's -32021 comes back instead; an
/// input-required result given anyway becomes a typed error:
/// `upstream_era::tests`); a 2026-07-28 caller's rounds to the same
/// upstream are one call, charged once.
#[test]
fn a_2026_07_28_only_upstream_serves_session_and_2026_07_28_callers() {
    let (_dir, _up, gw) = through("mcp/conformance-upstream.mjs", &["--modern-only"]);
    let token = dct(2, 1_000);
    let mut session = McpHttp::connect(&gw.addr, Some(&token));
    let a = session.call("test_input_required_result_elicitation", json!({}), None);
    assert_eq!(a["error"]["code"], -32021, "{a}");
    assert!(
        a["error"]["data"]["requiredCapabilities"]["elicitation"].is_object(),
        "{a}"
    );

    let auth = format!("DCT {}", dct(3, 1_000));
    let tool = "test_input_required_result_request_state";
    let (status, a) = stateless_call(&gw, 1, &auth, tool, json!({}));
    assert_eq!(status, 200, "{a}");
    assert_eq!(a["result"]["resultType"], "input_required", "{a}");
    let state = a["result"]["requestState"].clone();
    let responses = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    let (_, a) = stateless_call(
        &gw,
        2,
        &auth,
        tool,
        json!({"inputResponses": responses, "requestState": state}),
    );
    assert_eq!(a["result"]["resultType"], "complete", "{a}");
    // 600 of 1 000 charged once: a second call no longer fits.
    let (_, a) = stateless_call(&gw, 3, &auth, tool, json!({}));
    assert_eq!(a["error"]["data"]["type"], "budget_exceeded", "{a}");
}

/// An upstream that answers `server/discover` as a 2026-07-28 server and
/// refuses `initialize`, as a 2026-07-28-only one would, but refuses every
/// 2026-07-28 request with a bare 400 (a liar): dgw never takes it as ready (it probes again after each
/// failure) and its callers get a typed refusal; no call reaches it.
#[test]
fn an_upstream_lying_that_it_speaks_2026_07_28_is_never_ready() {
    let (_dir, mut up, gw) = through("mcp/hostile-upstream.mjs", &["--claims-modern"]);
    // Wait for two probes: dgw tried, failed, and tried again.
    let deadline = Instant::now() + Duration::from_secs(30);
    let probes = || {
        std::fs::read_to_string(&gw.stderr_log)
            .unwrap_or_default()
            .matches("what the upstream speaks")
            .count()
    };
    while probes() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(probes() >= 2, "dgw did not probe again");
    // Its tools were never listed: a call names no tool dgw knows.
    let a = stateless_call(
        &gw,
        1,
        &format!("DCT {}", dct(2, 1_000)),
        "sample",
        json!({}),
    )
    .1;
    assert_eq!(a["error"]["data"]["type"], "unknown_tool", "{a}");
    assert!(
        gw.metrics()
            .contains(r#"dgw_mcp_upstream_up{upstream="up"} 0"#),
        "{}",
        gw.metrics()
    );
    // What reached the liar: probes and the handshake's tools/list, never a call.
    let _ = up.0.kill();
    let mut got = String::new();
    std::io::Read::read_to_string(up.0.stdout.as_mut().unwrap(), &mut got).unwrap();
    assert!(got.contains("got server/discover"), "{got}");
    assert!(!got.contains("got tools/call"), "{got}");
}

/// Two replicas on one real redis-server share the `requestState`s they
/// passed out (decision 452): the first round on one, the retry on the
/// other completes uncharged; replayed on the first, forged, or under
/// another credential on either, it is refused before the upstream; the
/// budget (shared too) shows one charge.
#[test]
fn input_required_rounds_span_two_replicas_on_one_redis() {
    let redis = support::redis::RedisServer::start();
    let mut upstream = Command::new(node22());
    upstream
        .arg(tests_dir().join("mcp/conformance-upstream.mjs"))
        .arg("--modern-only");
    let (_up, port) = spawn_listening(upstream, "listening ");
    let root = seed(1);
    let extra = format!(
        "[state]\nbackend = \"redis\"\nurl = \"{}\"\nprefix = \"dgw\"\n[[upstreams]]\nname = \"up\"\nurl = \"http://127.0.0.1:{port}/mcp\"\ntimeout = \"20s\"\n{RULES}",
        redis.url()
    );
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let g1 = Gateway::start(&gateway_config(
        d1.path(),
        &[("acme", root.principal_id())],
        &extra,
    ));
    let g2 = Gateway::start(&gateway_config(
        d2.path(),
        &[("acme", root.principal_id())],
        &extra,
    ));
    let auth = format!("DCT {}", dct(2, 1_000));
    let other = format!("DCT {}", dct(3, 1_000));
    let tool = "test_input_required_result_request_state";
    let (_, a) = stateless_call(&g1, 1, &auth, tool, json!({}));
    assert_eq!(a["result"]["resultType"], "input_required", "{a}");
    let state = a["result"]["requestState"].clone();
    let responses = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    let retry = |gw: &Gateway, id, auth: &str, state: &serde_json::Value| {
        stateless_call(
            gw,
            id,
            auth,
            tool,
            json!({"inputResponses": responses, "requestState": state}),
        )
        .1
    };
    let a = retry(&g2, 2, &other, &state);
    assert_eq!(
        a["error"]["data"]["type"], "request_state_credential_mismatch",
        "{a}"
    );
    let a = retry(&g2, 3, &auth, &json!("forged"));
    assert_eq!(a["error"]["data"]["type"], "request_state_unknown", "{a}");
    let a = retry(&g2, 4, &auth, &state);
    assert_eq!(a["result"]["resultType"], "complete", "{a}");
    let a = retry(&g1, 5, &auth, &state);
    assert_eq!(a["error"]["data"]["type"], "request_state_unknown", "{a}");
    // Charged once: 600 of 1 000 spent, so a new call fits on neither.
    for (gw, id) in [(&g1, 6), (&g2, 7)] {
        let (_, a) = stateless_call(gw, id, &auth, tool, json!({}));
        assert_eq!(a["error"]["data"]["type"], "budget_exceeded", "{a}");
    }
}
