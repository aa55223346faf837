//! The reference implementation's red-team classes, against capabilities
//! made here: forged and broken signatures, revoked capabilities replayed,
//! wildcard injection and method escalation in scopes, future dating, empty
//! names, bad delegation chains, and Unicode look-alikes.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

use base64::Engine;
use delegateos::Keypair;
use serde_json::{json, Value};
use talos::capability::Capability;
use talos::keys::Issuers;
use talos::{authorize, Context, TalosDenial, TalosRequest};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

const NOW: i64 = 1_800_000_000;

fn key(n: u8) -> Keypair {
    Keypair::from_seed([n; 32])
}

fn did(k: &Keypair) -> String {
    format!("did:talos:{}", hex::encode(k.public_key().to_bytes()))
}

fn iso(t: i64) -> String {
    OffsetDateTime::from_unix_timestamp(t)
        .unwrap()
        .format(&Rfc3339)
        .unwrap()
}

/// A spec-format capability from `signer` (issuer) to `subject`.
fn spec(
    signer: &Keypair,
    subject: &Keypair,
    scope: &str,
    iat: i64,
    exp: i64,
    delegatable: bool,
    chain: Vec<Value>,
) -> Value {
    let id = format!("cap_{}", hex::encode(&signer.public_key().to_bytes()[..12]));
    let mut v = json!({
        "id": id, "version": 1, "issuer": did(signer), "subject": did(subject), "scope": scope,
        "constraints": {}, "issued_at": iso(iat), "expires_at": iso(exp),
        "delegatable": delegatable, "delegation_chain": chain,
    });
    let sig = signer.sign_message(&talos::canonical::jcs(&v));
    v["signature"] = json!(delegateos::base64url::encode(&sig.to_bytes()));
    v
}

/// A wire-format capability.
fn wire(signer: &Keypair, scope: &str, constraints: Value, iat: i64, exp: i64) -> Value {
    let mut v = json!({"v": "1", "iss": did(signer), "sub": "did:talos:agent", "scope": scope,
                       "constraints": constraints, "iat": iat, "exp": exp});
    let sig = signer.sign_message(&talos::canonical::jcs(&v));
    v["sig"] = json!(delegateos::base64url::encode(&sig.to_bytes()));
    v
}

fn issuers() -> Issuers {
    let mut i = Issuers::new();
    i.insert(&did(&key(1)), key(1).public_key());
    i
}

fn ask(tool: &str, method: &str, resources: &[&str]) -> TalosRequest {
    TalosRequest {
        tool: tool.into(),
        method: method.into(),
        resources: resources.iter().map(|r| r.to_string()).collect(),
    }
}

fn check(cap: &Value, request: &TalosRequest, revoked: &[String]) -> Result<(), TalosDenial> {
    let issuers = issuers();
    let revoked = |n: &str| revoked.iter().any(|r| r == n);
    let ctx = Context {
        issuers: &issuers,
        now: NOW,
        revoked: &revoked,
        known_tool: &|t| t == "fs" || t == "weather",
    };
    Capability::from_value(cap)
        .and_then(|c| authorize(&c, request, &ctx))
        .map(|_| ())
        .map_err(|d| d.reason)
}

fn read_data() -> TalosRequest {
    ask("fs", "read", &["/data/a.txt"])
}

fn good() -> Value {
    spec(
        &key(1),
        &key(2),
        "tool:fs/method:read/resource:/data",
        NOW - 10,
        NOW + 3600,
        true,
        vec![],
    )
}

#[test]
fn a_good_capability_is_allowed_in_both_formats() {
    assert_eq!(check(&good(), &read_data(), &[]), Ok(()));
    let w = wire(
        &key(1),
        "tools/call",
        json!({"tool": "weather", "method": "get"}),
        NOW - 10,
        NOW + 60,
    );
    assert_eq!(check(&w, &ask("weather", "get", &[]), &[]), Ok(()));
}

#[test]
fn signatures_swapped_null_truncated_malformed_or_from_strangers() {
    let other = spec(
        &key(1),
        &key(3),
        "tool:fs",
        NOW - 10,
        NOW + 3600,
        false,
        vec![],
    );
    let mut swapped = good();
    swapped["signature"] = other["signature"].clone();
    assert_eq!(
        check(&swapped, &read_data(), &[]),
        Err(TalosDenial::SignatureInvalid)
    );
    for bad in [
        json!(null),
        json!(""),
        json!("AAAA"),
        json!("!!not base64!!"),
        json!(42),
    ] {
        let mut c = good();
        c["signature"] = bad.clone();
        assert_eq!(
            check(&c, &read_data(), &[]),
            Err(TalosDenial::SignatureInvalid),
            "{bad}"
        );
    }
    let mut truncated = good();
    let s = truncated["signature"].as_str().unwrap().to_owned();
    truncated["signature"] = json!(&s[..s.len() - 4]);
    assert_eq!(
        check(&truncated, &read_data(), &[]),
        Err(TalosDenial::SignatureInvalid)
    );
    // Signed by someone the verifier does not trust.
    let stranger = spec(
        &key(9),
        &key(2),
        "tool:fs",
        NOW - 10,
        NOW + 3600,
        false,
        vec![],
    );
    assert_eq!(
        check(&stranger, &read_data(), &[]),
        Err(TalosDenial::SignatureInvalid)
    );
    // A field changed after signing.
    let mut widened = good();
    widened["scope"] = json!("tool:fs");
    assert_eq!(
        check(&widened, &read_data(), &[]),
        Err(TalosDenial::SignatureInvalid)
    );
    // The wire format has no Python form to fall back on.
    let mut w = wire(
        &key(1),
        "tools/call",
        json!({"tool": "weather"}),
        NOW,
        NOW + 60,
    );
    w["sig"] = json!(null);
    assert_eq!(
        check(&w, &ask("weather", "get", &[]), &[]),
        Err(TalosDenial::SignatureInvalid)
    );
}

#[test]
fn the_python_references_form_and_padded_base64_are_accepted_for_the_spec_format() {
    let mut v = json!({
        "id": "cap_0123456789abcdef01234567", "version": 1, "issuer": did(&key(1)),
        "subject": did(&key(2)), "scope": "tool:fs/method:read/resource:/données",
        "constraints": {"note": "é😀"}, "issued_at": iso(NOW - 10), "expires_at": iso(NOW + 60),
        "delegatable": false, "delegation_chain": [],
    });
    let bytes = talos::canonical::python_sorted(&v).unwrap();
    assert_ne!(
        bytes,
        talos::canonical::jcs(&v),
        "the forms differ for this content"
    );
    let sig = key(1).sign_message(&bytes);
    v["signature"] = json!(base64::engine::general_purpose::STANDARD.encode(sig.to_bytes()));
    assert!(v["signature"].as_str().unwrap().ends_with('='));
    assert_eq!(check(&v, &ask("fs", "read", &["/données/x"]), &[]), Ok(()));
}

#[test]
fn a_revoked_capability_replayed_is_denied_by_id_or_either_hash() {
    let c = Capability::from_value(&good()).unwrap();
    for name in c.revocation_names() {
        assert_eq!(
            check(&good(), &read_data(), std::slice::from_ref(&name)),
            Err(TalosDenial::Revoked),
            "{name}"
        );
    }
}

#[test]
fn wildcard_injection_and_method_escalation() {
    for scope in [
        "tool:*",
        "tool:fs*",
        "tool:fs/method:*",
        "tool:fs/method:read/resource:/data/*/../etc",
        "tool:fs/method:read/resource:/da*a",
    ] {
        let c = spec(&key(1), &key(2), scope, NOW - 10, NOW + 3600, false, vec![]);
        assert_eq!(
            check(&c, &read_data(), &[]),
            Err(TalosDenial::ScopeMismatch),
            "{scope}"
        );
    }
    assert_eq!(
        check(&good(), &ask("fs", "write", &["/data/a.txt"]), &[]),
        Err(TalosDenial::ScopeMismatch)
    );
    assert_eq!(
        check(&good(), &ask("fs", "read", &["/database"]), &[]),
        Err(TalosDenial::ScopeMismatch)
    );
    assert_eq!(
        check(&good(), &ask("fs", "read", &["/data/../etc/passwd"]), &[]),
        Err(TalosDenial::ScopeMismatch)
    );
    assert_eq!(
        check(&good(), &ask("fs", "read", &[]), &[]),
        Err(TalosDenial::ScopeMismatch)
    );
    // A capability for one tool never reaches another whose name extends it.
    assert_eq!(
        check(&good(), &ask("fsx", "read", &["/data/a"]), &[]),
        Err(TalosDenial::ScopeMismatch)
    );
}

#[test]
fn future_dated_expired_and_skew() {
    let future = spec(
        &key(1),
        &key(2),
        "tool:fs",
        NOW + 3600,
        NOW + 7200,
        false,
        vec![],
    );
    assert_eq!(check(&future, &read_data(), &[]), Err(TalosDenial::Expired));
    let within_skew = spec(
        &key(1),
        &key(2),
        "tool:fs",
        NOW + 30,
        NOW + 7200,
        false,
        vec![],
    );
    assert_eq!(check(&within_skew, &read_data(), &[]), Ok(()));
    let expired = spec(
        &key(1),
        &key(2),
        "tool:fs",
        NOW - 7200,
        NOW - 61,
        false,
        vec![],
    );
    assert_eq!(
        check(&expired, &read_data(), &[]),
        Err(TalosDenial::Expired)
    );
    let just_expired = spec(
        &key(1),
        &key(2),
        "tool:fs",
        NOW - 7200,
        NOW - 59,
        false,
        vec![],
    );
    assert_eq!(check(&just_expired, &read_data(), &[]), Ok(()));
}

#[test]
fn empty_tool_or_method_and_unknown_tools() {
    for scope in ["tool:", "tool:/method:read", "tool:fs/method:"] {
        let c = spec(&key(1), &key(2), scope, NOW - 10, NOW + 3600, false, vec![]);
        assert_eq!(
            check(&c, &read_data(), &[]),
            Err(TalosDenial::ScopeMismatch),
            "{scope}"
        );
    }
    assert_eq!(
        check(&good(), &ask("", "read", &["/data/a"]), &[]),
        Err(TalosDenial::ScopeMismatch)
    );
    assert_eq!(
        check(&good(), &ask("fs", "", &["/data/a"]), &[]),
        Err(TalosDenial::ScopeMismatch)
    );
    let other_tool = spec(
        &key(1),
        &key(2),
        "tool:shell",
        NOW - 10,
        NOW + 3600,
        false,
        vec![],
    );
    assert_eq!(
        check(&other_tool, &ask("shell", "run", &[]), &[]),
        Err(TalosDenial::UnknownTool)
    );
}

#[test]
fn unicode_look_alikes_in_scopes() {
    // Cyrillic "ѕ" in the tool name; a decomposed "é" in the resource.
    let homoglyph = spec(
        &key(1),
        &key(2),
        "tool:fѕ",
        NOW - 10,
        NOW + 3600,
        false,
        vec![],
    );
    assert_eq!(
        check(&homoglyph, &read_data(), &[]),
        Err(TalosDenial::ScopeMismatch)
    );
    let nfc = spec(
        &key(1),
        &key(2),
        "tool:fs/method:read/resource:/caf\u{e9}",
        NOW - 10,
        NOW + 3600,
        false,
        vec![],
    );
    assert_eq!(
        check(&nfc, &ask("fs", "read", &["/cafe\u{301}/x"]), &[]),
        Err(TalosDenial::ScopeMismatch)
    );
    assert_eq!(
        check(&nfc, &ask("fs", "read", &["/caf\u{e9}/x"]), &[]),
        Ok(())
    );
}

#[test]
fn delegation_chains() {
    let (root, a, b, c, d) = (key(1), key(2), key(3), key(4), key(5));
    let parent = spec(
        &root,
        &a,
        "tool:fs/method:read/resource:/data",
        NOW - 10,
        NOW + 3600,
        true,
        vec![],
    );
    let child = |signer: &Keypair, to: &Keypair, scope: &str, exp: i64, chain: Vec<Value>| {
        spec(signer, to, scope, NOW - 5, exp, true, chain)
    };
    let ok = child(
        &a,
        &b,
        "tool:fs/method:read/resource:/data/reports",
        NOW + 1800,
        vec![parent.clone()],
    );
    assert_eq!(
        check(&ok, &ask("fs", "read", &["/data/reports/q1"]), &[]),
        Ok(())
    );
    assert_eq!(
        check(&ok, &ask("fs", "read", &["/data/other"]), &[]),
        Err(TalosDenial::ScopeMismatch)
    );

    let broader = child(&a, &b, "tool:fs", NOW + 1800, vec![parent.clone()]);
    assert_eq!(
        check(&broader, &read_data(), &[]),
        Err(TalosDenial::DelegationInvalid)
    );
    let outlives = child(
        &a,
        &b,
        "tool:fs/method:read/resource:/data",
        NOW + 7200,
        vec![parent.clone()],
    );
    assert_eq!(
        check(&outlives, &read_data(), &[]),
        Err(TalosDenial::DelegationInvalid)
    );
    let not_its_own = child(
        &c,
        &b,
        "tool:fs/method:read/resource:/data",
        NOW + 1800,
        vec![parent.clone()],
    );
    assert_eq!(
        check(&not_its_own, &read_data(), &[]),
        Err(TalosDenial::DelegationInvalid)
    );
    let mut forged = child(
        &a,
        &b,
        "tool:fs/method:read/resource:/data",
        NOW + 1800,
        vec![parent.clone()],
    );
    forged["signature"] = parent["signature"].clone();
    assert_eq!(
        check(&forged, &read_data(), &[]),
        Err(TalosDenial::SignatureInvalid)
    );

    let sealed = spec(&root, &a, "tool:fs", NOW - 10, NOW + 3600, false, vec![]);
    let from_sealed = child(&a, &b, "tool:fs", NOW + 1800, vec![sealed]);
    assert_eq!(
        check(&from_sealed, &read_data(), &[]),
        Err(TalosDenial::DelegationInvalid)
    );

    let expired_parent = spec(&root, &a, "tool:fs", NOW - 7200, NOW - 3600, true, vec![]);
    let from_expired = spec(
        &a,
        &b,
        "tool:fs",
        NOW - 7200,
        NOW - 3601,
        true,
        vec![expired_parent.clone()],
    );
    let from_expired_fresh = spec(
        &a,
        &b,
        "tool:fs",
        NOW - 10,
        NOW + 10,
        true,
        vec![expired_parent],
    );
    assert_eq!(
        check(&from_expired, &read_data(), &[]),
        Err(TalosDenial::Expired)
    );
    assert_eq!(
        check(&from_expired_fresh, &read_data(), &[]),
        Err(TalosDenial::DelegationInvalid)
    );

    let parent_hash = Capability::from_value(&parent).unwrap().capability_hash();
    assert_eq!(
        check(
            &ok,
            &ask("fs", "read", &["/data/reports/q1"]),
            &[parent_hash]
        ),
        Err(TalosDenial::Revoked)
    );

    // Depth: three parents is the most.
    let root_cap = spec(&root, &a, "tool:fs", NOW - 10, NOW + 3600, true, vec![]);
    let l1_plain = spec(&a, &b, "tool:fs", NOW - 10, NOW + 3000, true, vec![]);
    let l2_plain = spec(&b, &c, "tool:fs", NOW - 10, NOW + 2000, true, vec![]);
    let l3_plain = spec(&c, &d, "tool:fs", NOW - 10, NOW + 1000, true, vec![]);
    let depth3 = spec(
        &c,
        &d,
        "tool:fs",
        NOW - 10,
        NOW + 1000,
        true,
        vec![root_cap.clone(), l1_plain.clone(), l2_plain.clone()],
    );
    assert_eq!(check(&depth3, &read_data(), &[]), Ok(()));
    let depth4 = spec(
        &d,
        &key(6),
        "tool:fs",
        NOW - 10,
        NOW + 500,
        true,
        vec![root_cap, l1_plain, l2_plain, l3_plain],
    );
    assert_eq!(
        check(&depth4, &read_data(), &[]),
        Err(TalosDenial::DelegationInvalid)
    );
}

/// Parents as their holders received them: each carries its own parents in
/// its signed `delegation_chain`. Three links are allowed (the reference's
/// `MAX_DELEGATION_DEPTH = 3`); the depth is the number of links, not the
/// sum of the nested chains' lengths.
#[test]
fn chains_of_capabilities_as_issued_count_links() {
    let (root, a, b, c, d) = (key(1), key(2), key(3), key(4), key(5));
    let d1 = spec(&root, &a, "tool:fs", NOW - 10, NOW + 3600, true, vec![]);
    let d2 = spec(
        &a,
        &b,
        "tool:fs",
        NOW - 10,
        NOW + 3000,
        true,
        vec![d1.clone()],
    );
    let d3 = spec(
        &b,
        &c,
        "tool:fs",
        NOW - 10,
        NOW + 2000,
        true,
        vec![d1.clone(), d2.clone()],
    );
    let d4 = spec(
        &c,
        &d,
        "tool:fs",
        NOW - 10,
        NOW + 1000,
        true,
        vec![d1.clone(), d2.clone(), d3.clone()],
    );
    for cap in [&d2, &d3, &d4] {
        assert_eq!(check(cap, &read_data(), &[]), Ok(()), "{cap}");
    }
    let d5 = spec(
        &d,
        &key(6),
        "tool:fs",
        NOW - 10,
        NOW + 500,
        true,
        vec![d1, d2, d3, d4],
    );
    assert_eq!(
        check(&d5, &read_data(), &[]),
        Err(TalosDenial::DelegationInvalid)
    );
}
