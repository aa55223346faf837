//! Artifacts the Motebit reference minted with its own signers, and the
//! verdicts its producers gave them (`tests/minted/README.md`): dgw's
//! verdict deep-equals each, on artifacts beyond the corpus.

use std::path::Path;

use motebit::receipt::Receipt;
use motebit::token::{DelegationToken, StandingDelegation};
use motebit::verdict::{self, TokenOptions};
use serde_json::Value;

#[test]
fn dgw_agrees_with_the_reference_on_artifacts_it_minted() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/minted/reference-verdicts.json");
    let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(cases.len(), 35);
    for case in &cases {
        let input = &case["input"];
        let got = match case["kind"].as_str().unwrap() {
            "receipt" => verdict::receipt(&Receipt::from_value(&input["receipt"]).unwrap(), None),
            _ => verdict::delegation_token(
                &DelegationToken::from_value(&input["token"]).unwrap(),
                Some(&StandingDelegation::from_value(&input["grant"]).unwrap()),
                &serde_json::from_value::<TokenOptions>(input["options"].clone()).unwrap(),
                0.0,
                None,
            ),
        };
        assert_eq!(got.to_json(), case["expected"], "{}", case["name"]);
    }
}
