//! RFC 8785's own vectors, held against our canonicalizer.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

use delegateos::canonical::{canonicalize, parse_strict};
use serde_json::Value;

fn canon_text(json: &str) -> String {
    let value = parse_strict(json.as_bytes(), 1 << 20).unwrap();
    String::from_utf8(canonicalize(&value).unwrap()).unwrap()
}

fn canon_f64(bits: u64) -> String {
    let v = f64::from_bits(bits);
    String::from_utf8(canonicalize(&Value::from(v)).unwrap()).unwrap()
}

/// RFC 8785 Appendix B: IEEE 754 bit patterns and their ECMAScript forms.
#[test]
fn appendix_b_number_serialization() {
    let table: &[(u64, &str)] = &[
        (0x0000000000000000, "0"),
        (0x8000000000000000, "0"), // -0
        (0x0000000000000001, "5e-324"),
        (0x8000000000000001, "-5e-324"),
        (0x7fefffffffffffff, "1.7976931348623157e+308"),
        (0xffefffffffffffff, "-1.7976931348623157e+308"),
        (0x4340000000000000, "9007199254740992"), // 2^53
        (0xc340000000000000, "-9007199254740992"),
        (0x4430000000000000, "295147905179352830000"),
        (0x44b52d02c7e14af5, "9.999999999999997e+22"),
        (0x44b52d02c7e14af6, "1e+23"),
        (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
        (0x444b1ae4d6e2ef4e, "999999999999999700000"),
        (0x444b1ae4d6e2ef4f, "999999999999999900000"),
        (0x444b1ae4d6e2ef50, "1e+21"),
        (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
        (0x3eb0c6f7a0b5ed8d, "0.000001"),
        (0x41b3de4355555553, "333333333.3333332"),
        (0x41b3de4355555554, "333333333.33333325"),
        (0x41b3de4355555555, "333333333.3333333"),
        (0x41b3de4355555556, "333333333.3333334"),
        (0x41b3de4355555557, "333333333.33333343"),
        (0xbecbf647612f3696, "-0.0000033333333333333333"),
        (0x43143ff3c1cb0959, "1424953923781206.2"),
    ];
    for (bits, expected) in table {
        assert_eq!(canon_f64(*bits), *expected, "bits {bits:016x}");
    }
    assert_eq!(canon_f64(1e-7f64.to_bits()), "1e-7");
    assert_eq!(canon_f64(1e21f64.to_bits()), "1e+21");
    assert_eq!(canon_f64(1e20f64.to_bits()), "100000000000000000000");
}

/// Numbers written in JSON text go through the same rules, and integers up
/// to 2^53 stay integers.
#[test]
fn numbers_from_text() {
    assert_eq!(canon_text("[-0]"), "[0]");
    assert_eq!(canon_text("[-0.0]"), "[0]");
    assert_eq!(
        canon_text("[1E30, 4.50, 2e-3, 1e-7]"),
        "[1e+30,4.5,0.002,1e-7]"
    );
    assert_eq!(canon_text("[9007199254740992]"), "[9007199254740992]");
    assert_eq!(canon_text("[9007199254740991]"), "[9007199254740991]");
    assert_eq!(canon_text("[5e-324]"), "[5e-324]");
    assert_eq!(
        canon_text("[1.7976931348623157e308]"),
        "[1.7976931348623157e+308]"
    );
}

/// RFC 8785 §3.2.2: the example with numbers, string escapes and literals.
#[test]
fn section_3_2_2_example() {
    let input = r#"{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"#;
    let expected = "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],\"string\":\"€$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}";
    assert_eq!(canon_text(input), expected);
}

/// RFC 8785 §3.2.3: keys sorted by UTF-16 code units, so the non-BMP emoji
/// (D83D DE00) sorts before U+FB33 although its code point is larger.
#[test]
fn section_3_2_3_sorting() {
    let input = r#"{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}"#;
    let expected = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}";
    assert_eq!(canon_text(input), expected);
}

/// String escaping: only `"`, `\` and controls are escaped, controls with
/// the short forms where JSON has them and lowercase `\u00xx` otherwise.
#[test]
fn string_escaping() {
    assert_eq!(
        canon_text(r#"["\u0000\u0001\b\t\n\f\r\u001f \u007f/\u00e9"]"#),
        "[\"\\u0000\\u0001\\b\\t\\n\\f\\r\\u001f \u{7f}/é\"]"
    );
    assert_eq!(
        canon_text(r#"{"b":{"d":1,"c":2},"a":[]}"#),
        r#"{"a":[],"b":{"c":2,"d":1}}"#
    );
}

/// Non-finite numbers cannot be canonicalized (JSON text cannot carry them).
#[test]
fn non_finite_cannot_enter() {
    assert!(parse_strict(b"[NaN]", 100).is_err());
    assert!(parse_strict(b"[1e400]", 100).is_err());
}
