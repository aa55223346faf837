//! Attacks on the gateway (issue 15), each reproduced against the real
//! binary and shown refused with nothing changed. docs/security.md names
//! the threat each test holds.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::os::unix::fs::PermissionsExt;

use delegateos::{RevocationEntry, RevocationScope};
use serde_json::{json, Value};
use support::*;

/// An admin secret and its `[[admin.tokens]]` entry.
const ADMIN_SECRET: &str = "test-admin-secret-0123456789abcdef";

fn admin_config() -> String {
    let digest: String = {
        use sha2::Digest;
        sha2::Sha256::digest(ADMIN_SECRET.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    format!("[[admin.tokens]]\nname = \"ops\"\nsha256 = \"{digest}\"\n")
}

fn admin() -> String {
    format!("Bearer {ADMIN_SECRET}")
}

fn authorize(token: &str, resource: &str, cost: u64) -> Value {
    json!({"dct": token, "namespace": "docs", "action": "read", "resource": resource, "costMicrocents": cost})
}

/// A gateway for tenant `acme` (root seed 1) with `extra` config.
fn start(extra: &str) -> (tempfile::TempDir, Gateway) {
    let dir = tempfile::tempdir().unwrap();
    let config = gateway_config(dir.path(), &[("acme", seed(1).principal_id())], extra);
    let gw = Gateway::start(&config);
    (dir, gw)
}

fn error_type(response: &Value) -> &str {
    response["error"]["data"]["type"]
        .as_str()
        .unwrap_or_default()
}

/// Threat 1: a caller who learns a reservation ID settles or releases it.
#[test]
fn only_the_holder_or_an_admin_ends_a_reservation() {
    let (_dir, gw) = start(&admin_config());
    let alice = root_token(&seed(1), &seed(2), &["docs:read:/project/**"], 1000, 3600).encode();
    let mallory = root_token_for(
        &seed(1),
        &seed(3),
        &["docs:read:/project/**"],
        1000,
        3600,
        del(7),
    )
    .encode();
    let ids: Vec<String> = (0..2)
        .map(|_| {
            gw.ok("delegateos/authorize", authorize(&alice, "/project/a", 500))["reservationId"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    // 128 random bits, base64url: no shared prefix to guess from.
    for id in &ids {
        let body = id.strip_prefix("res_").expect("res_ prefix");
        assert_eq!(body.len(), 22, "{id}");
    }
    assert_ne!(ids[0][..12], ids[1][..12]);

    for id in &ids {
        // No credential, another holder's token, or a forged admin secret.
        let e = gw.err("delegateos/release", json!({"reservationId": id}));
        assert_eq!(e["data"]["type"], "not_reservation_holder", "{e}");
        assert_eq!(e["code"], -32001);
        let e = gw.err(
            "delegateos/settle",
            json!({"reservationId": id, "actualMicrocents": 0, "dct": mallory}),
        );
        assert_eq!(e["data"]["type"], "not_reservation_holder", "{e}");
        let (_, r) = gw.call_as(
            &format!("DCT {mallory}"),
            "delegateos/release",
            json!({"reservationId": id}),
        );
        assert_eq!(error_type(&r), "not_reservation_holder", "{r}");
        let (status, r) = gw.call_as(
            "Bearer not-the-secret",
            "delegateos/release",
            json!({"reservationId": id}),
        );
        assert_eq!((status, error_type(&r)), (401, "invalid_admin_token"));
    }
    // Nothing changed: both reservations still hold the whole budget.
    let budget = gw.call_as(
        &admin(),
        "delegateos/budget",
        json!({"delegationId": del(1)}),
    );
    assert_eq!(
        budget.1["result"]["chains"][0][0]["reservedMicrocents"],
        1000
    );
    // The holder settles its own (header or params); an admin releases any.
    let (_, r) = gw.call_as(
        &format!("DCT {alice}"),
        "delegateos/settle",
        json!({"reservationId": ids[0], "actualMicrocents": 300}),
    );
    assert_eq!(r["result"]["chargedMicrocents"], 300, "{r}");
    let (_, r) = gw.call_as(
        &admin(),
        "delegateos/release",
        json!({"reservationId": ids[1]}),
    );
    assert_eq!(r["result"]["releasedMicrocents"], 500, "{r}");
    let budget = gw.call_as(
        &admin(),
        "delegateos/budget",
        json!({"delegationId": del(1)}),
    );
    let level = &budget.1["result"]["chains"][0][0];
    assert_eq!(
        (
            level["spentMicrocents"].as_u64(),
            level["reservedMicrocents"].as_u64()
        ),
        (Some(300), Some(0))
    );
}

/// Without admin tokens, loopback callers may read, but never end another
/// holder's reservation.
#[test]
fn loopback_without_admin_tokens_still_cannot_end_reservations() {
    let (_dir, gw) = start("");
    let alice = root_token(&seed(1), &seed(2), &["docs:read:/project/**"], 1000, 3600).encode();
    let id = gw.ok("delegateos/authorize", authorize(&alice, "/project/a", 500))["reservationId"]
        .clone();
    let e = gw.err("delegateos/release", json!({"reservationId": id}));
    assert_eq!(e["data"]["type"], "not_reservation_holder");
    gw.ok("dgw/audit", json!({}));
    let b = gw.ok("delegateos/budget", json!({"delegationId": del(1)}));
    assert_eq!(b["chains"][0][0]["reservedMicrocents"], 500);
}

/// Threats 2 and 5: delegation lookups hand out bearer tokens, state-reading
/// and admin methods answer anyone, and state files are world-readable.
#[test]
fn lookups_need_the_holder_or_an_admin_and_never_return_tokens() {
    let (dir, gw) = start(&admin_config());
    let root = seed(1);
    let t0 = root_token(&root, &seed(2), &["docs:read:/project/**"], 1000, 3600);
    let other = root_token_for(&root, &seed(3), &["docs:read:/x/**"], 10, 3600, del(9));
    let c = contract(&root, ct(1), &[]);
    let d = gw.ok(
        "delegateos/delegate",
        json!({"contract": c, "dct": t0.encode(), "dctFormat": "delegateos-sjt-v1",
               "delegationId": del(1), "parentDelegationId": delegateos::DelegationId::root_parent()}),
    );
    assert_eq!(d["accepted"], true, "{d}");
    for method in ["delegateos/delegation", "delegateos/budget"] {
        let e = gw.err(method, json!({"delegationId": del(1)}));
        assert_eq!(e["data"]["type"], "admin_required", "{method}: {e}");
        let e = gw.err(
            method,
            json!({"delegationId": del(1), "dct": other.encode()}),
        );
        assert_eq!(e["data"]["type"], "admin_required", "{method}: {e}");
    }
    for e in [
        gw.err("dgw/audit", json!({})),
        gw.err("delegateos/delegation", json!({"delegationId": del(1)})),
    ] {
        assert_eq!(e["code"], -32001);
    }
    // The holder reads its own; an admin reads any. Neither sees a token.
    let own = gw.ok(
        "delegateos/delegation",
        json!({"delegationId": del(1), "dct": t0.encode()}),
    );
    let (_, by_admin) = gw.call_as(
        &admin(),
        "delegateos/delegation",
        json!({"delegationId": del(1)}),
    );
    for view in [&own, &by_admin["result"]] {
        assert_eq!(view["id"], json!(del(1)));
        assert_eq!(view["capabilities"][0]["resource"], "/project/**");
        assert_eq!(view["budgetMicrocents"], 1000);
        let text = view.to_string();
        assert!(!text.contains(&t0.encode()[..40]), "{text}");
        assert!(
            view.get("dct").is_none() && !text.contains("signature"),
            "{text}"
        );
    }
    let (_, audit) = gw.call_as(&admin(), "dgw/audit", json!({}));
    assert!(audit["result"]["events"].is_array(), "{audit}");

    // Every file and directory under data_dir is private.
    let data = dir.path().join("data");
    let mut seen = 0;
    let mut stack = vec![data.clone()];
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p).unwrap();
        let mode = meta.permissions().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "{} is mode {mode:03o}", p.display());
        seen += 1;
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
    assert!(seen > 5, "only {seen} entries under data_dir");
}

/// An older data_dir with readable files is tightened at start.
#[test]
fn a_readable_data_dir_is_made_private_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(data.join("old"), b"x").unwrap();
    std::fs::set_permissions(data.join("old"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = gateway_config(dir.path(), &[("acme", seed(1).principal_id())], "");
    let _gw = Gateway::start(&config);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&data.join("old")), 0o600);
}

/// Threat 4: other spellings of a resource outside the grant.
#[test]
fn non_canonical_resources_are_invalid() {
    let (_dir, gw) = start("");
    let t = root_token(&seed(1), &seed(2), &["docs:read:/project/**"], 1000, 3600).encode();
    for resource in [
        "/project/%2e%2e/secret",
        "/project//x",
        "/project/./x",
        "/project/../etc/passwd",
        "/project/cafe\u{301}.txt",
        "/project/a\\..\\b",
        "/project/a\u{0}",
    ] {
        let e = gw.err("delegateos/authorize", authorize(&t, resource, 100));
        assert_eq!(e["data"]["type"], "invalid_resource", "{resource:?}: {e}");
    }
    // Nothing was ever reserved under the delegation.
    let e = gw.err("delegateos/budget", json!({"delegationId": del(1)}));
    assert_eq!(e["data"]["type"], "not_found");
    gw.ok(
        "delegateos/authorize",
        authorize(&t, "/project/caf\u{e9}.txt", 1),
    );
}

/// Threat 10: a huge request earns no larger an answer.
#[test]
fn denials_echo_at_most_a_little_of_the_request() {
    let (_dir, gw) = start("");
    let t = root_token(&seed(1), &seed(2), &["docs:read:/project/**"], 1000, 3600).encode();
    let huge = "n".repeat(900_000);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "delegateos/authorize",
        "params": {"dct": t, "namespace": huge, "action": "read", "resource": "/project/a"}});
    let (status, answer) = gw.http("POST", "/rpc", body.to_string().as_bytes());
    assert_eq!(status, 200);
    assert!(answer.len() < 4096, "a {}-byte answer", answer.len());
    let r: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(error_type(&r), "invalid_resource");
}

/// Threat 5: revocations signed by keys nobody trusts.
#[test]
fn untrusted_revocations_are_refused_and_not_stored() {
    let (_dir, gw) = start("");
    let (root, alice, bob, stranger) = (seed(1), seed(2), seed(3), seed(66));
    let t0 = root_token(&root, &alice, &["docs:read:/project/**"], 1000, 3600);
    let t1 = attenuate(&t0, &alice, &bob, 2, None, None);
    let ids = t1.revocation_ids();
    let revoke = |by: &delegateos::Keypair, block: &str, dct: Option<&str>| {
        let rev = RevocationEntry::sign(by, block, at(0), RevocationScope::Block).unwrap();
        let mut params = json!({"revocation": rev});
        if let Some(d) = dct {
            params["dct"] = json!(d);
        }
        gw.call("delegateos/revoke", params)
    };
    for i in 0..30 {
        let junk = delegateos::base64url::encode(&[i; 32]);
        let r = revoke(&stranger, &junk, None);
        assert_eq!(error_type(&r), "untrusted_revoker", "{r}");
    }
    // A stranger with a token that does not carry the block, and bob
    // revoking alice's block above his own: both refused.
    let r = revoke(&stranger, &ids[0], Some(&t1.encode()));
    assert_eq!(error_type(&r), "untrusted_revoker", "{r}");
    let r = revoke(&bob, &ids[0], Some(&t1.encode()));
    assert_eq!(error_type(&r), "untrusted_revoker", "{r}");
    let m = gw.metrics();
    assert!(
        m.lines().any(|l| l == "dgw_revocations_total 0"),
        "nothing was recorded: {m}"
    );
    gw.ok(
        "delegateos/authorize",
        authorize(&t1.encode(), "/project/a", 1),
    );
    // Alice revokes her own attenuation, proving it with the token.
    let r = revoke(&alice, &ids[1], Some(&t1.encode()));
    assert_eq!(r["result"]["newlyRecorded"], true, "{r}");
    let e = gw.err(
        "delegateos/authorize",
        authorize(&t1.encode(), "/project/a", 1),
    );
    assert_eq!(e["data"]["type"], "revoked");
    // The root revokes anything without proof.
    let r = revoke(&root, &ids[0], None);
    assert_eq!(r["result"]["newlyRecorded"], true, "{r}");
}

/// Threat 8: a token from the future, or one that expires before it is issued.
#[test]
fn tokens_from_the_future_are_not_yet_valid() {
    let (_dir, gw) = start("");
    let root = seed(1);
    let future = delegateos::Dct::create(
        &root,
        delegateos::dct::CreateParams {
            delegatee: seed(2).principal_id().clone(),
            capabilities: vec!["docs:read:/project/**".parse().unwrap()],
            contract_id: ct(1),
            delegation_id: del(1),
            parent_delegation_id: delegateos::DelegationId::root_parent(),
            chain_depth: 0,
            max_chain_depth: 3,
            max_budget_microcents: 100,
            expires_at: at(7200),
            issued_at: at(3600),
        },
    )
    .unwrap();
    let e = gw.err(
        "delegateos/authorize",
        authorize(&future.encode(), "/project/a", 1),
    );
    assert_eq!(e["data"]["type"], "token_not_yet_valid", "{e}");
    // Within the 60 s skew it is accepted.
    let skewed = delegateos::Dct::create(
        &root,
        delegateos::dct::CreateParams {
            delegatee: seed(2).principal_id().clone(),
            capabilities: vec!["docs:read:/project/**".parse().unwrap()],
            contract_id: ct(1),
            delegation_id: del(2),
            parent_delegation_id: delegateos::DelegationId::root_parent(),
            chain_depth: 0,
            max_chain_depth: 3,
            max_budget_microcents: 100,
            expires_at: at(7200),
            issued_at: at(30),
        },
    )
    .unwrap();
    gw.ok(
        "delegateos/authorize",
        authorize(&skewed.encode(), "/project/a", 1),
    );
}

/// Threat 10: one credential fills the ledger with open reservations.
#[test]
fn open_reservations_are_capped_per_delegation() {
    let (_dir, gw) = start("[budget]\nmax_open_reservations = 5\n");
    let t = root_token(&seed(1), &seed(2), &["docs:read:/project/**"], 1000, 3600).encode();
    for _ in 0..5 {
        gw.ok("delegateos/authorize", authorize(&t, "/project/a", 1));
    }
    let e = gw.err("delegateos/authorize", authorize(&t, "/project/a", 1));
    assert_eq!(e["data"]["type"], "budget_exceeded", "{e}");
    assert!(
        e["data"]["detail"]
            .as_str()
            .unwrap()
            .contains("max_open_reservations"),
        "{e}"
    );
}

fn initialize(gw: &Gateway, headers: &[(&str, &str)]) -> HttpResponse {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    http_exchange(
        &gw.addr,
        "POST",
        "/mcp",
        headers,
        init.to_string().as_bytes(),
    )
}

fn session_of(response: &HttpResponse) -> String {
    response
        .1
        .iter()
        .find(|(k, _)| k == "mcp-session-id")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no session: {}", String::from_utf8_lossy(&response.2)))
}

fn body_type(response: &HttpResponse) -> String {
    let v: Value = serde_json::from_slice(&response.2).unwrap();
    v["error"]["data"]["type"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Threat 6: DNS rebinding. A page on another origin, or a request naming
/// another host, is refused before anything runs.
#[test]
fn foreign_origins_and_hosts_are_refused() {
    let (_dir, gw) = start("");
    let t = root_token(&seed(1), &seed(2), &["docs:read:/project/**"], 1000, 3600).encode();
    let dct = format!("DCT {t}");
    for path in ["/mcp", "/rpc"] {
        let r = http_exchange(
            &gw.addr,
            "POST",
            path,
            &[("Origin", "http://evil.example"), ("Authorization", &dct)],
            b"{}",
        );
        assert_eq!((r.0, body_type(&r).as_str()), (403, "origin_not_allowed"));
    }
    // A rebinding page's Host is its own name, not ours.
    use std::io::{Read, Write};
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "delegateos/authorize",
        "params": authorize(&t, "/project/a", 1)})
    .to_string();
    let mut s = std::net::TcpStream::connect(&gw.addr).unwrap();
    write!(
        s,
        "POST /rpc HTTP/1.1\r\nHost: evil.example\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("host_not_allowed"), "{answer}");
    let e = gw.err("delegateos/budget", json!({"delegationId": del(1)}));
    assert_eq!(e["data"]["type"], "not_found", "nothing was reserved");
    // Our own names and an allowed origin work.
    let mut s = std::net::TcpStream::connect(&gw.addr).unwrap();
    let port = gw.addr.rsplit(':').next().unwrap();
    write!(
        s,
        "POST /rpc HTTP/1.1\r\nHost: localhost:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let (_dir2, gw2) = start("allowed_origins = [\"https://console.example.com\"]\n");
    let r = initialize(
        &gw2,
        &[
            ("Origin", "https://console.example.com"),
            ("Authorization", &dct),
        ],
    );
    assert_eq!(r.0, 200, "{}", String::from_utf8_lossy(&r.2));
}

/// Alice's and Mallory's `Authorization` headers, and a session Alice opened.
fn alices_session(gw: &Gateway) -> (String, String, String) {
    let alice = root_token(&seed(1), &seed(2), &["docs:read:/project/**"], 1000, 3600).encode();
    let mallory =
        root_token_for(&seed(1), &seed(3), &["docs:read:/x/**"], 10, 3600, del(5)).encode();
    let (a, m) = (format!("DCT {alice}"), format!("DCT {mallory}"));
    let id = session_of(&initialize(gw, &[("Authorization", &a)]));
    (a, m, id)
}

/// Threat 5: anyone who learns a session ID ends it or uses it.
#[test]
fn an_mcp_session_is_bound_to_the_credential_that_opened_it() {
    let (_dir, gw) = start("");
    let (a, m, id) = alices_session(&gw);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    for headers in [
        vec![("Mcp-Session-Id", id.as_str())],
        vec![
            ("Mcp-Session-Id", id.as_str()),
            ("Authorization", m.as_str()),
        ],
    ] {
        let r = http_exchange(&gw.addr, "DELETE", "/mcp", &headers, b"");
        assert_eq!(r.0, 403);
        let r = http_exchange(&gw.addr, "POST", "/mcp", &headers, list.as_bytes());
        assert_eq!(
            (r.0, body_type(&r).as_str()),
            (403, "session_credential_mismatch")
        );
    }
    // Still alive for its owner, who ends it.
    let owner = [
        ("Mcp-Session-Id", id.as_str()),
        ("Authorization", a.as_str()),
    ];
    let r = http_exchange(&gw.addr, "POST", "/mcp", &owner, list.as_bytes());
    assert_eq!(r.0, 200, "{}", String::from_utf8_lossy(&r.2));
    assert_eq!(
        http_exchange(&gw.addr, "DELETE", "/mcp", &owner, b"").0,
        204
    );
}

/// Threat 5 again, on one keep-alive connection: the gateway remembers the
/// digest of the header a connection last presented (so as not to digest
/// the same header per request), and another header on the same connection
/// is still checked on its own.
#[test]
fn another_credential_on_the_same_connection_is_still_refused() {
    use std::io::{BufRead, BufReader, Read, Write};
    let (_dir, gw) = start("");
    let (a, m, id) = alices_session(&gw);
    let stream = std::net::TcpStream::connect(&gw.addr).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let mut ask = |authorization: Option<&str>| -> (u16, String) {
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
        let auth = authorization
            .map(|v| format!("Authorization: {v}\r\n"))
            .unwrap_or_default();
        write!(
            writer,
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nMcp-Session-Id: {id}\r\n{auth}Content-Length: {}\r\n\r\n{body}",
            gw.addr,
            body.len()
        )
        .unwrap();
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
        }
        let mut answer = vec![0; length];
        reader.read_exact(&mut answer).unwrap();
        let v: Value = serde_json::from_slice(&answer).unwrap();
        let code = status.split_whitespace().nth(1).unwrap().parse().unwrap();
        let kind = v["error"]["data"]["type"]
            .as_str()
            .unwrap_or("ok")
            .to_owned();
        (code, kind)
    };
    let refused = (403, "session_credential_mismatch".to_owned());
    assert_eq!(ask(Some(&a)), (200, "ok".into()));
    assert_eq!(ask(Some(&m)), refused);
    assert_eq!(ask(Some(&a)), (200, "ok".into()));
    assert_eq!(ask(None), refused);
    assert_eq!(
        ask(Some(&format!(" {a} "))),
        (200, "ok".into()),
        "the same credential"
    );
    assert_eq!(ask(Some(&m)), refused);
}

/// Threat 10: a flood of anonymous initializes locks every client out.
#[test]
fn anonymous_sessions_are_off_by_default_and_cannot_take_every_slot() {
    let (_dir, gw) = start("");
    let r = initialize(&gw, &[]);
    assert_eq!((r.0, body_type(&r).as_str()), (401, "credential_required"));

    let (_dir, gw) = start(
        "[mcp]\nanonymous_sessions = true\nmax_sessions = 50\nmax_sessions_per_credential = 3\nanonymous_session_ttl = \"1s\"\n",
    );
    // A tenth of the slots for anonymous sessions.
    for _ in 0..5 {
        session_of(&initialize(&gw, &[]));
    }
    let r = initialize(&gw, &[]);
    assert_eq!((r.0, body_type(&r).as_str()), (503, "too_many_sessions"));
    // A credential still gets in, up to its own limit.
    let t = root_token(&seed(1), &seed(2), &["docs:read:/project/**"], 1000, 3600).encode();
    let dct = format!("DCT {t}");
    for _ in 0..3 {
        session_of(&initialize(&gw, &[("Authorization", &dct)]));
    }
    let r = initialize(&gw, &[("Authorization", &dct)]);
    assert_eq!((r.0, body_type(&r).as_str()), (429, "too_many_sessions"));
    // Anonymous sessions idle out after their short TTL.
    std::thread::sleep(std::time::Duration::from_millis(1300));
    session_of(&initialize(&gw, &[]));
    // A credential that could never authorize anything opens nothing.
    let r = initialize(&gw, &[("Authorization", "DCT garbage")]);
    assert_eq!(r.0, 200);
    assert!(r.1.iter().all(|(k, _)| k != "mcp-session-id"));
    assert_eq!(body_type(&r), "malformed_token");
}

/// Threat 3: symlinks lead out of a resource grant. With `resolve_path`,
/// the real filesystem server behind dgw never sees a path outside the
/// grant, whatever links lie on the way.
#[test]
fn links_never_lead_out_of_a_grant_with_resolve_path() {
    use std::os::unix::fs::symlink;
    use support::mcp::*;
    let files = Files::new();
    std::fs::write(files.root.join("secret.txt"), "top secret\n").unwrap();
    symlink("../secret.txt", files.root.join("sub/link")).unwrap();
    symlink("..", files.root.join("sub/dirlink")).unwrap();
    symlink("b.txt", files.root.join("sub/inside")).unwrap();
    let toml = files
        .upstream_toml()
        .replace(
            "resource = \"/path\"\n",
            "resource = \"/path\"\nresolve_path = true\n",
        )
        .replace(
            "resource = \"/paths\"\n",
            "resource = \"/paths\"\nresolve_path = true\n",
        );
    assert_eq!(toml.matches("resolve_path = true").count(), 3, "{toml}");
    let root = seed(1);
    let config = mcp_gateway_config(&files.dir, &[("acme", root.principal_id())], &toml);
    let gw = Gateway::start(&config);
    let sub = files.path("sub");
    let read = format!("docs:read:{sub}/**");
    let write = format!("docs:write:{sub}/**");
    let token = root_token(
        &root,
        &seed(2),
        &[read.as_str(), write.as_str()],
        10_000,
        3600,
    )
    .encode();
    let mut mcp = McpHttp::connect(&gw.addr, Some(&token));

    let through_link = mcp.call(
        "read_text_file",
        json!({"path": files.path("sub/link")}),
        None,
    );
    assert_eq!(
        denial_type(&through_link),
        "capability_not_granted",
        "{through_link}"
    );
    assert_eq!(
        through_link["error"]["data"]["requested"]["resource"],
        files.path("secret.txt"),
        "the resolved path is what was checked"
    );
    let through_dir = mcp.call(
        "read_multiple_files",
        json!({"paths": [files.path("sub/b.txt"), files.path("sub/dirlink/secret.txt")]}),
        None,
    );
    assert_eq!(denial_type(&through_dir), "capability_not_granted");
    let write_out = mcp.call(
        "write_file",
        json!({"path": files.path("sub/dirlink/planted.txt"), "content": "x"}),
        None,
    );
    assert_eq!(denial_type(&write_out), "capability_not_granted");
    assert!(!files.root.join("planted.txt").exists());
    assert!(
        files.upstream_calls().is_empty(),
        "nothing reached the upstream"
    );

    // A link that stays inside the grant works, and the upstream is given
    // the resolved path, not the link.
    let inside = mcp.call(
        "read_text_file",
        json!({"path": files.path("sub/inside")}),
        None,
    );
    assert_eq!(text_of(&inside), "hello from b\n");
    // A file created through a link-free path inside the grant.
    let created = mcp.call(
        "write_file",
        json!({"path": files.path("sub/new.txt"), "content": "fresh"}),
        None,
    );
    assert!(created.get("result").is_some(), "{created}");
    let calls = files.upstream_calls();
    assert_eq!(calls[0]["arguments"]["path"], files.path("sub/b.txt"));
    assert_eq!(calls.len(), 2);
    // A link created after that, out of the grant, is refused on the next call.
    std::fs::remove_file(files.root.join("sub/new.txt")).unwrap();
    symlink("../secret.txt", files.root.join("sub/new.txt")).unwrap();
    let swapped = mcp.call(
        "read_text_file",
        json!({"path": files.path("sub/new.txt")}),
        None,
    );
    assert_eq!(denial_type(&swapped), "capability_not_granted");
    assert_eq!(files.upstream_calls().len(), 2);
}

/// Threat 10: one client takes a shared stdio upstream down for everyone
/// (a reply over the limit used to restart the child), or floods dgw's
/// memory through the upstream's stderr.
#[test]
fn an_oversized_reply_fails_one_call_and_stderr_is_bounded() {
    use support::mcp::*;
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let echo = tests_dir().join("mcp/echo-server.mjs");
    let rules = "[[upstreams.tools]]\nname = \"*\"\ncapability = \"demo:call\"\nfixed_resource = \"/echo\"\ncost_microcents = 1\n";
    let extra = format!("[[upstreams]]\nname = \"local\"\ncommand = [\"node\", {echo:?}]\n{rules}");
    let config = mcp_gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let gw = Gateway::start(&config);
    let token = root_token(&root, &seed(2), &["demo:call:*"], 1_000_000, 3600).encode();
    let mut a = McpHttp::connect(&gw.addr, Some(&token));
    let mut b = McpHttp::connect(&gw.addr, Some(&token));
    let count = |c: &mut McpHttp| text_of(&c.call("count", json!({}), None));
    let before: u64 = count(&mut b).parse().unwrap();

    let big = a.call("big", json!({"bytes": 17 << 20}), None);
    assert_eq!(
        big["error"]["data"]["type"],
        "upstream_reply_too_large",
        "{}",
        &big.to_string()[..200.min(big.to_string().len())]
    );
    // The child lives on (its own call counter kept counting) and serves
    // every session.
    assert_eq!(
        text_of(&b.call("echo", json!({"text": "still here"}), None)),
        "still here"
    );
    let after: u64 = count(&mut a).parse().unwrap();
    assert_eq!(after, before + 3, "the same process served them all");

    let rss_before = gw.rss_kib();
    let shouted = b.call("shout", json!({"bytes": 200 << 20}), None);
    assert_eq!(text_of(&shouted), "shouted");
    // The logger drains the pipe on its own task: wait for it to count
    // the whole line.
    let dropped = || {
        gw.metrics()
            .lines()
            .find(|l| l.starts_with("dgw_mcp_upstream_stderr_dropped_bytes_total"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while dropped() < (200 << 20) as f64 - 8192.0 {
        assert!(
            std::time::Instant::now() < deadline,
            "only {} bytes counted",
            dropped()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let grown_mib = gw.rss_kib().saturating_sub(rss_before) / 1024;
    assert!(
        grown_mib < 64,
        "dgw grew {grown_mib} MiB reading 200 MiB of stderr"
    );
}

/// Threat 7: slowloris and descriptor exhaustion. With 1,024 descriptors,
/// 1,100 idle sockets and a client sending its headers a byte at a time,
/// `/healthz` and an authorization still answer: idle connections are shed
/// to make room, slow heads are cut at `header_read_timeout`, and idle ones
/// end at `idle_timeout`.
#[test]
fn idle_sockets_and_slow_headers_never_lock_clients_out() {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    // This test's own process needs room for 1,100 sockets too.
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    rustix::process::setrlimit(
        rustix::process::Resource::Nofile,
        rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        },
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = gateway_config(
        dir.path(),
        &[("acme", seed(1).principal_id())],
        "header_read_timeout = \"1s\"\nidle_timeout = \"4s\"\n",
    );
    let gw = Gateway::start_with_descriptors(&config, 1024);
    let t = root_token(&seed(1), &seed(2), &["docs:read:/project/**"], 1000, 3600).encode();

    // Paced, so the kernel's accept queue (often 128) never overflows and
    // every socket really reaches dgw.
    let mut idle = Vec::new();
    for i in 0..1100 {
        idle.push(std::net::TcpStream::connect(&gw.addr).unwrap());
        if i % 50 == 49 {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let slow_started = Instant::now();
    let slow = {
        let addr = gw.addr.clone();
        std::thread::spawn(move || {
            let mut s = std::net::TcpStream::connect(&addr).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            let head = format!("POST /rpc HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ");
            let mut sent = 0;
            for byte in head.bytes().chain(std::iter::repeat(b'a')) {
                if s.write_all(&[byte]).is_err() {
                    break;
                }
                sent += 1;
                let mut buf = [0u8; 64];
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => break,
                    Err(e)
                        if e.kind() == std::io::ErrorKind::WouldBlock
                            || e.kind() == std::io::ErrorKind::TimedOut => {}
                    Err(_) => break,
                }
                if sent > 200 {
                    break;
                }
            }
            sent
        })
    };
    std::thread::sleep(Duration::from_millis(200));

    // Answered within a second, though every descriptor was taken.
    let answered = |path: &str, body: &[u8]| {
        let started = Instant::now();
        let mut s = std::net::TcpStream::connect(&gw.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let method = if body.is_empty() { "GET" } else { "POST" };
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            gw.addr,
            body.len()
        )
        .unwrap();
        s.write_all(body).unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer)
            .unwrap_or_else(|e| panic!("{path} not answered: {e}"));
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{path} took {:?}",
            started.elapsed()
        );
        answer
    };
    let health = answered("/healthz", b"");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "delegateos/authorize",
        "params": authorize(&t, "/project/a", 1)})
    .to_string();
    let auth = answered("/rpc", body.as_bytes());
    assert!(auth.contains("\"allowed\":true"), "{auth}");

    // The slow head was cut near header_read_timeout, not left open.
    let sent = slow.join().unwrap();
    assert!(
        sent < 200,
        "the slow client sent {sent} bytes without being cut off"
    );
    assert!(slow_started.elapsed() < Duration::from_secs(5));

    // After idle_timeout every idle socket has been closed by dgw.
    std::thread::sleep(Duration::from_millis(4500));
    let mut closed = 0;
    for s in &mut idle {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut buf = [0u8; 1];
        if matches!(s.read(&mut buf), Ok(0) | Err(_)) {
            closed += 1;
        }
    }
    assert_eq!(closed, idle.len());
    // And once idle_timeout has passed, answers come as fast.
    let health = answered("/healthz", b"");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let auth = answered("/rpc", body.as_bytes());
    assert!(auth.contains("\"allowed\":true"), "{auth}");
    let m = gw.metrics();
    assert!(
        m.lines()
            .any(|l| l.starts_with("dgw_connections_shed_total ") && !l.ends_with(" 0")),
        "{m}"
    );
}

/// Threat 10: zero-cost authorizations used to hold a reservation each,
/// without limit; now they hold nothing.
#[test]
fn zero_cost_authorizations_hold_nothing() {
    let (_dir, gw) = start("");
    let t = root_token(&seed(1), &seed(2), &["docs:read:/project/**"], 1000, 3600).encode();
    for _ in 0..50 {
        let a = gw.ok("delegateos/authorize", authorize(&t, "/project/a", 0));
        assert_eq!(a["allowed"], true);
        assert!(a.get("reservationId").is_none(), "{a}");
    }
    let open = gw
        .metrics()
        .lines()
        .find(|l| l.starts_with("dgw_reservations_open"))
        .map(str::to_owned)
        .unwrap_or_default();
    assert!(open.is_empty() || open.ends_with(" 0"), "{open}");
    // A denied zero-cost request is still denied.
    let e = gw.err("delegateos/authorize", authorize(&t, "/etc/passwd", 0));
    assert_eq!(e["data"]["type"], "capability_not_granted");
}

/// Threat 10: an upstream's tool named like another (a Cyrillic look-alike
/// of `read_secret`, or `files__read` with dgw's separator) is never
/// offered nor callable, though a `*` rule would match it.
#[test]
fn look_alike_and_separator_tool_names_are_dropped() {
    use support::mcp::*;
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let echo = tests_dir().join("mcp/echo-server.mjs");
    let rules = "[[upstreams.tools]]\nname = \"*\"\ncapability = \"demo:call\"\nfixed_resource = \"/echo\"\n";
    let extra = format!(
        "[[upstreams]]\nname = \"local\"\ncommand = [\"node\", {echo:?}, \"--odd-names\"]\n{rules}"
    );
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let gw = Gateway::start(&config);
    let token = root_token(&root, &seed(2), &["demo:call:*"], 1000, 3600).encode();
    let mut mcp = McpHttp::connect(&gw.addr, Some(&token));
    let names = mcp.tool_names(None);
    assert!(names.contains(&"echo".to_owned()), "{names:?}");
    for odd in ["r\u{435}ad_secret", "files__read"] {
        assert!(!names.contains(&odd.to_owned()), "{odd} is offered");
        let r = mcp.call(odd, json!({}), None);
        assert_eq!(r["error"]["data"]["type"], "unknown_tool", "{r}");
    }
    let log = std::fs::read_to_string(&gw.stderr_log).unwrap();
    assert!(log.contains("dropping a tool"), "the drop is logged");
}

/// Threat 9: an upstream's error tells where its files live.
#[test]
fn upstream_errors_do_not_reveal_local_paths() {
    use support::mcp::*;
    let files = Files::new();
    let root = seed(1);
    let config = mcp_gateway_config(
        &files.dir,
        &[("acme", root.principal_id())],
        &files.upstream_toml(),
    );
    let gw = Gateway::start(&config);
    // Granted everywhere, so the call reaches the server, which refuses a
    // path outside its own directory and names that directory.
    let token = root_token(&root, &seed(2), &["docs:read:/**"], 1000, 3600).encode();
    let mut mcp = McpHttp::connect(&gw.addr, Some(&token));
    let r = mcp.call("read_text_file", json!({"path": "/etc/hostname"}), None);
    let text = r.to_string();
    assert_eq!(
        files.upstream_calls().len(),
        1,
        "the call reached the upstream"
    );
    assert!(
        !text.contains(files.root.to_str().unwrap()),
        "the server's root leaked: {text}"
    );
    assert!(text.contains("<path>"), "{text}");
    assert!(
        text.contains("/etc/hostname"),
        "the caller's own path stays: {text}"
    );
}

/// A stolen agent key: an administrator revokes the agent's block without
/// the signer's key; callers without a secret may not, even on loopback.
#[test]
fn an_admin_revokes_a_block_without_its_signers_key() {
    let (dir, mut gw) = start(&admin_config());
    let t0 = root_token(&seed(1), &seed(2), &["docs:read:/project/**"], 1000, 3600);
    let t1 = attenuate(&t0, &seed(2), &seed(3), 2, None, None);
    let block = &t1.revocation_ids()[1];
    let e = gw.err("dgw/revoke", json!({"revocationId": block}));
    assert_eq!(e["data"]["type"], "admin_required");
    gw.ok(
        "delegateos/authorize",
        authorize(&t1.encode(), "/project/a", 1),
    );
    let (_, r) = gw.call_as(&admin(), "dgw/revoke", json!({"revocationId": block}));
    assert_eq!(r["result"]["newlyRecorded"], true, "{r}");
    let e = gw.err(
        "delegateos/authorize",
        authorize(&t1.encode(), "/project/a", 1),
    );
    assert_eq!(e["data"]["type"], "revoked");
    // The parent token, which does not carry the block, still works.
    gw.ok(
        "delegateos/authorize",
        authorize(&t0.encode(), "/project/a", 1),
    );
    let (_, bad) = gw.call_as(&admin(), "dgw/revoke", json!({"revocationId": "nope"}));
    assert_eq!(error_type(&bad), "invalid_params", "{bad}");
    // Durable: still revoked after a restart.
    assert!(gw.terminate().success());
    let gw = Gateway::start(&gw.config);
    let e = gw.err(
        "delegateos/authorize",
        authorize(&t1.encode(), "/project/a", 1),
    );
    assert_eq!(e["data"]["type"], "revoked");
    let _ = dir;
}

/// Talos revocations: issuer-signed from anyone, unsigned only from an
/// administrator with a secret.
#[test]
fn unsigned_talos_revocations_need_an_admin_secret() {
    let (_dir, gw) = start(&admin_config());
    let params = json!({"revoke": "cap_00112233445566778899aabb"});
    let e = gw.err("talos/revoke", params.clone());
    assert_eq!(e["data"]["type"], "admin_required");
    let (_, r) = gw.call_as(&admin(), "talos/revoke", params);
    assert_eq!(r["result"]["newlyRecorded"], true, "{r}");
    let (_, bad) = gw.call_as(&admin(), "talos/revoke", json!({"revoke": "nope"}));
    assert_eq!(error_type(&bad), "invalid_params");
    let (_, audit) = gw.call_as(&admin(), "dgw/audit", json!({}));
    let events = audit["result"]["events"].as_array().unwrap();
    assert!(
        events.iter().any(|e| e["agent_id"] == "admin:token:ops"),
        "the revocation is audited with its admin: {audit}"
    );
}
