//! Artifacts the Motebit reference minted with its own signers, and the
//! verdicts its producers gave them (`tests/minted/README.md`): dgw's
//! verdict deep-equals each, on artifacts beyond the corpus, including
//! those off the schemas (a member missing, of another type, unknown);
//! where the reference's producer throws, dgw gives no verdict either.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use motebit::verdict;
use serde_json::Value;

/// The producer on a case whose parts are JSON objects (the cases marked
/// `dgw_refuses` have a part that is not, and are refused before any
/// producer runs: `tests/motebit_interop.rs` checks that on `dgw`).
fn judge(case: &Value) -> Result<Value, verdict::Unjudged> {
    let input = &case["input"];
    match case["kind"].as_str().unwrap() {
        "receipt" => Ok(verdict::receipt(input["receipt"].as_object().unwrap(), None).to_json()),
        _ => verdict::delegation_token(
            input["token"].as_object().unwrap(),
            input["grant"].as_object(),
            &input["options"],
            0.0,
            None,
        )
        .map(|v| v.to_json()),
    }
}

/// The vendored cases, read once.
fn cases() -> &'static [Value] {
    static CASES: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    CASES.get_or_init(|| {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/minted/reference-verdicts.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    })
}

#[test]
fn dgw_agrees_with_the_reference_on_artifacts_it_minted() {
    let cases = cases();
    assert_eq!(cases.len(), 129);
    let (mut judged, mut thrown, mut refused, mut diverged) = (0, 0, 0, 0);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        if case.get("dgw_refuses").is_some() {
            refused += 1;
            continue;
        }
        if case.get("dgw_diverges").is_some() {
            // The reference reads the forgery `verified`; dgw, strictly, not.
            let got = judge(case).unwrap();
            assert_eq!(case["expected"]["integrity"], "verified", "{name}");
            assert_eq!(got["integrity"], "invalid", "{name}");
            assert_eq!(
                got["repair"]["code"], "integrity.signature_invalid",
                "{name}"
            );
            diverged += 1;
            continue;
        }
        match (judge(case), case.get("throws")) {
            (Ok(got), None) => {
                assert_eq!(got, case["expected"], "{name}");
                // Every verdict reads back as a verdict (any subject).
                verdict::Verdict::from_json(&got).unwrap();
                judged += 1;
            }
            (Err(_), Some(_)) => thrown += 1,
            (got, throws) => panic!("{name}: dgw {got:?}, the reference threw {throws:?}"),
        }
    }
    assert_eq!((judged, thrown, refused, diverged), (117, 5, 6, 1));
}

fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| serde_json::json!(f)),
        any::<i64>().prop_map(|i| serde_json::json!(i)),
        "[ -~\u{a0}\u{feff}\u{1f600}]{0,70}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z_]{1,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest::proptest! {
    // Each case verifies up to three signatures (slow in debug builds).
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Any member of any minted case replaced by any JSON value: the
    /// producers answer (or refuse as the reference throws) and never panic.
    #[test]
    fn any_member_of_any_type_is_judged_without_panic(
        case in 0usize..129,
        part in 0usize..4,
        member in "[a-z_]{1,20}|suite|scope|grant_id|public_key|signature|expires_at|revocations|now|temporalMode",
        value in json_value(),
    ) {
        let mut case = cases()[case].clone();
        let name = ["receipt", "token", "grant", "options"][part];
        if let Some(Value::Object(m)) = case["input"].get_mut(name) {
            m.insert(member, value);
        }
        if case.get("dgw_refuses").is_none() {
            let _ = judge(&case);
        }
    }
}
