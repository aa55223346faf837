//! Property tests for the parts with an algebra: glob containment,
//! canonicalization and attenuation.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use delegateos::canonical::{canonicalize, parse_strict};
use delegateos::dct::{AttenuateParams, SignedJsonToken};
use delegateos::glob::{Containment, ResourcePattern};
use delegateos::{Capability, Dct, DenialType};
use proptest::prelude::*;
use serde_json::Value;
use support::*;

/// Pattern segments from a small alphabet so that collisions are common.
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => Just("a".to_string()),
        3 => Just("b".to_string()),
        1 => Just("".to_string()),
        1 => Just("..".to_string()),
        4 => Just("*".to_string()),
        4 => Just("**".to_string()),
    ]
}

fn pattern() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just("*".to_string()),
        12 => prop::collection::vec(segment(), 1..6).prop_map(|s| s.join("/")),
    ]
}

/// Expands a pattern into a concrete path it matches, using `choices` to
/// pick what each wildcard becomes.
fn instance(pattern: &str, choices: &[u8]) -> String {
    let pool = ["a", "b", "c", "", "zz"];
    let mut next = choices.iter().copied().cycle();
    if pattern == "*" || pattern == "**" {
        // Anything at all, dot segments included.
        let n = next.next().unwrap_or(0) % 4;
        return (0..n)
            .map(|_| ["a", "..", "."][next.next().unwrap_or(0) as usize % 3])
            .collect::<Vec<_>>()
            .join("/");
    }
    let mut out: Vec<&str> = Vec::new();
    for seg in pattern.split('/') {
        match seg {
            "*" => out.push(pool[next.next().unwrap_or(0) as usize % pool.len()]),
            "**" => {
                let n = next.next().unwrap_or(0) % 3;
                for _ in 0..n {
                    out.push(pool[next.next().unwrap_or(0) as usize % pool.len()]);
                }
            }
            literal => out.push(literal),
        }
    }
    out.join("/")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Soundness: whenever child ⊆ parent, every path the child matches, the parent matches.
    #[test]
    fn subset_is_sound(child in pattern(), parent in pattern(), choices in prop::collection::vec(any::<u8>(), 1..16)) {
        let c = ResourcePattern::parse(&child).unwrap();
        let p = ResourcePattern::parse(&parent).unwrap();
        let path = instance(&child, &choices);
        prop_assume!(c.matches(&path));
        if c.is_subset_of(&p) {
            prop_assert!(p.matches(&path), "{child} ⊆ {parent} but {path:?} escapes");
        }
    }

    /// Completeness: when containment fails, the witness really separates them;
    /// these small patterns are always decided.
    #[test]
    fn non_subset_has_a_real_witness(child in pattern(), parent in pattern()) {
        let c = ResourcePattern::parse(&child).unwrap();
        let p = ResourcePattern::parse(&parent).unwrap();
        match c.containment(&p) {
            Containment::Subset => {}
            Containment::NotSubset { witness } => {
                prop_assert!(c.matches(&witness), "{child} should match witness {witness:?}");
                prop_assert!(!p.matches(&witness), "{parent} should not match witness {witness:?}");
            }
            Containment::Undecided => prop_assert!(false, "{child} vs {parent} undecided"),
        }
    }

    /// Containment is a preorder: reflexive and transitive.
    #[test]
    fn subset_is_a_preorder(a in pattern(), b in pattern(), c in pattern()) {
        let (a, b, c) = (
            ResourcePattern::parse(&a).unwrap(),
            ResourcePattern::parse(&b).unwrap(),
            ResourcePattern::parse(&c).unwrap(),
        );
        prop_assert!(a.is_subset_of(&a));
        if a.is_subset_of(&b) && b.is_subset_of(&c) {
            prop_assert!(a.is_subset_of(&c));
        }
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| Value::from(n % (1 << 53))),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("\\PC{0,6}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Canonical bytes parse back to the same value and canonicalize to themselves.
    #[test]
    fn canonicalization_is_idempotent(v in json_value()) {
        let once = canonicalize(&v).unwrap();
        let reparsed = parse_strict(&once, 1 << 24).unwrap();
        let twice = canonicalize(&reparsed).unwrap();
        prop_assert_eq!(&once, &twice);
    }

    /// Pretty-printing (other whitespace, other key order) never changes canonical bytes.
    #[test]
    fn canonicalization_ignores_presentation(v in json_value()) {
        let pretty = serde_json::to_string_pretty(&v).unwrap();
        let reparsed = parse_strict(pretty.as_bytes(), 1 << 24).unwrap();
        prop_assert_eq!(canonicalize(&v).unwrap(), canonicalize(&reparsed).unwrap());
    }
}

fn cap_choice() -> impl Strategy<Value = Capability> {
    (
        prop_oneof![Just("docs"), Just("web"), Just("*")],
        prop_oneof![Just("read"), Just("write")],
        pattern(),
    )
        .prop_map(|(ns, action, res)| Capability::new(ns, action, &res).unwrap())
}

#[derive(Debug, Clone)]
struct Step {
    caps: Option<Vec<Capability>>,
    budget: Option<u64>,
    expiry_minutes: Option<i64>,
    depth: Option<u32>,
}

fn step() -> impl Strategy<Value = Step> {
    (
        prop::option::of(prop::collection::vec(cap_choice(), 1..3)),
        prop::option::of(0u64..20_000),
        prop::option::of(-10i64..90),
        prop::option::of(0u32..5),
    )
        .prop_map(|(caps, budget, expiry_minutes, depth)| Step {
            caps,
            budget,
            expiry_minutes,
            depth,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Creation-time checks (§3.4) and verification-time checks (§10.1 step 4)
    /// agree: an attenuation `attenuate` accepts verifies, and one it refuses,
    /// forced into a validly signed token, is an `attenuation_violation`.
    /// Accepted chains only ever narrow.
    #[test]
    fn attenuation_checks_agree_and_only_narrow(steps in prop::collection::vec(step(), 1..4)) {
        let cast = Cast::new();
        let keys = [&cast.alice, &cast.bob, &cast.carol, &cast.dave, &cast.root];
        let mut token = cast.root_token();
        let base_expiry = ts(EXPIRY);
        for (i, s) in steps.iter().enumerate() {
            let params = AttenuateParams {
                delegatee: keys[i + 1].principal_id().clone(),
                delegation_id: del(10 + i as u8),
                contract_id: ct(10 + i as u8),
                allowed_capabilities: s.caps.clone(),
                max_budget_microcents: s.budget,
                expires_at: s.expiry_minutes.map(|m| base_expiry.checked_add(time::Duration::minutes(m - 60)).unwrap()),
                max_chain_depth: s.depth,
            };
            let before = Dct::decode(&token.encode()).unwrap().verify_chain(&cast.roots()).unwrap();
            match token.attenuate(keys[i], params.clone()) {
                Ok(next) => {
                    let after = Dct::decode(&next.encode()).unwrap().verify_chain(&cast.roots());
                    prop_assert!(after.is_ok(), "accepted but does not verify: {:?}", after.err());
                    let after = after.unwrap();
                    prop_assert!(after.budget_microcents() <= before.budget_microcents());
                    prop_assert!(after.expires_at() <= before.expires_at());
                    for c in after.capabilities() {
                        prop_assert!(c.is_covered_by(before.capabilities()));
                    }
                    token = next;
                }
                Err(reason) => {
                    prop_assert!(matches!(reason.kind, DenialType::AttenuationViolation), "{reason:?}");
                    let forced = force(&token, keys[i], params);
                    let verdict = Dct::decode(&forced).unwrap().verify_chain(&cast.roots());
                    prop_assert_eq!(verdict.err().map(|r| r.kind), Some(DenialType::AttenuationViolation));
                    break;
                }
            }
        }
    }
}

/// Appends an attenuation without any checks and signs it properly.
fn force(token: &Dct, attenuator: &delegateos::Keypair, p: AttenuateParams) -> String {
    let mut t: SignedJsonToken = token.token().clone();
    t.attenuations.push(delegateos::dct::Attenuation {
        attenuator: attenuator.principal_id().clone(),
        delegatee: p.delegatee,
        delegation_id: p.delegation_id,
        contract_id: p.contract_id,
        allowed_capabilities: p.allowed_capabilities,
        max_budget_microcents: p.max_budget_microcents,
        expires_at: p.expires_at,
        max_chain_depth: p.max_chain_depth,
    });
    let index = t.attenuations.len() - 1;
    t.signatures.push(delegateos::dct::TokenSignature {
        signer: attenuator.principal_id().clone(),
        signature: String::new(),
        covers: delegateos::dct::Covers::Attenuation(index as u32),
    });
    let keys: Vec<delegateos::Keypair> = (1..=5).map(key).collect();
    let signer =
        |id: &delegateos::PrincipalId| keys.iter().find(|k| k.principal_id() == id).unwrap();
    let mut signers = vec![signer(&t.authority.issuer)];
    for a in &t.attenuations {
        signers.push(signer(&a.attenuator));
    }
    resign(&mut t, &signers);
    forge(&t)
}
