//! The gateway's acceptance of Motebit artifacts, breach by breach, on
//! artifacts minted here (so every signed member can be varied), and the
//! verdicts the reference's rules give them.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

use delegateos::{ContractId, DelegationId, Keypair, Timestamp};
use motebit::encoding::{self, key_hex};
use motebit::receipt::{self, KeySource, KnownKeys, Receipt};
use motebit::token;
use motebit::translate;
use motebit::verdict::{self, Authority, IdentityBinding, Integrity};
use motebit::{identity, Reason, SUITE};
use serde_json::{json, Value};

fn key(seed: u8) -> Keypair {
    Keypair::from_seed([seed; 32])
}

fn sovereign(k: &Keypair) -> String {
    identity::sovereign_id(&k.public_key())
}

/// A receipt by `k`, its members as `edit` leaves them, signed.
fn receipt_by(k: &Keypair, task: &str, edit: impl FnOnce(&mut Value)) -> Value {
    let result = format!("result of {task}");
    let mut r = json!({
        "task_id": task, "motebit_id": sovereign(k), "device_id": "device-1",
        "submitted_at": 1_700_000_000_000u64, "completed_at": 1_700_000_060_000u64,
        "status": "completed", "result": result, "tools_used": ["web_search"],
        "memories_formed": 0, "prompt_hash": encoding::sha256_hex(b"prompt"),
        "result_hash": encoding::sha256_hex(result.as_bytes()),
        "public_key": key_hex(&k.public_key()), "suite": SUITE,
    });
    edit(&mut r);
    encoding::sign(k, &mut r).unwrap();
    r
}

fn accepted(r: &Value) -> Result<(), Reason> {
    let parsed = Receipt::from_value(r).map_err(|f| f.reason)?;
    let report = receipt::verify_chain(&parsed, &KnownKeys::new());
    match report.first_failure() {
        None => Ok(()),
        Some((_, f)) => Err(f.reason),
    }
}

#[test]
fn a_minted_receipt_verifies_and_is_sovereign() {
    let r = receipt_by(&key(1), "t1", |_| {});
    assert_eq!(accepted(&r), Ok(()));
    let v = verdict::receipt(r.as_object().unwrap(), None);
    assert_eq!(
        (v.integrity, v.identity_binding),
        (Integrity::Verified, IdentityBinding::Sovereign)
    );
    assert!(v.repair.is_none());
    // A did:key id is sovereign too.
    let did = identity::did_key(&key(1).public_key());
    let r = receipt_by(&key(1), "t1", |r| r["motebit_id"] = json!(did));
    let v = verdict::receipt(r.as_object().unwrap(), None);
    assert_eq!(v.identity_binding, IdentityBinding::Sovereign);
}

/// Every signed member, changed after signing, breaks the signature.
#[test]
fn every_signed_member_is_covered() {
    let r = receipt_by(&key(1), "t1", |r| {
        r["relay_task_id"] = json!("relay-1");
        r["delegated_scope"] = json!("web_search");
        r["invocation_origin"] = json!("ai-loop");
    });
    let changes: Vec<(&str, Value)> = vec![
        ("task_id", json!("t2")),
        ("motebit_id", json!(sovereign(&key(2)))),
        ("device_id", json!("device-2")),
        ("submitted_at", json!(1_700_000_000_001u64)),
        ("completed_at", json!(1_700_000_060_001u64)),
        ("status", json!("failed")),
        ("tools_used", json!([])),
        ("memories_formed", json!(1)),
        ("prompt_hash", json!(encoding::sha256_hex(b"other"))),
        ("relay_task_id", json!("relay-2")),
        ("delegated_scope", json!("*")),
        ("invocation_origin", json!("user-tap")),
    ];
    let members = r.as_object().unwrap().len();
    assert_eq!(
        changes.len() + 5,
        members,
        "every member but result, result_hash, public_key, suite, signature"
    );
    for (member, value) in changes {
        let mut t = r.clone();
        t[member] = value;
        assert_eq!(accepted(&t), Err(Reason::BadSignature), "{member}");
    }
    // result and result_hash together: the signature still catches it.
    let mut t = r.clone();
    t["result"] = json!("forged");
    t["result_hash"] = json!(encoding::sha256_hex(b"forged"));
    assert_eq!(accepted(&t), Err(Reason::BadSignature));
    // Another key embedded: the signature is not by it.
    let mut t = r.clone();
    t["public_key"] = json!(key_hex(&key(2).public_key()));
    assert_eq!(accepted(&t), Err(Reason::BadSignature));
    let mut t = r.clone();
    t["signature"] = json!("AAAA");
    assert_eq!(accepted(&t), Err(Reason::BadSignature));
}

#[test]
fn suite_key_case_and_hashes_are_strict() {
    let wrong_suite = receipt_by(&key(1), "t", |r| {
        r["suite"] = json!("motebit-jcs-ed25519-hex-v1")
    });
    assert_eq!(accepted(&wrong_suite), Err(Reason::WrongSuite));
    let v = verdict::receipt(wrong_suite.as_object().unwrap(), None);
    assert_eq!(v.repair.unwrap().code, "integrity.signature_invalid");
    let no_suite = receipt_by(&key(1), "t", |r| {
        r.as_object_mut().unwrap().remove("suite");
    });
    assert_eq!(accepted(&no_suite), Err(Reason::WrongSuite));
    // Signed with its key written in uppercase: the reference's verdict
    // reads the signature as valid; the gateway refuses the key.
    let upper = receipt_by(&key(1), "t", |r| {
        r["public_key"] = json!(key_hex(&key(1).public_key()).to_uppercase())
    });
    assert_eq!(accepted(&upper), Err(Reason::BadKey));
    let v = verdict::receipt(upper.as_object().unwrap(), None);
    assert_eq!(v.integrity, Integrity::Verified);
    // A result_hash that does not bind the result, validly signed.
    let unbound = receipt_by(&key(1), "t", |r| {
        r["result_hash"] = json!(encoding::sha256_hex(b"x"))
    });
    assert_eq!(accepted(&unbound), Err(Reason::HashInconsistent));
    let v = verdict::receipt(unbound.as_object().unwrap(), None);
    assert_eq!(v.repair.unwrap().code, "integrity.hash_inconsistent");
    let not_hex = receipt_by(&key(1), "t", |r| r["prompt_hash"] = json!("AB".repeat(32)));
    assert_eq!(accepted(&not_hex), Err(Reason::HashInconsistent));
    // No key at all: unknown signer; the verdict names the missing key.
    let keyless = receipt_by(&key(1), "t", |r| {
        r.as_object_mut().unwrap().remove("public_key");
    });
    assert_eq!(accepted(&keyless), Err(Reason::UnknownSigner));
    let v = verdict::receipt(keyless.as_object().unwrap(), None);
    assert_eq!(v.repair.unwrap().code, "integrity.no_key");
    let backwards = receipt_by(&key(1), "t", |r| {
        r["completed_at"] = json!(1_699_999_999_999u64)
    });
    assert_eq!(accepted(&backwards), Err(Reason::OutOfOrder));
    let bad_status = receipt_by(&key(1), "t", |r| r["status"] = json!("done"));
    assert_eq!(accepted(&bad_status), Err(Reason::Malformed));
}

#[test]
fn pins_decide_identity_binding() {
    let r = receipt_by(&key(1), "t", |r| r["motebit_id"] = json!("agent-a"));
    let r = r.as_object().unwrap();
    let mine = key_hex(&key(1).public_key());
    let theirs = key_hex(&key(2).public_key());
    assert_eq!(
        verdict::receipt(r, None).identity_binding,
        IdentityBinding::Unverified
    );
    assert_eq!(
        verdict::receipt(r, Some(&mine)).identity_binding,
        IdentityBinding::Pinned
    );
    let v = verdict::receipt(r, Some(&theirs));
    assert_eq!(v.identity_binding, IdentityBinding::Invalid);
    assert_eq!(v.repair.unwrap().code, "identity.key_mismatch");
}

/// A parent that signed over a child which itself does not verify: the
/// parent verifies, the child does not, and the chain is refused naming it.
#[test]
fn chains_verify_each_receipt_with_the_best_key() {
    let good_child = receipt_by(&key(2), "child-ok", |_| {});
    let mut bad_child = receipt_by(&key(3), "child-bad", |_| {});
    bad_child["result"] = json!("changed after signing");
    let parent = receipt_by(&key(1), "parent", |r| {
        r["delegation_receipts"] = json!([good_child.clone(), bad_child.clone()])
    });
    let parsed = Receipt::from_value(&parent).unwrap();
    let mut known = KnownKeys::new();
    known.insert(sovereign(&key(2)), key(2).public_key());
    let report = receipt::verify_chain(&parsed, &known);
    assert!(report.failure.is_none());
    assert_eq!(report.key_source, Some(KeySource::Embedded));
    assert_eq!(report.delegations[0].key_source, Some(KeySource::External));
    assert!(report.delegations[0].failure.is_none());
    let (task, f) = report.first_failure().unwrap();
    assert_eq!((task, f.reason), ("child-bad", Reason::BadSignature));
    assert!(!report.verified());
    // A known key that is not the embedded one: refused as a mismatch.
    let mut wrong = KnownKeys::new();
    wrong.insert(sovereign(&key(1)), key(9).public_key());
    let report = receipt::verify_chain(
        &Receipt::from_value(&good_child).unwrap(),
        &KnownKeys::new(),
    );
    assert!(report.verified());
    let report = receipt::verify_chain(&parsed, &wrong);
    assert_eq!(report.failure.unwrap().reason, Reason::KeyMismatch);
    // Nesting deeper than 10 is refused before anything is verified.
    let mut deep = receipt_by(&key(1), "leaf", |_| {});
    for i in 0..11 {
        deep = receipt_by(&key(1), &format!("n{i}"), |r| {
            r["delegation_receipts"] = json!([deep])
        });
    }
    assert_eq!(
        Receipt::from_value(&deep).unwrap_err().reason,
        Reason::TooDeep
    );
}

#[test]
fn sequences_must_not_overlap() {
    let at = |task: &str, s: u64, c: u64| {
        let r = receipt_by(&key(1), task, |r| {
            r["submitted_at"] = json!(s);
            r["completed_at"] = json!(c);
        });
        (Receipt::from_value(&r).unwrap(), key(1).public_key())
    };
    assert!(receipt::verify_sequence(&[]).is_ok());
    let ok = [at("a", 0, 10), at("b", 10, 20), at("c", 25, 30)];
    assert!(receipt::verify_sequence(&ok).is_ok());
    let overlap = [at("a", 0, 10), at("b", 9, 20)];
    let (i, f) = receipt::verify_sequence(&overlap).unwrap_err();
    assert_eq!((i, f.reason), (1, Reason::OutOfOrder));
    let wrong_key = [at("a", 0, 10), (at("b", 10, 20).0, key(2).public_key())];
    let (i, f) = receipt::verify_sequence(&wrong_key).unwrap_err();
    assert_eq!((i, f.reason), (1, Reason::KeyMismatch));
}

const NOW: f64 = 1_700_000_000_000.0;

fn token_by(k: &Keypair, to: &Keypair, scope: &str, edit: impl FnOnce(&mut Value)) -> Value {
    let mut t = json!({
        "delegator_id": sovereign(k), "delegator_public_key": key_hex(&k.public_key()),
        "delegate_id": sovereign(to), "delegate_public_key": key_hex(&to.public_key()),
        "scope": scope, "issued_at": NOW as u64, "expires_at": NOW as u64 + 3_600_000,
        "suite": SUITE,
    });
    edit(&mut t);
    encoding::sign(k, &mut t).unwrap();
    t
}

fn chain(tokens: &[Value]) -> Result<(), (usize, Reason)> {
    let parsed =
        token::chain_from_value(&Value::Array(tokens.to_vec())).map_err(|f| (99, f.reason))?;
    token::verify_chain(&parsed, NOW).map_err(|(i, f)| (i, f.reason))
}

#[test]
fn token_chains_link_and_narrow() {
    let (a, b, c) = (key(1), key(2), key(3));
    let ab = token_by(&a, &b, "web_search,read_url", |_| {});
    let bc = token_by(&b, &c, "web_search", |_| {});
    assert_eq!(chain(&[ab.clone(), bc.clone()]), Ok(()));
    let widened = token_by(&b, &c, "web_search,send_email", |_| {});
    assert_eq!(
        chain(&[ab.clone(), widened]),
        Err((1, Reason::ScopeWidened))
    );
    let star = token_by(&b, &c, "*", |_| {});
    assert_eq!(chain(&[ab.clone(), star]), Err((1, Reason::ScopeWidened)));
    // C signs as if delegated by A: the linkage breaks.
    let unlinked = token_by(&c, &b, "web_search", |_| {});
    assert_eq!(
        chain(&[ab.clone(), unlinked]),
        Err((1, Reason::BrokenLinkage))
    );
    // Same id, another key: also broken.
    let imposter = token_by(&key(4), &c, "web_search", |t| {
        t["delegator_id"] = json!(sovereign(&b))
    });
    assert_eq!(
        chain(&[ab.clone(), imposter]),
        Err((1, Reason::BrokenLinkage))
    );
    let expired = token_by(&a, &b, "web_search", |t| {
        t["issued_at"] = json!(NOW as u64 - 7_200_000);
        t["expires_at"] = json!(NOW as u64 - 1);
    });
    assert_eq!(chain(&[expired]), Err((0, Reason::Expired)));
    let early = token_by(&a, &b, "web_search", |t| {
        t["not_before"] = json!(NOW as u64 + 1)
    });
    assert_eq!(chain(&[early]), Err((0, Reason::NotYetValid)));
    let mut tampered = ab.clone();
    tampered["scope"] = json!("*");
    assert_eq!(chain(&[tampered]), Err((0, Reason::BadSignature)));
    let upper = token_by(&a, &b, "x", |t| {
        t["delegate_public_key"] = json!(key_hex(&b.public_key()).to_uppercase())
    });
    assert_eq!(chain(&[upper]), Err((0, Reason::BadKey)));
    let wrong_suite = token_by(&a, &b, "x", |t| {
        t["suite"] = json!("motebit-jwt-ed25519-v1")
    });
    assert_eq!(chain(&[wrong_suite]), Err((0, Reason::WrongSuite)));
    assert_eq!(chain(&[]), Err((99, Reason::Malformed)));
    assert_eq!(chain(&vec![ab; 11]), Err((99, Reason::TooDeep)));
}

fn grant_by(k: &Keypair, to: &Keypair, edit: impl FnOnce(&mut Value)) -> Value {
    let mut g = json!({
        "grant_id": "g-1", "delegator_id": sovereign(k), "delegator_public_key": key_hex(&k.public_key()),
        "delegate_id": sovereign(to), "delegate_public_key": key_hex(&to.public_key()),
        "scope": "web_search,read_url", "subject": "s", "cadence_ms": 60_000,
        "issued_at": NOW as u64 - 1000, "not_before": null, "expires_at": NOW as u64 + 86_400_000,
        "max_token_ttl_ms": 3_600_000, "suite": SUITE,
    });
    edit(&mut g);
    encoding::sign(k, &mut g).unwrap();
    g
}

fn tick_verdict(token: &Value, grant: &Value, options: Value) -> verdict::Verdict {
    verdict::delegation_token(
        token.as_object().unwrap(),
        grant.as_object(),
        &options,
        NOW,
        None,
    )
    .unwrap()
}

/// The reference's authority rules on ticks nobody has seen: each way a
/// tick can fail its grant reads `insufficient`, and the revocation axis
/// stays apart from it.
#[test]
fn tick_verdicts_follow_the_reference_rules() {
    let (a, b) = (key(1), key(2));
    let grant = grant_by(&a, &b, |_| {});
    let tick = |edit: fn(&mut Value)| {
        token_by(&a, &b, "web_search", |t| {
            t["grant_id"] = json!("g-1");
            edit(t)
        })
    };
    let v = tick_verdict(&tick(|_| {}), &grant, json!({"revocations": []}));
    assert!(v.is_fully_verified(), "{}", v.to_json());
    assert_eq!(
        v.revocation.freshness,
        Some(json!({"basis": "asserted", "asOf": {}}))
    );
    let v = tick_verdict(&tick(|_| {}), &grant, json!({}));
    assert_eq!(v.repair.unwrap().code, "revocation.unchecked");
    for (edit, why) in [
        (
            (|t: &mut Value| t["scope"] = json!("web_search,send_email")) as fn(&mut Value),
            "widens",
        ),
        (|t| t["grant_id"] = json!("g-2"), "another grant"),
        (|t| t["expires_at"] = json!(NOW as u64 + 3_600_001), "ttl"),
    ] {
        let v = tick_verdict(&tick(edit), &grant, json!({"revocations": []}));
        assert_eq!(v.authority, Authority::Insufficient, "{why}");
        assert_eq!(v.repair.unwrap().code, "authority.insufficient");
    }
    let expired = tick(|t| {
        t["issued_at"] = json!(NOW as u64 - 7_200_000);
        t["expires_at"] = json!(NOW as u64 - 3_600_000);
    });
    assert_eq!(
        tick_verdict(&expired, &grant, json!({})).authority,
        Authority::Expired
    );
    assert_eq!(
        tick_verdict(&expired, &grant, json!({"temporalMode": "ordering"})).authority,
        Authority::Valid
    );
    // An expired grant is insufficient even by ordering when the tick's slot is after it.
    let old_grant = grant_by(&a, &b, |g| g["expires_at"] = json!(NOW as u64 - 1));
    assert_eq!(
        tick_verdict(
            &tick(|_| {}),
            &old_grant,
            json!({"temporalMode": "ordering"})
        )
        .authority,
        Authority::Insufficient
    );
    // A revocation signed by someone else is not authoritative.
    let mut forged = json!({"grant_id": "g-1", "delegator_id": sovereign(&a),
        "delegator_public_key": key_hex(&a.public_key()), "revoked_at": NOW as u64, "suite": SUITE});
    encoding::sign(&key(5), &mut forged).unwrap();
    let v = tick_verdict(&tick(|_| {}), &grant, json!({"revocations": [forged]}));
    assert_eq!(v.revocation.status, verdict::RevocationStatus::Fresh);
    let mut real = forged.clone();
    encoding::sign(&a, &mut real).unwrap();
    let v = tick_verdict(&tick(|_| {}), &grant, json!({"revocations": [real]}));
    assert_eq!(
        (v.authority, v.revocation.status),
        (Authority::Valid, verdict::RevocationStatus::Revoked)
    );
    // A forged tick: integrity invalid, authority still judged.
    let mut forged_tick = tick(|_| {});
    forged_tick["issued_at"] = json!(NOW as u64 + 1);
    let v = tick_verdict(&forged_tick, &grant, json!({}));
    assert_eq!(
        (v.integrity, v.authority),
        (Integrity::Invalid, Authority::Valid)
    );
}

/// A verified receipt tree becomes gateway-signed attestations, children
/// first; a gateway attestation becomes a receipt that verifies as the
/// gateway's own (sovereign) receipt.
#[test]
fn translation_both_ways() {
    let gateway = key(42);
    let child = receipt_by(&key(2), "child", |r| r["status"] = json!("failed"));
    let parent = receipt_by(&key(1), "parent", |r| {
        r["delegation_receipts"] = json!([child])
    });
    let parsed = Receipt::from_value(&parent).unwrap();
    let report = receipt::verify_chain(&parsed, &KnownKeys::new());
    let (contract, delegation) = (
        ContractId::parse("ct_000000000001").unwrap(),
        DelegationId::parse("del_000000000001").unwrap(),
    );
    let ctx = translate::AttestationContext {
        contract_id: &contract,
        delegation_id: &delegation,
        cost_microcents: 500,
        created_at: Timestamp::parse("2026-11-23T12:00:00Z").unwrap(),
    };
    let atts = translate::receipt_to_attestations(&parsed, &report, &gateway, &ctx).unwrap();
    assert_eq!(atts.len(), 2);
    let (c, p) = (&atts[0], &atts[1]);
    assert!(!c.result.success && p.result.success);
    assert_eq!(p.child_attestations, vec![c.id.clone()]);
    assert_eq!(
        (p.result.cost_microcents, c.result.cost_microcents),
        (500, 0)
    );
    assert_eq!(p.result.duration_ms, 60_000);
    let evidence = &p.result.output.as_ref().unwrap()["evidence"];
    assert_eq!(
        evidence["receiptDigest"],
        json!(encoding::digest(&parent).unwrap())
    );
    assert_eq!(evidence["keySource"], json!("embedded"));
    for a in &atts {
        let body = delegateos::signing::without_signature(a).unwrap();
        delegateos::signing::verify(gateway.principal_id(), &body, &a.signature).unwrap();
    }
    // Same tree, same ids.
    let again = translate::receipt_to_attestations(&parsed, &report, &gateway, &ctx).unwrap();
    assert_eq!(again[1].id, p.id);
    // A tree with a broken receipt is not attested.
    let mut broken = parent.clone();
    broken["delegation_receipts"][0]["result"] = json!("x");
    let broken_parsed = Receipt::from_value(&broken).unwrap();
    let broken_report = receipt::verify_chain(&broken_parsed, &KnownKeys::new());
    assert_eq!(
        translate::receipt_to_attestations(&broken_parsed, &broken_report, &gateway, &ctx)
            .unwrap_err()
            .reason,
        Reason::ChildInvalid
    );

    // And back.
    let back = translate::attestation_to_receipt(p, &gateway).unwrap();
    assert_eq!(accepted(&back), Ok(()));
    let back_parsed = Receipt::from_value(&back).unwrap();
    let v = verdict::receipt(back.as_object().unwrap(), None);
    assert_eq!(
        (v.integrity, v.identity_binding),
        (Integrity::Verified, IdentityBinding::Sovereign)
    );
    assert_eq!(back["relay_task_id"], json!(delegation.as_str()));
    assert_eq!(back["status"], json!("completed"));
    assert_eq!(
        back_parsed.completed_at - back_parsed.submitted_at,
        60_000.0
    );
}
