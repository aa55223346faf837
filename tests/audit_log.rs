//! The tamper-evident audit log of a running gateway (issue 21): every
//! decision, settlement, revocation and admin action lands in the chain;
//! `dgw audit verify` finds it intact, then names a flipped byte and a
//! removed record; `dgw audit export` hands the events to a SIEM.

mod support;

use delegateos::{RevocationEntry, RevocationScope};
use serde_json::{json, Value};
use support::*;

const ADMIN: &str = "audit-admin-secret-0123456789";

fn admin_toml() -> String {
    use sha2::Digest;
    let digest: String = sha2::Sha256::digest(ADMIN.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("[[admin.tokens]]\nname = \"ops\"\nsha256 = \"{digest}\"\n")
}

fn authorize(token: &str, resource: &str, cost: u64) -> Value {
    json!({"dct": token, "namespace": "docs", "action": "read",
           "resource": resource, "costMicrocents": cost})
}

#[test]
fn decisions_settlements_revocations_and_admin_actions_are_chained_and_verified() {
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], &admin_toml());
    let mut gw = Gateway::start(&config);
    let admin = format!("Bearer {ADMIN}");
    let token = root_token(&root, &seed(2), &["docs:read:/project/**"], 1_000, 3600);
    let t = token.encode();

    let a = gw.ok("delegateos/authorize", authorize(&t, "/project/a", 10));
    gw.ok(
        "delegateos/settle",
        json!({"reservationId": a["reservationId"], "actualMicrocents": 7, "dct": t}),
    );
    let b = gw.ok("delegateos/authorize", authorize(&t, "/project/b", 10));
    gw.ok(
        "delegateos/release",
        json!({"reservationId": b["reservationId"], "dct": t}),
    );
    gw.err("delegateos/authorize", authorize(&t, "/elsewhere", 1));
    let rev = RevocationEntry::sign(
        &root,
        &token.revocation_ids()[0],
        at(0),
        RevocationScope::Block,
    )
    .unwrap();
    gw.ok("delegateos/revoke", json!({"revocation": rev}));
    let (status, revoked) = gw.call_as(
        &admin,
        "dgw/revoke",
        json!({"revocationId": "A".repeat(43)}),
    );
    assert_eq!(
        (status, &revoked["result"]["newlyRecorded"]),
        (200, &json!(true)),
        "{revoked}"
    );
    let (status, _) = gw.call_as(&admin, "dgw/reload", json!({}));
    assert_eq!(status, 200);
    assert!(gw.terminate().success());

    let log = dir.path().join("data/audit");
    let gateway = gateway_principal(&dir.path().join("data"));
    let verified = audit_verify(&log, &gateway);
    assert!(
        verified.status.success(),
        "{}{}",
        stdout(&verified),
        stderr(&verified)
    );
    assert!(
        stdout(&verified).starts_with("intact: records 0..="),
        "{}",
        stdout(&verified)
    );

    // What a SIEM gets: each event once, in order.
    let exported = run(&[
        "audit",
        "export",
        log.to_str().unwrap(),
        "--since",
        "2020-01-01T00:00:00Z",
    ]);
    assert!(exported.status.success(), "{}", stderr(&exported));
    let events: Vec<Value> = stdout(&exported)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["event"].clone())
        .filter(|e| e["event"] != "seal")
        .collect();
    let summary: Vec<String> = events
        .iter()
        .map(|e| match e["event"].as_str().unwrap() {
            "decision" => format!("decision allowed={}", e["allowed"]),
            "revoke" => format!("revoke {}", e["kind"].as_str().unwrap()),
            other => other.to_owned(),
        })
        .collect();
    assert_eq!(
        summary,
        [
            "decision allowed=true",
            "settle",
            "decision allowed=true",
            "release",
            "decision allowed=false",
            "revoke delegateos",
            "revoke admin",
            "reload",
        ],
        "{events:#?}"
    );
    assert_eq!(events[1]["chargedMicrocents"], 7);
    assert_eq!(events[4]["denialType"], "capability_not_granted");
    assert_eq!(events[6]["by"], "token:ops");

    // Flip one byte in one record and remove another: both named.
    let segment = log.join(format!("{:020}.jsonl", 0));
    let text = std::fs::read_to_string(&segment).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[1] = lines[1].replacen("\"chargedMicrocents\":7", "\"chargedMicrocents\":1", 1);
    assert_ne!(
        lines[1],
        text.lines().nth(1).unwrap(),
        "the settlement is record 1"
    );
    lines.remove(4);
    std::fs::write(&segment, lines.join("\n") + "\n").unwrap();
    let tampered = audit_verify(&log, &gateway);
    assert_eq!(tampered.status.code(), Some(1), "{}", stdout(&tampered));
    let said = stdout(&tampered);
    assert!(said.contains(":2: record 1 was changed"), "{said}");
    assert!(
        said.contains("record 4 is missing (removed) before record 5"),
        "{said}"
    );

    // Another gateway's key does not pass for this one's.
    let other = seed(9).principal_id().to_string();
    std::fs::write(&segment, text).unwrap();
    let forged = audit_verify(&log, &other);
    assert_eq!(forged.status.code(), Some(1));
    assert!(stdout(&forged).contains("is not the gateway's signature"));
}
