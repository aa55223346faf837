//! Whole-number floats in both capability formats, against vectors made by
//! the reference implementations themselves (`interop/numbers/README.md`):
//! the seed's Python format signs `1.0`, the v1 wire format (the reference
//! SDK, and the contracts library since 2026-04-19) signs `1`. dgw computes
//! each format's own bytes, chosen by the format of the capability.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use talos::canonical::{jcs, python_float_repr, python_sorted};
use talos::capability::{Capability, Format};
use talos::keys::{parse_public_key, Issuers};
use talos::{authorize, Context, TalosDenial, TalosRequest};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/numbers")
}

fn read(name: &str) -> String {
    std::fs::read_to_string(dir().join(name)).unwrap()
}

const KEY: &str = "3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29";
const NOW: i64 = 1_700_000_100;

fn issuers() -> Issuers {
    let mut i = Issuers::new();
    i.insert(&format!("did:talos:{KEY}"), parse_public_key(KEY).unwrap());
    i
}

fn check(cap: &Capability) -> Result<(), TalosDenial> {
    let issuers = issuers();
    let never = |_: &str| false;
    let ctx = Context {
        issuers: &issuers,
        now: NOW,
        revoked: &never,
        known_tool: &|t| t == "weather",
    };
    let request = TalosRequest {
        tool: "weather".into(),
        method: "get".into(),
        resources: vec![],
    };
    authorize(cap, &request, &ctx)
        .map(|_| ())
        .map_err(|d| d.reason)
}

#[test]
fn a_seed_capability_with_floats_verifies_in_its_python_form() {
    let cap = Capability::from_text(&read("seed_capability.json")).unwrap();
    assert_eq!(cap.format, Format::Spec);
    let seed_bytes = read("seed_content_canonical.bytes");
    // The bytes the seed signed, `1.0`, `1e+16` and `1e-05` as Python writes them.
    let ours = String::from_utf8(python_sorted(&cap.signed_content()).unwrap()).unwrap();
    assert_eq!(ours, seed_bytes);
    assert!(ours.contains(r#""max_calls":1.0,"#), "{ours}");
    // JCS writes the same value otherwise: it is not what the seed signed.
    let jcs_text = String::from_utf8(jcs(&cap.signed_content())).unwrap();
    assert!(jcs_text.contains(r#""max_calls":1,"#), "{jcs_text}");
    assert_ne!(jcs_text, seed_bytes);
    assert_eq!(check(&cap), Ok(()));
}

#[test]
fn a_wire_capability_signs_whole_number_floats_as_integers_like_the_sdk_and_contracts() {
    let sdk_bytes = read("ts_wire_content_canonical.bytes");
    // The two current references agree byte for byte.
    assert_eq!(sdk_bytes, read("contracts_wire_content_canonical.bytes"));
    let sdk_text = read("ts_wire_capability.json");
    let cap = Capability::from_text(&sdk_text).unwrap();
    assert_eq!(cap.format, Format::Wire);
    assert_eq!(jcs(&cap.signed_content()), sdk_bytes.as_bytes());
    assert_eq!(
        cap.capability_hash(),
        read("ts_wire_capability_hash.hex").trim()
    );
    assert_eq!(check(&cap), Ok(()));

    // The same capability as a Python producer sends it, floats spelt `1.0`:
    // the same canonical bytes, the same hash, the same verdict.
    let mut value: Value = serde_json::from_str(&sdk_text).unwrap();
    for (k, v) in [("iat", 1_700_000_000.0), ("exp", 1_700_003_600.0)] {
        value[k] = Value::from(v);
    }
    for (k, v) in [
        ("max_calls", 1.0),
        ("limit", 100.0),
        ("zero", 0.0),
        ("negative", -2.0),
        ("big", 1e16),
    ] {
        value["constraints"][k] = Value::from(v);
    }
    let text = serde_json::to_string(&value).unwrap();
    assert!(
        text.contains(r#""max_calls":1.0"#) && text.contains(r#""iat":1700000000.0"#),
        "{text}"
    );
    let floats = Capability::from_text(&text).unwrap();
    assert_eq!(jcs(&floats.signed_content()), sdk_bytes.as_bytes());
    assert_eq!(floats.capability_hash(), cap.capability_hash());
    assert_eq!(check(&floats), Ok(()));
}

#[test]
fn a_wire_capability_signed_over_the_old_python_form_is_refused() {
    // The contracts library before 2026-04-19 signed `1.0`: the v1 format is
    // JCS only, so dgw does not try the Python form for it.
    let text = read("contracts_before_wire_capability.json");
    let signed = read("contracts_before_wire_content_canonical.bytes");
    assert!(signed.contains(r#""max_calls":1.0"#));
    let cap = Capability::from_text(&text).unwrap();
    assert_eq!(cap.format, Format::Wire);
    assert_ne!(jcs(&cap.signed_content()), signed.as_bytes());
    assert_eq!(check(&cap), Err(TalosDenial::SignatureInvalid));
}

#[test]
fn a_wire_capability_with_a_fraction_is_refused_as_the_sdk_refuses_to_sign_it() {
    let refusals: Value = serde_json::from_str(&read("ts_non_integer_refusals.json")).unwrap();
    let sdk_text = read("ts_wire_capability.json");
    for (name, number) in [("ratio", 0.5), ("tiny", 1e-5)] {
        assert!(
            refusals[name]
                .as_str()
                .unwrap()
                .contains("Floats not permitted"),
            "{refusals}"
        );
        let mut value: Value = serde_json::from_str(&sdk_text).unwrap();
        value["constraints"][name] = Value::from(number);
        let err = Capability::from_text(&value.to_string()).unwrap_err();
        assert_eq!(err.reason, TalosDenial::SignatureInvalid);
        assert!(err.detail.contains("integers only"), "{}", err.detail);
    }
    // Nested ones too.
    let mut value: Value = serde_json::from_str(&sdk_text).unwrap();
    value["constraints"]["limits"] = serde_json::json!([{"rate": 2.5}]);
    assert!(Capability::from_text(&value.to_string()).is_err());
}

/// `python_float_repr` against Python's own `repr`, on edge cases and on
/// random bit patterns, in one `python3` run with a deadline.
#[test]
fn python_float_repr_is_pythons_repr() {
    let mut floats: Vec<f64> = vec![
        0.0,
        -0.0,
        1.0,
        -2.0,
        0.5,
        100.0,
        1e15,
        1e16,
        1.5e16,
        1e17,
        1e-4,
        1e-5,
        1.2345e-5,
        0.1,
        1.0 / 3.0,
        123456789.125,
        1e21,
        1e22,
        1e300,
        5e-324,
        f64::MAX,
        f64::MIN_POSITIVE,
        9007199254740993.0,
        1700000000.0,
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    while floats.len() < 3000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let f = f64::from_bits(state);
        if f.is_finite() {
            floats.push(f);
        }
    }
    let input: String = floats
        .iter()
        .map(|f| format!("{:016x}\n", f.to_bits()))
        .collect();
    let path = std::env::temp_dir().join(format!("talos-floats-{}.txt", std::process::id()));
    std::fs::write(&path, input).unwrap();
    let out = Command::new("timeout")
        .args(["60", "python3", "-c"])
        .arg(
            "import struct,sys\n\
             for line in open(sys.argv[1]):\n\
             \x20   print(repr(struct.unpack('>d', bytes.fromhex(line.strip()))[0]))",
        )
        .arg(&path)
        .output()
        .expect("python3 runs");
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs = String::from_utf8(out.stdout).unwrap();
    let theirs: Vec<&str> = theirs.lines().collect();
    assert_eq!(theirs.len(), floats.len());
    for (f, expected) in floats.iter().zip(theirs) {
        assert_eq!(
            python_float_repr(*f).unwrap(),
            expected,
            "bits {:016x}",
            f.to_bits()
        );
    }
}
