//! dgw as an OAuth 2.1 protected resource (issue 35, slice 1; docs/oauth.md):
//! with `[oauth]`, its metadata (RFC 9728) at the well-known paths, and a
//! call that needs a credential and carries none answered 401 with
//! `WWW-Authenticate: Bearer resource_metadata="…"` on `/mcp` (both
//! revisions), `/rpc` and gRPC; a good credential too narrow, 403
//! `insufficient_scope` naming the capability; a DCT read from
//! `Authorization: Bearer`. What worked without a credential still does.

// Integration tests: a failed unwrap is the test failing loudly, and
// clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]
mod support;

use delegate_gateway::grpc::pb;
use delegate_gateway::grpc::pb::delegation_gateway_client::DelegationGatewayClient;
use serde_json::{json, Value};
use support::mcp::*;
use support::*;

const PUBLIC: &str = "https://dgw.example";
const ROOT_METADATA: &str = "https://dgw.example/.well-known/oauth-protected-resource";
const MCP_METADATA: &str = "https://dgw.example/.well-known/oauth-protected-resource/mcp";

const RULES: &str = r#"
[[upstreams.tools]]
name = "echo"
capability = "demo:echo"
resource = "/text"
cost_microcents = 10
"#;

struct Setup {
    _dir: tempfile::TempDir,
    _echo: Killed,
    gw: Gateway,
    root: delegateos::Keypair,
}

/// A gateway with an echo upstream whose `echo` tool is gated, gRPC on,
/// anonymous sessions as told, and `[oauth]` when `oauth`.
fn setup(anonymous: bool, oauth: bool) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let (echo, port) = echo_server_on_port(&[]);
    let root = seed(1);
    let oauth = if oauth {
        format!(
            "[oauth]\npublic_url = \"{PUBLIC}/\"\n[[oauth.identity_providers]]\nname = \"corp\"\nissuer = \"https://idp.example\"\naudience = \"dgw\"\ntenant = \"acme\"\n[[oauth.identity_providers.grants]]\nclaims = {{ groups = \"engineering\" }}\ncapabilities = [\"demo:echo:/text\"]\nbudget_microcents = 1000\nttl = \"8h\"\nsubject_budget_period = \"30d\"\n"
        )
    } else {
        String::new()
    };
    let extra = format!(
        "grpc = \"127.0.0.1:0\"\n[[upstreams]]\nname = \"web\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n{RULES}\n[mcp]\nanonymous_sessions = {anonymous}\n{oauth}"
    );
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
    let gw = Gateway::start(&config);
    Setup {
        _dir: dir,
        _echo: echo,
        gw,
        root,
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// POSTs `body` to `path` with `headers`: (status, WWW-Authenticate, answer).
fn post(
    gw: &Gateway,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, Option<String>, Value) {
    let (status, h, bytes) =
        http_exchange(&gw.addr, "POST", path, headers, body.to_string().as_bytes());
    let answer = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (
        status,
        header(&h, "www-authenticate").map(str::to_owned),
        answer,
    )
}

/// A 2026-07-28 (stateless) `tools/call` of `echo` with `authorization`.
fn stateless_call(gw: &Gateway, authorization: Option<&str>) -> (u16, Option<String>, Value) {
    let v = "2026-07-28";
    let mut headers = vec![
        ("MCP-Protocol-Version", v),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "echo"),
    ];
    if let Some(a) = authorization {
        headers.push(("Authorization", a));
    }
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": v,
        "io.modelcontextprotocol/clientInfo": {"name": "rust-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    post(
        gw,
        "/mcp",
        &headers,
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "hi"}, "_meta": meta}}),
    )
}

/// A session's `initialize` with `authorization`.
fn initialize(gw: &Gateway, authorization: Option<&str>) -> (u16, Option<String>, Value) {
    let headers: Vec<(&str, &str)> = authorization
        .map(|a| ("Authorization", a))
        .into_iter()
        .collect();
    post(
        gw,
        "/mcp",
        &headers,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "rust-test", "version": "1"}}}),
    )
}

/// `dgw/authorize` of `demo:echo:/text` on `/rpc` with `authorization`.
fn rpc_authorize(gw: &Gateway, authorization: Option<&str>) -> (u16, Option<String>, Value) {
    let headers: Vec<(&str, &str)> = authorization
        .map(|a| ("Authorization", a))
        .into_iter()
        .collect();
    post(
        gw,
        "/rpc",
        &headers,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "dgw/authorize",
                "params": {"namespace": "demo", "action": "echo", "resource": "/text", "costMicrocents": 1}}),
    )
}

async fn grpc_authorize(
    gw: &Gateway,
    authorization: Option<&str>,
) -> Result<pb::AuthorizeResponse, tonic::Status> {
    let addr = gw.grpc.as_ref().expect("the gateway serves gRPC");
    let mut client = DelegationGatewayClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let mut request = tonic::Request::new(pb::AuthorizeRequest {
        credential_json: String::new(),
        dct: String::new(),
        request: Some(pb::CapabilityRequest {
            namespace: "demo".into(),
            action: "echo".into(),
            resource: "/text".into(),
        }),
        cost_microcents: 1,
    });
    if let Some(a) = authorization {
        request
            .metadata_mut()
            .insert("authorization", a.parse().unwrap());
    }
    client
        .authorize(request)
        .await
        .map(tonic::Response::into_inner)
}

fn www_authenticate(status: &tonic::Status) -> Option<String> {
    status
        .metadata()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
}

#[test]
fn the_metadata_names_dgw_as_the_resource_and_its_authorization_server() {
    let s = setup(true, true);
    for (path, resource) in [
        ("/.well-known/oauth-protected-resource", PUBLIC.to_owned()),
        (
            "/.well-known/oauth-protected-resource/mcp",
            format!("{PUBLIC}/mcp"),
        ),
    ] {
        let (status, h, body) = http_exchange(&s.gw.addr, "GET", path, &[], b"");
        assert_eq!(status, 200, "{path}");
        let m: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(m["resource"], resource.as_str(), "{m}");
        assert_eq!(m["authorization_servers"], json!([PUBLIC]), "{m}");
        assert_eq!(m["scopes_supported"], json!(["demo:echo:/text"]), "{m}");
        assert_eq!(m["bearer_methods_supported"], json!(["header"]), "{m}");
        assert_eq!(header(&h, "access-control-allow-origin"), Some("*"));
    }
    for path in [
        "/.well-known/oauth-protected-resource/rpcx",
        "/.well-known/oauth-protected-resourcex",
        // dgw is no OpenID provider.
        "/.well-known/openid-configuration",
    ] {
        assert_eq!(s.gw.http("GET", path, b"").0, 404, "{path}");
    }
    // Without [oauth], no metadata.
    let plain = setup(true, false);
    assert_eq!(
        plain
            .gw
            .http("GET", "/.well-known/oauth-protected-resource", b"")
            .0,
        404
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_without_a_credential_is_challenged_on_every_front() {
    let closed = setup(false, true);
    let gw = &closed.gw;
    // /mcp, a session's initialize.
    let (status, challenge, a) = initialize(gw, None);
    assert_eq!(status, 401, "{a}");
    assert_eq!(
        challenge.as_deref(),
        Some(&*format!("Bearer resource_metadata=\"{MCP_METADATA}\""))
    );
    assert_eq!(a["error"]["data"]["type"], "credential_required", "{a}");
    // /mcp, the stateless revision.
    let (status, challenge, a) = stateless_call(gw, None);
    assert_eq!(status, 401, "{a}");
    assert_eq!(
        challenge.as_deref(),
        Some(&*format!("Bearer resource_metadata=\"{MCP_METADATA}\""))
    );
    // /rpc.
    let (status, challenge, a) = rpc_authorize(gw, None);
    assert_eq!(status, 401, "{a}");
    assert_eq!(
        challenge.as_deref(),
        Some(&*format!("Bearer resource_metadata=\"{ROOT_METADATA}\""))
    );
    assert_eq!(a["error"]["data"]["type"], "credential_required", "{a}");
    // gRPC.
    let e = grpc_authorize(gw, None).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
    assert_eq!(
        www_authenticate(&e),
        Some(format!("Bearer resource_metadata=\"{ROOT_METADATA}\""))
    );

    // With anonymous sessions, the session opens as before; its call of a
    // gated tool is what needs the credential.
    let open = setup(true, true);
    let (status, _, a) = initialize(&open.gw, None);
    assert_eq!(status, 200, "{a}");
    let mut session = McpHttp::connect(&open.gw.addr, None);
    session.next_id += 1;
    let (status, a) = session.post(
        &json!({"jsonrpc": "2.0", "id": session.next_id, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "hi"}}}),
        None,
    );
    assert_eq!(status, 401, "{a}");
    assert_eq!(a["error"]["data"]["type"], "dct_required", "{a}");
    let (status, challenge, _) = stateless_call(&open.gw, None);
    assert_eq!(status, 401);
    assert_eq!(
        challenge.as_deref(),
        Some(&*format!("Bearer resource_metadata=\"{MCP_METADATA}\""))
    );
    // Open paths stay open.
    assert_eq!(open.gw.http("GET", "/healthz", b"").0, 200);
    let tools = session.request("tools/list", json!({}), None);
    assert!(tools["result"]["tools"].is_array(), "{tools}");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_oauth_the_answers_are_what_they_were() {
    let s = setup(true, false);
    let (status, challenge, a) = stateless_call(&s.gw, None);
    assert_eq!(status, 200, "{a}");
    assert_eq!(a["error"]["data"]["type"], "dct_required", "{a}");
    assert_eq!(challenge, None);
    let (status, challenge, a) = rpc_authorize(&s.gw, None);
    assert_eq!((status, challenge), (200, None), "{a}");
    let e = grpc_authorize(&s.gw, None).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    assert_eq!(www_authenticate(&e), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dct_as_bearer_is_a_dct_and_one_too_narrow_is_asked_to_step_up() {
    let s = setup(false, true);
    let granted = root_token(&s.root, &seed(2), &["demo:echo:*"], 1000, 3600).encode();
    let narrow = root_token(&s.root, &seed(3), &["demo:other:*"], 1000, 3600).encode();
    let expired = root_token(&s.root, &seed(4), &["demo:echo:*"], 1000, -10).encode();
    let bearer = |t: &str| format!("Bearer {t}");

    // A granted DCT under Bearer works on every front.
    let (status, _, a) = stateless_call(&s.gw, Some(&bearer(&granted)));
    assert_eq!(status, 200, "{a}");
    assert_eq!(text_of(&a), "hi");
    let mut session = McpHttp::connect_with(&s.gw.addr, Some(bearer(&granted)));
    assert_eq!(
        text_of(&session.call("echo", json!({"text": "hi"}), None)),
        "hi"
    );
    let (status, _, a) = rpc_authorize(&s.gw, Some(&bearer(&granted)));
    assert_eq!(status, 200, "{a}");
    assert!(a["result"]["reservationId"].is_string(), "{a}");
    grpc_authorize(&s.gw, Some(&bearer(&granted)))
        .await
        .unwrap();

    // Too narrow: 403 insufficient_scope naming the capability needed.
    // (The tool's rule takes its resource from the `text` argument.)
    let step_up = |scope: &str, metadata: &str| {
        format!("Bearer error=\"insufficient_scope\", scope=\"{scope}\", resource_metadata=\"{metadata}\"")
    };
    let (status, challenge, a) = stateless_call(&s.gw, Some(&bearer(&narrow)));
    assert_eq!(status, 403, "{a}");
    assert_eq!(challenge, Some(step_up("demo:echo:hi", MCP_METADATA)));
    assert_eq!(a["error"]["data"]["type"], "capability_not_granted", "{a}");
    let (status, challenge, a) = rpc_authorize(&s.gw, Some(&bearer(&narrow)));
    assert_eq!(status, 403, "{a}");
    assert_eq!(challenge, Some(step_up("demo:echo:/text", ROOT_METADATA)));
    let e = grpc_authorize(&s.gw, Some(&bearer(&narrow)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    assert_eq!(
        www_authenticate(&e),
        Some(step_up("demo:echo:/text", ROOT_METADATA))
    );

    // Expired: 401 invalid_token.
    let invalid = |metadata: &str| {
        format!("Bearer error=\"invalid_token\", resource_metadata=\"{metadata}\"")
    };
    let (status, challenge, a) = stateless_call(&s.gw, Some(&bearer(&expired)));
    assert_eq!(status, 401, "{a}");
    assert_eq!(challenge, Some(invalid(MCP_METADATA)));
    let (status, challenge, a) = rpc_authorize(&s.gw, Some(&bearer(&expired)));
    assert_eq!(status, 401, "{a}");
    assert_eq!(challenge, Some(invalid(ROOT_METADATA)));
    let e = grpc_authorize(&s.gw, Some(&bearer(&expired)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
    assert_eq!(www_authenticate(&e), Some(invalid(ROOT_METADATA)));

    // A Bearer value that is no prefix, no DCT and no admin secret is
    // refused, never taken as something else: a mangled DCT included.
    let mangled = bearer(&granted[..granted.len() - 8]);
    for value in [mangled.as_str(), "Bearer not-a-token", "Basic dXNlcjpwdw=="] {
        let (status, challenge, a) = rpc_authorize(&s.gw, Some(value));
        assert_eq!(status, 401, "{value}: {a}");
        assert_eq!(challenge, Some(invalid(ROOT_METADATA)), "{value}");
        let e = grpc_authorize(&s.gw, Some(value)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "{value}: {e:?}");
        assert_eq!(
            www_authenticate(&e),
            Some(invalid(ROOT_METADATA)),
            "{value}"
        );
        let (status, challenge, a) = stateless_call(&s.gw, Some(value));
        assert_eq!(status, 401, "{value}: {a}");
        assert_eq!(
            challenge,
            Some(format!("Bearer resource_metadata=\"{MCP_METADATA}\"")),
            "{value}"
        );
    }
}

#[test]
fn the_oauth_section_is_checked_key_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let base = format!(
        "data_dir = \"data\"\nkey_file = \"data/gateway.key\"\n[server]\nhttp = \"127.0.0.1:0\"\n[[tenants]]\nname = \"acme\"\nroot = \"{}\"\n",
        seed(1).principal_id()
    );
    let idp = "[[oauth.identity_providers]]\nname = \"corp\"\nissuer = \"https://idp.example\"\naudience = \"dgw\"\ntenant = \"acme\"\n";
    let grant = "[[oauth.identity_providers.grants]]\ncapabilities = [\"docs:read:/p/**\"]\nbudget_microcents = 100\nttl = \"8h\"\nsubject_budget_period = \"30d\"\n";
    let good = format!("{base}[oauth]\npublic_url = \"https://dgw.example\"\naccess_token_ttl = \"1h\"\n{idp}{grant}");
    support::mcp::secret_file(dir.path(), "a.secret", "a-secret-of-sixteen-or-more", 0o600);
    let out = config_check_in(dir.path(), &good);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    for (bad, key) in [
        (
            good.replace("https://dgw.example", "http://dgw.example"),
            "oauth.public_url",
        ),
        (
            good.replace("https://dgw.example", "https://dgw.example/base"),
            "oauth.public_url",
        ),
        (good.replace("\"1h\"", "\"soon\""), "oauth.access_token_ttl"),
        (
            good.replace("public_url = \"https://dgw.example\"\n", ""),
            "oauth.access_token_ttl",
        ),
        (
            good.replace("https://idp.example", "http://idp.example"),
            "oauth.identity_providers[0].issuer",
        ),
        (
            good.replace("tenant = \"acme\"", "tenant = \"nobody\""),
            "oauth.identity_providers[0].tenant",
        ),
        (
            good.replace("docs:read:/p/**", "not a capability"),
            "oauth.identity_providers[0].grants[0].capabilities",
        ),
        (
            good.replace("\"30d\"", "\"-1\""),
            "oauth.identity_providers[0].grants[0].subject_budget_period",
        ),
        (format!("{good}{idp}"), "oauth.identity_providers[1].name"),
        // A client of a tenant without an issuing delegation could get nothing.
        (
            format!("{good}[[oauth.clients]]\nclient_id = \"a\"\nsecret_file = \"a.secret\"\ntenant = \"acme\"\ncapabilities = [\"docs:read:/p/**\"]\nbudget_microcents = 1\nttl = \"1h\"\nsubject_budget_period = \"1d\"\n"),
            "oauth.clients[0].tenant",
        ),
        (
            format!("{good}[[oauth.clients]]\nclient_id = \"a\"\n"),
            "missing field `tenant`",
        ),
        // A secret or public keys (private_key_jwt), one of them, and
        // never a private or symmetric key in the config.
        (
            format!("{good}[[oauth.clients]]\nclient_id = \"a\"\ntenant = \"acme\"\ncapabilities = [\"docs:read:/p/**\"]\nbudget_microcents = 1\nttl = \"1h\"\nsubject_budget_period = \"1d\"\n"),
            "needs secret_file or jwks (private_key_jwt), one of them",
        ),
        (
            format!("{good}[[oauth.clients]]\nclient_id = \"a\"\nsecret_file = \"a.secret\"\njwks = {{ keys = [] }}\ntenant = \"acme\"\ncapabilities = [\"docs:read:/p/**\"]\nbudget_microcents = 1\nttl = \"1h\"\nsubject_budget_period = \"1d\"\n"),
            "needs secret_file or jwks (private_key_jwt), one of them",
        ),
        (
            format!("{good}[[oauth.clients]]\nclient_id = \"a\"\njwks = {{ keys = [{{ kty = \"oct\", k = \"c2VjcmV0\" }}] }}\ntenant = \"acme\"\ncapabilities = [\"docs:read:/p/**\"]\nbudget_microcents = 1\nttl = \"1h\"\nsubject_budget_period = \"1d\"\n"),
            "oauth.clients[0].jwks",
        ),
        (
            format!("{good}[[oauth.clients]]\nclient_id = \"a\"\njwks = {{ keys = [{{ kty = \"OKP\", crv = \"Ed25519\", x = \"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\", d = \"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A\" }}] }}\ntenant = \"acme\"\ncapabilities = [\"docs:read:/p/**\"]\nbudget_microcents = 1\nttl = \"1h\"\nsubject_budget_period = \"1d\"\n"),
            "holds a private or symmetric key",
        ),
    ] {
        let out = config_check_in(dir.path(), &bad);
        let said = format!("{}{}", stdout(&out), stderr(&out));
        assert!(!out.status.success(), "{key}: {said}");
        assert!(said.contains(key), "{key}: {said}");
    }
}
