//! Byte-for-byte interop with a DelegateOS peer built on the TypeScript
//! reference's libraries (@noble/ed25519, blakejs, canonicalize): tokens it
//! mints verify in `dgw`, tokens `dgw` mints verify there, and both compute
//! the same revocation IDs and revocation signatures.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

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

/// Tokens minted by DelegateOS 0.3.0 itself (`interop/delegateos-0.3.0/`,
/// made by its `generate.mjs`), with dgw's verdict on each shape the package
/// can emit: the SJT as `createDCT`/`attenuateDCT` and the A2A broker make
/// it, the SJT stamped by `setTokenVersion`, and the Biscuit backend's.
fn samples_030() -> serde_json::Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/interop/delegateos-0.3.0/samples.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// What dgw answers each 0.3.0 sample: `Ok(delegation)` or `Err(type)`.
fn verdict_030(name: &str) -> Result<&'static str, &'static str> {
    match name {
        "sjt_root" => Ok("del_0300000000a1"),
        "sjt_attenuated" | "sjt_version_1_0" => Ok("del_0300000000b0"),
        "sjt_version_1_1" | "sjt_version_2_0" => Err("unsupported_token_version"),
        // Its delegation ID is random: any accepted verdict will do.
        "a2a_broker_proposal" => Ok(""),
        "biscuit_root" | "biscuit_attenuated" | "biscuit_widened_by_its_holder" => {
            Err("unsupported_token_format")
        }
        other => panic!("a 0.3.0 sample this test does not know: {other}"),
    }
}

#[test]
fn every_token_shape_delegateos_0_3_0_emits_gets_a_typed_verdict() {
    let samples = samples_030();
    assert_eq!(samples["package"], "delegate-os 0.3.0");
    let root = samples["root"].as_str().unwrap();
    assert_eq!(root, seed(1).principal_id().as_str());
    let list = samples["samples"].as_array().unwrap();
    assert_eq!(list.len(), 9);
    for sample in list {
        let name = sample["name"].as_str().unwrap();
        let expected = verdict_030(name);
        let request = &sample["request"];
        let serialized = &sample["serialized"];
        // The bare token and the package's own {token, format} object alike.
        for token in [
            serialized["token"].as_str().unwrap().to_owned(),
            serialized.to_string(),
        ] {
            let o = run(&[
                "token",
                "verify",
                &token,
                "--root",
                root,
                "--namespace",
                request["namespace"].as_str().unwrap(),
                "--action",
                request["action"].as_str().unwrap(),
                "--resource",
                request["resource"].as_str().unwrap(),
                "--now",
                samples["now"].as_str().unwrap(),
                "--json",
            ]);
            let out = json(&o);
            match expected {
                Ok(delegation) => {
                    assert_eq!(o.status.code(), Some(0), "{name}: {out}");
                    assert_eq!(out["valid"], true, "{name}: {out}");
                    if !delegation.is_empty() {
                        assert_eq!(out["scope"]["delegationId"], delegation, "{name}");
                    }
                }
                Err(kind) => {
                    assert_eq!(o.status.code(), Some(1), "{name}: {out}");
                    assert_eq!(out["valid"], false, "{name}: {out}");
                    assert_eq!(out["denial"]["type"], kind, "{name}: {out}");
                }
            }
        }
        // The package itself accepts every one of them (the Biscuit widened
        // by its own holder included: why dgw refuses the format).
        assert_eq!(sample["referenceVerdict"]["ok"], true, "{name}");
    }
}

#[test]
fn a_gateway_accepts_the_0_3_0_sjt_and_refuses_its_biscuit_and_newer_versions_by_name() {
    let samples = samples_030();
    let dir = tempfile::tempdir().unwrap();
    let config = gateway_config(dir.path(), &[("acme", seed(1).principal_id())], "");
    let gw = Gateway::start(&config);
    let token = |name: &str| {
        samples["samples"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()["serialized"]["token"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let params = |name: &str| {
        json!({"dct": token(name), "namespace": "docs", "action": "read",
               "resource": "/project/src/lib.rs", "costMicrocents": 1})
    };
    for name in ["sjt_attenuated", "sjt_version_1_0", "a2a_broker_proposal"] {
        let r = gw.call("delegateos/authorize", params(name));
        assert!(r.get("error").is_none(), "{name}: {r}");
    }
    for (name, kind) in [
        ("biscuit_attenuated", "unsupported_token_format"),
        ("biscuit_widened_by_its_holder", "unsupported_token_format"),
        ("sjt_version_2_0", "unsupported_token_version"),
    ] {
        let e = gw.err("delegateos/authorize", params(name));
        assert_eq!(e["code"], -32001, "{name}: {e}");
        assert_eq!(e["data"]["type"], kind, "{name}: {e}");
    }
}
