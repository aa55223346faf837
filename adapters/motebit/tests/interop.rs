//! Every file from the Motebit reference (copied to `tests/interop/` with
//! its paths and licenses) is a test here; a file this list does not know
//! fails the run, so a new one cannot be skipped silently.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use motebit::receipt::{self, KnownKeys, Receipt};
use motebit::token::DelegationToken;
use motebit::verdict;
use serde_json::Value;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(dir().join(rel)).unwrap()
}

fn json(rel: &str) -> Value {
    serde_json::from_str(&read(rel)).unwrap()
}

const CORPUS: &str = "spec/conformance/verification-verdict/corpus.json";
const RECEIPT_SCHEMA: &str = "spec/schemas/execution-receipt-v1.json";
const TOKEN_SCHEMA: &str = "spec/schemas/delegation-token-v1.json";
const FIXTURES: [&str; 5] = [
    "examples/python-receipt-verifier/fixtures/example-receipt.json",
    "examples/python-receipt-verifier/fixtures/sovereign-receipt-payment-denied.json",
    "examples/python-receipt-verifier/fixtures/sovereign-receipt-research-complete.json",
    "examples/python-receipt-verifier/fixtures/sovereign-receipt.json",
    "packages/verify/examples/sample-receipt.json",
];

/// Every case of the conformance corpus deep-equals its `expected`.
#[test]
fn verdict_corpus() {
    let corpus = json(CORPUS);
    assert_eq!(corpus["schema"], "motebit.verification-verdict-corpus.v1");
    let cases = corpus["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 8);
    for case in cases {
        let input = &case["input"];
        let got = match case["kind"].as_str().unwrap() {
            "receipt" => verdict::receipt(input["receipt"].as_object().unwrap(), None),
            "delegation_token" => {
                // A wrong fallback clock would show in every windowed case.
                verdict::delegation_token(
                    input["token"].as_object().unwrap(),
                    input["grant"].as_object(),
                    &input["options"],
                    0.0,
                    None,
                )
                .unwrap()
            }
            other => panic!("unknown kind {other}"),
        };
        assert_eq!(got.to_json(), case["expected"], "case {}", case["name"]);
    }
}

/// Every receipt the reference ships verifies (embedded key, hash binding,
/// suite), and is valid under the published schema.
#[test]
fn fixture_receipts_verify() {
    let schema = jsonschema::validator_for(&json(RECEIPT_SCHEMA)).unwrap();
    for rel in FIXTURES {
        let raw = read(rel);
        let value: Value = serde_json::from_str(&raw).unwrap();
        assert!(schema.is_valid(&value), "{rel} against the schema");
        let r = Receipt::parse(raw.as_bytes()).unwrap();
        let report = receipt::verify_chain(&r, &KnownKeys::new());
        assert!(report.verified(), "{rel}: {:?}", report.first_failure());
        assert_eq!(report.key_source, Some(receipt::KeySource::Embedded));
        let v = verdict::receipt(value.as_object().unwrap(), None);
        assert_eq!(v.integrity, verdict::Integrity::Verified, "{rel}");
    }
}

/// The corpus's artifacts are valid under the published schemas too, and
/// the schema and the parser agree on each with a member removed or added
/// (a missing `suite` is parsed, and refused `wrong_suite` on acceptance).
#[test]
fn schemas_and_parsers_agree() {
    let receipts = jsonschema::validator_for(&json(RECEIPT_SCHEMA)).unwrap();
    let tokens = jsonschema::validator_for(&json(TOKEN_SCHEMA)).unwrap();
    let corpus = json(CORPUS);
    let mut checked = 0;
    for case in corpus["cases"].as_array().unwrap() {
        let (artifact, schema, parses): (_, _, fn(&Value) -> bool) =
            match case["kind"].as_str().unwrap() {
                "receipt" => (&case["input"]["receipt"], &receipts, |v| {
                    Receipt::from_value(v).is_ok()
                }),
                _ => (&case["input"]["token"], &tokens, |v| {
                    DelegationToken::from_value(v).is_ok()
                }),
            };
        assert!(schema.is_valid(artifact) && parses(artifact));
        let members: Vec<String> = artifact.as_object().unwrap().keys().cloned().collect();
        for m in &members {
            let mut less = artifact.clone();
            less.as_object_mut().unwrap().remove(m);
            if m == "suite" {
                // Parsed, so that acceptance can name it (`wrong_suite`).
                assert!(!schema.is_valid(&less) && parses(&less), "without suite");
            } else {
                assert_eq!(schema.is_valid(&less), parses(&less), "without {m}");
            }
            checked += 1;
        }
        let mut more = artifact.clone();
        more["unexpected"] = Value::Bool(true);
        assert!(!schema.is_valid(&more) && !parses(&more));
    }
    assert!(checked > 80);
}

/// The receipt wire format tables (execution-ledger §11.1, delegation §5.1)
/// name exactly the members the schema has.
#[test]
fn spec_tables_match_the_schema() {
    let schema = json(RECEIPT_SCHEMA);
    let properties: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
    let ledger = read("spec/execution-ledger-v1.md");
    let section = ledger
        .split("### 11.1")
        .nth(1)
        .unwrap()
        .split("#### Status")
        .next()
        .unwrap();
    let named: Vec<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next())
        .collect();
    assert!(named.len() >= 17);
    for n in &named {
        assert!(properties.iter().any(|p| p == n), "{n} not in the schema");
    }
    let delegation = read("spec/delegation-v1.md");
    let block = delegation
        .split("ExecutionReceipt {")
        .nth(1)
        .unwrap()
        .split('}')
        .next()
        .unwrap();
    for line in block.lines().filter(|l| l.contains(':')) {
        let name = line.trim().split(':').next().unwrap();
        assert!(
            properties.iter().any(|p| *p == name),
            "{name} not in the schema"
        );
    }
}

/// The audience table of auth-token §5 includes the audience the gateway
/// asks of Motebit callers by default.
#[test]
fn auth_token_audiences() {
    let spec = read("spec/auth-token-v1.md");
    let table = spec
        .split("## 5. Audience Values")
        .nth(1)
        .unwrap()
        .split("## 6.")
        .next()
        .unwrap();
    let audiences: Vec<&str> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next())
        .collect();
    assert!(audiences.contains(&"task:submit"), "{audiences:?}");
    assert!(spec.contains("Bearer motebit:{token}"));
    assert_eq!(motebit::bearer::PREFIX, "motebit:");
}

/// The corpus README names the producers and axes the verdict module has.
#[test]
fn corpus_readme_axes() {
    let readme = read("spec/conformance/verification-verdict/README.md");
    for axis in [
        "integrity",
        "identityBinding",
        "authority",
        "revocation",
        "temporalBasis",
        "evidenceBasis",
    ] {
        assert!(readme.contains(&format!("`{axis}`")), "{axis}");
    }
}

/// Licenses are carried, not tested.
const LICENSES: [&str; 2] = ["examples/python-receipt-verifier/LICENSE", "spec/LICENSE"];

#[test]
fn every_file_is_known() {
    let known: Vec<&str> = [CORPUS, RECEIPT_SCHEMA, TOKEN_SCHEMA]
        .into_iter()
        .chain(FIXTURES)
        .chain(LICENSES)
        .chain([
            "spec/execution-ledger-v1.md",
            "spec/delegation-v1.md",
            "spec/auth-token-v1.md",
            "spec/conformance/verification-verdict/README.md",
        ])
        .collect();
    fn walk(d: &Path, base: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, base, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut files = Vec::new();
    walk(&dir(), &dir(), &mut files);
    for f in &files {
        assert!(known.contains(&f.as_str()), "{f} has no test");
    }
    assert_eq!(files.len(), known.len());
}
