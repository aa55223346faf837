//! VERIFY_DCT (§10.1): every step, every denial type, in order.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::HashSet;

use delegateos::dct::{self, AttenuateParams, Covers, SignedJsonToken, VerificationContext};
use delegateos::revocation::NoRevocations;
use delegateos::{
    base64url, AuthorizedScope, CapabilityRequest, Dct, DenialReason, DenialType, RevocationEntry,
    RevocationList, RevocationScope,
};
use serde_json::{json, Value};
use support::*;

fn check_at(
    token: &str,
    cast: &Cast,
    now: &str,
    spent: u64,
    req: &CapabilityRequest,
    revocations: &dyn delegateos::RevocationCheck,
) -> Result<AuthorizedScope, DenialReason> {
    let roots = cast.roots();
    let now = ts(now);
    dct::verify(
        token,
        &VerificationContext {
            trusted_roots: &roots,
            revocations,
            now: &now,
            spent_microcents: spent,
            request: req,
        },
    )
}

fn check(token: &str, cast: &Cast) -> Result<AuthorizedScope, DenialReason> {
    check_at(
        token,
        cast,
        NOW,
        0,
        &request("docs", "read", "/project/src/main.rs"),
        &NoRevocations,
    )
}

fn denied(result: Result<AuthorizedScope, DenialReason>) -> DenialType {
    match result {
        Ok(scope) => panic!("expected a denial, got {scope:?}"),
        Err(reason) => {
            assert!(!reason.detail.is_empty());
            reason.kind
        }
    }
}

fn content(token: &Dct) -> SignedJsonToken {
    token.token().clone()
}

/// Decodes a token to its JSON value, for byte-level tampering.
fn json_of(token: &str) -> Value {
    serde_json::from_slice(&base64url::decode(token).unwrap()).unwrap()
}

fn encode_json(v: &Value) -> String {
    base64url::encode(&delegateos::canonical::canonicalize(v).unwrap())
}

#[test]
fn root_token_verifies_with_its_scope() {
    let cast = Cast::new();
    let token = cast.root_token().encode();
    let scope = check(&token, &cast).unwrap();
    assert_eq!(scope.chain_depth, 0);
    assert_eq!(scope.max_chain_depth, 3);
    assert_eq!(scope.remaining_budget_microcents, 10_000);
    assert_eq!(scope.delegation_id, del(1));
    assert_eq!(scope.contract_id, ct(1));
    assert_eq!(scope.capabilities.len(), 2);
    let json = serde_json::to_value(&scope).unwrap();
    for field in [
        "capabilities",
        "remainingBudgetMicrocents",
        "chainDepth",
        "maxChainDepth",
        "contractId",
        "delegationId",
    ] {
        assert!(json.get(field).is_some(), "camelCase field {field}");
    }
    // Round trip through the wire form is byte-exact.
    assert_eq!(Dct::decode(&token).unwrap().encode(), token);
    let serialized = cast.root_token().to_serialized();
    assert_eq!(serialized.format, "delegateos-sjt-v1");
    assert_eq!(serialized.token, token);
}

#[test]
fn chain_of_three_attenuations_verifies_with_effective_values() {
    let cast = Cast::new();
    let token = cast.chain_of_three();
    assert_eq!(token.holder(), cast.dave.principal_id());
    let scope = check_at(
        &token.encode(),
        &cast,
        NOW,
        500,
        &request("docs", "read", "/project/src/lib.rs"),
        &NoRevocations,
    )
    .unwrap();
    assert_eq!(scope.chain_depth, 3);
    assert_eq!(scope.max_chain_depth, 0);
    assert_eq!(scope.remaining_budget_microcents, 1_500);
    assert_eq!(scope.delegation_id, del(4));
    assert_eq!(scope.contract_id, ct(4));
    assert_eq!(scope.capabilities, vec![cap("docs:read:/project/src/*")]);
    // The third attenuation narrowed to one level under src.
    assert_eq!(
        denied(check_at(
            &token.encode(),
            &cast,
            NOW,
            0,
            &request("docs", "read", "/project/src/a/b.rs"),
            &NoRevocations
        )),
        DenialType::CapabilityNotGranted
    );
    // The second attenuation's expiry is in force.
    assert_eq!(
        denied(check_at(
            &token.encode(),
            &cast,
            "2026-02-17T10:50:00Z",
            0,
            &request("docs", "read", "/project/src/lib.rs"),
            &NoRevocations
        )),
        DenialType::Expired
    );
    let ids = token.revocation_ids();
    assert_eq!(ids.len(), 4);
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 4);
    let levels = Dct::decode(&token.encode())
        .unwrap()
        .verify_chain(&cast.roots())
        .unwrap();
    let budgets: Vec<u64> = levels
        .levels()
        .iter()
        .map(|l| l.max_budget_microcents)
        .collect();
    assert_eq!(budgets, vec![10_000, 5_000, 2_000, 2_000]);
}

#[test]
fn revocation_ids_are_blake2b_of_each_canonical_block() {
    let cast = Cast::new();
    let token = cast.chain_of_three();
    let json = json_of(&token.encode());
    let expected_authority = delegateos::signing::hash_id(&json["authority"]).unwrap();
    assert_eq!(token.revocation_ids()[0], expected_authority);
    for i in 0..3 {
        assert_eq!(
            token.revocation_ids()[i + 1],
            delegateos::signing::hash_id(&json["attenuations"][i]).unwrap()
        );
    }
}

// ---- 1. malformed_token -------------------------------------------------

#[test]
fn malformed_tokens() {
    let cast = Cast::new();
    let good = json_of(&cast.root_token().encode());
    let not_canonical = base64url::encode(serde_json::to_string_pretty(&good).unwrap().as_bytes());
    let mut unknown_field = good.clone();
    unknown_field["authority"]["caveat"] = json!("ignored?");
    let mut null_field = good.clone();
    null_field["authority"]["delegatee"] = Value::Null;
    let mut big_budget = good.clone();
    big_budget["authority"]["maxBudgetMicrocents"] = json!(9_007_199_254_740_993u64);
    let mut string_budget = good.clone();
    string_budget["authority"]["maxBudgetMicrocents"] = json!("100");
    let mut negative_budget = good.clone();
    negative_budget["authority"]["maxBudgetMicrocents"] = json!(-1);
    let mut float_depth = good.clone();
    float_depth["authority"]["maxChainDepth"] = json!(1.5);
    let mut bad_time = good.clone();
    bad_time["authority"]["expiresAt"] = json!("tomorrow");
    let mut bad_glob = good.clone();
    bad_glob["authority"]["capabilities"][0]["resource"] = json!("a/".repeat(100));
    let mut wrong_format = good.clone();
    wrong_format["format"] = json!("delegateos-sjt-v2");
    let mut bad_principal = good.clone();
    bad_principal["authority"]["delegatee"] = json!("alice");
    let mut bad_covers = good.clone();
    bad_covers["signatures"][0]["covers"] = json!("everything");
    let mut issued_after_expiry = good.clone();
    issued_after_expiry["authority"]["issuedAt"] = json!("2999-01-01T00:00:00.000Z");
    let mut non_string = good.clone();
    non_string["authority"]["issuer"] = json!(42);
    let duplicate_key = {
        let text = String::from_utf8(delegateos::canonical::canonicalize(&good).unwrap()).unwrap();
        base64url::encode(
            text.replacen(
                "{\"attenuations\":[]",
                "{\"attenuations\":[],\"attenuations\":[]",
                1,
            )
            .as_bytes(),
        )
    };

    let cases: Vec<(&str, String)> = vec![
        ("empty", String::new()),
        ("not base64url", "!!!not base64!!!".into()),
        ("padded base64", format!("{}=", cast.root_token().encode())),
        ("not JSON", base64url::encode(b"hello")),
        ("JSON array", base64url::encode(b"[]")),
        ("not canonical", not_canonical),
        ("duplicate key", duplicate_key),
        ("unknown field", encode_json(&unknown_field)),
        ("null field", encode_json(&null_field)),
        ("budget above 2^53", encode_json(&big_budget)),
        ("string budget", encode_json(&string_budget)),
        ("negative budget", encode_json(&negative_budget)),
        ("fractional depth", encode_json(&float_depth)),
        ("bad timestamp", encode_json(&bad_time)),
        ("glob too deep", encode_json(&bad_glob)),
        ("bad principal", encode_json(&bad_principal)),
        ("bad covers", encode_json(&bad_covers)),
        ("non-string field", encode_json(&non_string)),
        ("issued after expiry", encode_json(&issued_after_expiry)),
        (
            "deep JSON",
            base64url::encode(format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)).as_bytes()),
        ),
        ("huge", "A".repeat(dct::MAX_TOKEN_CHARS + 1)),
    ];
    for (name, token) in cases {
        assert_eq!(
            denied(check(&token, &cast)),
            DenialType::MalformedToken,
            "{name}"
        );
    }
    // Another format is refused by its own name (decisions.md 180).
    assert_eq!(
        denied(check(&encode_json(&wrong_format), &cast)),
        DenialType::UnsupportedTokenFormat
    );
}

#[test]
fn ten_thousand_attenuations_are_refused_cheaply() {
    let cast = Cast::new();
    let mut json = json_of(&cast.root_token().encode());
    let att = json!({
        "attenuator": cast.alice.principal_id(),
        "delegatee": cast.alice.principal_id(),
        "delegationId": del(2),
        "contractId": ct(2),
    });
    json["attenuations"] = Value::Array(vec![att; 10_000]);
    let sig = json["signatures"][0].clone();
    json["signatures"] = Value::Array(vec![sig; 10_001]);
    let token = encode_json(&json);
    assert!(token.len() > dct::MAX_TOKEN_CHARS);
    let start = std::time::Instant::now();
    assert_eq!(denied(check(&token, &cast)), DenialType::MalformedToken);
    // 200 of them fit the size limit but not the attenuation limit.
    json["attenuations"] = Value::Array(vec![json["attenuations"][0].clone(); 200]);
    json["signatures"] = Value::Array(vec![json["signatures"][0].clone(); 201]);
    let reason = check(&encode_json(&json), &cast).unwrap_err();
    assert_eq!(reason.kind, DenialType::MalformedToken);
    assert!(reason.detail.contains("attenuations"), "{}", reason.detail);
    // Not a timing assertion: just make sure a regression to quadratic work shows up loudly.
    assert!(start.elapsed().as_secs() < 10);
}

// ---- 2. revoked -----------------------------------------------------------

#[test]
fn revoked_blocks_deny_and_only_their_signer_may_revoke() {
    let cast = Cast::new();
    let token = cast.chain_of_three();
    let ids = token.revocation_ids();
    let signers = [&cast.root, &cast.alice, &cast.bob, &cast.carol];
    for (i, id) in ids.iter().enumerate() {
        let mut list = RevocationList::new();
        list.add(RevocationEntry::sign(signers[i], id, ts(NOW), RevocationScope::Block).unwrap())
            .unwrap();
        let reason = check_at(
            &token.encode(),
            &cast,
            NOW,
            0,
            &request("docs", "read", "/project/src/x"),
            &list,
        )
        .unwrap_err();
        assert_eq!(reason.kind, DenialType::Revoked, "block {i}");
        assert!(reason.detail.contains(id.as_str()));

        // The same ID revoked by someone who did not sign that block has no effect.
        let mut stranger_list = RevocationList::new();
        let stranger = if i == 0 { &cast.alice } else { &cast.root };
        stranger_list
            .add(RevocationEntry::sign(stranger, id, ts(NOW), RevocationScope::Chain).unwrap())
            .unwrap();
        assert!(check_at(
            &token.encode(),
            &cast,
            NOW,
            0,
            &request("docs", "read", "/project/src/x"),
            &stranger_list
        )
        .is_ok());
    }
    // Every token attenuated from a revoked block carries it, so a sibling
    // branch that bob cut from the same parent is revoked as well.
    let mut list = RevocationList::new();
    list.add(RevocationEntry::sign(&cast.alice, &ids[1], ts(NOW), RevocationScope::Chain).unwrap())
        .unwrap();
    let sibling = Dct::decode(&token.encode()).unwrap();
    let mut branch = sibling.token().clone();
    branch.attenuations.truncate(1);
    branch.signatures.truncate(2);
    let branch = Dct::decode(&forge(&branch))
        .unwrap()
        .attenuate(
            &cast.bob,
            AttenuateParams {
                delegatee: cast.dave.principal_id().clone(),
                delegation_id: del(7),
                contract_id: ct(7),
                allowed_capabilities: None,
                max_budget_microcents: Some(100),
                expires_at: None,
                max_chain_depth: None,
            },
        )
        .unwrap();
    let req = request("docs", "read", "/project/src/x");
    assert!(check_at(&branch.encode(), &cast, NOW, 0, &req, &NoRevocations).is_ok());
    assert_eq!(
        denied(check_at(&branch.encode(), &cast, NOW, 0, &req, &list)),
        DenialType::Revoked
    );
    let bare: HashSet<String> = [ids[2].clone()].into();
    assert_eq!(
        denied(check_at(
            &token.encode(),
            &cast,
            NOW,
            0,
            &request("docs", "read", "/project/src/x"),
            &bare
        )),
        DenialType::Revoked
    );
}

#[test]
fn revocation_is_checked_before_signatures() {
    let cast = Cast::new();
    let mut t = content(&cast.root_token());
    t.signatures[0].signature = base64url::encode(&[0; 64]);
    let token = forge(&t);
    let revoked: HashSet<String> =
        [Dct::decode(&token).unwrap().revocation_ids()[0].clone()].into();
    assert_eq!(
        denied(check_at(
            &token,
            &cast,
            NOW,
            0,
            &request("docs", "read", "/project/a"),
            &revoked
        )),
        DenialType::Revoked
    );
    assert_eq!(denied(check(&token, &cast)), DenialType::InvalidSignature);
}

// ---- 3. invalid_signature -------------------------------------------------

#[test]
fn untrusted_root_is_invalid_signature() {
    let cast = Cast::new();
    let token = cast.root_token().encode();
    let roots = vec![key(77).principal_id().clone()];
    let reason = dct::verify(
        &token,
        &VerificationContext {
            trusted_roots: &roots,
            revocations: &NoRevocations,
            now: &ts(NOW),
            spent_microcents: 0,
            request: &request("docs", "read", "/project/a"),
        },
    )
    .unwrap_err();
    assert_eq!(reason.kind, DenialType::InvalidSignature);
    assert!(reason.detail.contains("trusted root"));
}

/// Changes one value in every block and every signature of a 3-attenuation
/// chain, re-encodes it canonically, and expects `invalid_signature`.
#[test]
fn tampering_any_block_breaks_a_signature() {
    let cast = Cast::new();
    let good = json_of(&cast.chain_of_three().encode());
    let other = key(50).principal_id().to_string();
    let mut tampered: Vec<(String, Value)> = Vec::new();
    let edits: Vec<(&str, Value)> = vec![
        ("/authority/delegatee", json!(other)),
        ("/authority/capabilities/0/resource", json!("/**")),
        ("/authority/capabilities/0/action", json!("write")),
        ("/authority/contractId", json!(ct(9))),
        ("/authority/delegationId", json!(del(9))),
        ("/authority/parentDelegationId", json!(del(8))),
        ("/authority/chainDepth", json!(1)),
        ("/authority/maxChainDepth", json!(5)),
        ("/authority/maxBudgetMicrocents", json!(10_001)),
        ("/authority/expiresAt", json!("2026-02-17T11:00:00.001Z")),
        ("/authority/issuedAt", json!("2026-02-17T10:00:00.001Z")),
    ];
    for (ptr, v) in edits {
        let mut j = good.clone();
        *j.pointer_mut(ptr).unwrap() = v;
        tampered.push((ptr.to_owned(), j));
    }
    for i in 0..3 {
        for (field, v) in [
            ("delegatee", json!(other)),
            ("delegationId", json!(del(9))),
            ("contractId", json!(ct(9))),
        ] {
            let mut j = good.clone();
            j["attenuations"][i][field] = v;
            tampered.push((format!("attenuations/{i}/{field}"), j));
        }
        let mut j = good.clone();
        j["attenuations"][i]["maxBudgetMicrocents"] = json!(1);
        tampered.push((
            format!("attenuations/{i}/maxBudgetMicrocents (narrower!)"),
            j,
        ));
    }
    for s in 0..4 {
        let mut j = good.clone();
        let sig = j["signatures"][s]["signature"].as_str().unwrap().to_owned();
        let mut bytes = base64url::decode(&sig).unwrap();
        bytes[10] ^= 1;
        j["signatures"][s]["signature"] = json!(base64url::encode(&bytes));
        tampered.push((format!("signatures/{s} flipped bit"), j));
        let mut j = good.clone();
        j["signatures"][s]["signature"] = json!(base64url::encode(&bytes[..63]));
        tampered.push((format!("signatures/{s} truncated"), j));
        let mut j = good.clone();
        j["signatures"][s]["signature"] = json!("");
        tampered.push((format!("signatures/{s} empty"), j));
    }
    let mut j = good.clone();
    let (a, b) = (j["signatures"][1].clone(), j["signatures"][2].clone());
    j["signatures"][1] = b;
    j["signatures"][2] = a;
    tampered.push(("signatures swapped".into(), j));
    let mut j = good.clone();
    j["signatures"][0]["signer"] = json!(cast.alice.principal_id());
    tampered.push(("authority signer is not the issuer".into(), j));
    let mut j = good.clone();
    j["signatures"][2]["covers"] = json!(0);
    tampered.push(("covers wrong index".into(), j));
    let mut j = good.clone();
    j["signatures"][0]["covers"] = json!(0);
    tampered.push(("authority covers an index".into(), j));
    let mut j = good.clone();
    j["signatures"].as_array_mut().unwrap().pop();
    tampered.push(("missing signature".into(), j));
    let mut j = good.clone();
    let extra = j["signatures"][3].clone();
    j["signatures"].as_array_mut().unwrap().push(extra);
    tampered.push(("extra signature".into(), j));

    for (name, j) in tampered {
        assert_eq!(
            denied(check(&encode_json(&j), &cast)),
            DenialType::InvalidSignature,
            "{name}"
        );
    }
}

#[test]
fn an_attenuation_signed_by_someone_else_is_invalid_signature() {
    let cast = Cast::new();
    let mut t = content(&cast.chain_of_three());
    // Claims alice as attenuator of block 1 but is signed by mallory.
    t.attenuations[0].attenuator = key(66).principal_id().clone();
    t.signatures[1].signer = key(66).principal_id().clone();
    resign(&mut t, &[&cast.root, &cast.alice, &cast.bob, &cast.carol]);
    assert_eq!(
        denied(check(&forge(&t), &cast)),
        DenialType::InvalidSignature
    );
}

// ---- 4. attenuation_violation --------------------------------------------

/// Builds a token whose blocks are validly signed but whose content widens.
fn widened(cast: &Cast, edit: impl FnOnce(&mut SignedJsonToken)) -> String {
    let mut t = content(&cast.chain_of_three());
    edit(&mut t);
    // Signer of each block follows the attenuator field.
    let keys = [key(1), key(2), key(3), key(4), key(5), key(66)];
    let signer =
        |id: &delegateos::PrincipalId| keys.iter().find(|k| k.principal_id() == id).unwrap();
    let mut signers = vec![signer(&t.authority.issuer)];
    for a in &t.attenuations {
        signers.push(signer(&a.attenuator));
    }
    for (s, a) in t.signatures.iter_mut().skip(1).zip(&t.attenuations) {
        s.signer = a.attenuator.clone();
    }
    resign(&mut t, &signers);
    forge(&t)
}

#[test]
fn each_widening_is_an_attenuation_violation() {
    let cast = Cast::new();
    let cases: Vec<(&str, String)> = vec![
        (
            "attenuator mismatch",
            widened(&cast, |t| {
                t.attenuations[1].attenuator = key(66).principal_id().clone();
            }),
        ),
        (
            "capability expansion: resource",
            widened(&cast, |t| {
                t.attenuations[0].allowed_capabilities = Some(vec![cap("docs:read:/**")]);
            }),
        ),
        (
            "capability expansion: prefix without boundary",
            widened(&cast, |t| {
                t.attenuations[0].allowed_capabilities =
                    Some(vec![cap("docs:read:/projectSECRET/**")]);
            }),
        ),
        (
            "capability expansion: action",
            widened(&cast, |t| {
                t.attenuations[2].allowed_capabilities =
                    Some(vec![cap("docs:write:/project/src/*")]);
            }),
        ),
        (
            "capability expansion: namespace",
            widened(&cast, |t| {
                t.attenuations[2].allowed_capabilities = Some(vec![cap("web:read:/project/src/*")]);
            }),
        ),
        (
            "capability expansion: wildcard action",
            widened(&cast, |t| {
                t.attenuations[2].allowed_capabilities = Some(vec![cap("docs:*:/project/src/*")]);
            }),
        ),
        (
            "capability expansion: after an earlier narrowing",
            widened(&cast, |t| {
                t.attenuations[2].allowed_capabilities =
                    Some(vec![cap("docs:write:/project/out/*")]);
            }),
        ),
        (
            "budget expansion",
            widened(&cast, |t| {
                t.attenuations[2].max_budget_microcents = Some(2_001);
            }),
        ),
        (
            "expiry expansion",
            widened(&cast, |t| {
                t.attenuations[2].expires_at = Some(ts("2026-02-17T10:45:00.001Z"));
            }),
        ),
        (
            "chain depth expansion",
            widened(&cast, |t| {
                t.attenuations[2].max_chain_depth = Some(1);
            }),
        ),
        (
            "chain depth exceeded: past the root's maxChainDepth",
            widened(&cast, |t| {
                t.authority.max_chain_depth = 2;
                t.attenuations[1].max_chain_depth = None;
                t.attenuations[2].max_chain_depth = None;
            }),
        ),
        (
            "chain depth exceeded: past an attenuation's maxChainDepth",
            widened(&cast, |t| {
                t.attenuations[0].max_chain_depth = Some(1);
                t.attenuations[1].max_chain_depth = None;
                t.attenuations[2].max_chain_depth = None;
            }),
        ),
        (
            "authority chainDepth: above maxChainDepth",
            widened(&cast, |t| {
                t.authority.chain_depth = 4;
            }),
        ),
    ];
    for (name, token) in cases {
        let reason = check(&token, &cast).unwrap_err();
        assert_eq!(
            reason.kind,
            DenialType::AttenuationViolation,
            "{name}: {}",
            reason.detail
        );
        let expected = name.split(':').next().unwrap();
        assert!(
            reason.detail.starts_with(expected),
            "{name}: {}",
            reason.detail
        );
    }
}

#[test]
fn attenuate_refuses_widening_with_the_same_denials() {
    let cast = Cast::new();
    let root = cast.root_token();
    let base = AttenuateParams {
        delegatee: cast.bob.principal_id().clone(),
        delegation_id: del(2),
        contract_id: ct(2),
        allowed_capabilities: None,
        max_budget_microcents: None,
        expires_at: None,
        max_chain_depth: None,
    };
    let refused =
        |who: &delegateos::Keypair, p: AttenuateParams| root.attenuate(who, p).unwrap_err();
    assert!(refused(&cast.bob, base.clone())
        .detail
        .contains("attenuator mismatch"));
    for (name, params) in [
        (
            "caps",
            AttenuateParams {
                allowed_capabilities: Some(vec![cap("docs:delete:/project/**")]),
                ..base.clone()
            },
        ),
        (
            "budget",
            AttenuateParams {
                max_budget_microcents: Some(10_001),
                ..base.clone()
            },
        ),
        (
            "expiry",
            AttenuateParams {
                expires_at: Some(ts("2026-02-17T12:00:00Z")),
                ..base.clone()
            },
        ),
        (
            "depth",
            AttenuateParams {
                max_chain_depth: Some(3),
                ..base.clone()
            },
        ),
        (
            "unsafe budget",
            AttenuateParams {
                max_budget_microcents: Some(1 << 60),
                ..base.clone()
            },
        ),
    ] {
        let reason = refused(&cast.alice, params);
        assert!(
            matches!(
                reason.kind,
                DenialType::AttenuationViolation | DenialType::MalformedToken
            ),
            "{name}: {reason:?}"
        );
    }
    // Equal values are not widening.
    root.attenuate(
        &cast.alice,
        AttenuateParams {
            max_budget_microcents: Some(10_000),
            expires_at: Some(ts(EXPIRY)),
            max_chain_depth: Some(2),
            allowed_capabilities: Some(root.token().authority.capabilities.clone()),
            ..base
        },
    )
    .unwrap();
    // Past the depth limit.
    let full = cast.chain_of_three();
    let reason = full
        .attenuate(
            &cast.dave,
            AttenuateParams {
                delegatee: cast.alice.principal_id().clone(),
                delegation_id: del(6),
                contract_id: ct(6),
                allowed_capabilities: None,
                max_budget_microcents: None,
                expires_at: None,
                max_chain_depth: None,
            },
        )
        .unwrap_err();
    assert_eq!(reason.kind, DenialType::AttenuationViolation);
}

// ---- 5. expired ------------------------------------------------------------

#[test]
fn expiry_is_by_instant() {
    let cast = Cast::new();
    let token = cast.root_token().encode();
    let req = request("docs", "read", "/project/a");
    assert!(
        check_at(&token, &cast, EXPIRY, 0, &req, &NoRevocations).is_ok(),
        "at the instant of expiry it is still valid"
    );
    assert!(
        check_at(
            &token,
            &cast,
            "2026-02-17T12:00:00+01:00",
            0,
            &req,
            &NoRevocations
        )
        .is_ok(),
        "same instant, other offset"
    );
    assert_eq!(
        denied(check_at(
            &token,
            &cast,
            "2026-02-17T11:00:00.001Z",
            0,
            &req,
            &NoRevocations
        )),
        DenialType::Expired
    );
    // "…00Z" sorts after "…00.5Z" as text; as instants it is earlier.
    assert_eq!(
        denied(check_at(
            &token,
            &cast,
            "2026-02-17T11:00:00.5Z",
            0,
            &req,
            &NoRevocations
        )),
        DenialType::Expired
    );
}

#[test]
fn expiry_comes_before_budget_and_capability() {
    let cast = Cast::new();
    let token = cast.root_token().encode();
    assert_eq!(
        denied(check_at(
            &token,
            &cast,
            "2027-01-01T00:00:00Z",
            1_000_000,
            &request("web", "search", "x"),
            &NoRevocations
        )),
        DenialType::Expired
    );
    assert_eq!(
        denied(check_at(
            &token,
            &cast,
            NOW,
            1_000_000,
            &request("web", "search", "x"),
            &NoRevocations
        )),
        DenialType::BudgetExceeded
    );
}

// ---- 6. budget_exceeded -------------------------------------------------------

#[test]
fn budget_boundaries() {
    let cast = Cast::new();
    let token = cast.chain_of_three().encode();
    let req = request("docs", "read", "/project/src/a");
    let scope = check_at(&token, &cast, NOW, 1_999, &req, &NoRevocations).unwrap();
    assert_eq!(scope.remaining_budget_microcents, 1);
    assert_eq!(
        denied(check_at(&token, &cast, NOW, 2_000, &req, &NoRevocations)),
        DenialType::BudgetExceeded
    );
    assert_eq!(
        denied(check_at(&token, &cast, NOW, u64::MAX, &req, &NoRevocations)),
        DenialType::BudgetExceeded
    );
}

// ---- 7. capability_not_granted ---------------------------------------------------

#[test]
fn capability_matching() {
    let cast = Cast::new();
    let token = cast.root_token().encode();
    let allowed = [
        ("docs", "read", "/project/a/b/c"),
        ("docs", "read", "/project"),
        ("docs", "write", "/project/out/x"),
    ];
    for (ns, action, res) in allowed {
        assert!(
            check_at(
                &token,
                &cast,
                NOW,
                0,
                &request(ns, action, res),
                &NoRevocations
            )
            .is_ok(),
            "{ns}:{action}:{res}"
        );
    }
    let refused = [
        ("docs", "write", "/project/a"),
        ("docs", "write", "/project/out/x/y"),
        ("docs", "delete", "/project/a"),
        ("web", "read", "/project/a"),
        ("docs", "read", "/projectSECRET/a"),
        ("docs", "read", "/project/../etc/passwd"),
        ("docs", "read", "/etc/passwd"),
        ("docs", "read", ""),
    ];
    for (ns, action, res) in refused {
        let reason = check_at(
            &token,
            &cast,
            NOW,
            0,
            &request(ns, action, res),
            &NoRevocations,
        )
        .unwrap_err();
        assert_eq!(
            reason.kind,
            DenialType::CapabilityNotGranted,
            "{ns}:{action}:{res}"
        );
        assert_eq!(reason.granted.as_ref().unwrap().len(), 2);
    }
}

#[test]
fn covers_is_authority_or_index_on_the_wire() {
    let cast = Cast::new();
    let json = json_of(&cast.chain_of_three().encode());
    assert_eq!(json["signatures"][0]["covers"], json!("authority"));
    assert_eq!(json["signatures"][3]["covers"], json!(2));
    let t: SignedJsonToken = serde_json::from_value(json).unwrap();
    assert_eq!(t.signatures[2].covers, Covers::Attenuation(1));
}

#[test]
fn several_tenants_each_trust_their_own_root() {
    let cast = Cast::new();
    let other_tenant_root = key(99);
    let mut t = content(&cast.root_token());
    t.authority.issuer = other_tenant_root.principal_id().clone();
    t.signatures[0].signer = other_tenant_root.principal_id().clone();
    resign(&mut t, &[&other_tenant_root]);
    assert!(check(&forge(&t), &cast).is_ok());
}

/// DelegateOS 0.3's `setTokenVersion` stamps an unsigned `version`: `"1.0"`
/// is the format we speak and changes nothing; any other spelling or
/// version is refused by name, before the structure is read.
#[test]
fn a_token_version_is_1_0_or_refused_by_name() {
    let cast = Cast::new();
    let token = cast.root_token().encode();
    let mut stamped = json_of(&token);
    stamped["version"] = json!("1.0");
    let stamped_token = encode_json(&stamped);
    let scope = check(&stamped_token, &cast).unwrap();
    assert_eq!(scope, check(&token, &cast).unwrap());
    // Kept as it came: re-encoding gives the same bytes.
    assert_eq!(Dct::decode(&stamped_token).unwrap().encode(), stamped_token);
    for bad in [
        json!("1.1"),
        json!("2.0"),
        json!("1"),
        json!("1.0 "),
        json!("01.0"),
        json!(1.0),
        json!(null),
        json!({"major": 1, "minor": 0}),
        json!("9".repeat(10_000)),
    ] {
        let mut v = json_of(&token);
        v["version"] = bad.clone();
        let reason = Dct::decode(&encode_json(&v)).unwrap_err();
        assert_eq!(reason.kind, DenialType::UnsupportedTokenVersion, "{bad}");
        assert!(reason.detail.len() < 200, "{}", reason.detail);
    }
}

/// Any format but `delegateos-sjt-v1`, in the token or in `_delegateos`, is
/// `unsupported_token_format` (the Biscuit backend's tokens: decisions.md 180).
#[test]
fn another_token_format_is_refused_by_name() {
    let cast = Cast::new();
    let token = cast.root_token().encode();
    for format in [
        "delegateos-biscuit-v1".to_owned(),
        "delegateos-sjt-v2".to_owned(),
        "DELEGATEOS-SJT-V1".to_owned(),
        "x".repeat(50_000),
    ] {
        let mut v = json_of(&token);
        v["format"] = json!(format);
        let reason = Dct::decode(&encode_json(&v)).unwrap_err();
        assert_eq!(reason.kind, DenialType::UnsupportedTokenFormat);
        assert!(reason.detail.len() < 200, "{}", reason.detail);
        let field = delegateos::messages::McpDelegateos {
            dct: token.clone(),
            format: Some(format),
            delegation_id: None,
            contract_id: None,
        };
        assert_eq!(
            field.check_format().unwrap_err().kind,
            DenialType::UnsupportedTokenFormat
        );
    }
    // A format that is not a string is just malformed.
    let mut v = json_of(&token);
    v["format"] = json!(1);
    assert_eq!(
        Dct::decode(&encode_json(&v)).unwrap_err().kind,
        DenialType::MalformedToken
    );
}
