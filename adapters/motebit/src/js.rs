//! How the reference's JavaScript reads a JSON member, for the verdict
//! producers: the reference types its input but checks none of it, so a
//! member that is missing or of another type is read with JavaScript's
//! rules (`undefined`, `===`, `<` across types, string coercion, its
//! `hexToBytes` and `atob`). A verdict that follows these rules agrees
//! with the reference on every JSON object, not only on well-formed ones.

use std::borrow::Cow;
use std::cmp::Ordering;

use serde_json::{Map, Value};

/// A member as JavaScript reads it: `None` is `undefined`.
pub type Member<'a> = Option<&'a Value>;

/// `object[key]`: `undefined` when absent or when `object` is not a JSON
/// object (an array's or a string's named property is `undefined` too).
pub fn get<'a>(object: Member<'a>, key: &str) -> Member<'a> {
    object.and_then(Value::as_object).and_then(|m| m.get(key))
}

/// A primitive, after `ToPrimitive` (arrays and objects become strings).
#[derive(Debug, Clone, PartialEq)]
pub enum Prim<'a> {
    /// `undefined`.
    Undefined,
    /// `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A number.
    Num(f64),
    /// A string.
    Str(Cow<'a, str>),
}

/// `ToPrimitive(v)`: an array is its elements joined by `,`, an object
/// `[object Object]`.
pub fn prim(v: Member<'_>) -> Prim<'_> {
    match v {
        None => Prim::Undefined,
        Some(Value::Null) => Prim::Null,
        Some(Value::Bool(b)) => Prim::Bool(*b),
        Some(Value::Number(n)) => Prim::Num(n.as_f64().unwrap_or(f64::NAN)),
        Some(Value::String(s)) => Prim::Str(Cow::Borrowed(s)),
        Some(other) => Prim::Str(Cow::Owned(to_string(other))),
    }
}

/// `String(v)` of a JSON value.
pub fn to_string(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number_string(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|i| match i {
                Value::Null => String::new(),
                other => to_string(other),
            })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => "[object Object]".into(),
    }
}

/// `Number.prototype.toString()`: the shortest round-trip form, as
/// JSON.stringify and RFC 8785 write numbers.
pub fn number_string(n: f64) -> String {
    if n.is_nan() {
        return "NaN".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    serde_json::Number::from_f64(n)
        .and_then(|n| serde_jcs::to_string(&n).ok())
        .unwrap_or_else(|| n.to_string())
}

/// What `new TextEncoder().encode(v)` encodes: `undefined` is the empty
/// string (the parameter's default), anything else `String(v)`.
pub fn encoded(v: Member<'_>) -> String {
    v.map(to_string).unwrap_or_default()
}

/// JavaScript truthiness.
pub fn truthy(v: Member<'_>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|x| x != 0.0 && !x.is_nan()),
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    }
}

/// `v == null`: `undefined` or `null`.
pub fn nullish(v: Member<'_>) -> bool {
    matches!(v, None | Some(Value::Null))
}

/// `a === b`. Two objects (or arrays) are never the same object here:
/// each JSON member is its own.
pub fn strict_eq(a: Member<'_>, b: Member<'_>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(Value::Null), Some(Value::Null)) => true,
        (Some(Value::Bool(x)), Some(Value::Bool(y))) => x == y,
        (Some(Value::Number(x)), Some(Value::Number(y))) => x.as_f64() == y.as_f64(),
        (Some(Value::String(x)), Some(Value::String(y))) => x == y,
        _ => false,
    }
}

/// `a === "text"`.
pub fn is_str(a: Member<'_>, text: &str) -> bool {
    a.and_then(Value::as_str) == Some(text)
}

/// `ToNumber` of a primitive.
pub fn to_number(p: &Prim<'_>) -> f64 {
    match p {
        Prim::Undefined => f64::NAN,
        Prim::Null => 0.0,
        Prim::Bool(b) => f64::from(u8::from(*b)),
        Prim::Num(n) => *n,
        Prim::Str(s) => string_to_number(s),
    }
}

/// `a < b`: two strings compare by UTF-16 code units, anything else as
/// numbers (`NaN` compares false).
pub fn lt(a: &Prim<'_>, b: &Prim<'_>) -> bool {
    match (a, b) {
        (Prim::Str(x), Prim::Str(y)) => x.encode_utf16().cmp(y.encode_utf16()) == Ordering::Less,
        _ => to_number(a) < to_number(b),
    }
}

/// `a - b` of two members.
pub fn sub(a: Member<'_>, b: Member<'_>) -> f64 {
    to_number(&prim(a)) - to_number(&prim(b))
}

/// The whitespace `String.prototype.trim` removes.
fn js_space(c: char) -> bool {
    matches!(
        c,
        '\u{9}'..='\u{d}'
            | ' '
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
            | '\u{feff}'
    )
}

/// `String.prototype.trim`.
pub fn trim(s: &str) -> &str {
    s.trim_matches(js_space)
}

/// `Number(s)` of a string: decimal, `0x`/`0o`/`0b` integers,
/// `Infinity`; anything else `NaN`; blank is 0.
fn string_to_number(s: &str) -> f64 {
    let t = trim(s);
    if t.is_empty() {
        return 0.0;
    }
    for (prefix, radix) in [
        ("0x", 16),
        ("0X", 16),
        ("0o", 8),
        ("0O", 8),
        ("0b", 2),
        ("0B", 2),
    ] {
        if let Some(digits) = t.strip_prefix(prefix) {
            if digits.is_empty() {
                return f64::NAN;
            }
            return digits
                .chars()
                .try_fold(0.0f64, |acc, c| {
                    c.to_digit(radix)
                        .map(|d| acc * f64::from(radix) + f64::from(d))
                })
                .unwrap_or(f64::NAN);
        }
    }
    let unsigned = t.strip_prefix(['+', '-']).unwrap_or(t);
    if unsigned == "Infinity" {
        return if t.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
    }
    if !is_decimal_literal(unsigned) {
        return f64::NAN;
    }
    t.parse().unwrap_or(f64::NAN)
}

/// `digits [. digits] | . digits`, then an optional exponent.
fn is_decimal_literal(s: &str) -> bool {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int, frac) = match mantissa.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mantissa, None),
    };
    let digits = |x: &str| x.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = digits(int)
        && frac.is_none_or(digits)
        && (!int.is_empty() || frac.is_some_and(|f| !f.is_empty()));
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

/// `parseInt(s, 16)`: leading whitespace, a sign, an optional `0x`, then
/// the longest run of hex digits (`None` for `NaN`).
fn parse_int_16(s: &str) -> Option<f64> {
    let t = s.trim_start_matches(js_space);
    let (negative, t) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    let digits: Vec<u32> = t.chars().map_while(|c| c.to_digit(16)).collect();
    if digits.is_empty() {
        return None;
    }
    let v = digits
        .iter()
        .fold(0.0f64, |acc, d| acc * 16.0 + f64::from(*d));
    Some(if negative { -v } else { v })
}

/// A number stored into a `Uint8Array` (`ToUint8`).
fn to_uint8(n: Option<f64>) -> u8 {
    match n {
        Some(x) if x.is_finite() => x.trunc().rem_euclid(256.0) as u8,
        _ => 0,
    }
}

/// The reference's `hexToBytes(hex)`: `hex.length / 2` bytes, byte *i*
/// `parseInt(hex.slice(2i, 2i + 2), 16)`. `None` where it throws (a
/// member that has a `length` but no `slice`, or `null`); a member with
/// no `length` gives no bytes.
pub fn hex_to_bytes(v: Member<'_>) -> Option<Vec<u8>> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => {
            let units: Vec<u16> = s.encode_utf16().collect();
            Some(
                units
                    .chunks(2)
                    .take(units.len() / 2)
                    .map(|pair| to_uint8(parse_int_16(&String::from_utf16_lossy(pair))))
                    .collect(),
            )
        }
        Some(Value::Array(items)) => Some(
            items
                .chunks(2)
                .take(items.len() / 2)
                .map(|pair| to_uint8(parse_int_16(&to_string(&Value::Array(pair.to_vec())))))
                .collect(),
        ),
        Some(Value::Object(m)) => {
            // `new Uint8Array(length / 2)`, then a loop that calls the
            // `slice` an object lacks unless `0 < length` is false.
            let length = prim(m.get("length"));
            let half = to_number(&length) / 2.0;
            (!lt(&Prim::Num(0.0), &length) && (half.is_nan() || half > -1.0)).then(Vec::new)
        }
        Some(_) => Some(Vec::new()),
    }
}

/// The reference's `fromBase64Url(str)`: `-`/`_` become `+`/`/`, then
/// `atob` (forgiving base64: ASCII whitespace skipped, `=` padding
/// optional, the last character's spare bits ignored). `None` where it
/// throws (not a string, or not base64).
pub fn from_base64url(v: Member<'_>) -> Option<Vec<u8>> {
    let s = v?.as_str()?;
    let mut data: Vec<u8> = s
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\u{c}' | '\r' | ' '))
        .map(|c| match c {
            '-' => Some(b'+'),
            '_' => Some(b'/'),
            c if c.is_ascii() => Some(c as u8),
            _ => None,
        })
        .collect::<Option<_>>()?;
    if data.len().is_multiple_of(4) {
        for _ in 0..2 {
            if data.last() == Some(&b'=') {
                data.pop();
            }
        }
    }
    if data.len() % 4 == 1 {
        return None;
    }
    let mut bits: u32 = 0;
    let mut count = 0;
    let mut out = Vec::with_capacity(data.len() * 3 / 4);
    for b in data {
        let d = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(d);
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    Some(out)
}

/// `const { signature, ...body } = artifact`: the members the signature
/// covers.
pub fn body(artifact: &Map<String, Value>) -> Value {
    let mut body = artifact.clone();
    body.remove("signature");
    Value::Object(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn comparisons_follow_javascript() {
        let n = |x: f64| Prim::Num(x);
        let s = |x: &'static str| Prim::Str(Cow::Borrowed(x));
        assert!(lt(&n(1.0), &n(2.0)));
        assert!(!lt(&Prim::Undefined, &n(2.0)));
        assert!(lt(&Prim::Null, &n(1.0)));
        assert!(lt(&s("10"), &s("9")), "strings compare as strings");
        assert!(!lt(&s("10"), &n(9.0)), "a string and a number as numbers");
        assert!(!lt(&s("x"), &n(9.0)) && !lt(&n(9.0), &s("x")));
        assert!(!lt(&s("\u{ff61}"), &s("\u{1f600}")));
        assert!(
            lt(&s("\u{1f600}"), &s("\u{ff61}")),
            "UTF-16 order, not code points"
        );
        assert!(lt(&prim(Some(&json!([]))), &n(1.0)), "[] is \"\" is 0");
        assert_eq!(to_number(&s(" 0x1f ")), 31.0);
        assert!(to_number(&s("inf")).is_nan());
        assert!(to_number(&s("1e")).is_nan());
        assert_eq!(to_number(&s("-Infinity")), f64::NEG_INFINITY);
        assert_eq!(to_number(&s(".5e1")), 5.0);
        assert_eq!(to_number(&s("")), 0.0);
    }

    #[test]
    fn strings_and_equality_follow_javascript() {
        assert_eq!(
            to_string(&json!([1, null, [2, "a"], {}])),
            "1,,2,a,[object Object]"
        );
        assert_eq!(to_string(&json!(1e21)), "1e+21");
        assert_eq!(to_string(&json!(1.0)), "1");
        assert_eq!(encoded(None), "");
        assert!(strict_eq(None, None));
        assert!(!strict_eq(Some(&json!({})), Some(&json!({}))));
        assert!(strict_eq(Some(&json!(1)), Some(&json!(1.0))));
        assert!(!strict_eq(Some(&Value::Null), None));
        assert!(!truthy(Some(&json!(""))) && truthy(Some(&json!([]))));
        assert_eq!(trim("\u{feff} a \u{85}"), "a \u{85}");
    }

    #[test]
    fn keys_and_signatures_decode_as_the_reference_decodes_them() {
        assert_eq!(hex_to_bytes(Some(&json!("0aFF"))), Some(vec![10, 255]));
        // Each checked against node's `parseInt(pair, 16)` into a Uint8Array.
        assert_eq!(hex_to_bytes(Some(&json!("zz -f f"))), Some(vec![0, 0, 15]));
        assert_eq!(
            hex_to_bytes(Some(&json!("-f+f0x f"))),
            Some(vec![241, 15, 0, 15])
        );
        assert_eq!(hex_to_bytes(Some(&json!("abc"))), Some(vec![171]));
        assert_eq!(hex_to_bytes(Some(&json!(7))), Some(vec![]));
        assert_eq!(
            hex_to_bytes(Some(&json!(["a", "b", "c", "d"]))),
            Some(vec![0xa, 0xc])
        );
        assert_eq!(hex_to_bytes(Some(&Value::Null)), None);
        assert_eq!(hex_to_bytes(Some(&json!({"length": 2}))), None);
        assert_eq!(hex_to_bytes(Some(&json!({"length": "0"}))), Some(vec![]));
        assert_eq!(hex_to_bytes(Some(&json!({"length": -4}))), None);
        assert_eq!(hex_to_bytes(Some(&json!({}))), Some(vec![]));
        assert_eq!(from_base64url(Some(&json!("AQID"))), Some(vec![1, 2, 3]));
        assert_eq!(from_base64url(Some(&json!("AQI="))), Some(vec![1, 2]));
        assert_eq!(
            from_base64url(Some(&json!("AQJ"))),
            Some(vec![1, 2]),
            "spare bits ignored"
        );
        assert_eq!(from_base64url(Some(&json!("_-8 "))), Some(vec![0xff, 0xef]));
        assert_eq!(from_base64url(Some(&json!("A"))), None);
        assert_eq!(from_base64url(Some(&json!("A*AA"))), None);
        assert_eq!(from_base64url(Some(&json!(5))), None);
    }
}
