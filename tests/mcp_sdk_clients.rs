//! The official MCP SDK clients against dgw with each revision they speak
//! (issue 33): the TypeScript SDK v2 client and the Python SDK (`mcp` 2.x),
//! on a session (the initialize handshake) and on 2026-07-28, through dgw
//! to a dual-era upstream (the conformance upstream, which dgw speaks to
//! on its session for session callers and statelessly for 2026-07-28
//! ones) and, for 2026-07-28 clients, to a 2025-11-25-only upstream (the
//! SDK v1 echo server) and, for both, to a 2026-07-28-only upstream (the
//! SDK v2's strict modern handler): tools, resources and prompts through their rules,
//! the ungranted ones refused with the same typed denial either way.

// Integration tests: a failed unwrap is the test failing loudly, and
// clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]
mod support;

use std::path::PathBuf;
use std::process::Command;

use serde_json::{json, Value};
use support::mcp::*;
use support::*;

const RULES: &str = r#"
[[upstreams.tools]]
name = "test_simple_text"
capability = "demo:call"
fixed_resource = "x"
cost_microcents = 3

[[upstreams.resources]]
uri = "test://static-*"
capability = "docs:read"

[[upstreams.prompts]]
name = "test_*"
capability = "prompts:get"
"#;

fn python() -> PathBuf {
    let p = tests_dir().join(".venv/bin/python");
    assert!(
        p.exists(),
        "the tests' virtualenv is missing: run tests/setup.sh"
    );
    p
}

/// One step for both SDKs: (Python method and arguments, TypeScript method
/// and its one argument).
struct Step(Value, Value);

fn steps() -> Vec<Step> {
    vec![
        Step(json!(["list_tools"]), json!(["listTools", {}])),
        Step(
            json!(["call_tool", "test_simple_text", {}]),
            json!(["callTool", {"name": "test_simple_text", "arguments": {}}]),
        ),
        Step(json!(["list_resources"]), json!(["listResources", {}])),
        Step(
            json!(["read_resource", "test://static-text"]),
            json!(["readResource", {"uri": "test://static-text"}]),
        ),
        Step(
            json!(["read_resource", "test://static-binary"]),
            json!(["readResource", {"uri": "test://static-binary"}]),
        ),
        Step(json!(["list_prompts"]), json!(["listPrompts", {}])),
        Step(
            json!(["get_prompt", "test_simple_prompt"]),
            json!(["getPrompt", {"name": "test_simple_prompt"}]),
        ),
        Step(
            json!(["get_prompt", "test_prompt_with_image"]),
            json!(["getPrompt", {"name": "test_prompt_with_image"}]),
        ),
    ]
}

/// Runs one SDK's client against `url` in `mode`; its JSON report.
fn run_client(sdk: &str, url: &str, token: &str, mode: &str, steps: &[Value]) -> Value {
    let steps = Value::Array(steps.to_vec()).to_string();
    let mut command = match sdk {
        "python" => {
            let mut c = Command::new(python());
            c.arg(tests_dir().join("mcp/py-client.py"));
            c
        }
        _ => {
            let mut c = Command::new(node22());
            c.arg(tests_dir().join("mcp/sdk2-client.mjs"));
            c
        }
    };
    let out = command
        .args([url, token, mode, steps.as_str()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{sdk} {mode}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|_| panic!("{sdk} {mode}: {stdout}"))
}

fn sorted(values: &Value, field: &str) -> Vec<String> {
    let mut v: Vec<String> = values
        .as_array()
        .unwrap_or_else(|| panic!("{values}"))
        .iter()
        .map(|e| e[field].as_str().unwrap().to_owned())
        .collect();
    v.sort();
    v
}

/// The data type of a step's typed denial, however the SDK surfaced it.
fn denial(step: &Value) -> String {
    let e = &step["error"];
    assert_eq!(e["code"], -32001, "{step}");
    e["data"]["type"]
        .as_str()
        .unwrap_or_else(|| panic!("{step}"))
        .to_owned()
}

#[test]
fn both_sdks_on_both_revisions_through_dgw_get_tools_resources_and_prompts_by_the_rules() {
    both_sdks_on_both_revisions(&[]);
}

/// The same through dgw to an upstream that speaks only 2026-07-28 (the
/// SDK v2's strict modern handler, which refuses `initialize`): dgw finds
/// that out with `server/discover`, opens no session with it, and carries
/// session callers' requests to it as 2026-07-28 ones; each call is
/// enforced, charged once and audited once whichever revision carried it.
#[test]
fn both_sdks_on_both_revisions_reach_a_2026_07_28_only_upstream_through_dgw() {
    let (dir, gw) = both_sdks_on_both_revisions(&["--modern-only"]);
    // Four calls (two SDKs, two revisions) at 3 each, charged once each.
    let m = gw.metrics();
    assert!(
        m.contains(r#"dgw_budget_spent_microcents{tenant="acme"} 12"#),
        "{m}"
    );
    let log = dir.path().join("data/audit");
    let settled = || {
        std::fs::read_dir(&log)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
            .map(|t| t.matches(r#""chargedMicrocents":3,"#).count())
            .sum::<usize>()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while settled() < 4 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(settled(), 4, "one record of 3 charged per call, in {log:?}");
}

/// Both SDKs, each on a session and on 2026-07-28, through dgw to the
/// conformance upstream started with `upstream_args`; the gateway, for
/// more checks.
fn both_sdks_on_both_revisions(upstream_args: &[&str]) -> (tempfile::TempDir, Gateway) {
    let dir = tempfile::tempdir().unwrap();
    let mut upstream = Command::new(node22());
    upstream.arg(tests_dir().join("mcp/conformance-upstream.mjs"));
    upstream.args(upstream_args);
    let (_upstream, port) = spawn_listening(upstream, "listening ");
    let root = seed(1);
    let extra = format!(
        "[[upstreams]]\nname = \"everything\"\nurl = \"http://127.0.0.1:{port}/mcp\"\ntimeout = \"20s\"\n{RULES}"
    );
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let gw = Gateway::start(&config);
    let url = format!("http://{}/mcp", gw.addr);
    let token = root_token(
        &root,
        &seed(2),
        &[
            "demo:call:*",
            "docs:read:test://static-text",
            "prompts:get:test_simple_prompt",
        ],
        1_000_000,
        3600,
    )
    .encode();
    let all = steps();
    for sdk in ["python", "typescript"] {
        for mode in ["legacy", "2026-07-28"] {
            let list: Vec<Value> = all
                .iter()
                .map(|Step(py, ts)| {
                    if sdk == "python" {
                        py.clone()
                    } else {
                        ts.clone()
                    }
                })
                .collect();
            let r = run_client(sdk, &url, &token, mode, &list);
            let at = format!("{sdk} {mode}: {r}");
            let want = if mode == "legacy" {
                "2025-11-25"
            } else {
                "2026-07-28"
            };
            assert_eq!(r["protocolVersion"], want, "{at}");
            assert_eq!(r["server"], "dgw", "{at}");
            let s = r["steps"].as_array().unwrap();
            assert_eq!(
                sorted(&s[0]["result"]["tools"], "name"),
                ["test_simple_text"],
                "{at}"
            );
            assert_eq!(
                s[1]["result"]["content"][0]["text"], "This is a simple text response for testing.",
                "{at}"
            );
            assert_eq!(
                sorted(&s[2]["result"]["resources"], "uri"),
                ["test://static-text"],
                "{at}"
            );
            assert_eq!(
                s[3]["result"]["contents"][0]["text"],
                "This is the content of the static text resource.",
                "{at}"
            );
            assert_eq!(denial(&s[4]), "capability_not_granted", "{at}");
            assert_eq!(
                sorted(&s[5]["result"]["prompts"], "name"),
                ["test_simple_prompt"],
                "{at}"
            );
            assert!(s[6]["result"]["messages"].is_array(), "{at}");
            assert_eq!(denial(&s[7]), "capability_not_granted", "{at}");
        }
    }
    let m = gw.metrics();
    assert!(
        m.contains(r#"dgw_mcp_tool_calls_total{protocol="delegateos",upstream="everything",tool="test_simple_text",outcome="forwarded"} 4"#),
        "{m}"
    );
    (dir, gw)
}

#[test]
fn a_2026_07_28_sdk_client_reaches_a_2025_11_25_upstream_through_dgw() {
    let dir = tempfile::tempdir().unwrap();
    let (_echo, port) = echo_server_on_port(&[]);
    let root = seed(1);
    let extra = format!(
        "[[upstreams]]\nname = \"web\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n[[upstreams.tools]]\nname = \"echo\"\ncapability = \"demo:echo\"\nresource = \"/text\"\n"
    );
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let gw = Gateway::start(&config);
    let url = format!("http://{}/mcp", gw.addr);
    let token = root_token(&root, &seed(2), &["demo:echo:hi"], 1_000, 3600).encode();
    for sdk in ["python", "typescript"] {
        let steps = if sdk == "python" {
            vec![
                json!(["call_tool", "echo", {"text": "hi"}]),
                json!(["call_tool", "echo", {"text": "bye"}]),
            ]
        } else {
            vec![
                json!(["callTool", {"name": "echo", "arguments": {"text": "hi"}}]),
                json!(["callTool", {"name": "echo", "arguments": {"text": "bye"}}]),
            ]
        };
        let r = run_client(sdk, &url, &token, "2026-07-28", &steps);
        let at = format!("{sdk}: {r}");
        assert_eq!(r["protocolVersion"], "2026-07-28", "{at}");
        assert_eq!(r["steps"][0]["result"]["content"][0]["text"], "hi", "{at}");
        assert_eq!(denial(&r["steps"][1]), "capability_not_granted", "{at}");
    }
}
