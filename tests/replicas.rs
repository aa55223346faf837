//! Several `dgw serve` replicas on one real Redis (`[state] backend =
//! "redis"`): one budget, one revocation list, one truth for all of them.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

#[path = "ldp/delegate.rs"]
mod delegate;

const SECRET: &str = "a-shared-secret-of-32-bytes-0123";
const ECHO: &str = "ldp:delegate:echo";

use std::sync::Arc;

use delegateos::{RevocationEntry, RevocationScope};
use serde_json::{json, Value};
use support::redis::{RedisCluster, RedisServer};
use support::*;

struct Replicas {
    _dirs: Vec<tempfile::TempDir>,
    gateways: Vec<Gateway>,
    root: delegateos::Keypair,
}

/// `n` replicas on `redis`, trusting one tenant root.
fn replicas(redis: &RedisServer, n: usize) -> Replicas {
    replicas_with(redis, n, "")
}

/// [`replicas`] with `extra` config.
fn replicas_with(redis: &RedisServer, n: usize, extra: &str) -> Replicas {
    replicas_at(&redis.url(), n, extra)
}

/// `n` replicas on the Redis at `url`, with `extra` config.
fn replicas_at(url: &str, n: usize, extra: &str) -> Replicas {
    let root = seed(1);
    let mut dirs = Vec::new();
    let mut gateways = Vec::new();
    for _ in 0..n {
        let dir = tempfile::tempdir().unwrap();
        let extra =
            format!("{extra}\n[state]\nbackend = \"redis\"\nurl = \"{url}\"\nprefix = \"dgw\"\n");
        let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &extra);
        gateways.push(Gateway::start(&config));
        dirs.push(dir);
    }
    Replicas {
        _dirs: dirs,
        gateways,
        root,
    }
}

fn authorize(token: &str, cost: u64) -> Value {
    json!({"dct": token, "namespace": "docs", "action": "read", "resource": "/project/a",
           "costMicrocents": cost})
}

/// 1,000 concurrent reservations of 1 over three replicas against a budget
/// of 100: exactly 100 are admitted; settled on other replicas than the
/// ones that reserved, the spend is 100, and every replica reports the
/// same budget.
#[test]
fn three_replicas_admit_exactly_the_budget() {
    let redis = RedisServer::start();
    let r = Arc::new(replicas(&redis, 3));
    let token = root_token(&r.root, &seed(2), &["docs:read:/project/**"], 100, 3600).encode();
    let workers: Vec<_> = (0..25)
        .map(|w| {
            let (r, token) = (r.clone(), token.clone());
            std::thread::spawn(move || {
                let mut admitted = Vec::new();
                for i in 0..40 {
                    let at = (w + i) % 3;
                    let answer = r.gateways[at].call("delegateos/authorize", authorize(&token, 1));
                    match (&answer["result"], &answer["error"]) {
                        (Value::Object(ok), _) => {
                            let id = ok["reservationId"].as_str().unwrap().to_owned();
                            admitted.push((at, id));
                        }
                        (_, e) => assert_eq!(e["data"]["type"], "budget_exceeded", "{answer}"),
                    }
                }
                admitted
            })
        })
        .collect();
    let admitted: Vec<(usize, String)> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    assert_eq!(admitted.len(), 100);
    for (at, id) in &admitted {
        let other = &r.gateways[(at + 1) % 3];
        let settled = other.ok(
            "delegateos/settle",
            json!({"reservationId": id, "actualMicrocents": 1, "dct": token}),
        );
        assert_eq!(settled["chargedMicrocents"], 1);
    }
    let reports: Vec<Value> = r
        .gateways
        .iter()
        .map(|g| g.ok("delegateos/budget", json!({"delegationId": del(1)})))
        .collect();
    assert_eq!(
        reports[0]["chains"][0][0]["spentMicrocents"], 100,
        "{}",
        reports[0]
    );
    assert_eq!(reports[0]["chains"][0][0]["reservedMicrocents"], 0);
    assert!(reports.iter().all(|x| x == &reports[0]), "{reports:?}");
    let e = r.gateways[2].err("delegateos/authorize", authorize(&token, 1));
    assert_eq!(e["data"]["type"], "budget_exceeded");
}

/// A revocation recorded on one replica is enforced by the others (each
/// follows the feed), and by a replica started after it.
#[test]
fn a_revocation_on_one_replica_reaches_every_replica() {
    let redis = RedisServer::start();
    let r = replicas(&redis, 3);
    let token = root_token(&r.root, &seed(2), &["docs:read:/project/**"], 100, 3600);
    for g in &r.gateways {
        g.ok("delegateos/authorize", authorize(&token.encode(), 0));
    }
    let rev = RevocationEntry::sign(
        &r.root,
        &token.revocation_ids()[0],
        at(0),
        RevocationScope::Block,
    )
    .unwrap();
    let recorded = r.gateways[0].ok("delegateos/revoke", json!({"revocation": rev}));
    assert_eq!(recorded["newlyRecorded"], true);
    for g in &r.gateways[1..] {
        let denied = (0..200).any(|_| {
            let answer = g.call("delegateos/authorize", authorize(&token.encode(), 0));
            if answer["error"]["data"]["type"] == "revoked" {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            false
        });
        assert!(denied, "replica {} still admits the revoked token", g.addr);
    }
    let again = r.gateways[2].ok("delegateos/revoke", json!({"revocation": rev}));
    assert_eq!(again["newlyRecorded"], false);
    // Each follower timed the entry from the feed to itself, and says its
    // index is current.
    for g in &r.gateways {
        let m = g.metrics();
        assert!(
            counter(&m, "dgw_revocation_feed_lag_seconds_count") >= 1,
            "{m}"
        );
        assert!(m.contains("dgw_revocation_index_complete 1"), "{m}");
    }
    // Peers that are not dgw poll any replica's revocationEndpoint.
    let list = |g: &Gateway, query: &str| {
        let (status, body) = g.http("GET", &format!("/revocations{query}"), b"");
        (status, serde_json::from_slice::<Value>(&body).unwrap())
    };
    let (status, all) = list(&r.gateways[1], "");
    assert_eq!(status, 200, "{all}");
    assert_eq!(all["revocations"], json!([rev]));
    let entry: RevocationEntry = serde_json::from_value(all["revocations"][0].clone()).unwrap();
    assert!(
        entry.into_verified().is_ok(),
        "a peer verifies what it polls"
    );
    let as_of = all["asOf"].as_str().unwrap().to_owned();
    let (_, later) = list(&r.gateways[2], &format!("?since={as_of}"));
    assert_eq!(later["revocations"], json!([rev]), "within the overlap");
    let (_, future) = list(&r.gateways[2], "?since=2099-01-01T00:00:00Z");
    assert_eq!(future["revocations"], json!([]));
    let (status, bad) = list(&r.gateways[2], "?since=yesterday");
    assert_eq!(status, 400, "{bad}");
    let late = replicas(&redis, 1);
    let e = late.gateways[0].err("delegateos/authorize", authorize(&token.encode(), 0));
    assert_eq!(e["data"]["type"], "revoked");
}

/// Polls `check` every 50 ms for up to 15 s.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..300 {
        if check() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{what} did not happen within 15 s");
}

/// Redis stops: every replica refuses every decision (`state_unavailable`,
/// even one that reserves nothing: a revocation may be missing), reports
/// unready, and its gauge says so. Redis comes back (from its append-only
/// file): they recover, and what was recorded before holds.
#[test]
fn without_redis_every_replica_fails_closed_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let mut redis = RedisServer::start_persistent(dir.path());
    let r = replicas(&redis, 2);
    let token = root_token(&r.root, &seed(2), &["docs:read:/project/**"], 100, 3600).encode();
    let revoked = root_token(&r.root, &seed(3), &["docs:read:/project/**"], 100, 3600);
    let a = r.gateways[0].ok("delegateos/authorize", authorize(&token, 30));
    r.gateways[1].ok(
        "delegateos/settle",
        json!({"reservationId": a["reservationId"], "actualMicrocents": 30, "dct": token}),
    );
    let rev = RevocationEntry::sign(
        &r.root,
        &revoked.revocation_ids()[0],
        at(0),
        RevocationScope::Block,
    )
    .unwrap();
    r.gateways[0].ok("delegateos/revoke", json!({"revocation": rev}));

    redis.stop();
    // From the moment Redis is gone, no decision is admitted: not one that
    // reserves (it cannot be recorded), and not one that reserves nothing
    // (a revocation may be missing). Every answer counts, none is retried.
    for g in &r.gateways {
        for cost in [1, 0, 1, 0] {
            let answer = g.call("delegateos/authorize", authorize(&token, cost));
            assert_eq!(
                answer["error"]["data"]["type"], "state_unavailable",
                "admitted after Redis stopped (cost {cost}): {answer}"
            );
        }
        let (status, body) = g.http("GET", "/readyz", b"");
        assert_eq!(status, 503, "{}", String::from_utf8_lossy(&body));
        assert!(String::from_utf8_lossy(&body).contains("state unavailable"));
        assert!(g.metrics().contains("dgw_state_writable 0"));
        eventually("the feed reported lost", || {
            g.metrics().contains("dgw_revocation_index_complete 0")
        });
    }

    redis.resume();
    for g in &r.gateways {
        eventually("ready again", || g.http("GET", "/readyz", b"").0 == 200);
        let e = g.err("delegateos/authorize", authorize(&revoked.encode(), 0));
        assert_eq!(e["data"]["type"], "revoked");
        // 30 of 100 spent before: 70 fit, 71 do not.
        let e = g.err("delegateos/authorize", authorize(&token, 71));
        assert_eq!(e["data"]["type"], "budget_exceeded");
    }
    let a = r.gateways[1].ok("delegateos/authorize", authorize(&token, 70));
    assert_eq!(a["allowed"], true);
    assert!(r.gateways[0].metrics().contains("dgw_state_writable 1"));
    assert!(r.gateways[0]
        .metrics()
        .contains("dgw_revocation_index_complete 1"));
}

/// The value of an unlabelled counter in a metrics page (0 when absent).
fn counter(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// A replica killed with SIGKILL mid-load: what the others acknowledged
/// stays spent, and the reservations it left open are released by the
/// survivors' sweepers exactly once between them.
#[test]
fn a_killed_replicas_reservations_expire_exactly_once() {
    let redis = RedisServer::start();
    let mut r = replicas_with(
        &redis,
        3,
        "[budget]\nreservation_ttl = \"2s\"\nsweep_interval = \"100ms\"\n",
    );
    let token = root_token(&r.root, &seed(2), &["docs:read:/project/**"], 100, 3600).encode();
    for _ in 0..20 {
        r.gateways[0].ok("delegateos/authorize", authorize(&token, 1));
    }
    for _ in 0..10 {
        let a = r.gateways[1].ok("delegateos/authorize", authorize(&token, 1));
        r.gateways[2].ok(
            "delegateos/settle",
            json!({"reservationId": a["reservationId"], "actualMicrocents": 1, "dct": token}),
        );
    }
    r.gateways[0].kill();
    let survivors = &r.gateways[1..];
    eventually("the open reservations released", || {
        let b = survivors[0].ok("delegateos/budget", json!({"delegationId": del(1)}));
        b["chains"][0][0]["reservedMicrocents"] == 0
    });
    let b = survivors[1].ok("delegateos/budget", json!({"delegationId": del(1)}));
    assert_eq!(b["chains"][0][0]["spentMicrocents"], 10, "{b}");
    assert_eq!(b["chains"][0][0]["remainingMicrocents"], 90, "{b}");
    let expired: u64 = survivors
        .iter()
        .map(|g| counter(&g.metrics(), "dgw_reservations_expired_total"))
        .sum();
    assert_eq!(expired, 20);
}

/// A message seen by one replica is a replay on another: an LDP message
/// ID (the replay guard every protocol uses) sent twice, once to each.
#[test]
fn a_message_seen_by_one_replica_is_a_replay_on_another() {
    use ldp_protocol::types::messages::{LdpEnvelope, LdpMessageBody};
    use ldp_protocol::types::payload::PayloadMode;
    let redis = RedisServer::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let url = delegate::echo_delegate(&rt);
    let ldp = format!(
        "[ldp]\n[[ldp.delegates]]\nname = \"echo\"\nurl = {url:?}\nsecret = {SECRET:?}\n\
         trust_domain = \"d\"\ntenant = \"acme\"\ncost_microcents = 1\n"
    );
    let r = replicas_with(&redis, 2, &ldp);
    let hello = LdpMessageBody::Hello {
        delegate_id: "ldp:delegate:router".into(),
        supported_modes: vec![PayloadMode::Text],
    };
    let mut e = LdpEnvelope::new("", "ldp:delegate:router", ECHO, hello, PayloadMode::Text);
    ldp_protocol::apply_signature(&mut e, SECRET);
    let bytes = serde_json::to_vec(&e).unwrap();
    let (status, body) = r.gateways[0].http("POST", "/ldp/echo/messages", &bytes);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let (status, body) = r.gateways[1].http("POST", "/ldp/echo/messages", &bytes);
    assert_eq!(status, 409, "{}", String::from_utf8_lossy(&body));
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"]["type"], "replay");
}

/// Two replicas on a Redis Cluster of three masters share one budget and
/// one revocation list.
#[test]
fn replicas_on_a_redis_cluster_share_budgets_and_revocations() {
    let cluster = RedisCluster::start();
    let r = replicas_at(&cluster.url(), 2, "");
    let token = root_token(&r.root, &seed(2), &["docs:read:/project/**"], 10, 3600);
    let admitted = (0..20)
        .filter(|i| {
            let answer =
                r.gateways[i % 2].call("delegateos/authorize", authorize(&token.encode(), 1));
            answer["result"]["allowed"] == true
        })
        .count();
    assert_eq!(admitted, 10);
    let rev = RevocationEntry::sign(
        &r.root,
        &token.revocation_ids()[0],
        at(0),
        RevocationScope::Block,
    )
    .unwrap();
    r.gateways[0].ok("delegateos/revoke", json!({"revocation": rev}));
    eventually("the other replica denies", || {
        let answer = r.gateways[1].call("delegateos/authorize", authorize(&token.encode(), 0));
        answer["error"]["data"]["type"] == "revoked"
    });
}

/// An MCP session opened on one replica is used on another (a load
/// balancer without affinity): the session is restored from the shared
/// record, bound to the same `Authorization` header; another header is
/// refused; once ended on one replica, a replica that never held it does
/// not know it.
#[test]
fn an_mcp_session_lands_on_any_replica() {
    use support::mcp::{text_of, Files, McpHttp};
    let redis = RedisServer::start();
    let files = Files::new();
    let r = replicas_with(&redis, 2, &files.upstream_toml());
    let token = files.read_token(&r.root, 10_000, 3600).encode();
    let mut c = McpHttp::connect(&r.gateways[0].addr, Some(&token));
    let read =
        |c: &mut McpHttp| c.call("read_text_file", json!({"path": files.path("a.txt")}), None);
    assert!(text_of(&read(&mut c)).contains("hello from a"));
    c.addr = &r.gateways[1].addr;
    assert!(text_of(&read(&mut c)).contains("hello from a"));
    // The same session with another credential: refused on either replica.
    let mut stranger = McpHttp {
        addr: &r.gateways[1].addr,
        session: c.session.clone(),
        next_id: 1,
        opened_with: Some(format!(
            "DCT {}",
            root_token_for(&r.root, &seed(4), &["docs:read:/**"], 5, 3600, del(9)).encode()
        )),
    };
    let (status, answer) = stranger.post(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        None,
    );
    assert_eq!(status, 403, "{answer}");
    assert_eq!(
        answer["error"]["data"]["type"],
        "session_credential_mismatch"
    );
    // Ended on the second replica: a third that never held it does not know it.
    let auth = format!("DCT {token}");
    let (status, _, _) = http_exchange(
        &r.gateways[1].addr,
        "DELETE",
        "/mcp",
        &[
            ("Mcp-Session-Id", c.session.as_str()),
            ("Authorization", auth.as_str()),
        ],
        b"",
    );
    assert_eq!(status, 204);
    let late = replicas_with(&redis, 1, &files.upstream_toml());
    c.addr = &late.gateways[0].addr;
    let (status, answer) = c.post(
        &json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
        None,
    );
    assert_eq!(status, 404, "{answer}");
    assert_eq!(answer["error"]["data"]["type"], "session_not_found");
}

/// A Talos correlation ID used on one replica is a replay on another
/// (the replay guard is shared), over JSON-RPC `dgw/authorize`.
#[test]
fn a_talos_correlation_id_is_a_replay_on_another_replica() {
    use support::talos_caps::{capability, did, iso};
    let redis = RedisServer::start();
    let issuer = seed(7);
    let extra = format!(
        "[[talos.issuers]]\ndid = {:?}\nkey = {:?}\ntenant = \"acme\"\nbudget_microcents = 200\n",
        did(&issuer),
        hex::encode(issuer.public_key().to_bytes())
    );
    let r = replicas_with(&redis, 2, &extra);
    let cap = capability(&issuer, "/project");
    let ask = |correlation: &str| {
        json!({"_talos_capability": cap, "_talos_correlation_id": correlation,
               "_talos_session_id": "sess-1", "_talos_timestamp": iso(0), "_talos_version": 1,
               "namespace": "read_text_file", "action": "read", "resource": "/project/a",
               "costMicrocents": 1})
    };
    let a = r.gateways[0].ok("dgw/authorize", ask("corr-1"));
    assert_eq!(a["protocol"], "talos");
    let e = r.gateways[1].err("dgw/authorize", ask("corr-1"));
    assert_eq!(
        (e["data"]["type"].as_str(), e["data"]["protocol"].as_str()),
        (Some("REPLAY"), Some("talos")),
        "{e}"
    );
    r.gateways[1].ok("dgw/authorize", ask("corr-2"));
}
