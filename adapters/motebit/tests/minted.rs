//! Artifacts the Motebit reference minted with its own signers, and the
//! verdicts its producers gave them (`tests/minted/README.md`): dgw's
//! verdict deep-equals each, on artifacts beyond the corpus, including
//! those off the schemas (a member missing, of another type, unknown);
//! where the reference's producer throws, dgw gives no verdict either.

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

#[test]
fn dgw_agrees_with_the_reference_on_artifacts_it_minted() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/minted/reference-verdicts.json");
    let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(cases.len(), 128);
    let (mut judged, mut thrown, mut refused) = (0, 0, 0);
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        if case.get("dgw_refuses").is_some() {
            refused += 1;
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
    assert_eq!((judged, thrown, refused), (117, 5, 6));
}
