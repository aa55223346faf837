//! `dgw serve` end to end: the real binary on a free port with a temp data
//! dir, spoken to over HTTP.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use delegateos::{Dct, DelegationId, Keypair, RevocationEntry, RevocationScope, TaskContract};
use serde_json::{json, Value};
use support::*;

fn authorize(token: &str, resource: &str, cost: u64) -> Value {
    json!({"dct": token, "namespace": "docs", "action": "read", "resource": resource, "costMicrocents": cost})
}

struct Setup {
    dir: tempfile::TempDir,
    root: Keypair,
    alice: Keypair,
    bob: Keypair,
}

fn setup(extra: &str) -> (Setup, Gateway) {
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let other_tenant = seed(50);
    let config = gateway_config(
        dir.path(),
        &[
            ("acme", root.principal_id()),
            ("globex", other_tenant.principal_id()),
        ],
        extra,
    );
    let gw = Gateway::start(&config);
    (
        Setup {
            dir,
            root,
            alice: seed(2),
            bob: seed(3),
        },
        gw,
    )
}

#[test]
fn authorize_settle_release_and_budgets() {
    let (s, gw) = setup("");
    let t0 = root_token(&s.root, &s.alice, &["docs:read:/project/**"], 100, 3600);
    let t1 = attenuate(&t0, &s.alice, &s.bob, 2, Some(60), None);

    let a = gw.ok(
        "delegateos/authorize",
        authorize(&t1.encode(), "/project/a.md", 30),
    );
    assert_eq!(a["allowed"], true);
    assert_eq!(a["tenant"], "acme");
    assert_eq!(a["scope"]["delegationId"], json!(del(2)));
    assert_eq!(a["scope"]["chainDepth"], 1);
    let rid = a["reservationId"].as_str().unwrap().to_owned();

    let budget = gw.ok("delegateos/budget", json!({"delegationId": del(2)}));
    // The pipeline's own name answers the same (issue 32).
    assert_eq!(gw.ok("dgw/budget", json!({"delegationId": del(2)})), budget);
    let chain = &budget["chains"][0];
    assert_eq!(chain[0]["delegationId"], json!(del(1)));
    assert_eq!(chain[0]["reservedMicrocents"], 30);
    assert_eq!(chain[1]["budgetMicrocents"], 60);
    assert_eq!(chain[1]["remainingMicrocents"], 30);

    let settled = gw.ok(
        "delegateos/settle",
        json!({"reservationId": rid, "actualMicrocents": 20, "dct": t1.encode()}),
    );
    assert_eq!(settled["chargedMicrocents"], 20);
    assert_eq!(settled["releasedMicrocents"], 10);
    let chain = gw.ok("delegateos/budget", json!({"delegationId": del(2)}))["chains"][0].clone();
    assert_eq!(chain[0]["spentMicrocents"], 20);
    assert_eq!(chain[0]["remainingMicrocents"], 80);
    assert_eq!(chain[1]["spentMicrocents"], 20);
    assert_eq!(chain[1]["reservedMicrocents"], 0);

    // Settling twice, or an unknown reservation: not found.
    let e = gw.err(
        "delegateos/settle",
        json!({"reservationId": rid, "actualMicrocents": 1, "dct": t1.encode()}),
    );
    assert_eq!(
        (e["code"].as_i64(), e["data"]["type"].as_str()),
        (Some(-32004), Some("not_found"))
    );
    // More than reserved: a conflict, nothing changes.
    let r2 = gw.ok(
        "delegateos/authorize",
        authorize(&t1.encode(), "/project/b.md", 10),
    )["reservationId"]
        .clone();
    let e = gw.err(
        "delegateos/settle",
        json!({"reservationId": r2, "actualMicrocents": 11, "dct": t1.encode()}),
    );
    assert_eq!(
        (e["code"].as_i64(), e["data"]["type"].as_str()),
        (Some(-32005), Some("settlement_exceeds_reservation"))
    );
    let released = gw.ok(
        "delegateos/release",
        json!({"reservationId": r2, "dct": t1.encode()}),
    );
    assert_eq!(released["releasedMicrocents"], 10);
    // The child's 60 caps it: 20 spent, 40 more fits, 41 does not.
    let e = gw.err(
        "delegateos/authorize",
        authorize(&t1.encode(), "/project/c.md", 41),
    );
    assert_eq!(e["data"]["type"], "budget_exceeded");
    gw.ok(
        "delegateos/authorize",
        authorize(&t1.encode(), "/project/c.md", 40),
    );
    let e = gw.err("delegateos/budget", json!({"delegationId": del(99)}));
    assert_eq!(e["data"]["type"], "not_found");
}

#[test]
fn every_denial_type_over_the_wire() {
    let (s, gw) = setup("");
    let t0 = root_token(&s.root, &s.alice, &["docs:read:/project/**"], 100, 3600);
    let expect = |params: Value, kind: &str| {
        let e = gw.err("delegateos/authorize", params);
        assert_eq!(e["code"], -32001, "{e}");
        assert_eq!(e["message"], "DCT verification failed");
        assert_eq!(e["data"]["type"], kind, "{e}");
        assert!(e["data"]["requested"]["resource"].is_string());
        e
    };
    expect(authorize("not-a-token", "/project/a", 1), "malformed_token");
    let stranger = root_token(&seed(77), &s.alice, &["docs:read:/project/**"], 100, 3600);
    expect(
        authorize(&stranger.encode(), "/project/a", 1),
        "invalid_signature",
    );
    // A widening attenuation, validly signed: forged below the engine's checks.
    let forged = widened_attenuation(&t0, &s.alice, &s.bob);
    expect(authorize(&forged, "/project/a", 1), "attenuation_violation");
    let old = root_token(&s.root, &s.alice, &["docs:read:/project/**"], 100, -10);
    expect(authorize(&old.encode(), "/project/a", 1), "expired");
    expect(
        authorize(&t0.encode(), "/project/a", 101),
        "budget_exceeded",
    );
    let e = expect(
        authorize(&t0.encode(), "/etc/passwd", 1),
        "capability_not_granted",
    );
    assert_eq!(e["data"]["granted"][0]["resource"], "/project/**");
    assert_eq!(
        e["data"]["requested"],
        json!({"namespace": "docs", "action": "read", "resource": "/etc/passwd"})
    );
    // Revoked, through delegateos/revoke.
    let rev = RevocationEntry::sign(
        &s.root,
        &t0.revocation_ids()[0],
        at(0),
        RevocationScope::Block,
    )
    .unwrap();
    let r = gw.ok("delegateos/revoke", json!({"revocation": rev}));
    assert_eq!(r["newlyRecorded"], true);
    expect(authorize(&t0.encode(), "/project/a", 1), "revoked");
    // A revocation signed by someone who is not a root and shows no token
    // carrying the block is refused (issue 15), and the block stays good.
    let t_other = root_token(&s.root, &s.bob, &["docs:read:/x/**"], 100, 3600);
    let fake = RevocationEntry::sign(
        &s.alice,
        &t_other.revocation_ids()[0],
        at(0),
        RevocationScope::Chain,
    )
    .unwrap();
    let e = gw.err("delegateos/revoke", json!({"revocation": fake}));
    assert_eq!(e["data"]["type"], "untrusted_revoker");
    gw.ok(
        "delegateos/authorize",
        authorize(&t_other.encode(), "/x/a", 1),
    );
    // A tampered revocation entry is rejected.
    let mut bad = serde_json::to_value(&rev).unwrap();
    bad["scope"] = json!("chain");
    let e = gw.err("delegateos/revoke", json!({"revocation": bad}));
    assert_eq!(
        (e["code"].as_i64(), e["data"]["type"].as_str()),
        (Some(-32003), Some("invalid_revocation"))
    );
}

fn delegate(c: &TaskContract, token: &Dct, id: DelegationId, parent: DelegationId) -> Value {
    json!({"contract": c, "dct": token.encode(), "dctFormat": "delegateos-sjt-v1", "delegationId": id, "parentDelegationId": parent})
}

#[test]
fn delegation_lifecycle_delegate_complete_revoke() {
    let (s, gw) = setup("");
    let c = contract(&s.root, ct(1), &["docs:read"]);
    let t0 = root_token(&s.root, &s.alice, &["docs:read:/project/**"], 1000, 3600);
    let t1 = attenuate(&t0, &s.alice, &s.bob, 2, Some(400), None);

    let r = gw.ok(
        "delegateos/delegate",
        delegate(&c, &t0, del(1), DelegationId::root_parent()),
    );
    assert_eq!(r, json!({"accepted": true, "delegationId": del(1)}));
    // Replay of the same delegation ID.
    let r = gw.ok(
        "delegateos/delegate",
        delegate(&c, &t0, del(1), DelegationId::root_parent()),
    );
    assert_eq!(
        (r["accepted"].as_bool(), r["reason"].as_str()),
        (Some(false), Some("replay"))
    );
    // The child, under its parent.
    let r = gw.ok("delegateos/delegate", delegate(&c, &t1, del(2), del(1)));
    assert_eq!(r["accepted"], true, "{r}");

    // Rejections, each with a reason and a sentence.
    let reject = |params: Value, reason: &str| {
        let r = gw.ok("delegateos/delegate", params);
        assert_eq!(r["accepted"], false, "{r}");
        assert_eq!(r["reason"], reason, "{r}");
        assert!(!r["details"].as_str().unwrap().is_empty());
    };
    // A token of DelegateOS 0.3's Biscuit format, by name (decisions.md 180).
    let mut p = delegate(&c, &t0, del(3), DelegationId::root_parent());
    p["dctFormat"] = json!("delegateos-biscuit-v1");
    reject(p, "unsupported_token_format");
    let mut tampered = serde_json::to_value(&c).unwrap();
    tampered["constraints"]["maxBudgetMicrocents"] = json!(1_000_000);
    let mut p = delegate(&c, &t0, del(3), DelegationId::root_parent());
    p["contract"] = tampered;
    reject(p, "invalid_contract");
    let needs_web = contract(&s.root, ct(1), &["web:search"]);
    reject(
        delegate(&needs_web, &t0, del(1), DelegationId::root_parent()),
        "capability_not_granted",
    );
    let other_contract = contract(&s.root, ct(9), &[]);
    reject(
        delegate(&other_contract, &t0, del(1), DelegationId::root_parent()),
        "contract_mismatch",
    );
    reject(delegate(&c, &t1, del(5), del(1)), "delegation_mismatch");
    let orphan = attenuate(
        &root_token(&s.root, &s.alice, &["docs:read:/p/**"], 10, 3600),
        &s.alice,
        &s.bob,
        6,
        None,
        None,
    );
    let mut orphan_t = orphan.token().clone();
    orphan_t.authority.delegation_id = del(7);
    let orphan_tok = {
        let mut t = orphan_t;
        let auth = json!({"authority": t.authority});
        t.signatures[0].signature = delegateos::signing::sign(&s.root, &auth).unwrap();
        let chain = json!({"authority": t.authority, "attenuations": t.attenuations});
        t.signatures[1].signature = delegateos::signing::sign(&s.alice, &chain).unwrap();
        Dct::decode(&delegateos::base64url::encode(
            &delegateos::canonical::canonicalize(&t).unwrap(),
        ))
        .unwrap()
    };
    reject(delegate(&c, &orphan_tok, del(6), del(7)), "unknown_parent");
    let expired = root_token(&s.root, &s.alice, &["docs:read:/project/**"], 1000, -5);
    reject(
        delegate(&c, &expired, del(1), DelegationId::root_parent()),
        "expired",
    );

    // Completion by the wrong principal is refused and changes nothing.
    let e = gw.err("delegateos/complete", json!({"delegationId": del(2), "attestation": attestation(&s.alice, 1, del(2), json!({"words": 1}), 10, true)}));
    assert_eq!(e["data"]["type"], "principal_mismatch");
    // A forged attestation (tampered after signing) changes nothing either.
    let mut forged = attestation(&s.bob, 1, del(2), json!({"words": 1}), 10, true);
    forged["result"]["costMicrocents"] = json!(1);
    let e = gw.err(
        "delegateos/complete",
        json!({"delegationId": del(2), "attestation": forged}),
    );
    assert_eq!(e["data"]["type"], "invalid_signature");
    // The real completion: verified, charged at both levels, completed.
    let done = gw.ok("delegateos/complete", json!({"delegationId": del(2), "attestation": attestation(&s.bob, 1, del(2), json!({"words": 12}), 150, true)}));
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["chargedMicrocents"], 150);
    assert_eq!(done["verification"]["passed"], true);
    let chain = gw.ok("delegateos/budget", json!({"delegationId": del(2)}))["chains"][0].clone();
    assert_eq!(
        (
            chain[0]["spentMicrocents"].as_u64(),
            chain[1]["spentMicrocents"].as_u64()
        ),
        (Some(150), Some(150))
    );
    let e = gw.err("delegateos/complete", json!({"delegationId": del(2), "attestation": attestation(&s.bob, 2, del(2), json!({"words": 1}), 1, true)}));
    assert_eq!(e["data"]["type"], "delegation_not_active");

    // Revoking the authority block ends the still-active root delegation and denies its tokens.
    let rev = RevocationEntry::sign(
        &s.root,
        &t0.revocation_ids()[0],
        at(0),
        RevocationScope::Chain,
    )
    .unwrap();
    let r = gw.ok("delegateos/revoke", json!({"revocation": rev}));
    assert_eq!(r["revokedDelegations"], json!([del(1)]));
    let e = gw.err(
        "delegateos/authorize",
        authorize(&t1.encode(), "/project/a", 1),
    );
    assert_eq!(e["data"]["type"], "revoked");
    let e = gw.err("delegateos/complete", json!({"delegationId": del(1), "attestation": attestation(&s.alice, 3, del(1), json!({"words": 1}), 1, true)}));
    assert_eq!(e["data"]["type"], "delegation_not_active");
}

#[test]
fn a_failed_output_fails_the_delegation() {
    let (s, gw) = setup("");
    let c = contract(&s.root, ct(1), &[]);
    let t0 = root_token(&s.root, &s.alice, &["docs:read:/project/**"], 1000, 3600);
    gw.ok(
        "delegateos/delegate",
        delegate(&c, &t0, del(1), DelegationId::root_parent()),
    );
    let done = gw.ok("delegateos/complete", json!({"delegationId": del(1), "attestation": attestation(&s.alice, 1, del(1), json!({"lines": 3}), 10, true)}));
    assert_eq!(done["status"], "failed");
    assert_eq!(done["reason"]["type"], "schema_mismatch");
    assert_eq!(
        done["chargedMicrocents"], 10,
        "the work was done and is paid for"
    );
}

#[test]
fn json_rpc_conformance() {
    let (_s, gw) = setup("");
    let post = |body: &str| {
        let (status, bytes) = gw.http("POST", "/rpc", body.as_bytes());
        (
            status,
            if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice::<Value>(&bytes).unwrap()
            },
        )
    };
    let (st, r) = post("{not json");
    assert_eq!(
        (st, r["error"]["code"].as_i64(), r["id"].clone()),
        (200, Some(-32700), Value::Null)
    );
    assert_eq!(
        post(r#"{"a":1,"a":2}"#).1["error"]["code"],
        -32700,
        "duplicate keys are not JSON we accept"
    );
    assert_eq!(post("[]").1["error"]["code"], -32600);
    assert_eq!(post("42").1["error"]["code"], -32600);
    assert_eq!(
        post(r#"{"jsonrpc":"1.0","id":1,"method":"delegateos/budget"}"#).1["error"]["code"],
        -32600
    );
    assert_eq!(
        post(r#"{"jsonrpc":"2.0","id":{"x":1},"method":"delegateos/budget"}"#).1["error"]["code"],
        -32600
    );
    assert_eq!(
        post(r#"{"jsonrpc":"2.0","id":1,"method":5}"#).1["error"]["code"],
        -32600
    );
    assert_eq!(
        post(r#"{"jsonrpc":"2.0","id":1,"method":"delegateos/budget","params":"x"}"#).1["error"]
            ["code"],
        -32600
    );
    assert_eq!(
        post(r#"{"jsonrpc":"2.0","id":1,"method":"delegateos/budget","extra":1}"#).1["error"]
            ["code"],
        -32600
    );
    let r = post(r#"{"jsonrpc":"2.0","id":"abc","method":"nope/nope"}"#).1;
    assert_eq!(
        (r["error"]["code"].as_i64(), r["id"].as_str()),
        (Some(-32601), Some("abc"))
    );
    for params in [
        r#"{}"#,
        r#"{"delegationId":"bad"}"#,
        r#"{"delegationId":"del_000000000001","x":1}"#,
        r#"[1]"#,
    ] {
        let r = post(&format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"delegateos/budget","params":{params}}}"#
        ))
        .1;
        assert_eq!(r["error"]["code"], -32602, "{params}: {r}");
        assert_eq!(r["error"]["data"]["type"], "invalid_params");
    }
    let e = gw.err(
        "delegateos/authorize",
        json!({"dct": "x", "namespace": "docs", "action": "read"}),
    );
    assert_eq!(e["code"], -32602);
    // Notifications get nothing back; a batch gets one answer per request.
    let (st, body) = gw.http("POST", "/rpc", br#"{"jsonrpc":"2.0","method":"delegateos/budget","params":{"delegationId":"del_000000000001"}}"#);
    assert_eq!((st, body.len()), (204, 0));
    let (st, r) = post(
        r#"[{"jsonrpc":"2.0","id":1,"method":"nope"},{"jsonrpc":"2.0","method":"nope"},{"jsonrpc":"2.0","id":2,"method":"delegateos/budget","params":{"delegationId":"del_000000000001"}}]"#,
    );
    assert_eq!(st, 200);
    let ids: Vec<i64> = r
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![1, 2]);
    // Limits and routes.
    let many = format!(
        "[{}]",
        vec![r#"{"jsonrpc":"2.0","method":"nope"}"#; 1001].join(",")
    );
    let (st, r) = post(&many);
    assert_eq!(
        (st, r["error"]["data"]["type"].as_str()),
        (200, Some("batch_too_large"))
    );
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"pad":"{}"}}}}"#,
        "x".repeat(2 << 20)
    );
    let (st, body) = gw.http("POST", "/rpc", big.as_bytes());
    assert_eq!(st, 413);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["error"]["data"]["type"],
        "body_too_large"
    );
    assert_eq!(gw.http("GET", "/rpc", b"").0, 405);
    assert_eq!(gw.http("GET", "/nowhere", b"").0, 404);
    assert_eq!(gw.http("GET", "/healthz", b"").0, 200);
    assert_eq!(gw.http("GET", "/readyz", b"").0, 200);
}

/// Hundreds of concurrent reservations at one budget across sibling
/// delegations: exactly what fits is granted, never more.
#[test]
fn concurrent_reservations_never_overspend() {
    let (s, gw) = setup("");
    let t0 = root_token(&s.root, &s.alice, &["docs:read:/project/**"], 1000, 3600);
    // Ten siblings, each allowed the whole 1000: only the parent limits them together.
    let siblings: Vec<String> = (0..10)
        .map(|i| attenuate(&t0, &s.alice, &seed(10 + i), 10 + i, Some(1000), None).encode())
        .collect();
    let granted = Arc::new(std::sync::Mutex::new(Vec::new()));
    let denied = Arc::new(AtomicUsize::new(0));
    let addr = gw.addr.clone();
    std::thread::scope(|scope| {
        for worker in 0..40 {
            let (granted, denied, siblings, addr) =
                (granted.clone(), denied.clone(), &siblings, addr.clone());
            scope.spawn(move || {
                for i in 0..10 {
                    let token = &siblings[(worker + i) % siblings.len()];
                    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "delegateos/authorize", "params": authorize(token, "/project/x", 5)});
                    let (_, bytes) = http_request(&addr, "POST", "/rpc", body.to_string().as_bytes());
                    let r: Value = serde_json::from_slice(&bytes).unwrap();
                    if let Some(id) = r["result"]["reservationId"].as_str() {
                        granted.lock().unwrap().push((id.to_owned(), token.clone()));
                    } else {
                        assert_eq!(r["error"]["data"]["type"], "budget_exceeded", "{r}");
                        denied.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let granted = granted.lock().unwrap().clone();
    assert_eq!(granted.len(), 200, "1000 / 5 = 200 reservations fit");
    assert_eq!(denied.load(Ordering::Relaxed), 200);
    for (id, token) in &granted {
        gw.ok(
            "delegateos/settle",
            json!({"reservationId": id, "actualMicrocents": 5, "dct": token}),
        );
    }
    let chain = gw.ok("delegateos/budget", json!({"delegationId": del(10)}))["chains"][0].clone();
    assert_eq!(chain[0]["spentMicrocents"], 1000);
    assert_eq!(chain[0]["remainingMicrocents"], 0);
    let per_sibling: u64 = (10..20u8)
        .map(|i| {
            gw.ok("delegateos/budget", json!({"delegationId": del(i)}))["chains"][0][1]
                ["spentMicrocents"]
                .as_u64()
                .unwrap()
        })
        .sum();
    assert_eq!(
        per_sibling, 1000,
        "siblings together spent exactly their parent's budget"
    );
}

/// A kill -9 in the middle of a burst, then a restart: acknowledged
/// reservations survive and can be settled, unacknowledged ones expire, and
/// in the end exactly the budget is spent.
#[test]
fn kill_and_restart_never_overspends_or_forgets() {
    // The TTL outlasts a restart and settling every acknowledged
    // reservation on a loaded machine (at 5 s the last ones had lapsed).
    let (s, mut gw) = setup("[budget]\nreservation_ttl = \"15s\"\nsweep_interval = \"200ms\"\nsnapshot_interval = \"300ms\"");
    let t0 = root_token(&s.root, &s.alice, &["docs:read:/project/**"], 5000, 3600);
    let siblings: Vec<String> = (0..5)
        .map(|i| attenuate(&t0, &s.alice, &seed(10 + i), 10 + i, None, None).encode())
        .collect();
    // Acknowledged reservations, with the token that holds each.
    type Acked = Arc<std::sync::Mutex<Vec<(String, String)>>>;
    let acked: Acked = Arc::default();
    let fire = |addr: String, n: usize, acked: Acked| {
        let siblings = siblings.clone();
        std::thread::spawn(move || {
            std::thread::scope(|scope| {
                for w in 0..16 {
                    let (addr, acked, siblings) = (addr.clone(), acked.clone(), &siblings);
                    scope.spawn(move || {
                        for i in 0..n / 16 {
                            let token = &siblings[(w + i) % 5];
                            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "delegateos/authorize",
                                              "params": authorize(token, "/project/x", 5)});
                            let Ok(mut stream) = std::net::TcpStream::connect(&addr) else { return };
                            use std::io::{Read, Write};
                            let req = format!("POST /rpc HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}", body.to_string().len(), body);
                            if stream.write_all(req.as_bytes()).is_err() { return; }
                            let mut resp = String::new();
                            if stream.read_to_string(&mut resp).is_err() { return; }
                            if let Some(start) = resp.find("\r\n\r\n") {
                                if let Ok(v) = serde_json::from_str::<Value>(&resp[start + 4..]) {
                                    if let Some(id) = v["result"]["reservationId"].as_str() {
                                        acked.lock().unwrap().push((id.to_owned(), token.clone()));
                                    }
                                }
                            }
                        }
                    });
                }
            });
        })
    };
    // Phase 1: 48 requests, all fit (48 × 5 = 240 ≤ 5000).
    fire(gw.addr.clone(), 48, acked.clone()).join().unwrap();
    assert_eq!(acked.lock().unwrap().len(), 48);
    // Phase 2: a burst cut short by SIGKILL.
    let burst = fire(gw.addr.clone(), 1600, acked.clone());
    std::thread::sleep(std::time::Duration::from_millis(150));
    gw.kill();
    let killed_at = std::time::Instant::now();
    burst.join().unwrap();
    let acked_before_restart = acked.lock().unwrap().clone();
    // The kill landed mid-burst: some of it was acknowledged, not all of what fits.
    assert!(
        acked_before_restart.len() > 48 && acked_before_restart.len() < 1000,
        "acknowledged before the kill: {}",
        acked_before_restart.len()
    );

    let gw = Gateway::start(&gw.config);
    // Every acknowledged reservation survived the crash and settles now.
    for (id, token) in &acked_before_restart {
        gw.ok(
            "delegateos/settle",
            json!({"reservationId": id, "actualMicrocents": 5, "dct": token}),
        );
    }
    // Orphans (written, never acknowledged) are swept after their TTL.
    let swept_by = killed_at + std::time::Duration::from_millis(15_600);
    std::thread::sleep(swept_by.saturating_duration_since(std::time::Instant::now()));
    acked.lock().unwrap().clear();
    fire(gw.addr.clone(), 1600, acked.clone()).join().unwrap();
    let after = acked.lock().unwrap().clone();
    for (id, token) in &after {
        gw.ok(
            "delegateos/settle",
            json!({"reservationId": id, "actualMicrocents": 5, "dct": token}),
        );
    }
    assert_eq!(
        acked_before_restart.len() + after.len(),
        1000,
        "exactly 5000 / 5 reservations in all"
    );
    let chain = gw.ok("delegateos/budget", json!({"delegationId": del(10)}))["chains"][0].clone();
    assert_eq!(chain[0]["spentMicrocents"], 5000);
    assert_eq!(chain[0]["reservedMicrocents"], 0);
    let metrics = gw.metrics();
    assert!(metrics.contains("dgw_reservations_open 0"));
    assert!(metrics.contains("dgw_state_writable 1"), "{metrics}");
}

#[test]
fn state_survives_a_clean_restart_and_sigterm_exits_zero() {
    let (s, mut gw) = setup("");
    let c = contract(&s.root, ct(1), &[]);
    let t0 = root_token(&s.root, &s.alice, &["docs:read:/project/**"], 100, 3600);
    let t_revoked = root_token(&s.root, &s.bob, &["docs:read:/project/**"], 100, 3600);
    gw.ok(
        "delegateos/delegate",
        delegate(&c, &t0, del(1), DelegationId::root_parent()),
    );
    let rid = gw.ok(
        "delegateos/authorize",
        authorize(&t0.encode(), "/project/a", 40),
    )["reservationId"]
        .clone();
    gw.ok(
        "delegateos/settle",
        json!({"reservationId": rid, "actualMicrocents": 40, "dct": t0.encode()}),
    );
    let open = gw.ok(
        "delegateos/authorize",
        authorize(&t0.encode(), "/project/a", 10),
    )["reservationId"]
        .clone();
    let rev = RevocationEntry::sign(
        &s.root,
        &t_revoked.revocation_ids()[0],
        at(0),
        RevocationScope::Block,
    )
    .unwrap();
    gw.ok("delegateos/revoke", json!({"revocation": rev}));
    assert!(gw.terminate().success(), "SIGTERM exits 0");

    let gw = Gateway::start(&gw.config);
    let chain = gw.ok("delegateos/budget", json!({"delegationId": del(1)}))["chains"][0].clone();
    assert_eq!(
        (
            chain[0]["spentMicrocents"].as_u64(),
            chain[0]["reservedMicrocents"].as_u64()
        ),
        (Some(40), Some(10))
    );
    gw.ok(
        "delegateos/settle",
        json!({"reservationId": open, "actualMicrocents": 10, "dct": t0.encode()}),
    );
    let r = gw.ok(
        "delegateos/delegate",
        delegate(&c, &t0, del(1), DelegationId::root_parent()),
    );
    assert_eq!(r["reason"], "replay");
    assert_eq!(
        gw.err(
            "delegateos/authorize",
            authorize(&t_revoked.encode(), "/project/a", 1)
        )["data"]["type"],
        "revoked"
    );
    let _ = &s.dir;
}

/// `--ephemeral`: the same enforcement over the in-memory backend, nothing
/// written under data_dir but the keys, and a restart forgets it all.
#[test]
fn ephemeral_state_is_enforced_in_memory_and_forgotten_at_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (root, alice) = (seed(1), seed(2));
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], "");
    let mut gw = Gateway::start_ephemeral(&config);
    let c = contract(&root, ct(1), &[]);
    let t0 = root_token(&root, &alice, &["docs:read:/project/**"], 100, 3600);
    let r = gw.ok(
        "delegateos/delegate",
        delegate(&c, &t0, del(1), DelegationId::root_parent()),
    );
    assert_eq!(r["accepted"], true, "{r}");
    let rid = gw.ok(
        "delegateos/authorize",
        authorize(&t0.encode(), "/project/a", 70),
    )["reservationId"]
        .clone();
    assert_eq!(
        gw.err(
            "delegateos/authorize",
            authorize(&t0.encode(), "/project/a", 31)
        )["data"]["type"],
        "budget_exceeded"
    );
    gw.ok(
        "delegateos/settle",
        json!({"reservationId": rid, "actualMicrocents": 60, "dct": t0.encode()}),
    );
    let chain = gw.ok("delegateos/budget", json!({"delegationId": del(1)}))["chains"][0].clone();
    assert_eq!(chain[0]["spentMicrocents"], 60);
    let rev = RevocationEntry::sign(
        &root,
        &t0.revocation_ids()[0],
        at(0),
        RevocationScope::Block,
    )
    .unwrap();
    gw.ok("delegateos/revoke", json!({"revocation": rev}));
    assert_eq!(
        gw.err(
            "delegateos/authorize",
            authorize(&t0.encode(), "/project/a", 1)
        )["data"]["type"],
        "revoked"
    );
    let data = dir.path().join("data");
    assert!(!data.join("db").exists() && !data.join("journal").exists());
    assert!(gw.terminate().success());

    // A restart forgets the revocation, the spend and the delegation.
    let gw = Gateway::start_ephemeral(&config);
    let r = gw.ok(
        "delegateos/delegate",
        delegate(&c, &t0, del(1), DelegationId::root_parent()),
    );
    assert_eq!(r["accepted"], true, "not a replay: {r}");
    gw.ok(
        "delegateos/authorize",
        authorize(&t0.encode(), "/project/a", 100),
    );
}

#[test]
fn metrics_move() {
    let (s, gw) = setup("");
    let t0 = root_token(&s.root, &s.alice, &["docs:read:/project/**"], 100, 3600);
    let rid = gw.ok(
        "delegateos/authorize",
        authorize(&t0.encode(), "/project/a", 30),
    )["reservationId"]
        .clone();
    gw.ok(
        "delegateos/settle",
        json!({"reservationId": rid, "actualMicrocents": 25, "dct": t0.encode()}),
    );
    gw.err(
        "delegateos/authorize",
        authorize(&t0.encode(), "/etc/passwd", 1),
    );
    gw.err("delegateos/authorize", authorize("garbage", "/x", 1));
    // Malformed: not JSON; an empty batch; no method.
    for body in [&b"{"[..], b"[]", br#"{"jsonrpc":"2.0","id":7}"#] {
        let (status, answer) = gw.http("POST", "/rpc", body);
        assert_eq!(status, 200);
        assert!(String::from_utf8_lossy(&answer).contains("\"error\""));
    }
    let m = gw.metrics();
    for line in [
        "dgw_requests_total{front=\"jsonrpc\",method=\"-\",outcome=\"error\"} 3",
        "dgw_requests_total{front=\"jsonrpc\",method=\"delegateos/authorize\",outcome=\"ok\"} 1",
        "dgw_requests_total{front=\"jsonrpc\",method=\"delegateos/authorize\",outcome=\"denied\"} 2",
        "dgw_requests_total{front=\"jsonrpc\",method=\"delegateos/settle\",outcome=\"ok\"} 1",
        "dgw_denials_total{protocol=\"delegateos\",type=\"capability_not_granted\"} 1",
        "dgw_denials_total{protocol=\"delegateos\",type=\"malformed_token\"} 1",
        "dgw_budget_spent_microcents{tenant=\"acme\"} 25",
        "dgw_budget_remaining_microcents{tenant=\"acme\"} 75",
        "dgw_reservations_open 0",
        "dgw_authorize_duration_seconds_count 1",
        // t0 and "garbage" looked for and verified once each; t0 found
        // by the second authorize (a settle matches the holder's digest).
        "dgw_token_cache_lookups_total{result=\"miss\"} 2",
        "dgw_token_cache_lookups_total{result=\"hit\"} 1",
    ] {
        assert!(m.lines().any(|l| l == line), "missing {line:?} in:\n{m}");
    }
    // Exported at zero from the start: synced means counted above it.
    let count = |name: &str| -> u64 {
        m.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in:\n{m}"))
            .parse()
            .unwrap()
    };
    assert!(
        count("dgw_budget_journal_sync_duration_seconds_count") > 0,
        "{m}"
    );
    assert!(count("dgw_budget_journal_sync_batch_size_count") > 0, "{m}");
    assert!(m.contains("# TYPE dgw_requests_total counter"));
}

#[test]
fn bad_configs_are_refused_with_the_key_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    for (text, key) in [
        ("data_dir = \"d\"\nkey_file = \"k\"\n[server]\nhttp = \"nowhere\"\n", "server.http"),
        ("data_dir = \"d\"\nkey_file = \"k\"\n[server]\nhttp = \"127.0.0.1:0\"\n[[tenants]]\nname = \"a\"\nroot = \"x\"\n", "tenants[0].root"),
        ("data_dir = \"d\"\n[server]\nhttp = \"127.0.0.1:0\"\n", "key_file"),
        ("data_dir = \"d\"\nkey_file = \"k\"\nport = 1\n[server]\nhttp = \"127.0.0.1:0\"\n", "port"),
    ] {
        std::fs::write(&path, text).unwrap();
        let o = run(&["serve", "--config", path.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{text}");
        assert!(stderr(&o).contains(key), "{key}: {}", stderr(&o));
    }
    let o = run(&["serve", "--config", "/nonexistent/dgw.toml"]);
    assert_eq!(o.status.code(), Some(2));
}

/// A reservation nobody settles is ended at its deadline and counted
/// (`dgw_reservations_expired_total`, which an alert watches).
#[test]
fn unsettled_reservations_expire_and_are_counted() {
    let (s, gw) = setup("[budget]\nreservation_ttl = \"1s\"\nsweep_interval = \"100ms\"");
    let t0 = root_token(&s.root, &s.alice, &["docs:read:/project/**"], 100, 3600);
    for _ in 0..3 {
        gw.ok(
            "delegateos/authorize",
            authorize(&t0.encode(), "/project/a", 10),
        );
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let metrics = gw.metrics();
        let expired = metrics
            .lines()
            .find(|l| l.starts_with("dgw_reservations_expired_total "))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0);
        if expired >= 3.0 {
            assert!(metrics.contains("dgw_reservations_open 0"), "{metrics}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{metrics}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let chain = gw.ok("delegateos/budget", json!({"delegationId": del(1)}))["chains"][0].clone();
    assert_eq!(chain[0]["reservedMicrocents"], 0);
    assert_eq!(chain[0]["spentMicrocents"], 0);
}

/// Issue 32: the gateway's methods are `dgw/*`, and DelegateOS's crate
/// gives them its spec's names: each alias answers as the method it names
/// (results, errors), counted under the name called; DelegateOS's own
/// methods keep their params' words; a name no one registered is unknown,
/// however close to an alias.
#[test]
fn the_neutral_names_and_the_delegateos_aliases_answer_alike() {
    let (s, gw) = setup("");
    let c = contract(&s.root, ct(1), &["docs:read"]);
    let t0 = root_token(&s.root, &s.alice, &["docs:read:/project/**"], 1000, 3600);
    gw.ok(
        "delegateos/delegate",
        delegate(&c, &t0, del(1), DelegationId::root_parent()),
    );
    let dct = t0.encode();
    let rid =
        gw.ok("delegateos/authorize", authorize(&dct, "/project/a", 30))["reservationId"].clone();
    let pairs = [
        ("dgw/budget", "delegateos/budget", del(1)),
        ("dgw/delegation", "delegateos/delegation", del(1)),
        // Unknown delegations.
        ("dgw/budget", "delegateos/budget", del(7)),
        ("dgw/delegation", "delegateos/delegation", del(8)),
    ];
    let mut answers = Vec::new();
    for (neutral, alias, id) in pairs {
        let params = json!({"delegationId": id, "dct": dct});
        let answer = gw.call(neutral, params.clone());
        assert_eq!(answer, gw.call(alias, params), "{neutral}");
        answers.push(answer);
    }
    // Those answered (two results, two errors), and so do params the
    // method does not take.
    assert!(
        answers[..2].iter().all(|a| a.get("result").is_some()),
        "{answers:?}"
    );
    assert!(
        answers[2..].iter().all(|a| a.get("error").is_some()),
        "{answers:?}"
    );
    let extra = json!({"reservationId": rid, "extra": 1});
    assert_eq!(
        gw.err("dgw/settle", extra.clone()),
        gw.err("delegateos/settle", extra)
    );
    // A reservation ended under one name is ended for the other.
    let released = gw.ok("dgw/release", json!({"reservationId": rid, "dct": dct}));
    assert_eq!(released["releasedMicrocents"], 30, "{released}");
    let again = gw.err(
        "delegateos/release",
        json!({"reservationId": rid, "dct": dct}),
    );
    assert_eq!(
        again,
        gw.err("dgw/release", json!({"reservationId": rid, "dct": dct}))
    );
    // A signed entry, through the neutral name, then the spec's.
    let rev = RevocationEntry::sign(
        &s.root,
        &t0.revocation_ids()[0],
        at(0),
        RevocationScope::Block,
    )
    .unwrap();
    let first = gw.ok("dgw/revocations/submit", json!({"revocation": rev}));
    assert_eq!(first["newlyRecorded"], true, "{first}");
    let second = gw.ok("delegateos/revoke", json!({"revocation": rev}));
    assert_eq!(second["newlyRecorded"], false, "{second}");
    // DelegateOS's own methods, now its crate's, with the params' words the
    // front used.
    let raw = |body: &str| -> Value {
        let (status, bytes) = gw.http("POST", "/rpc", body.as_bytes());
        assert_eq!(status, 200);
        serde_json::from_slice::<Value>(&bytes).unwrap()["error"].clone()
    };
    let none = raw(r#"{"jsonrpc":"2.0","id":1,"method":"delegateos/authorize"}"#);
    assert_eq!(
        (
            none["code"].as_i64(),
            none["data"]["type"].as_str(),
            none["message"].as_str()
        ),
        (
            Some(-32602),
            Some("invalid_params"),
            Some("params are required")
        )
    );
    let listed = raw(r#"{"jsonrpc":"2.0","id":1,"method":"delegateos/complete","params":[1]}"#);
    assert_eq!(listed["message"], "params must be an object", "{listed}");
    let extra = gw.err(
        "delegateos/delegate",
        json!({"delegationId": del(2), "x": 1}),
    );
    assert_eq!(extra["data"]["type"], "invalid_params", "{extra}");
    assert!(
        extra["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid params: "),
        "{extra}"
    );
    // No protocol answers to these.
    for name in [
        "delegateos/audit",
        "delegateos/",
        "DELEGATEOS/SETTLE",
        "delegateos/settle/",
        "dgw/delegateos/settle",
    ] {
        let e = gw.err(name, json!({"reservationId": rid}));
        assert_eq!(e["code"], -32601, "{name}: {e}");
    }
    let m = gw.metrics();
    for line in [
        "dgw_requests_total{front=\"jsonrpc\",method=\"dgw/budget\",outcome=\"ok\"} 1",
        "dgw_requests_total{front=\"jsonrpc\",method=\"delegateos/budget\",outcome=\"ok\"} 1",
        "dgw_requests_total{front=\"jsonrpc\",method=\"dgw/revocations/submit\",outcome=\"ok\"} 1",
        "dgw_requests_total{front=\"jsonrpc\",method=\"delegateos/revoke\",outcome=\"ok\"} 1",
        "dgw_requests_total{front=\"jsonrpc\",method=\"delegateos/delegate\",outcome=\"ok\"} 1",
        "dgw_requests_total{front=\"jsonrpc\",method=\"unknown\",outcome=\"error\"} 5",
    ] {
        assert!(m.lines().any(|l| l == line), "missing {line:?} in:\n{m}");
    }
}
