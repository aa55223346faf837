//! The operator console at `/ui` (issue 38), over real sockets against the
//! real `dgw`: off unless configured, refused without an administrator;
//! sign-in, the session cookie's flags, CSRF and same-origin checks, the
//! strict headers, sign-out, a forged or expired cookie, sessions ended by
//! a reload of the administrators, and a session valid on every replica
//! of one real Redis. The pages themselves are driven in a real browser
//! by `tests/console_browser.rs`.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::audit::{admin_toml, ADMIN};
use support::mcp::{echo_server_on_port, McpHttp};
use support::redis::RedisServer;
use support::*;

/// A gateway with an admin token and the console on (`extra` added).
fn console_gateway(dir: &std::path::Path, extra: &str) -> Gateway {
    let root = seed(1);
    let config = gateway_config(
        dir,
        &[("acme", root.principal_id())],
        &format!("{}\n[console]\nenabled = true\n{extra}\n", admin_toml()),
    );
    Gateway::start(&config)
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// A form post to the console from its own origin (`origin` overrides it).
fn post(
    addr: &str,
    path: &str,
    cookie: Option<&str>,
    origin: Option<&str>,
    body: &str,
) -> HttpResponse {
    let own = format!("http://{addr}");
    let mut headers = vec![
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("Origin", origin.unwrap_or(&own)),
    ];
    let cookie_line;
    if let Some(c) = cookie {
        cookie_line = format!("dgw_console={c}");
        headers.push(("Cookie", cookie_line.as_str()));
    }
    http_exchange(addr, "POST", path, &headers, body.as_bytes())
}

fn get(addr: &str, path: &str, cookie: Option<&str>) -> HttpResponse {
    let line = cookie.map(|c| format!("dgw_console={c}"));
    let headers: Vec<(&str, &str)> = line.iter().map(|l| ("Cookie", l.as_str())).collect();
    http_exchange(addr, "GET", path, &headers, b"")
}

/// Signs in with the admin token: the session cookie's secret.
fn sign_in(addr: &str) -> String {
    support::console::sign_in(addr, ADMIN)
}

/// The CSRF token on a page of the session.
fn csrf(addr: &str, cookie: &str) -> String {
    let (status, _, body) = get(addr, "/ui/budgets", Some(cookie));
    assert_eq!(status, 200);
    let page = String::from_utf8(body).unwrap();
    let at = page.find("name=\"csrf\" value=\"").expect("a CSRF field") + 19;
    page[at..at + 43].to_owned()
}

fn redirects_to_sign_in(r: &HttpResponse) -> bool {
    r.0 == 303 && header(&r.1, "location") == Some("/ui/signin")
}

#[test]
fn the_console_is_off_unless_enabled_and_refused_without_an_administrator() {
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    // Off: /ui is not served.
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &admin_toml());
    let gw = Gateway::start(&config);
    assert_eq!(get(&gw.addr, "/ui/signin", None).0, 404);
    drop(gw);
    // On without an admin token or certificate: config check names the key.
    let other = tempfile::tempdir().unwrap();
    let config = gateway_config(
        other.path(),
        &[("acme", root.principal_id())],
        "[console]\nenabled = true\n",
    );
    let out = run(&["config", "check", config.to_str().unwrap()]);
    assert!(!out.status.success());
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        said.contains("console.enabled") && said.contains("admin.tokens"),
        "{said}"
    );
    // A session lifetime past 12 hours is refused too.
    let config = gateway_config(
        other.path(),
        &[("acme", root.principal_id())],
        &format!(
            "{}\n[console]\nenabled = true\nsession_ttl = \"2d\"\n",
            admin_toml()
        ),
    );
    let out = run(&["config", "check", config.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("console.session_ttl"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn sign_in_opens_a_strict_session_that_every_action_needs() {
    let dir = tempfile::tempdir().unwrap();
    let gw = console_gateway(dir.path(), "");
    let addr = gw.addr.as_str();

    // Without a session every page redirects to sign-in, with the headers.
    for page in [
        "/ui",
        "/ui/budgets",
        "/ui/decisions",
        "/ui/delegations",
        "/ui/audit",
        "/ui/upstreams",
    ] {
        let r = get(addr, page, None);
        assert!(redirects_to_sign_in(&r), "{page}: {}", r.0);
        let csp = header(&r.1, "content-security-policy").unwrap();
        assert!(
            csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'"),
            "{csp}"
        );
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert_eq!(header(&r.1, "x-frame-options"), Some("DENY"));
    }
    let (status, _, page) = get(addr, "/ui/signin", None);
    assert_eq!(status, 200);
    let page = String::from_utf8(page).unwrap();
    assert!(
        !page.contains("<script>") && page.contains("label for=\"token\""),
        "{page}"
    );

    // A wrong token: refused, no cookie, the secret not echoed.
    let (status, headers, body) = post(addr, "/ui/signin", None, None, "token=wrong-secret-xyz");
    assert_eq!(status, 401);
    assert!(header(&headers, "set-cookie").is_none());
    assert!(!String::from_utf8_lossy(&body).contains("wrong-secret-xyz"));
    // The right token from another site, or with no Origin: refused.
    let (status, headers, _) = post(
        addr,
        "/ui/signin",
        None,
        Some("http://evil.example"),
        &format!("token={ADMIN}"),
    );
    assert_eq!(status, 403);
    assert!(header(&headers, "set-cookie").is_none());
    let (status, _, _) = http_exchange(
        addr,
        "POST",
        "/ui/signin",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        format!("token={ADMIN}").as_bytes(),
    );
    assert_eq!(status, 403);

    // The right token: a cookie the page's script cannot read, sent only
    // to this site, short-lived.
    let (status, headers, _) = post(addr, "/ui/signin", None, None, &format!("token={ADMIN}"));
    assert_eq!(status, 303);
    assert_eq!(header(&headers, "location"), Some("/ui/budgets"));
    let cookie = header(&headers, "set-cookie").unwrap();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/ui", "Max-Age=900"] {
        assert!(cookie.contains(flag), "{flag} missing: {cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "no TLS on this listener: {cookie}"
    );
    let secret = sign_in(addr);
    for page in [
        "/ui/budgets",
        "/ui/decisions",
        "/ui/delegations",
        "/ui/audit",
        "/ui/upstreams",
    ] {
        assert_eq!(get(addr, page, Some(&secret)).0, 200, "{page}");
    }

    // A forged cookie, of the right shape or not: sign in again.
    assert!(redirects_to_sign_in(&get(
        addr,
        "/ui/budgets",
        Some(&"A".repeat(43))
    )));
    assert!(redirects_to_sign_in(&get(
        addr,
        "/ui/budgets",
        Some("<script>")
    )));

    // An action without the CSRF token, with another session's, or from
    // another site is refused, and the session stays.
    let token = csrf(addr, &secret);
    let other = sign_in(addr);
    let others_token = csrf(addr, &other);
    assert_eq!(post(addr, "/ui/signout", Some(&secret), None, "").0, 403);
    assert_eq!(
        post(
            addr,
            "/ui/signout",
            Some(&secret),
            None,
            &format!("csrf={others_token}")
        )
        .0,
        403
    );
    assert_eq!(
        post(
            addr,
            "/ui/signout",
            Some(&secret),
            Some("http://evil.example"),
            &format!("csrf={token}")
        )
        .0,
        403
    );
    assert_eq!(get(addr, "/ui/budgets", Some(&secret)).0, 200);

    // Sign-out ends it: the cookie is cleared and no longer opens a page.
    let (status, headers, _) = post(
        addr,
        "/ui/signout",
        Some(&secret),
        None,
        &format!("csrf={token}"),
    );
    assert_eq!(status, 303);
    assert!(header(&headers, "set-cookie")
        .unwrap()
        .contains("Max-Age=0"));
    assert!(redirects_to_sign_in(&get(
        addr,
        "/ui/budgets",
        Some(&secret)
    )));
    // The other session is still open.
    assert_eq!(get(addr, "/ui/budgets", Some(&other)).0, 200);
}

#[test]
fn a_session_ends_at_its_lifetime_and_when_the_administrators_are_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let gw = console_gateway(dir.path(), "session_ttl = \"2s\"");
    let addr = gw.addr.as_str();
    let secret = sign_in(addr);
    assert_eq!(get(addr, "/ui/budgets", Some(&secret)).0, 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !redirects_to_sign_in(&get(addr, "/ui/budgets", Some(&secret))) {
        assert!(
            Instant::now() < deadline,
            "the session outlived its 2 s lifetime"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let secret = sign_in(addr);
    assert_eq!(get(addr, "/ui/budgets", Some(&secret)).0, 200);
    let (status, answer) = gw.call_as(&format!("Bearer {ADMIN}"), "dgw/reload", json!({}));
    assert_eq!(status, 200, "{answer}");
    assert!(answer.get("result").is_some(), "{answer}");
    // Answered: the reload is in force for the session at once.
    assert!(redirects_to_sign_in(&get(
        addr,
        "/ui/budgets",
        Some(&secret)
    )));
}

/// Two replicas on one real Redis: a session opened on one opens pages
/// on the other, and signing out on the other ends it on both.
#[test]
fn a_session_is_valid_on_every_replica_of_one_redis() {
    let redis = RedisServer::start();
    let url = redis.url();
    let root = seed(1);
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let gws: Vec<Gateway> = dirs
        .iter()
        .map(|d| {
            let config = gateway_config(
                d.path(),
                &[("acme", root.principal_id())],
                &format!(
                    "{}\n[console]\nenabled = true\n[state]\nbackend = \"redis\"\nurl = \"{url}\"\nprefix = \"dgw\"\n",
                    admin_toml()
                ),
            );
            Gateway::start(&config)
        })
        .collect();
    let (a, b) = (gws[0].addr.as_str(), gws[1].addr.as_str());
    let secret = sign_in(a);
    assert_eq!(get(b, "/ui/budgets", Some(&secret)).0, 200);
    let token = csrf(b, &secret);
    assert_eq!(
        post(
            b,
            "/ui/signout",
            Some(&secret),
            None,
            &format!("csrf={token}")
        )
        .0,
        303
    );
    assert!(redirects_to_sign_in(&get(a, "/ui/budgets", Some(&secret))));
    assert!(redirects_to_sign_in(&get(b, "/ui/budgets", Some(&secret))));

    // A reload of the administrators on one replica ends the sessions on
    // the other too.
    let secret = sign_in(b);
    assert_eq!(get(a, "/ui/budgets", Some(&secret)).0, 200);
    let (status, answer) = gws[0].call_as(&format!("Bearer {ADMIN}"), "dgw/reload", json!({}));
    assert_eq!(status, 200, "{answer}");
    // The reloading replica removes them from the shared store as it
    // hears of the reload, without waiting for a request.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !redirects_to_sign_in(&get(b, "/ui/budgets", Some(&secret))) {
        assert!(
            Instant::now() < deadline,
            "the other replica still honours the session"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The bars' words on the budgets page (`spent, reserved, remaining of`).
fn budget_words(addr: &str, cookie: &str) -> Vec<String> {
    let (status, _, body) = get(addr, "/ui/budgets", Some(cookie));
    assert_eq!(status, 200);
    let page = String::from_utf8(body).unwrap();
    page.split("role=\"img\" aria-label=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().to_owned())
        .collect()
}

/// The same traffic on sled and on Redis shows the same figures: the
/// budgets page reads the budget store, whichever backend it is. The whole
/// tree, attenuations included, comes from the store: after a restart
/// (a gateway that decided none of those calls) it is all there.
#[test]
fn the_budgets_page_shows_the_same_figures_on_sled_and_redis() {
    let redis = RedisServer::start();
    let backends = [
        String::new(),
        format!(
            "[state]\nbackend = \"redis\"\nurl = \"{}\"\nprefix = \"dgw\"\n",
            redis.url()
        ),
    ];
    let mut seen = Vec::new();
    for state in &backends {
        let dir = tempfile::tempdir().unwrap();
        let mut gw = console_gateway(dir.path(), state);
        let root = seed(1);
        let agent = root_token(&root, &seed(2), &["docs:read:*"], 1000, 3600);
        // An attenuation of the agent's delegation, to a sub-agent.
        let sub = attenuate(&agent, &seed(2), &seed(4), 5, Some(500), None).encode();
        support::audit::traffic(&gw, &sub, 3);
        // One reservation left open: reserved shows.
        gw.ok(
            "delegateos/authorize",
            support::audit::authorize(&sub, "/project/open"),
        );
        let config = gw.config.clone();
        assert!(gw.terminate().success());
        let gw = Gateway::start(&config);
        let secret = sign_in(&gw.addr);
        let words = budget_words(&gw.addr, &secret);
        assert_eq!(
            words.len(),
            2,
            "the delegation and its attenuation: {words:?}"
        );
        let (_, _, body) = get(&gw.addr, "/ui/budgets", Some(&secret));
        let page = String::from_utf8(body).unwrap();
        let (top, below) = (
            page.find("del_000000000001").unwrap(),
            page.find("del_000000000005").unwrap(),
        );
        assert!(top < below, "the attenuation below its delegation: {page}");
        seen.push(words);
    }
    assert_eq!(seen[0], seen[1]);
    for words in &seen[0] {
        assert!(
            words.contains("$0.00000021 spent, $0.0000001 reserved"),
            "{words}"
        );
    }
    assert!(seen[0][1].ends_with("of $0.000005"), "{:?}", seen[0]);
}

/// The audit page's export: the period's records as JSON lines (the
/// decisions among them), a period that is not a time refused by name.
#[test]
fn the_audit_log_exports_a_period_and_refuses_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let gw = console_gateway(dir.path(), "");
    let token = root_token(&seed(1), &seed(2), &["docs:read:*"], 1000, 3600).encode();
    support::audit::traffic(&gw, &token, 2);
    let secret = sign_in(&gw.addr);
    let (status, _, body) = get(&gw.addr, "/ui/audit/export?since=yesterday", Some(&secret));
    assert_eq!(status, 400);
    assert!(String::from_utf8_lossy(&body).contains("RFC 3339"));
    // The writer thread records off the call's path: wait for the decisions.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, headers, body) = get(
            &gw.addr,
            "/ui/audit/export?since=2000-01-01T00:00:00Z",
            Some(&secret),
        );
        assert_eq!(status, 200);
        assert_eq!(
            header(&headers, "content-type"),
            Some("application/x-ndjson")
        );
        let text = String::from_utf8(body).unwrap();
        let decisions = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|r| r["event"]["event"] == "decision")
            .count();
        if decisions == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{decisions} decisions exported: {text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Nothing recorded before the period.
    let (_, _, body) = get(
        &gw.addr,
        "/ui/audit/export?until=2000-01-01T00:00:00Z",
        Some(&secret),
    );
    assert!(body.is_empty(), "{}", String::from_utf8_lossy(&body));
}

/// Revoking from the console asks first, names what it cuts off, then
/// revokes as `dgw/revoke` does: audited under the administrator's name,
/// and the agent's next call denied. A block ID that is not one is refused.
#[test]
fn a_revocation_is_confirmed_audited_and_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let gw = console_gateway(dir.path(), "");
    let addr = gw.addr.as_str();
    let dct = root_token(&seed(1), &seed(2), &["docs:read:*"], 1000, 3600);
    let token = dct.encode();
    let block = dct.revocation_ids()[0].clone();
    gw.ok(
        "delegateos/authorize",
        support::audit::authorize(&token, "/a"),
    );
    let secret = sign_in(addr);
    let csrf = csrf(addr, &secret);

    let ask = format!("csrf={csrf}&revocation={block}&delegation=del_000000000001");
    let (status, _, body) = post(addr, "/ui/delegations/revoke", Some(&secret), None, &ask);
    assert_eq!(status, 200);
    let page = String::from_utf8(body).unwrap();
    assert!(
        page.contains("cuts off delegation") && page.contains("del_000000000001"),
        "{page}"
    );
    // Asked, not done: the agent still gets through.
    gw.ok(
        "delegateos/authorize",
        support::audit::authorize(&token, "/b"),
    );

    let (status, _, body) = post(
        addr,
        "/ui/delegations/revoke",
        Some(&secret),
        None,
        &format!("{ask}&confirm=yes"),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("<h1>Revoked</h1>"));
    let denied = gw.err(
        "delegateos/authorize",
        support::audit::authorize(&token, "/c"),
    );
    assert_eq!(denied["data"]["type"], "revoked", "{denied}");

    // In the audit trail as the JSON-RPC method records it, by name.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, _, body) = get(addr, "/ui/audit/export", Some(&secret));
        let text = String::from_utf8(body).unwrap();
        let by_ops = text.lines().any(|l| {
            let r: serde_json::Value = serde_json::from_str(l).unwrap();
            r["event"]["event"] == "revoke"
                && r["event"]["id"] == block.as_str()
                && r["event"]["by"] == "token:ops"
        });
        if by_ops {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no revoke event by token:ops: {text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Hostile block IDs: refused with words, nothing recorded.
    for junk in ["not-a-block", "%3Cscript%3Ealert(1)%3C%2Fscript%3E"] {
        let (status, _, body) = post(
            addr,
            "/ui/delegations/revoke",
            Some(&secret),
            None,
            &format!("csrf={csrf}&revocation={junk}&confirm=yes"),
        );
        let page = String::from_utf8(body).unwrap();
        assert_eq!(status, 400, "{page}");
        assert!(
            page.contains("Not revoked") && !page.contains("<script>"),
            "{page}"
        );
    }
}

/// `allowed_origins` set for a browser MCP client: the console's own
/// origin still signs in with no entry there, and the listed origin (not
/// the console's) cannot post a console form.
#[test]
fn the_consoles_own_origin_needs_no_allowed_origins_entry() {
    let dir = tempfile::tempdir().unwrap();
    let config = gateway_config(
        dir.path(),
        &[("acme", seed(1).principal_id())],
        &format!(
            "allowed_origins = [\"https://app.example\"]\n{}\n[console]\nenabled = true\n",
            admin_toml()
        ),
    );
    let gw = Gateway::start(&config);
    let secret = sign_in(&gw.addr);
    assert_eq!(get(&gw.addr, "/ui/budgets", Some(&secret)).0, 200);
    let (status, headers, _) = post(
        &gw.addr,
        "/ui/signin",
        None,
        Some("https://app.example"),
        &format!("token={ADMIN}"),
    );
    assert_eq!(status, 403);
    assert!(header(&headers, "set-cookie").is_none());
}

/// The rows of the table `id` on a decisions page, as text.
fn table_rows(page: &str, id: &str) -> Vec<String> {
    let Some(at) = page.find(&format!("id=\"{id}\"")) else {
        return Vec::new();
    };
    let table = &page[at..at + page[at..].find("</table>").unwrap()];
    let body = &table[table.find("<tbody>").unwrap()..];
    body.split("<tr>").skip(1).map(str::to_owned).collect()
}

/// A decision carries the protocol that decided it, the front it came in
/// on and the tool it named, in the audit log and on the live stream, and
/// the decisions page filters on each (decision 406 left them out).
#[test]
fn decisions_are_filtered_by_protocol_front_and_tool() {
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let (_upstream, port) = echo_server_on_port(&[]);
    let config = mcp_gateway_config(
        dir.path(),
        &[("acme", root.principal_id())],
        &format!(
            "{}\n[console]\nenabled = true\n[[upstreams]]\nname = \"web\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n[[upstreams.tools]]\nname = \"echo\"\ncapability = \"demo:echo\"\nresource = \"/text\"\ncost_microcents = 1000\n",
            admin_toml()
        ),
    );
    let gw = Gateway::start(&config);
    let addr = gw.addr.as_str();
    let good = root_token(
        &root,
        &seed(2),
        &["docs:read:*", "demo:echo:*"],
        10_000_000,
        3600,
    )
    .encode();
    let narrow =
        root_token_for(&root, &seed(3), &["demo:other:*"], 10_000_000, 3600, del(2)).encode();
    // JSON-RPC: an authorization (no tool), settled.
    support::audit::traffic(&gw, &good, 1);
    // MCP: the tool allowed, then denied to a token without its capability.
    let mut mcp = McpHttp::connect(addr, None);
    let allowed = mcp.call("echo", json!({"text": "hi"}), Some(&good));
    assert!(allowed.get("result").is_some(), "{allowed}");
    let denied = mcp.call("echo", json!({"text": "hi"}), Some(&narrow));
    assert_eq!(
        denied["error"]["data"]["type"], "capability_not_granted",
        "{denied}"
    );

    // The audit log's records carry them (the writer is off the call's path).
    let secret = sign_in(addr);
    let deadline = Instant::now() + Duration::from_secs(10);
    let decisions = loop {
        let (_, _, body) = get(addr, "/ui/audit/export", Some(&secret));
        let decisions: Vec<serde_json::Value> = String::from_utf8(body)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["event"].clone())
            .filter(|e| e["event"] == "decision")
            .collect();
        if decisions.len() == 3 {
            break decisions;
        }
        assert!(Instant::now() < deadline, "{decisions:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let seen: Vec<_> = decisions
        .iter()
        .map(|d| {
            (
                d["protocol"].clone(),
                d["front"].clone(),
                d["tool"].clone(),
                d["allowed"].clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                json!("delegateos"),
                json!("jsonrpc"),
                json!(null),
                json!(true)
            ),
            (
                json!("delegateos"),
                json!("mcp"),
                json!("echo"),
                json!(true)
            ),
            (
                json!("delegateos"),
                json!("mcp"),
                json!("echo"),
                json!(false)
            ),
        ]
    );

    // The page keeps what each filter names, live and from the log alike.
    let rows = |query: &str| {
        let (status, _, body) = get(addr, &format!("/ui/decisions?{query}"), Some(&secret));
        assert_eq!(status, 200, "{query}");
        let page = String::from_utf8(body).unwrap();
        (
            table_rows(&page, "live-table"),
            table_rows(&page, "log-table"),
        )
    };
    // The live stream reaches the console off the call's path too.
    let deadline = Instant::now() + Duration::from_secs(10);
    while rows("").0.len() < 3 {
        assert!(Instant::now() < deadline, "{:?}", rows(""));
        std::thread::sleep(Duration::from_millis(100));
    }
    for (query, n) in [
        ("", 3),
        ("protocol=delegateos", 3),
        ("protocol=talos", 0),
        ("front=mcp", 2),
        ("front=jsonrpc", 1),
        ("front=grpc", 0),
        ("front=any", 3),
        ("tool=echo", 2),
        ("tool=ech", 0),
        ("tool=echo&outcome=denied", 1),
        ("front=jsonrpc&tool=echo", 0),
    ] {
        let (live, log) = rows(query);
        assert_eq!((live.len(), log.len()), (n, n), "{query}: {live:?} {log:?}");
    }
    let (live, _) = rows("front=mcp&outcome=denied");
    assert!(
        live[0].contains("<td>delegateos</td><td>mcp</td><td><code>echo</code></td>"),
        "{}",
        live[0]
    );
    // A hostile filter value is shown back as text, never as markup.
    let (status, _, body) = get(
        addr,
        "/ui/decisions?tool=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        Some(&secret),
    );
    assert_eq!(status, 200);
    let page = String::from_utf8(body).unwrap();
    assert!(!page.contains("<script>alert(1)"), "{page}");
}
