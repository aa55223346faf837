//! Byte-for-byte interop with a DelegateOS peer built on the TypeScript
//! reference's libraries (@noble/ed25519, blakejs, canonicalize): tokens it
//! mints verify in `dgw`, tokens `dgw` mints verify there, and both compute
//! the same revocation IDs and revocation signatures.

mod support;

use delegateos::{RevocationEntry, RevocationList};
use serde_json::json;
use support::*;

#[test]
fn tokens_minted_in_typescript_verify_in_dgw() {
    let root = delegateos::Keypair::from_seed([1; 32]);
    let alice = delegateos::Keypair::from_seed([2; 32]);
    let bob = delegateos::Keypair::from_seed([3; 32]);
    let carol = delegateos::Keypair::from_seed([4; 32]);
    let minted = node_peer(
        "mint",
        &json!({
            "root": seed_b64(1),
            "authority": {
                "delegatee": alice.principal_id(),
                "capabilities": [{"namespace": "web", "action": "search", "resource": "*"},
                                 {"namespace": "docs", "action": "read", "resource": "/project/**"}],
                "contractId": "ct_a1b2c3d4e5f6",
                "delegationId": "del_f7e8d9c0b1a2",
                "parentDelegationId": "del_000000000000",
                "chainDepth": 0,
                "maxChainDepth": 3,
                "maxBudgetMicrocents": 500000,
                "expiresAt": "2099-02-17T11:00:00.000Z",
                "issuedAt": "2026-02-17T10:00:00.000Z"
            },
            "attenuations": [
                {"seed": seed_b64(2), "block": {
                    "delegatee": bob.principal_id(), "delegationId": "del_000000000b0b",
                    "contractId": "ct_a1b2c3d4e5f6",
                    "allowedCapabilities": [{"namespace": "docs", "action": "read", "resource": "/project/src/**"}],
                    "maxBudgetMicrocents": 1000}},
                {"seed": seed_b64(3), "block": {
                    "delegatee": carol.principal_id(), "delegationId": "del_000000000ca1",
                    "contractId": "ct_a1b2c3d4e5f6", "expiresAt": "2099-02-17T10:30:00Z", "maxChainDepth": 1}}
            ]
        }),
    );
    let token = minted["token"].as_str().unwrap();
    let o = run(&[
        "token",
        "verify",
        token,
        "--root",
        root.principal_id().as_str(),
        "--namespace",
        "docs",
        "--action",
        "read",
        "--resource",
        "/project/src/lib.rs",
        "--spent",
        "100",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let scope = &json(&o)["scope"];
    assert_eq!(scope["remainingBudgetMicrocents"], 900);
    assert_eq!(scope["delegationId"], "del_000000000ca1");
    assert_eq!(scope["chainDepth"], 2);

    // Both sides agree on revocation IDs.
    let ours = json(&run(&["token", "inspect", token, "--json"]))["revocationIds"].clone();
    let theirs = node_peer(
        "verify",
        &json!({"token": token, "root": root.principal_id()}),
    );
    assert_eq!(theirs["valid"], true);
    assert_eq!(ours, theirs["revocationIds"]);
    // dgw re-encodes the peer's token to the same bytes.
    assert_eq!(delegateos::Dct::decode(token).unwrap().encode(), token);
}

#[test]
fn tokens_minted_by_dgw_verify_in_typescript() {
    let dir = tempfile::tempdir().unwrap();
    let (root_key, root) = key_file(dir.path(), "root", 11);
    let (alice_key, alice) = key_file(dir.path(), "alice", 12);
    let (_, bob) = key_file(dir.path(), "bob", 13);
    let issued = run(&[
        "token",
        "issue",
        "--key",
        root_key.to_str().unwrap(),
        "--to",
        alice.principal_id().as_str(),
        "--cap",
        "docs:read:/ünïcode/€/**",
        "--cap",
        "web:fetch:https://example.com/*",
        "--contract",
        "ct_000000000001",
        "--delegation",
        "del_000000000001",
        "--budget",
        "9007199254740991",
        "--max-depth",
        "2",
    ]);
    assert!(issued.status.success(), "{}", stderr(&issued));
    let token = stdout(&issued).trim().to_owned();
    let attenuated = run(&[
        "token",
        "attenuate",
        &token,
        "--key",
        alice_key.to_str().unwrap(),
        "--to",
        bob.principal_id().as_str(),
        "--cap",
        "docs:read:/ünïcode/€/😀/*",
        "--budget",
        "77",
        "--delegation",
        "del_000000000002",
        "--contract",
        "ct_000000000001",
    ]);
    assert!(attenuated.status.success(), "{}", stderr(&attenuated));
    let token = stdout(&attenuated).trim().to_owned();
    let theirs = node_peer(
        "verify",
        &json!({"token": token, "root": root.principal_id()}),
    );
    assert_eq!(theirs["valid"], true, "{theirs}");
    let ours = json(&run(&["token", "inspect", &token, "--json"]))["revocationIds"].clone();
    assert_eq!(ours, theirs["revocationIds"]);
}

#[test]
fn revocation_entries_signed_in_typescript_verify_here() {
    let entry = node_peer(
        "revocation",
        &json!({
            "seed": seed_b64(2),
            "revocationId": delegateos::base64url::encode(&[7; 32]),
            "revokedAt": "2026-02-17T10:00:00.000Z",
            "scope": "chain"
        }),
    );
    let parsed: RevocationEntry = serde_json::from_value(entry.clone()).unwrap();
    parsed.verify().unwrap();
    let mut list = RevocationList::new();
    list.add(parsed).unwrap();
    // And our own signature over the same fields is byte-identical (Ed25519 is deterministic).
    let ours = RevocationEntry::sign(
        &delegateos::Keypair::from_seed([2; 32]),
        &delegateos::base64url::encode(&[7; 32]),
        delegateos::Timestamp::parse("2026-02-17T10:00:00.000Z").unwrap(),
        delegateos::RevocationScope::Chain,
    )
    .unwrap();
    assert_eq!(serde_json::to_value(&ours).unwrap(), entry);
}
