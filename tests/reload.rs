//! Hot reload (issue 21): SIGHUP and `dgw/reload` re-read the config file
//! of a running `dgw serve`; what they change, what they refuse, and that
//! no call fails while they do.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::mcp::McpHttp;
use support::*;

/// A fast MCP echo upstream (`dgw-load --serve-upstream`).
fn echo() -> LoadServer {
    LoadServer::start("--serve-upstream", "dgw-load upstream listening http=")
}

fn digest(secret: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What one version of the config file holds.
struct Variant<'a> {
    tenants: &'a [(&'a str, &'a delegateos::PrincipalId)],
    admins: &'a [(&'a str, &'a str)],
    upstream: &'a str,
    /// The echo tool's rule (`None`: no rule, so the tool is denied).
    echo_cost: Option<u64>,
    extra: &'a str,
    /// Added to the `[server]` table.
    server: &'a str,
}

fn write_config(dir: &Path, v: &Variant) -> PathBuf {
    let mut toml = format!(
        "data_dir = {:?}\nkey_file = {:?}\n{}\n[server]\nhttp = \"127.0.0.1:0\"\n{}\n[mcp]\nready_timeout = \"5s\"\n",
        dir.join("data"),
        dir.join("data/gateway.key"),
        v.extra,
        v.server,
    );
    for (name, root) in v.tenants {
        toml.push_str(&format!(
            "[[tenants]]\nname = {name:?}\nroot = \"{root}\"\n"
        ));
    }
    for (name, secret) in v.admins {
        toml.push_str(&format!(
            "[[admin.tokens]]\nname = {name:?}\nsha256 = \"{}\"\n",
            digest(secret)
        ));
    }
    toml.push_str(&format!(
        "[[upstreams]]\nname = \"echo\"\nurl = \"http://{}/mcp\"\n",
        v.upstream
    ));
    if let Some(cost) = v.echo_cost {
        toml.push_str(&format!(
            "[[upstreams.tools]]\nname = \"echo\"\ncapability = \"docs:read\"\nresource = \"/text\"\ncost_microcents = {cost}\n"
        ));
    }
    let path = dir.join("gateway.toml");
    // Written whole, then renamed: a reload never reads half a file.
    let tmp = dir.join("gateway.toml.new");
    std::fs::write(&tmp, toml).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

fn reload_as(gw: &Gateway, secret: &str) -> (u16, Value) {
    gw.call_as(&format!("Bearer {secret}"), "dgw/reload", json!({}))
}

fn hangup(gw: &Gateway) {
    let status = Command::new("kill")
        .args(["-HUP", &gw.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits until the gateway's log holds `n` lines containing `needle`.
fn wait_for_log(gw: &Gateway, needle: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = std::fs::read_to_string(&gw.stderr_log).unwrap_or_default();
        if log.matches(needle).count() >= n {
            return;
        }
        assert!(Instant::now() < deadline, "no {n}× {needle:?} in:\n{log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The answer to an MCP `initialize` presenting `token`.
fn initialize(gw: &Gateway, token: &str) -> Value {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "rust-test", "version": "1"}}});
    let auth = format!("DCT {token}");
    let (_, _, body) = http_exchange(
        &gw.addr,
        "POST",
        "/mcp",
        &[("Authorization", auth.as_str())],
        init.to_string().as_bytes(),
    );
    serde_json::from_slice(&body).unwrap()
}

/// Waits until the audit log (read from loopback, no admin tokens) holds
/// `n` reloads.
fn wait_for_reloads(gw: &Gateway, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let events = gw.ok("dgw/audit", json!({"limit": 1000}));
        let count = events["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["event"] == "reload")
            .count();
        if count >= n {
            return;
        }
        assert!(Instant::now() < deadline, "{count} of {n} reloads");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn echo_token(root: &delegateos::Keypair, budget: u64) -> String {
    root_token(root, &seed(2), &["docs:read:/**"], budget, 3600).encode()
}

#[test]
fn reload_applies_tenants_admins_rules_and_refuses_a_bad_file_whole() {
    let dir = tempfile::tempdir().unwrap();
    let echo = echo();
    let (acme, beta) = (seed(1), seed(7));
    let base = Variant {
        tenants: &[("acme", acme.principal_id())],
        admins: &[("ops", "ops-secret-0123456789")],
        upstream: &echo.addr,
        echo_cost: Some(1),
        extra: "",
        server: "",
    };
    let config = write_config(dir.path(), &base);
    let gw = Gateway::start(&config);
    let beta_token = echo_token(&beta, 1_000);
    let call = |token: &str| {
        let mut c = McpHttp::connect_with(&gw.addr, Some(format!("DCT {token}")));
        c.call("echo", json!({"text": "/text"}), None)
    };

    // A session of acme's, used before every reload below.
    let acme_token = echo_token(&acme, 1_000);
    let mut acme_session = McpHttp::connect_with(&gw.addr, Some(format!("DCT {acme_token}")));
    let answer = acme_session.call("echo", json!({"text": "/text"}), None);
    assert_eq!(answer["result"]["content"][0]["text"], "/text", "{answer}");

    // Before: beta is no tenant, the "ci" secret no admin.
    let answer = initialize(&gw, &beta_token);
    assert!(
        answer.get("error").is_some(),
        "an untrusted root opens no session: {answer}"
    );
    let (status, _) = reload_as(&gw, "ci-secret-0123456789");
    assert_eq!(status, 401);

    write_config(
        dir.path(),
        &Variant {
            tenants: &[("acme", acme.principal_id()), ("beta", beta.principal_id())],
            admins: &[("ci", "ci-secret-0123456789")],
            ..base
        },
    );
    let (status, answer) = reload_as(&gw, "ops-secret-0123456789");
    assert_eq!(status, 200, "{answer}");
    let report = &answer["result"];
    for section in ["tenants", "admin", "talos", "motebit", "upstreams"] {
        assert!(
            report["applied"]
                .as_array()
                .unwrap()
                .contains(&json!(section)),
            "{report}"
        );
    }
    assert_eq!(report["restartNeeded"], json!([]));
    assert_eq!(report["upstreams"]["kept"], json!(["echo"]));

    // After: beta's token works, "ci" is an admin, "ops" no longer.
    let answer = call(&beta_token);
    assert_eq!(
        answer["result"]["content"][0]["text"], "/text",
        "the echo answered: {answer}"
    );
    assert_eq!(reload_as(&gw, "ops-secret-0123456789").0, 401);
    let (status, answer) = reload_as(&gw, "ci-secret-0123456789");
    assert_eq!(status, 200, "{answer}");

    // A tool rule removed: the tool is denied from the next call.
    write_config(
        dir.path(),
        &Variant {
            tenants: &[("acme", acme.principal_id()), ("beta", beta.principal_id())],
            admins: &[("ci", "ci-secret-0123456789")],
            echo_cost: None,
            ..base
        },
    );
    assert_eq!(reload_as(&gw, "ci-secret-0123456789").0, 200);
    let answer = call(&beta_token);
    assert_eq!(
        answer["error"]["data"]["type"], "tool_not_mapped",
        "{answer}"
    );

    // A file that does not parse, and one naming a bad key: refused whole,
    // typed, and the running configuration kept (ci still admin, beta's
    // tenant still trusted).
    std::fs::write(&config, "data_dir = [this is not toml").unwrap();
    let (status, answer) = reload_as(&gw, "ci-secret-0123456789");
    assert_eq!(status, 200);
    assert_eq!(
        answer["error"]["data"]["type"], "config_invalid",
        "{answer}"
    );
    write_config(
        dir.path(),
        &Variant {
            tenants: &[("acme", acme.principal_id())],
            admins: &[],
            extra: "[log]\nlevel = \"dgw=loud\"",
            ..base
        },
    );
    let (_, answer) = reload_as(&gw, "ci-secret-0123456789");
    assert_eq!(
        answer["error"]["data"]["type"], "config_invalid",
        "{answer}"
    );
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("log.level"),
        "{answer}"
    );
    hangup(&gw);
    wait_for_log(&gw, "reload refused", 3);
    let mut c = McpHttp::connect_with(&gw.addr, Some(format!("DCT {beta_token}")));
    let answer = c.request("tools/list", json!({}), None);
    assert!(answer.get("result").is_some(), "still trusted: {answer}");

    // Restart-only sections are named and left as they run.
    write_config(
        dir.path(),
        &Variant {
            tenants: &[("acme", acme.principal_id()), ("beta", beta.principal_id())],
            admins: &[("ci", "ci-secret-0123456789")],
            extra: "",
            ..base
        },
    );
    let mut text = std::fs::read_to_string(&config).unwrap();
    text = text.replace("[server]\n", "[server]\nmax_body_bytes = 4096\n");
    std::fs::write(&config, text).unwrap();
    let (_, answer) = reload_as(&gw, "ci-secret-0123456789");
    assert_eq!(
        answer["result"]["restartNeeded"],
        json!(["server"]),
        "{answer}"
    );

    // A tenant removed: its token, verified and cached before, is refused,
    // and the session it opened has ended (issue 30).
    write_config(
        dir.path(),
        &Variant {
            tenants: &[("beta", beta.principal_id())],
            admins: &[("ci", "ci-secret-0123456789")],
            extra: "",
            ..base
        },
    );
    assert_eq!(reload_as(&gw, "ci-secret-0123456789").0, 200);
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "echo", "arguments": {"text": "/text"}}});
    let (status, answer) = acme_session.post(&call, None);
    assert_eq!(
        (status, &answer["error"]["data"]["type"]),
        (404, &json!("session_ended")),
        "acme is no tenant now: {answer}"
    );

    // Every reload, accepted or refused, is in the audit log with who asked.
    let (_, audit) = gw.call_as(
        "Bearer ci-secret-0123456789",
        "dgw/audit",
        json!({"limit": 100}),
    );
    let events: Vec<&Value> = audit["result"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "reload" || e["event"] == "reload_refused")
        .collect();
    let by: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e["event"].as_str().unwrap(), e["by"].as_str().unwrap()))
        .collect();
    assert_eq!(
        by,
        [
            ("reload", "token:ops"),
            ("reload", "token:ci"),
            ("reload", "token:ci"),
            ("reload_refused", "token:ci"),
            ("reload_refused", "token:ci"),
            ("reload_refused", "signal:SIGHUP"),
            ("reload", "token:ci"),
            ("reload", "token:ci"),
        ]
    );
}

#[test]
fn the_log_level_follows_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let echo = echo();
    let v = |extra| Variant {
        tenants: &[],
        admins: &[],
        upstream: &echo.addr,
        echo_cost: Some(1),
        extra,
        server: "",
    };
    let config = write_config(dir.path(), &v(""));
    let gw = Gateway::start(&config);
    hangup(&gw);
    wait_for_reloads(&gw, 1);
    // At `warn`, a reload's own info line is not written (the level is
    // applied before it); once `info` is back, it is.
    write_config(dir.path(), &v("[log]\nlevel = \"warn\""));
    hangup(&gw);
    wait_for_reloads(&gw, 2);
    hangup(&gw);
    wait_for_reloads(&gw, 3);
    write_config(dir.path(), &v("[log]\nlevel = \"info\""));
    hangup(&gw);
    wait_for_reloads(&gw, 4);
    wait_for_log(&gw, "configuration reloaded", 2);
    let log = std::fs::read_to_string(&gw.stderr_log).unwrap();
    assert_eq!(
        log.matches("configuration reloaded").count(),
        2,
        "the reloads at warn wrote no info line:\n{log}"
    );
}

/// 5,000 MCP calls from 8 clients while the file changes 20 times (SIGHUP
/// and `dgw/reload` in turn): tenants and admins come and go, the echo
/// tool's cost changes, and every other reload moves the upstream to
/// another server. Not one call fails.
#[test]
fn twenty_reloads_during_5000_calls_fail_none() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (echo(), echo());
    let (acme, beta) = (seed(1), seed(7));
    let secret = "ops-secret-0123456789";
    let just_acme = [("acme", acme.principal_id())];
    let both = [("acme", acme.principal_id()), ("beta", beta.principal_id())];
    let admins = [("ops", secret)];
    let variant = |i: usize| Variant {
        tenants: if i.is_multiple_of(2) {
            &just_acme[..]
        } else {
            &both[..]
        },
        admins: &admins,
        // Odd reloads (by dgw/reload) move the upstream to the other
        // server; even ones (by SIGHUP) keep it.
        upstream: if i.div_ceil(2).is_multiple_of(2) {
            &one.addr
        } else {
            &two.addr
        },
        echo_cost: Some(1 + (i % 3) as u64),
        extra: "",
        server: "",
    };
    let config = write_config(dir.path(), &variant(0));
    let gw = Arc::new(Gateway::start(&config));
    let token = echo_token(&acme, 1_000_000);

    const CLIENTS: usize = 8;
    const CALLS: usize = 5_000;
    let done = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..CLIENTS)
        .map(|w| {
            let (gw, token, done) = (gw.clone(), token.clone(), done.clone());
            std::thread::spawn(move || {
                let mut c = McpHttp::connect_with(&gw.addr, Some(format!("DCT {token}")));
                let mut failures = Vec::new();
                for i in 0..CALLS / CLIENTS {
                    let answer = c.call("echo", json!({"text": "/text"}), None);
                    let ok = answer.get("result").is_some()
                        && answer["result"]["isError"] != json!(true);
                    if !ok {
                        failures.push(format!("client {w} call {i}: {answer}"));
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
                failures
            })
        })
        .collect();

    // Twenty reloads spread over the run; the whole run has a deadline, so
    // a stuck worker fails the test instead of hanging it.
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut reloads = 0;
    let mut by_signal = 0;
    while reloads < 20 {
        let due = (reloads + 1) * CALLS / 22;
        while done.load(Ordering::Relaxed) < due {
            assert!(
                Instant::now() < deadline,
                "{} of {CALLS} calls done by the deadline",
                done.load(Ordering::Relaxed)
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        reloads += 1;
        write_config(dir.path(), &variant(reloads));
        if reloads % 2 == 0 {
            by_signal += 1;
            hangup(&gw);
            wait_for_log(&gw, "configuration reloaded", reloads);
        } else {
            let (status, answer) = reload_as(&gw, secret);
            assert_eq!(status, 200, "{answer}");
            assert_eq!(
                answer["result"]["upstreams"]["started"],
                json!(["echo"]),
                "{answer}"
            );
            assert_eq!(
                answer["result"]["upstreams"]["retired"],
                json!(["echo"]),
                "{answer}"
            );
        }
    }
    while !workers.iter().all(|w| w.is_finished()) {
        assert!(
            Instant::now() < deadline,
            "{} of {CALLS} calls done by the deadline",
            done.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let failures: Vec<String> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    assert_eq!(done.load(Ordering::Relaxed), CALLS);
    assert!(
        failures.is_empty(),
        "{} of {CALLS} calls failed, first: {:?}",
        failures.len(),
        failures.first()
    );
    assert_eq!(by_signal, 10);
    let log = std::fs::read_to_string(&gw.stderr_log).unwrap();
    assert_eq!(log.matches("configuration reloaded").count(), 20, "{log}");
    let metrics = gw.metrics();
    assert!(
        metrics.contains("dgw_mcp_upstream_up{upstream=\"echo\"} 1"),
        "{metrics}"
    );
}

/// Issue 30, finding 11: what a reload removes stops working at once, in
/// the long-lived streams and sessions opened with it too. A gRPC
/// `WatchDecisions` stream of an admin whose token a reload removed, or
/// whose secret it changed, ends (`UNAUTHENTICATED`) before the next
/// decision reaches it, while another admin's stream goes on; an MCP
/// session opened with a DCT of a tenant a reload removed ends at its next
/// request, `ping` included, while another tenant's goes on.
#[tokio::test(flavor = "multi_thread")]
async fn a_reload_ends_the_streams_and_sessions_of_what_it_removed() {
    use delegate_gateway::grpc::pb;
    use delegate_gateway::grpc::pb::delegation_gateway_client::DelegationGatewayClient;
    use tokio::task::block_in_place as blocking;

    let dir = tempfile::tempdir().unwrap();
    let echo = blocking(echo);
    let (acme, beta) = (seed(1), seed(7));
    let both = [("acme", acme.principal_id()), ("beta", beta.principal_id())];
    let just_beta = [("beta", beta.principal_id())];
    let (ops, ci, ci_new) = (
        "ops-secret-0123456789",
        "ci-secret-0123456789",
        "ci-new-secret-0123456789",
    );
    let (first_admins, ci_alone) = ([("ops", ops), ("ci", ci)], [("ci", ci)]);
    let ci_changed = [("ci", ci_new), ("ops", ops)];
    let variant = |tenants, admins| Variant {
        tenants,
        admins,
        upstream: &echo.addr,
        echo_cost: Some(1),
        extra: "",
        server: "grpc = \"127.0.0.1:0\"",
    };
    let config = write_config(dir.path(), &variant(&both, &first_admins));
    let gw = blocking(|| Gateway::start(&config));
    let grpc = format!("http://{}", gw.grpc.clone().unwrap());
    let watch = |secret: &str| {
        let grpc = grpc.clone();
        let value: tonic::metadata::MetadataValue<_> = format!("Bearer {secret}").parse().unwrap();
        async move {
            let mut client = DelegationGatewayClient::connect(grpc).await.unwrap();
            let mut request = tonic::Request::new(pb::WatchDecisionsRequest::default());
            request.metadata_mut().insert("authorization", value);
            client.watch_decisions(request).await.unwrap().into_inner()
        }
    };
    let (mut by_ops, mut by_ci) = (watch(ops).await, watch(ci).await);
    let beta_token = echo_token(&beta, 1_000);
    let decide = |resource: &str| {
        let answer = blocking(|| {
            gw.call(
                "delegateos/authorize",
                json!({"dct": beta_token, "namespace": "docs", "action": "read",
                       "resource": resource, "costMicrocents": 1}),
            )
        });
        assert!(answer.get("result").is_some(), "{answer}");
    };
    // The next message on a stream, within a deadline: a decision's
    // resource, or how the stream ended.
    async fn next(s: &mut tonic::Streaming<pb::WatchDecisionsResponse>) -> Result<String, String> {
        match tokio::time::timeout(Duration::from_secs(10), s.message())
            .await
            .expect("a message or the end within 10 s")
        {
            Ok(Some(m)) => Ok(m.decision.unwrap().request.unwrap().resource),
            Ok(None) => Err("ended".into()),
            Err(status) => Err(format!("{:?}: {}", status.code(), status.message())),
        }
    }
    let reload = |v: Variant, secret: &str| {
        blocking(|| {
            write_config(dir.path(), &v);
            let (status, answer) = reload_as(&gw, secret);
            assert_eq!(status, 200, "{answer}");
            assert!(answer.get("result").is_some(), "{answer}");
        })
    };

    // MCP sessions of acme's and of beta's, opened with their DCTs.
    let acme_token = echo_token(&acme, 1_000);
    let mut acme_session = McpHttp::connect_with(&gw.addr, Some(format!("DCT {acme_token}")));
    let mut beta_session = McpHttp::connect_with(&gw.addr, Some(format!("DCT {beta_token}")));
    let ping = |session: &mut McpHttp| {
        let message = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"});
        blocking(|| session.post(&message, None))
    };
    assert!(ping(&mut acme_session).1.get("result").is_some());
    assert!(ping(&mut beta_session).1.get("result").is_some());

    decide("/text");
    assert_eq!(next(&mut by_ops).await, Ok("/text".into()));
    assert_eq!(next(&mut by_ci).await, Ok("/text".into()));

    // "ops" removed, and acme.
    reload(variant(&just_beta, &ci_alone), ci);
    decide("/after-ops-removed");
    let ended = next(&mut by_ops).await;
    assert!(
        ended
            .as_ref()
            .is_err_and(|e| e.starts_with("Unauthenticated")),
        "the stream of the removed admin: {ended:?}"
    );
    assert_eq!(next(&mut by_ci).await, Ok("/after-ops-removed".into()));
    let (status, answer) = ping(&mut acme_session);
    assert_eq!(
        answer["error"]["data"]["type"], "session_ended",
        "the session of the removed tenant: {answer}"
    );
    assert_eq!(status, 404, "{answer}");
    let (status, answer) = ping(&mut acme_session);
    assert_eq!(status, 404, "ended for good: {answer}");
    let (_, answer) = ping(&mut beta_session);
    assert!(answer.get("result").is_some(), "{answer}");

    // "ci"'s secret changed: its stream ends too.
    reload(variant(&just_beta, &ci_changed), ci);
    decide("/after-ci-changed");
    let ended = next(&mut by_ci).await;
    assert!(
        ended
            .as_ref()
            .is_err_and(|e| e.starts_with("Unauthenticated")),
        "the stream of the changed admin: {ended:?}"
    );
}
