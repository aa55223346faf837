//! Tokens from an enterprise identity provider become DCTs (issue 35;
//! docs/oauth.md): token exchange (RFC 8693) of the real `oidc-provider`'s
//! ID tokens and JWT access tokens, the JWT bearer grant with an ID-JAG,
//! and `private_key_jwt` client authentication. Each DCT attenuates its
//! subject's one delegation, calls a tool charged to it, and verifies
//! offline against the tenant root; every hostile token or request gets
//! its RFC error, and nothing is issued.

// Integration tests: a failed unwrap is the test failing loudly, and
// clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]
mod support;

use serde_json::{json, Value};
use support::mcp::{
    echo_server_on_port, secret_file, spawn_listening, tests_dir, text_of, Killed, McpHttp,
};
use support::oauth::{issuing_delegation, sha256_hex, token_request, ADMIN, FORM, PUBLIC, SECRET};
use support::*;

const EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";
const JWT: &str = "urn:ietf:params:oauth:token-type:jwt";
const ASSERTION: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// The identity provider (its process and issuer), an echo upstream, and
/// a gateway trusting the provider: tenant `acme` (root seed 1) gave the
/// gateway (seed 9) `demo:*:*`; the `engineering` group may have
/// `demo:echo:*`, 25 microcents per subject (a call costs 10). Client
/// `agent` has a secret, client `signer` the provider's client key.
struct Site {
    dir: tempfile::TempDir,
    _idp: Killed,
    _echo: Killed,
    idp: String,
    gw: Gateway,
    root: delegateos::Keypair,
}

fn site() -> Site {
    let dir = tempfile::tempdir().unwrap();
    let mut command = std::process::Command::new("node");
    command
        .arg(tests_dir().join("mcp/oidc-idp.mjs"))
        .arg(PUBLIC)
        .stderr(std::process::Stdio::null());
    let (idp_process, port) = spawn_listening(command, "oidc-idp listening port=");
    let idp = format!("http://127.0.0.1:{port}");
    let (echo, echo_port) = echo_server_on_port(&[]);
    let root = seed(1);
    let (gateway_key, issuing) = issuing_delegation(dir.path(), &root, &["demo:*:*"]);
    let secret = secret_file(dir.path(), "agent.secret", SECRET, 0o600);
    let (_, _, client_jwks) = http_exchange(
        &idp.replace("http://", ""),
        "GET",
        "/__client_jwks",
        &[],
        b"",
    );
    let client_jwks: Value = serde_json::from_slice(&client_jwks).unwrap();
    let key = &client_jwks["keys"][0];
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            r#"data_dir = {data:?}
key_file = {gateway_key:?}
[server]
http = "127.0.0.1:0"
[[tenants]]
name = "acme"
root = "{root}"
issuing_delegation_file = {issuing:?}
[[admin.tokens]]
name = "ops"
sha256 = "{admin}"
[[upstreams]]
name = "web"
url = "http://127.0.0.1:{echo_port}/mcp"
[[upstreams.tools]]
name = "echo"
capability = "demo:echo"
resource = "/text"
cost_microcents = 10
[oauth]
public_url = "{PUBLIC}"
access_token_ttl = "10m"
[[oauth.identity_providers]]
name = "corp"
issuer = "{idp}"
audience = "dgw"
tenant = "acme"
[[oauth.identity_providers.grants]]
claims = {{ groups = "engineering" }}
capabilities = ["demo:echo:*"]
budget_microcents = 25
ttl = "1h"
subject_budget_period = "1d"
[[oauth.clients]]
client_id = "agent"
secret_file = {secret:?}
tenant = "acme"
capabilities = ["demo:echo:*"]
budget_microcents = 10
ttl = "1h"
subject_budget_period = "1d"
[[oauth.clients]]
client_id = "signer"
jwks = {{ keys = [{{ kty = "EC", crv = "P-256", x = {x}, y = {y}, kid = "client-1", alg = "ES256", use = "sig" }}] }}
tenant = "acme"
capabilities = ["demo:echo:*"]
budget_microcents = 10
ttl = "1h"
subject_budget_period = "1d"
"#,
            data = dir.path().join("data"),
            root = root.principal_id(),
            admin = sha256_hex(ADMIN),
            x = key["x"],
            y = key["y"],
        ),
    )
    .unwrap();
    let gw = Gateway::start(&config);
    Site {
        dir,
        _idp: idp_process,
        _echo: echo,
        idp,
        gw,
        root,
    }
}

impl Site {
    fn idp_get(&self, path: &str) -> Value {
        let (status, _, body) =
            http_exchange(&self.idp.replace("http://", ""), "GET", path, &[], b"");
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).unwrap()
    }

    /// The provider's ID token for `user` (its code flow, run by it).
    fn id_token(&self, user: &str) -> String {
        self.idp_get(&format!("/__id_token?sub={user}&nonce=n-{user}"))["id_token"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// A JWT access token the provider issued client `robot` for dgw.
    fn access_token(&self) -> String {
        self.idp_get("/__access_token?client=robot")["access_token"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// A JWT signed with `key` (see tests/mcp/oidc-idp.mjs).
    fn sign(&self, key: &str, header: Value, claims: Value) -> String {
        let body = json!({"key": key, "header": header, "claims": claims}).to_string();
        let (status, _, answer) = http_exchange(
            &self.idp.replace("http://", ""),
            "POST",
            "/__sign",
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        );
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
        let v: Value = serde_json::from_slice(&answer).unwrap();
        v["jwt"].as_str().unwrap().to_owned()
    }

    /// ID-JAG claims for `user`, for client `agent`, valid now.
    fn jag_claims(&self, user: &str, jti: &str) -> Value {
        let now = now();
        json!({"iss": self.idp, "sub": user, "aud": PUBLIC, "client_id": "agent", "jti": jti,
               "iat": now, "exp": now + 120, "groups": ["engineering"], "resource": format!("{PUBLIC}/mcp")})
    }

    fn jag(&self, user: &str, jti: &str) -> String {
        self.sign(
            "idp",
            json!({"typ": "oauth-id-jag+jwt", "kid": "idp-1"}),
            self.jag_claims(user, jti),
        )
    }

    /// The audit log's `kind` records, once at least `n` are written.
    fn trail(&self, kind: &str, n: usize) -> Vec<Value> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let found: Vec<Value> = support::audit::records(&self.dir.path().join("data/audit"))
                .into_iter()
                .map(|r| r.event)
                .filter(|e| e["event"] == kind)
                .collect();
            if found.len() >= n || std::time::Instant::now() > deadline {
                return found;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    fn metric(&self, series: &str) -> u64 {
        let metrics = self.gw.metrics();
        metrics
            .lines()
            .find(|l| l.starts_with(series))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{series} missing:\n{metrics}")) as u64
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
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

fn exchange_body(token: &str, kind: &str, extra: &str) -> String {
    format!(
        "grant_type={}&subject_token={token}&subject_token_type={}{extra}",
        enc(EXCHANGE),
        enc(kind)
    )
}

fn issued(answer: &Value) -> String {
    answer["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("no token: {answer}"))
        .to_owned()
}

/// Calls the echo tool with `token` as Bearer: the answer.
fn echo(gw: &Gateway, token: &str, text: &str) -> Value {
    let mut mcp = McpHttp::connect_with(&gw.addr, Some(format!("Bearer {token}")));
    mcp.call("echo", json!({"text": text}), None)
}

fn verify_offline(root: &delegateos::Keypair, token: &str) {
    let out = run(&[
        "token",
        "verify",
        "--root",
        &root.principal_id().to_string(),
        "--namespace",
        "demo",
        "--action",
        "echo",
        "--resource",
        "hi",
        "--json",
        token,
    ]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let said = stdout(&out);
    assert!(
        said.contains("\"valid\":true") || said.contains("\"valid\": true"),
        "{said}"
    );
}

#[test]
fn id_tokens_and_jwt_access_tokens_are_exchanged_for_dcts_charged_to_their_subject() {
    let s = site();
    let m: Value = serde_json::from_slice(
        &http_exchange(
            &s.gw.addr,
            "GET",
            "/.well-known/oauth-authorization-server",
            &[],
            b"",
        )
        .2,
    )
    .unwrap();
    assert_eq!(
        m["grant_types_supported"],
        json!(["client_credentials", EXCHANGE, JWT_BEARER]),
        "{m}"
    );

    // Alice's real ID token, for dgw's audience, exchanged.
    let (status, head, a) = token_request(
        &s.gw,
        FORM,
        None,
        &exchange_body(
            &s.id_token("alice"),
            ID_TOKEN,
            "&resource=https%3A%2F%2Fdgw.example%2Fmcp",
        ),
    );
    assert_eq!(status, 200, "{a}");
    assert!(head.contains("cache-control: no-store"), "{head}");
    assert_eq!(
        a["issued_token_type"], "urn:ietf:params:oauth:token-type:access_token",
        "{a}"
    );
    assert_eq!(a["token_type"], "Bearer", "{a}");
    assert_eq!(a["scope"], "demo:echo:*", "{a}");
    let first = issued(&a);
    verify_offline(&s.root, &first);

    // It calls the tool; spend is the subject's, across every token.
    assert_eq!(text_of(&echo(&s.gw, &first, "hi")), "hi");
    assert_eq!(text_of(&echo(&s.gw, &first, "hi")), "hi");
    for _ in 0..3 {
        // Asking again and again (a fresh ID token each time) mints no budget.
        let (status, _, again) = token_request(
            &s.gw,
            FORM,
            None,
            &exchange_body(&s.id_token("alice"), ID_TOKEN, ""),
        );
        assert_eq!(status, 200, "{again}");
        let denied = echo(&s.gw, &issued(&again), "hi");
        assert_eq!(
            denied["error"]["data"]["type"], "budget_exceeded",
            "{denied}"
        );
    }

    // A narrower scope narrows the token.
    let body = exchange_body(&s.id_token("alice"), ID_TOKEN, "&scope=demo%3Aecho%3Aonly");
    let (status, _, narrow) = token_request(&s.gw, FORM, None, &body);
    assert_eq!(
        (status, narrow["scope"].as_str()),
        (200, Some("demo:echo:only")),
        "{narrow}"
    );

    // The robot's JWT access token (typ at+jwt, aud dgw, groups by client).
    let (status, _, b) = token_request(
        &s.gw,
        FORM,
        None,
        &exchange_body(&s.access_token(), JWT, ""),
    );
    assert_eq!(status, 200, "{b}");
    let robot = issued(&b);
    verify_offline(&s.root, &robot);
    assert_eq!(text_of(&echo(&s.gw, &robot, "beep")), "beep");

    let line = format!("dgw_oauth_tokens_issued_total{{grant=\"{EXCHANGE}\",idp=\"corp\"}}");
    assert_eq!(s.metric(&line), 6);
    let events = s.trail("oauth_token_issued", 6);
    let issued_to: Vec<&str> = events
        .iter()
        .filter(|e| e["grant"] == EXCHANGE && e["idp"] == "corp")
        .map(|e| e["subject"].as_str().unwrap())
        .collect();
    assert_eq!(issued_to.len(), 6, "{events:?}");
    assert!(
        issued_to.contains(&"idp/corp/0/alice") && issued_to.contains(&"idp/corp/0/robot"),
        "{issued_to:?}"
    );
    drop(s.dir);
}

#[test]
fn hostile_subject_tokens_are_refused_with_invalid_request_and_nothing_issued() {
    let s = site();
    let now = now();
    let claims = |change: Value| {
        let mut c = json!({"iss": s.idp, "sub": "alice", "aud": "dgw", "iat": now, "exp": now + 300, "groups": ["engineering"]});
        for (k, v) in change.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    };
    let idp_kid = json!({"kid": "idp-1"});
    // A correctly signed control token is accepted (so the refusals below
    // are the changes', not the signing's).
    let good = s.sign("idp", idp_kid.clone(), claims(json!({})));
    let (status, _, a) = token_request(&s.gw, FORM, None, &exchange_body(&good, JWT, ""));
    assert_eq!(status, 200, "{a}");
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "wrong iss",
            s.sign(
                "idp",
                idp_kid.clone(),
                claims(json!({"iss": "http://127.0.0.1:1"})),
            ),
            "invalid_request",
        ),
        (
            "wrong aud",
            s.sign(
                "idp",
                idp_kid.clone(),
                claims(json!({"aud": "someone-else"})),
            ),
            "invalid_request",
        ),
        (
            "expired",
            s.sign(
                "idp",
                idp_kid.clone(),
                claims(json!({"iat": now - 900, "exp": now - 600})),
            ),
            "invalid_request",
        ),
        (
            "not yet valid",
            s.sign("idp", idp_kid.clone(), claims(json!({"nbf": now + 600}))),
            "invalid_request",
        ),
        (
            "alg none",
            s.sign("none", idp_kid.clone(), claims(json!({}))),
            "invalid_request",
        ),
        (
            "HS256 with the public key",
            s.sign("hs256-public", idp_kid.clone(), claims(json!({}))),
            "invalid_request",
        ),
        (
            "a kid not in the JWKS",
            s.sign("stranger", json!({"kid": "stranger-1"}), claims(json!({}))),
            "invalid_request",
        ),
        (
            "a stranger's key under the IdP's kid",
            s.sign("stranger", idp_kid.clone(), claims(json!({}))),
            "invalid_request",
        ),
        (
            "no grant matches",
            s.sign("idp", idp_kid.clone(), claims(json!({"groups": ["sales"]}))),
            "access_denied",
        ),
        (
            "an ID-JAG as subject token",
            s.sign(
                "idp",
                json!({"kid": "idp-1", "typ": "oauth-id-jag+jwt"}),
                claims(json!({})),
            ),
            "invalid_request",
        ),
    ];
    for (what, token, error) in &cases {
        let (status, _, a) = token_request(&s.gw, FORM, None, &exchange_body(token, ID_TOKEN, ""));
        assert_eq!(
            (status, a["error"].as_str()),
            (400, Some(*error)),
            "{what}: {a}"
        );
        assert!(a.get("access_token").is_none(), "{what}: {a}");
    }
    // A flood of unknown kids: the keys are fetched again at most once per
    // 30 s (the control's fetch, and perhaps one more on a slow machine).
    let unknown = s.sign("stranger", json!({"kid": "stranger-2"}), claims(json!({})));
    for _ in 0..20 {
        let (status, _, a) = token_request(&s.gw, FORM, None, &exchange_body(&unknown, JWT, ""));
        assert_eq!(
            (status, a["error"].as_str()),
            (400, Some("invalid_request")),
            "{a}"
        );
    }
    let fetches = s.idp_get("/__jwks_fetches")["fetches"].as_u64().unwrap();
    assert!((1..=2).contains(&fetches), "{fetches} fetches of the JWKS");
    // Good tokens, bad requests.
    let alice = s.id_token("alice");
    for (what, body, error) in [
        (
            "a scope wider than the grant",
            exchange_body(&alice, ID_TOKEN, "&scope=demo%3Awrite%3A*"),
            "invalid_scope",
        ),
        (
            "a resource naming another server",
            exchange_body(
                &alice,
                ID_TOKEN,
                "&resource=https%3A%2F%2Fother.example%2Fmcp",
            ),
            "invalid_target",
        ),
        (
            "an audience naming another server",
            exchange_body(&alice, ID_TOKEN, "&audience=https%3A%2F%2Fother.example"),
            "invalid_target",
        ),
        (
            "an unknown token type",
            exchange_body(&alice, "urn:ietf:params:oauth:token-type:saml2", ""),
            "invalid_request",
        ),
        (
            "an actor token",
            exchange_body(
                &alice,
                ID_TOKEN,
                &format!("&actor_token={alice}&actor_token_type={}", enc(ID_TOKEN)),
            ),
            "invalid_request",
        ),
        (
            "no subject token",
            format!(
                "grant_type={}&subject_token_type={}",
                enc(EXCHANGE),
                enc(ID_TOKEN)
            ),
            "invalid_request",
        ),
    ] {
        let (status, _, a) = token_request(&s.gw, FORM, None, &body);
        assert_eq!(
            (status, a["error"].as_str()),
            (400, Some(error)),
            "{what}: {a}"
        );
    }
    // One token issued (the control), every refusal audited and counted.
    assert_eq!(
        s.metric(&format!(
            "dgw_oauth_tokens_issued_total{{grant=\"{EXCHANGE}\",idp=\"corp\"}}"
        )),
        1
    );
    assert_eq!(
        s.metric("dgw_oauth_token_denials_total{reason=\"invalid_request\"}"),
        32
    );
    let denied = s.trail("oauth_token_denied", cases.len() + 26);
    assert_eq!(denied.len(), cases.len() + 26, "{denied:?}");
    // The control's subject was the only one made: bob never got one.
    let subjects: Vec<String> = s
        .trail("oauth_token_issued", 1)
        .iter()
        .map(|e| e["subject"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(subjects, vec!["idp/corp/0/alice".to_owned()]);
}

#[test]
fn an_id_jag_is_redeemed_once_by_its_client_and_a_client_assertion_once() {
    let s = site();
    let jag_body = |jag: &str| format!("grant_type={}&assertion={jag}", enc(JWT_BEARER));
    let jag = s.jag("alice", "jag-1");
    let (status, _, a) = token_request(&s.gw, FORM, Some(("agent", SECRET)), &jag_body(&jag));
    assert_eq!(status, 200, "{a}");
    let token = issued(&a);
    verify_offline(&s.root, &token);
    assert_eq!(text_of(&echo(&s.gw, &token, "hi")), "hi");
    // Replayed: refused, by the same client or any other.
    let (status, _, a) = token_request(&s.gw, FORM, Some(("agent", SECRET)), &jag_body(&jag));
    assert_eq!(
        (status, a["error"].as_str()),
        (400, Some("invalid_grant")),
        "{a}"
    );

    let now = now();
    let with = |change: Value, header: Value| {
        let mut c = s.jag_claims("alice", &format!("jag-{}", change));
        for (k, v) in change.as_object().unwrap() {
            c[k] = v.clone();
        }
        s.sign("idp", header, c)
    };
    let jag_typ = json!({"typ": "oauth-id-jag+jwt", "kid": "idp-1"});
    for (what, assertion, error) in [
        (
            "no typ",
            with(json!({}), json!({"kid": "idp-1"})),
            "invalid_grant",
        ),
        (
            "aud not dgw's issuer",
            with(json!({"aud": "dgw"}), jag_typ.clone()),
            "invalid_grant",
        ),
        (
            "another client's",
            with(json!({"client_id": "signer"}), jag_typ.clone()),
            "invalid_grant",
        ),
        (
            "another resource",
            with(
                json!({"resource": "https://other.example/mcp"}),
                jag_typ.clone(),
            ),
            "invalid_grant",
        ),
        (
            "expired",
            with(json!({"iat": now - 600, "exp": now - 300}), jag_typ.clone()),
            "invalid_grant",
        ),
        (
            "living too long",
            with(json!({"exp": now + 3600}), jag_typ.clone()),
            "invalid_grant",
        ),
        (
            "no jti",
            with(json!({"jti": null}), jag_typ.clone()),
            "invalid_grant",
        ),
        (
            "a scope wider than the grant",
            with(json!({"scope": "demo:write:*"}), jag_typ.clone()),
            "invalid_scope",
        ),
    ] {
        let (status, _, a) =
            token_request(&s.gw, FORM, Some(("agent", SECRET)), &jag_body(&assertion));
        assert_eq!(
            (status, a["error"].as_str()),
            (400, Some(error)),
            "{what}: {a}"
        );
    }
    // Without client authentication: invalid_client.
    let (status, _, a) = token_request(&s.gw, FORM, None, &jag_body(&s.jag("alice", "jag-anon")));
    assert_eq!(
        (status, a["error"].as_str()),
        (401, Some("invalid_client")),
        "{a}"
    );
    // A refused ID-JAG left nothing behind: the same jti works once fixed.
    let (status, _, a) = token_request(
        &s.gw,
        FORM,
        Some(("agent", SECRET)),
        &jag_body(&s.jag("alice", "jag-anon")),
    );
    assert_eq!(status, 200, "{a}");

    // private_key_jwt: client `signer` with its key.
    let endpoint = format!("{PUBLIC}/oauth/token");
    let assertion = |jti: &str, change: Value| {
        let mut c = json!({"iss": "signer", "sub": "signer", "aud": endpoint, "jti": jti, "iat": now, "exp": now + 60});
        for (k, v) in change.as_object().unwrap() {
            c[k] = v.clone();
        }
        s.sign("client", json!({"kid": "client-1"}), c)
    };
    let cc = |a: &str| {
        format!(
            "grant_type=client_credentials&client_assertion_type={}&client_assertion={a}",
            enc(ASSERTION)
        )
    };
    let good = assertion("ca-1", json!({}));
    let (status, _, a) = token_request(&s.gw, FORM, None, &cc(&good));
    assert_eq!(status, 200, "{a}");
    assert_eq!(text_of(&echo(&s.gw, &issued(&a), "hi")), "hi");
    for (what, body) in [
        ("replayed", cc(&good)),
        ("aud not the token endpoint", cc(&assertion("ca-2", json!({"aud": PUBLIC})))),
        ("sub not iss", cc(&assertion("ca-3", json!({"sub": "agent"})))),
        ("expired", cc(&assertion("ca-4", json!({"iat": now - 600, "exp": now - 300})))),
        ("living too long", cc(&assertion("ca-5", json!({"exp": now + 3600})))),
        ("signed by the IdP", cc(&s.sign("idp", json!({"kid": "client-1"}), json!({"iss": "signer", "sub": "signer", "aud": endpoint, "jti": "ca-6", "iat": now, "exp": now + 60})))),
        ("alg none", cc(&s.sign("none", json!({"kid": "client-1"}), json!({"iss": "signer", "sub": "signer", "aud": endpoint, "jti": "ca-7", "iat": now, "exp": now + 60})))),
        ("a secret client's id", cc(&assertion("ca-8", json!({"iss": "agent", "sub": "agent"})))),
    ] {
        let (status, _, a) = token_request(&s.gw, FORM, None, &body);
        assert_eq!((status, a["error"].as_str()), (401, Some("invalid_client")), "{what}: {a}");
    }
    // An assertion and a secret both: one method only.
    let (status, _, a) = token_request(
        &s.gw,
        FORM,
        Some(("agent", SECRET)),
        &cc(&assertion("ca-9", json!({}))),
    );
    assert_eq!(
        (status, a["error"].as_str()),
        (400, Some("invalid_request")),
        "{a}"
    );
    assert_eq!(
        s.metric(&format!(
            "dgw_oauth_tokens_issued_total{{grant=\"{JWT_BEARER}\",idp=\"corp\"}}"
        )),
        2
    );
}

#[test]
fn a_revoked_subject_loses_its_exchanged_tokens_and_gets_no_new_one() {
    let s = site();
    let (_, _, a) = token_request(
        &s.gw,
        FORM,
        None,
        &exchange_body(&s.id_token("alice"), ID_TOKEN, ""),
    );
    let old = issued(&a);
    assert_eq!(text_of(&echo(&s.gw, &old, "hi")), "hi");
    let admin = secret_file(s.dir.path(), "admin.secret", ADMIN, 0o600);
    let out = run(&[
        "oauth",
        "revoke",
        "--tenant",
        "acme",
        "--subject",
        "idp/corp/0/alice",
        "--via",
        &format!("http://{}/rpc", s.gw.addr),
        "--admin-token-file",
        admin.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    // Its old token ends at once.
    let (status, _, gone) = http_exchange(
        &s.gw.addr,
        "POST",
        "/rpc",
        &[("Authorization", &format!("Bearer {old}")), ("Content-Type", "application/json")],
        json!({"jsonrpc": "2.0", "id": 1, "method": "dgw/authorize", "params": {"namespace": "demo", "action": "echo", "resource": "hi", "costMicrocents": 1}}).to_string().as_bytes(),
    );
    assert_eq!(status, 401, "{}", String::from_utf8_lossy(&gone));
    let (status, _, a) = token_request(
        &s.gw,
        FORM,
        None,
        &exchange_body(&s.id_token("alice"), ID_TOKEN, ""),
    );
    assert_eq!(
        (status, a["error"].as_str()),
        (400, Some("access_denied")),
        "{a}"
    );
    // Another subject is untouched.
    let (status, _, a) = token_request(
        &s.gw,
        FORM,
        None,
        &exchange_body(&s.access_token(), JWT, ""),
    );
    assert_eq!(status, 200, "{a}");
}
