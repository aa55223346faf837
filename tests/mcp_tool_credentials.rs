//! Credentials per tool rule (issue 34): a tool that needs a stronger
//! credential than the rest of its upstream gets its own, presented on
//! that tool's calls alone, only when the caller's DCT grants the call,
//! and never shown to anyone.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]
#![allow(dead_code)]

mod support;

use std::path::Path;

use serde_json::{json, Value};
use support::mcp::*;
use support::*;

const BASE: &str = "sk-base-0123456789abcdef";
const STRONG: &str = "sk-strong-fedcba9876543210";

/// Every request the upstream logged, as (JSON-RPC method, tool, X-Api-Key).
fn requests(log: &Path) -> Vec<(String, String, String)> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (
                s(&r["body"]["method"]),
                s(&r["body"]["params"]["name"]),
                s(&r["headers"]["x-api-key"]),
            )
        })
        .collect()
}

#[test]
fn a_rules_own_credential_reaches_only_its_tools_granted_calls() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = seed(1);
    let accepted = secret_file(d, "accepted", &format!("{BASE}\n{STRONG}\n"), 0o600);
    let strong_only = secret_file(d, "strong_only", STRONG, 0o600);
    let base_file = secret_file(d, "base.key", BASE, 0o600);
    let strong_file = secret_file(d, "strong.key", &format!("{STRONG}\n"), 0o400);
    let log = d.join("upstream.log");
    // Every request needs one of the two keys; `count` and `leak` need
    // the strong one.
    let (_u, port) = echo_server_on_port(&[
        "--require-header".as_ref(),
        "x-api-key".as_ref(),
        accepted.as_os_str(),
        "--require-tool-header".as_ref(),
        "count".as_ref(),
        "x-api-key".as_ref(),
        strong_only.as_os_str(),
        "--header-log".as_ref(),
        log.as_os_str(),
    ]);
    let extra = format!(
        r#"
[[upstreams]]
name = "a"
url = "http://127.0.0.1:{port}/mcp"
headers = [{{ name = "X-Api-Key", value_file = {base_file:?} }}]
[[upstreams.tools]]
name = "echo"
capability = "demo:echo"
resource = "/text"
[[upstreams.tools]]
name = "count"
capability = "demo:count"
fixed_resource = "count"
headers = [{{ name = "X-Api-Key", value_file = {strong_file:?} }}]
[[upstreams.tools]]
name = "leak"
capability = "demo:leak"
fixed_resource = "leak"
headers = [{{ name = "X-Api-Key", value_file = {strong_file:?} }}]
"#
    );
    let config = mcp_gateway_config(d, &[("acme", root.principal_id())], &extra);

    // `config check` names the rule's credential and its source only.
    let said = config_check_passes(&mut dgw(), &config);
    assert!(
        said.contains(&format!(
            "upstream a, tools \"count\": header x-api-key = <redacted> from file {}",
            strong_file.display()
        )),
        "{said}"
    );
    assert!(!said.contains(STRONG) && !said.contains(BASE), "{said}");

    let gw = Gateway::start(&config);
    let mut mcp = McpHttp::connect(&gw.addr, None);

    // A caller granted echo alone: its calls carry the upstream's key, and
    // it cannot make dgw present the strong one.
    let narrow = root_token(&root, &seed(2), &["demo:echo:*"], 1000, 3600).encode();
    let a = mcp.call("echo", json!({"text": "plain"}), Some(&narrow));
    assert_eq!(text_of(&a), "plain", "{a}");
    let denied = mcp.call("count", json!({}), Some(&narrow));
    assert_eq!(denial_type(&denied), "capability_not_granted", "{denied}");
    let seen = requests(&log);
    assert!(
        seen.iter().all(|(_, _, key)| key == BASE),
        "the strong key left dgw for a call the DCT does not grant: {seen:?}"
    );

    // A caller granted count: that call, and only it, carries the strong key.
    let wide = root_token(&root, &seed(3), &["demo:*:*"], 1000, 3600).encode();
    let a = mcp.call("count", json!({}), Some(&wide));
    assert!(a.get("result").is_some(), "{a}");
    let a = mcp.call("echo", json!({"text": "after"}), Some(&wide));
    assert_eq!(text_of(&a), "after", "{a}");
    // An upstream giving the strong key away has it scrubbed.
    let a = mcp.call("leak", json!({"name": "x-api-key"}), Some(&wide));
    assert_eq!(text_of(&a), "the value is <redacted>", "{a}");
    let seen = requests(&log);
    for (method, tool, key) in &seen {
        let strong_tool = method == "tools/call" && (tool == "count" || tool == "leak");
        let want = if strong_tool { STRONG } else { BASE };
        assert_eq!(key, want, "{method} {tool}: {seen:?}");
    }
    assert!(seen.iter().any(|(_, t, _)| t == "count"), "{seen:?}");

    let emitted = everything_dgw_emitted(&gw, &d.join("data"));
    assert!(!emitted.is_empty());
    for secret in [BASE, STRONG] {
        assert!(!contains(&emitted, secret), "{secret} in dgw's output");
    }
}

#[test]
fn a_rules_own_credential_is_for_an_enforced_rule_of_an_http_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = secret_file(d, "k", STRONG, 0o600);
    let open = secret_file(d, "open.key", STRONG, 0o644);
    let http = "data_dir = \"data\"\nkey_file = \"data/gateway.key\"\n[server]\nhttp = \"127.0.0.1:0\"\n[[upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:9/mcp\"\n";
    let stdio = "data_dir = \"data\"\nkey_file = \"data/gateway.key\"\n[server]\nhttp = \"127.0.0.1:0\"\n[[upstreams]]\nname = \"a\"\ncommand = [\"true\"]\n";
    let enforced =
        "[[upstreams.tools]]\nname = \"t\"\ncapability = \"demo:t\"\nfixed_resource = \"t\"\n";
    let cases = [
        (
            format!("{http}[[upstreams.tools]]\nname = \"t\"\nopen = true\nbearer = {{ value_file = {key:?} }}\n"),
            "`upstreams[0].tools[0].bearer`: a rule's own credentials are for tools a DCT must grant",
        ),
        (
            format!("{stdio}{enforced}headers = [{{ name = \"X-Api-Key\", value_file = {key:?} }}]\n"),
            "`upstreams[0].tools[0].headers`: are sent to an HTTP upstream",
        ),
        (
            format!("{http}{enforced}headers = [{{ name = \"X-Api-Key\", value = \"inline\" }}]\n"),
            "`upstreams[0].tools[0].headers[0].value`: X-Api-Key carries a credential",
        ),
        (
            format!("{http}{enforced}bearer = {{ value_file = {open:?} }}\n"),
            "has mode 0644: it must be 0600, 0400 or 0440",
        ),
        (
            format!("{http}{enforced}bearer = {{ value_file = {key:?} }}\noauth = {{ token_url = \"http://127.0.0.1:9/token\", client_id = \"c\", client_secret_file = {key:?} }}\n"),
            "`upstreams[0].tools[0].oauth`: sets Authorization, which `bearer` or `headers` sets too",
        ),
    ];
    for (toml, expected) in cases {
        let out = config_check_in(d, &toml);
        let said = stderr(&out);
        assert!(!out.status.success(), "accepted: {toml}");
        assert!(said.contains(expected), "{said}");
        assert!(!said.contains(STRONG), "{said}");
    }
}
