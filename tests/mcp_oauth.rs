//! OAuth 2.0 client credentials toward an HTTP upstream (issue 34, part
//! 3): dgw fetches its token from a real authorization server
//! (oidc-provider), caches it, fetches anew once on the upstream's 401, and
//! answers `upstream_unavailable` with nothing charged when the token
//! endpoint is down. Neither the client secret nor a token ever comes back
//! out of dgw.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]
#![allow(dead_code)]

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::mcp::*;
use support::*;

const CLIENT_SECRET: &str = "oauth-client-secret-0123456789abcdef";

/// The authorization server: its process and `127.0.0.1:port`.
fn provider(secret_file: &Path, ttl_secs: u32) -> (Killed, String) {
    let mut command = std::process::Command::new("node");
    command
        .arg(tests_dir().join("mcp/oauth-provider.mjs"))
        .arg(secret_file)
        .arg(ttl_secs.to_string())
        .stderr(std::process::Stdio::null());
    let (child, port) = spawn_listening(command, "oauth-provider listening port=");
    (child, format!("127.0.0.1:{port}"))
}

fn issued(provider: &str) -> u64 {
    let (status, body) = http_request(provider, "GET", "/__issued", b"");
    assert_eq!(status, 200);
    String::from_utf8(body).unwrap().parse().unwrap()
}

/// The echo server accepting only tokens active at `provider`.
fn introspecting_echo(provider: &str, log: &Path) -> (Killed, String) {
    let (server, port) = echo_server_on_port(&[
        "--introspect".as_ref(),
        format!("http://{provider}/token/introspection").as_ref(),
        "--header-log".as_ref(),
        log.as_os_str(),
    ]);
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

const RULES: &str = r#"
[[upstreams.tools]]
name = "echo"
capability = "demo:echo"
resource = "/text"
cost_microcents = 10
[[upstreams.tools]]
name = "leak"
capability = "demo:leak"
fixed_resource = "leak"
"#;

fn config(d: &Path, root: &delegateos::Keypair, provider: &str, url: &str) -> std::path::PathBuf {
    let secret = secret_file(d, "client_secret", &format!("{CLIENT_SECRET}\n"), 0o600);
    let extra = format!(
        r#"
[[upstreams]]
name = "a"
url = {url:?}
timeout = "5s"
oauth = {{ token_url = "http://{provider}/token", client_id = "dgw", client_secret_file = {secret:?}, scope = "mcp:call", audience = "mcp-upstream" }}
{RULES}
"#
    );
    mcp_gateway_config(d, &[("acme", root.principal_id())], &extra)
}

/// The bearer tokens the upstream was shown.
fn tokens_seen(log: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            r["headers"]["authorization"]
                .as_str()
                .and_then(|a| a.strip_prefix("Bearer "))
                .map(str::to_owned)
        })
        .collect();
    out.dedup();
    out
}

#[test]
fn tokens_from_a_real_authorization_server_are_cached_refetched_on_401_and_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = seed(1);
    let provider_secret = secret_file(d, "provider_secret", CLIENT_SECRET, 0o600);
    let (_p, prov) = provider(&provider_secret, 3600);
    let log = d.join("upstream.log");
    let (_u, url) = introspecting_echo(&prov, &log);
    let config = config(d, &root, &prov, &url);

    let said = config_check_passes(&mut dgw(), &config);
    assert!(
        said.contains(&format!(
            "upstream a: oauth client \"dgw\" at http://{prov}/token, secret <redacted> from file {}",
            d.join("client_secret").display()
        )),
        "{said}"
    );
    assert!(!said.contains(CLIENT_SECRET), "{said}");

    let gw = Gateway::start(&config);
    let token = root_token(&root, &seed(2), &["demo:*:*"], 1000, 3600).encode();
    let mut mcp = McpHttp::connect(&gw.addr, None);
    let names = mcp.tool_names(Some(&token));
    assert!(
        names.contains(&"echo".to_owned()),
        "{names:?} {}",
        std::fs::read_to_string(&gw.stderr_log).unwrap()
    );
    for i in 0..3 {
        let a = mcp.call("echo", json!({"text": format!("call {i}")}), Some(&token));
        assert_eq!(text_of(&a), format!("call {i}"), "{a}");
    }
    // initialize, tools/list and three calls: one token.
    assert_eq!(issued(&prov), 1);

    // The authorization server forgets every token: the upstream answers
    // 401, dgw fetches one new token and the call goes through.
    let (status, _) = http_request(&prov, "POST", "/__revoke_all", b"");
    assert_eq!(status, 204);
    let a = mcp.call("echo", json!({"text": "after revocation"}), Some(&token));
    assert_eq!(text_of(&a), "after revocation", "{a}");
    assert_eq!(issued(&prov), 2);
    // Again, with calls in flight together: they share one fetch.
    let (status, _) = http_request(&prov, "POST", "/__revoke_all", b"");
    assert_eq!(status, 204);
    std::thread::scope(|s| {
        for i in 0..4 {
            let (addr, token) = (&gw.addr, &token);
            s.spawn(move || {
                let mut mcp = McpHttp::connect(addr, None);
                let a = mcp.call(
                    "echo",
                    json!({"text": format!("together {i}")}),
                    Some(token),
                );
                assert_eq!(text_of(&a), format!("together {i}"), "{a}");
            });
        }
    });
    assert_eq!(issued(&prov), 3);
    let mut seen = tokens_seen(&log);
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 3, "{seen:?}");

    // An upstream that gives the token away has it scrubbed.
    let a = mcp.call("leak", json!({"name": "authorization"}), Some(&token));
    assert_eq!(text_of(&a), "the value is Bearer <redacted>", "{a}");

    // Neither the client secret nor a token is in anything dgw emitted,
    // and the upstream never saw the client secret.
    let emitted = everything_dgw_emitted(&gw, &d.join("data"));
    assert!(!emitted.is_empty());
    assert!(
        !contains(&emitted, CLIENT_SECRET),
        "the client secret in dgw's output"
    );
    for t in &seen {
        assert!(!contains(&emitted, t), "a token in dgw's output");
    }
    assert!(!contains(&std::fs::read(&log).unwrap(), CLIENT_SECRET));
}

#[test]
fn the_token_endpoint_down_is_upstream_unavailable_and_nothing_is_charged() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = seed(1);
    let provider_secret = secret_file(d, "provider_secret", CLIENT_SECRET, 0o600);
    let (mut p, prov) = provider(&provider_secret, 3600);
    let log = d.join("upstream.log");
    let (_u, url) = introspecting_echo(&prov, &log);
    let config = config(d, &root, &prov, &url);
    let gw = Gateway::start(&config);
    let token = root_token(&root, &seed(2), &["demo:*:*"], 1000, 3600).encode();
    let mut mcp = McpHttp::connect(&gw.addr, None);
    let a = mcp.call("echo", json!({"text": "before"}), Some(&token));
    assert_eq!(text_of(&a), "before", "{a}");

    // The authorization server goes away (its tokens with it): the upstream
    // answers 401, and the token endpoint cannot be reached.
    let _ = p.0.kill();
    let _ = p.0.wait();
    let started = Instant::now();
    let a = mcp.call("echo", json!({"text": "after"}), Some(&token));
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "not bounded by the upstream's timeout"
    );
    assert_eq!(a["error"]["data"]["type"], "upstream_unavailable", "{a}");
    assert!(!a.to_string().contains(CLIENT_SECRET), "{a}");
    for t in tokens_seen(&log) {
        assert!(!a.to_string().contains(&t), "{a}");
    }
    let budget = gw.ok(
        "delegateos/budget",
        json!({"delegationId": del(1).to_string()}),
    );
    let level = &budget["chains"][0][0];
    assert_eq!(level["spentMicrocents"], 10, "{budget}");
    assert_eq!(level["reservedMicrocents"], 0, "{budget}");
    let emitted = everything_dgw_emitted(&gw, &d.join("data"));
    assert!(!contains(&emitted, CLIENT_SECRET));
}

#[test]
fn oauth_is_for_http_upstreams_alone_and_its_secret_is_a_private_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = seed(1);
    let private = secret_file(d, "secret", CLIENT_SECRET, 0o600);
    let open = secret_file(d, "open_secret", CLIENT_SECRET, 0o644);
    let oauth = |file: &Path, url: &str| {
        format!(
            r#"oauth = {{ token_url = {url:?}, client_id = "dgw", client_secret_file = {file:?} }}"#
        )
    };
    let cases = [
        (
            format!(
                "url = \"http://127.0.0.1:9/mcp\"\nbearer = {{ value_env = \"X\" }}\n{}",
                oauth(&private, "http://127.0.0.1:9/token")
            ),
            "upstreams[0].oauth",
        ),
        (
            format!(
                "command = [\"node\"]\n{}",
                oauth(&private, "http://127.0.0.1:9/token")
            ),
            "upstreams[0].oauth",
        ),
        (
            format!(
                "url = \"http://127.0.0.1:9/mcp\"\n{}",
                oauth(&open, "http://127.0.0.1:9/token")
            ),
            "upstreams[0].oauth.client_secret_file",
        ),
        (
            format!(
                "url = \"http://127.0.0.1:9/mcp\"\n{}",
                oauth(&private, "ftp://127.0.0.1/token")
            ),
            "upstreams[0].oauth.token_url",
        ),
    ];
    for (upstream, key) in cases {
        let extra = format!("[[upstreams]]\nname = \"a\"\n{upstream}\n{RULES}");
        let config = mcp_gateway_config(d, &[("acme", root.principal_id())], &extra);
        let out = dgw()
            .env("X", "x-token-value-123456")
            .args(["config", "check", config.to_str().unwrap()])
            .output()
            .unwrap();
        let said = format!("{}{}", stdout(&out), stderr(&out));
        assert!(!out.status.success(), "{upstream}: {said}");
        assert!(said.contains(key), "{upstream}: {said}");
        assert!(!said.contains(CLIENT_SECRET), "{said}");
    }
}

/// A token endpoint that answers each request with the next of `answers`
/// (the last one again once they run out; `None`: never answers) and
/// records each request it read.
fn scripted_endpoint(
    answers: Vec<Option<Vec<u8>>>,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for (i, conn) in listener.incoming().enumerate() {
            let mut conn = conn.unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            // Headers, then the body its Content-Length names.
            loop {
                let n = conn.read(&mut buf).unwrap_or(0);
                if n == 0 {
                    break;
                }
                req.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&req).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len = text
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    if req.len() >= end + 4 + len {
                        break;
                    }
                }
            }
            log.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&req).into_owned());
            let answer = answers[i.min(answers.len() - 1)].clone();
            match answer {
                Some(bytes) => {
                    let _ = conn.write_all(&bytes);
                }
                None => {
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_secs(30));
                        drop(conn);
                    });
                }
            }
        }
    });
    (addr, seen)
}

fn http_answer(status: &str, body: &[u8]) -> Option<Vec<u8>> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    Some(out)
}

#[test]
fn a_hostile_token_endpoint_gets_no_token_taken_and_nothing_charged() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = seed(1);
    const GOOD: &str = "first-good-token-0123456789";
    let huge = format!(
        r#"{{"token_type":"Bearer","access_token":"x","pad":"{}"}}"#,
        "a".repeat(70 * 1024)
    );
    let refusal =
        format!(r#"{{"error":"invalid_client","error_description":"bad secret {CLIENT_SECRET}"}}"#);
    let answers = vec![
        http_answer(
            "200 OK",
            format!(r#"{{"token_type":"Bearer","access_token":"{GOOD}","expires_in":3600}}"#)
                .as_bytes(),
        ),
        http_answer(
            "200 OK",
            br#"{"token_type":"mac","access_token":"mac-token-123456789"}"#,
        ),
        http_answer("200 OK", huge.as_bytes()),
        http_answer(
            "200 OK",
            br#"{"token_type":"Bearer","access_token":"evil-token\r\nX-Injected: 1"}"#,
        ),
        http_answer("200 OK", br#"{"token_type":"Bearer","access_token":["a"]}"#),
        http_answer("401 Unauthorized", refusal.as_bytes()),
        None,
    ];
    let calls = answers.len() - 1;
    let (endpoint, requests) = scripted_endpoint(answers);
    let accepted = secret_file(d, "accepted", &format!("Bearer {GOOD}"), 0o600);
    let log = d.join("upstream.log");
    let (server, port) = echo_server_on_port(&[
        "--require-header".as_ref(),
        "authorization".as_ref(),
        accepted.as_os_str(),
        "--header-log".as_ref(),
        log.as_os_str(),
    ]);
    let _server = server;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let config = config(d, &root, &endpoint, &url);
    let gw = Gateway::start(&config);
    let token = root_token(&root, &seed(2), &["demo:*:*"], 1000, 3600).encode();
    let mut mcp = McpHttp::connect(&gw.addr, None);
    let a = mcp.call("echo", json!({"text": "with the good token"}), Some(&token));
    assert_eq!(text_of(&a), "with the good token", "{a}");

    // The token request: a form POST with Basic auth, scope and audience.
    let first = requests.lock().unwrap()[0].clone();
    assert!(first.starts_with("POST /token HTTP/1.1\r\n"), "{first}");
    // base64 of `dgw:` and CLIENT_SECRET.
    let basic = "ZGd3Om9hdXRoLWNsaWVudC1zZWNyZXQtMDEyMzQ1Njc4OWFiY2RlZg==";
    assert!(
        first.contains(&format!("authorization: Basic {basic}\r\n")),
        "{first}"
    );
    assert!(
        first.contains("content-type: application/x-www-form-urlencoded"),
        "{first}"
    );
    assert!(
        first.ends_with("grant_type=client_credentials&scope=mcp%3Acall&audience=mcp-upstream"),
        "{first}"
    );

    // The upstream stops taking the token: each refetch meets a hostile
    // answer, and each call is upstream_unavailable, charged nothing.
    std::fs::write(&accepted, "Bearer nothing-dgw-has").unwrap();
    for i in 0..calls {
        let started = Instant::now();
        let a = mcp.call(
            "echo",
            json!({"text": format!("hostile {i}")}),
            Some(&token),
        );
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "answer {i} took {:?}",
            started.elapsed()
        );
        assert_eq!(
            a["error"]["data"]["type"], "upstream_unavailable",
            "answer {i}: {a}"
        );
        let shown = a.to_string();
        for bad in [
            CLIENT_SECRET,
            "mac-token-123456789",
            "evil-token",
            "X-Injected",
        ] {
            assert!(!shown.contains(bad), "answer {i}: {a}");
        }
    }
    let budget = gw.ok(
        "delegateos/budget",
        json!({"delegationId": del(1).to_string()}),
    );
    let level = &budget["chains"][0][0];
    assert_eq!(level["spentMicrocents"], 10, "{budget}");
    assert_eq!(level["reservedMicrocents"], 0, "{budget}");
    // One fetch per call: no hostile answer was taken as a token and tried.
    assert_eq!(requests.lock().unwrap().len(), calls + 1);
    // No hostile token ever went upstream.
    let upstream_saw = std::fs::read_to_string(&log).unwrap();
    assert!(!upstream_saw.contains("mac-token") && !upstream_saw.contains("evil-token"));
    let emitted = everything_dgw_emitted(&gw, &d.join("data"));
    assert!(
        !contains(&emitted, CLIENT_SECRET),
        "the client secret in dgw's output"
    );
}

#[test]
fn a_tool_rules_own_oauth_client_serves_that_tools_granted_calls_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = seed(1);
    let provider_secret = secret_file(d, "provider_secret", CLIENT_SECRET, 0o600);
    let (_p, prov) = provider(&provider_secret, 3600);
    let log = d.join("upstream.log");
    // Only `echo` needs a token.
    let (_u, port) = echo_server_on_port(&[
        "--introspect-tool".as_ref(),
        "echo".as_ref(),
        format!("http://{prov}/token/introspection").as_ref(),
        "--header-log".as_ref(),
        log.as_os_str(),
    ]);
    let secret = secret_file(d, "client_secret", &format!("{CLIENT_SECRET}\n"), 0o600);
    let extra = format!(
        r#"
[[upstreams]]
name = "a"
url = "http://127.0.0.1:{port}/mcp"
timeout = "5s"
[[upstreams.tools]]
name = "echo"
capability = "demo:echo"
resource = "/text"
oauth = {{ token_url = "http://{prov}/token", client_id = "dgw", client_secret_file = {secret:?}, scope = "mcp:call" }}
[[upstreams.tools]]
name = "leak"
capability = "demo:leak"
fixed_resource = "leak"
"#
    );
    let config = mcp_gateway_config(d, &[("acme", root.principal_id())], &extra);
    let gw = Gateway::start(&config);
    let mut mcp = McpHttp::connect(&gw.addr, None);

    // A caller not granted echo gets no token fetched on its behalf.
    let narrow = root_token(&root, &seed(2), &["demo:leak:*"], 1000, 3600).encode();
    let denied = mcp.call("echo", json!({"text": "x"}), Some(&narrow));
    assert_eq!(denial_type(&denied), "capability_not_granted", "{denied}");
    let a = mcp.call("leak", json!({"name": "x-other"}), Some(&narrow));
    assert!(a.get("result").is_some(), "{a}");
    assert_eq!(issued(&prov), 0);

    let wide = root_token(&root, &seed(3), &["demo:*:*"], 1000, 3600).encode();
    for i in 0..2 {
        let a = mcp.call("echo", json!({"text": format!("call {i}")}), Some(&wide));
        assert_eq!(text_of(&a), format!("call {i}"), "{a}");
    }
    let a = mcp.call("leak", json!({"name": "authorization"}), Some(&wide));
    assert!(a.get("result").is_some(), "{a}");
    assert_eq!(issued(&prov), 1);

    // The token rode echo's calls and nothing else.
    let lines: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let carried: Vec<&Value> = lines
        .iter()
        .filter(|r| r["headers"]["authorization"].is_string())
        .collect();
    assert_eq!(carried.len(), 2, "{lines:?}");
    assert!(carried
        .iter()
        .all(|r| r["body"]["method"] == "tools/call" && r["body"]["params"]["name"] == "echo"));
    let tokens = tokens_seen(&log);
    assert_eq!(tokens.len(), 1, "{tokens:?}");
    let emitted = everything_dgw_emitted(&gw, &d.join("data"));
    assert!(!contains(&emitted, CLIENT_SECRET));
    assert!(!contains(&emitted, &tokens[0]));
}
