//! dgw as an OAuth 2.1 authorization server, client credentials (issue
//! 35, slice 2 in part; docs/oauth.md): `[[oauth.clients]]` get DCTs at
//! `POST /oauth/token`, each an attenuation of the client's one
//! per-subject delegation of the tenant's issuing delegation, so every
//! token it asks for shares one budget; tokens verify offline against the
//! tenant root; every hostile request gets its RFC 6749 error and nothing.

// Integration tests: a failed unwrap is the test failing loudly, and
// clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]
mod support;

use serde_json::{json, Value};
use support::mcp::secret_file;
use support::oauth::{issuing_delegation, token_request, ADMIN, FORM, PUBLIC, SECRET};
use support::*;

struct Site {
    dir: tempfile::TempDir,
    gw: Gateway,
    root: delegateos::Keypair,
}

/// Tenant `acme` (root seed 1) gave the gateway (seed 9) an issuing
/// delegation for `docs:*:/p/**`, 100,000 microcents, an hour; client
/// `agent` may have `docs:read:/p/**`, 50 microcents per day.
fn site() -> Site {
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let (gateway_key, issuing) = issuing_delegation(dir.path(), &root, &["docs:*:/p/**"]);
    let secret = secret_file(dir.path(), "agent.secret", SECRET, 0o600);
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {data:?}\nkey_file = {gateway_key:?}\n[server]\nhttp = \"127.0.0.1:0\"\n\
             [[tenants]]\nname = \"acme\"\nroot = \"{root}\"\nissuing_delegation_file = {issuing:?}\n\
             [[admin.tokens]]\nname = \"ops\"\nsha256 = \"{admin}\"\n\
             [oauth]\npublic_url = \"{PUBLIC}\"\naccess_token_ttl = \"10m\"\n\
             [[oauth.clients]]\nclient_id = \"agent\"\nsecret_file = {secret:?}\ntenant = \"acme\"\n\
             capabilities = [\"docs:read:/p/**\"]\nbudget_microcents = 50\nttl = \"1h\"\nsubject_budget_period = \"1d\"\n",
            data = dir.path().join("data"),
            root = root.principal_id(),
            admin = support::oauth::sha256_hex(ADMIN),
        ),
    )
    .unwrap();
    let gw = Gateway::start(&config);
    Site { dir, gw, root }
}

fn token(gw: &Gateway, body: &str) -> String {
    let (status, head, answer) = token_request(gw, FORM, Some(("agent", SECRET)), body);
    assert_eq!(status, 200, "{answer}");
    assert!(head.contains("cache-control: no-store"), "{head}");
    assert_eq!(answer["token_type"], "Bearer", "{answer}");
    answer["access_token"].as_str().unwrap().to_owned()
}

/// `dgw/authorize` of `docs:read:<resource>` for `cost` with `token`.
fn authorize(gw: &Gateway, token: &str, resource: &str, cost: u64) -> Value {
    let (status, answer) = gw.call_as(
        &format!("Bearer {token}"),
        "dgw/authorize",
        json!({"namespace": "docs", "action": "read", "resource": resource, "costMicrocents": cost}),
    );
    // Under [oauth]: 403 too narrow, 401 no longer good (revoked).
    assert!([200, 401, 403].contains(&status), "{answer}");
    answer
}

#[test]
fn client_credentials_tokens_share_one_subject_budget_and_verify_offline() {
    let s = site();
    let (status, h, bytes) = http_exchange(
        &s.gw.addr,
        "GET",
        "/.well-known/oauth-authorization-server",
        &[],
        b"",
    );
    assert_eq!(status, 200);
    let m: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(m["issuer"], PUBLIC, "{m}");
    assert_eq!(m["token_endpoint"], format!("{PUBLIC}/oauth/token"), "{m}");
    assert_eq!(
        m["grant_types_supported"],
        json!(["client_credentials"]),
        "{m}"
    );
    assert!(h
        .iter()
        .any(|(k, v)| k == "access-control-allow-origin" && v == "*"));

    let (status, _, first) = token_request(
        &s.gw,
        FORM,
        Some(("agent", SECRET)),
        "grant_type=client_credentials",
    );
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["scope"], "docs:read:/p/**", "{first}");
    let expires_in = first["expires_in"].as_u64().unwrap();
    assert!(
        (500..=600).contains(&expires_in),
        "access_token_ttl bounds it: {first}"
    );
    let first = first["access_token"].as_str().unwrap().to_owned();

    // Offline, against the tenant root alone.
    let out = run(&[
        "token",
        "verify",
        "--root",
        &s.root.principal_id().to_string(),
        "--namespace",
        "docs",
        "--action",
        "read",
        "--resource",
        "/p/a.txt",
        "--json",
        &first,
    ]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("\"valid\":true") || stdout(&out).contains("\"valid\": true"),
        "{}",
        stdout(&out)
    );

    // 30 of the 50 with the first token; a second token (client_secret_post,
    // narrowed by scope) is of the same subject delegation: 30 more does not fit.
    let a = authorize(&s.gw, &first, "/p/a.txt", 30);
    assert!(a["result"]["reservationId"].is_string(), "{a}");
    let body = format!("grant_type=client_credentials&client_id=agent&client_secret={SECRET}&scope=docs%3Aread%3A%2Fp%2Fb%2F**&resource=https%3A%2F%2Fdgw.example%2Fmcp");
    let (status, _, second) = token_request(&s.gw, FORM, None, &body);
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["scope"], "docs:read:/p/b/**", "{second}");
    let second = second["access_token"].as_str().unwrap().to_owned();
    assert_ne!(first, second);
    let b = authorize(&s.gw, &second, "/p/b/x", 30);
    assert_eq!(b["error"]["data"]["type"], "budget_exceeded", "{b}");
    // Again and again: still the one budget.
    for _ in 0..3 {
        let again = token(&s.gw, "grant_type=client_credentials");
        let c = authorize(&s.gw, &again, "/p/c", 21);
        assert_eq!(c["error"]["data"]["type"], "budget_exceeded", "{c}");
    }
    let fits = authorize(&s.gw, &second, "/p/b/x", 20);
    assert!(fits["result"]["reservationId"].is_string(), "{fits}");
    // The scope narrowed the second token.
    let narrow = authorize(&s.gw, &second, "/p/a.txt", 0);
    assert_eq!(
        narrow["error"]["data"]["type"], "capability_not_granted",
        "{narrow}"
    );
    // Five tokens issued, each counted under its grant.
    let line = "dgw_oauth_tokens_issued_total{grant=\"client_credentials\",idp=\"-\"} 5";
    assert!(s.gw.metrics().lines().any(|l| l == line), "{line}");
    drop(s.dir);
}

#[test]
fn hostile_token_requests_get_their_rfc_error_and_nothing_is_issued() {
    let s = site();
    let cc = "grant_type=client_credentials";
    for (content_type, basic, body, status, error) in [
        (
            FORM,
            Some(("agent", "wrong-secret-wrong-secret")),
            cc,
            401,
            "invalid_client",
        ),
        (FORM, Some(("nobody", SECRET)), cc, 401, "invalid_client"),
        (
            FORM,
            None,
            "grant_type=client_credentials&client_id=agent&client_secret=nope",
            401,
            "invalid_client",
        ),
        (FORM, None, cc, 401, "invalid_client"),
        (
            FORM,
            Some(("agent", SECRET)),
            "grant_type=password&username=a&password=b",
            400,
            "unsupported_grant_type",
        ),
        (
            FORM,
            Some(("agent", SECRET)),
            "scope=docs%3Aread%3A%2Fp%2F**",
            400,
            "invalid_request",
        ),
        (
            FORM,
            Some(("agent", SECRET)),
            "grant_type=client_credentials&grant_type=client_credentials",
            400,
            "invalid_request",
        ),
        (
            "application/json",
            Some(("agent", SECRET)),
            cc,
            400,
            "invalid_request",
        ),
        (
            FORM,
            Some(("agent", SECRET)),
            "grant_type=client_credentials&client_secret=x&client_id=agent",
            400,
            "invalid_request",
        ),
        (
            FORM,
            Some(("agent", SECRET)),
            "grant_type=client_credentials&scope=docs%3Aread%3A%2Fetc%2F**",
            400,
            "invalid_scope",
        ),
        (
            FORM,
            Some(("agent", SECRET)),
            "grant_type=client_credentials&scope=docs%3Awrite%3A%2Fp%2F**",
            400,
            "invalid_scope",
        ),
        (
            FORM,
            Some(("agent", SECRET)),
            "grant_type=client_credentials&scope=not-a-capability",
            400,
            "invalid_scope",
        ),
        (
            FORM,
            Some(("agent", SECRET)),
            "grant_type=client_credentials&resource=https%3A%2F%2Fother.example",
            400,
            "invalid_target",
        ),
    ] {
        let (got, head, answer) = token_request(&s.gw, content_type, basic, body);
        assert_eq!(
            (got, answer["error"].as_str()),
            (status, Some(error)),
            "{body}: {answer}"
        );
        assert!(answer.get("access_token").is_none(), "{answer}");
        if basic.is_some() && error == "invalid_client" {
            assert!(head.contains("www-authenticate: basic"), "{head}");
        }
        // The secret is never echoed.
        assert!(!answer.to_string().contains(SECRET), "{answer}");
    }
    // Every refusal counted by its reason, nothing issued.
    let metrics = s.gw.metrics();
    let count = |series: &str| -> u64 {
        metrics
            .lines()
            .find(|l| l.starts_with(series))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{series} missing:\n{metrics}")) as u64
    };
    assert_eq!(
        count("dgw_oauth_token_denials_total{reason=\"invalid_client\"}"),
        4
    );
    assert_eq!(
        count("dgw_oauth_token_denials_total{reason=\"invalid_scope\"}"),
        3
    );
    assert_eq!(
        count("dgw_oauth_token_denials_total{reason=\"invalid_grant\"}"),
        0
    );
    assert_eq!(
        count("dgw_oauth_tokens_issued_total{grant=\"client_credentials\",idp=\"-\"}"),
        0
    );
    // Nothing was issued or charged: the whole budget is still there.
    let t = token(&s.gw, cc);
    let a = authorize(&s.gw, &t, "/p/a.txt", 50);
    assert!(a["result"]["reservationId"].is_string(), "{a}");
}

#[test]
fn a_revoked_subject_loses_every_token_and_gets_no_new_budget() {
    let s = site();
    let first = token(&s.gw, "grant_type=client_credentials");
    let second = token(&s.gw, "grant_type=client_credentials");
    let a = authorize(&s.gw, &first, "/p/a.txt", 1);
    assert!(a["result"]["reservationId"].is_string(), "{a}");

    // Only an administrator with a secret revokes a subject.
    let rpc = format!("http://{}/rpc", s.gw.addr);
    let out = run(&[
        "oauth",
        "revoke",
        "--tenant",
        "acme",
        "--subject",
        "client/agent",
        "--via",
        &rpc,
    ]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(stderr(&out).contains("admin_required"), "{}", stderr(&out));
    let admin = secret_file(s.dir.path(), "admin.secret", ADMIN, 0o600);
    let admin = admin.to_str().unwrap();
    let out = run(&[
        "oauth",
        "revoke",
        "--tenant",
        "acme",
        "--subject",
        "client/nobody",
        "--via",
        &rpc,
        "--admin-token-file",
        admin,
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("subject_not_found"),
        "{}",
        stderr(&out)
    );
    let out = run(&[
        "oauth",
        "revoke",
        "--tenant",
        "acme",
        "--subject",
        "client/agent",
        "--via",
        &rpc,
        "--admin-token-file",
        admin,
    ]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("\"newlyRecorded\""),
        "{}",
        stdout(&out)
    );

    // Both old tokens end; asking again mints nothing.
    for old in [&first, &second] {
        let d = authorize(&s.gw, old, "/p/a.txt", 1);
        assert_eq!(d["error"]["data"]["type"], "revoked", "{d}");
    }
    let (status, _, answer) = token_request(
        &s.gw,
        FORM,
        Some(("agent", SECRET)),
        "grant_type=client_credentials",
    );
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("access_denied")),
        "{answer}"
    );
}

#[test]
fn the_token_endpoint_is_rate_limited_per_client_and_per_source() {
    let s = site();
    let cc = "grant_type=client_credentials";
    // 60 a minute for the authenticated client…
    for n in 0..60 {
        let (status, _, answer) = token_request(&s.gw, FORM, Some(("agent", SECRET)), cc);
        assert_eq!(status, 200, "request {n}: {answer}");
    }
    let (status, head, answer) = token_request(&s.gw, FORM, Some(("agent", SECRET)), cc);
    assert_eq!(status, 429, "{answer}");
    assert_eq!(answer["error"], "temporarily_unavailable", "{answer}");
    assert!(head.contains("retry-after: 60"), "{head}");
    assert!(answer.get("access_token").is_none());
    // …and 120 a minute from one source, whoever it claims to be: guessing
    // secrets stops there too.
    for n in 61..120 {
        let (status, _, answer) =
            token_request(&s.gw, FORM, Some(("agent", &format!("guess-{n}"))), cc);
        assert_eq!(status, 401, "request {n}: {answer}");
    }
    let (status, _, answer) = token_request(&s.gw, FORM, Some(("agent", "guess-x")), cc);
    assert_eq!(
        (status, answer["error"].as_str()),
        (429, Some("temporarily_unavailable")),
        "{answer}"
    );
}
