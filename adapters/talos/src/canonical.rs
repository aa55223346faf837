//! The bytes Talos signs and hashes: RFC 8785 (JCS), and the Python
//! reference's `json.dumps(sort_keys=True, separators=(",", ":"))`, whose
//! default `ensure_ascii` escapes every character outside printable ASCII
//! and which sorts keys by code point rather than by UTF-16 unit.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// JCS bytes of a value.
pub fn jcs(value: &Value) -> Vec<u8> {
    delegateos::canonical::canonicalize(value).unwrap_or_default()
}

/// Lowercase hex SHA-256 of a value's JCS bytes (`request_hash`,
/// `response_hash`, `capability_hash`).
pub fn sha256_hex(value: &Value) -> String {
    hex::encode(Sha256::digest(jcs(value)))
}

/// The Python reference's form, or `None` for a value Python would not hold
/// as the JSON text says (a non-finite float).
pub fn python_sorted(value: &Value) -> Option<Vec<u8>> {
    let mut out = String::new();
    write_python(value, &mut out)?;
    Some(out.into_bytes())
}

fn write_python(value: &Value, out: &mut String) -> Option<()> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match n.as_f64() {
            // A number written with a fraction or an exponent is a Python
            // float, and Python writes it back with `repr`.
            Some(f) if n.is_f64() => out.push_str(&python_float_repr(f)?),
            _ => out.push_str(&n.to_string()),
        },
        Value::String(s) => write_python_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_python(item, out)?;
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| a.chars().cmp(b.chars()));
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_python_string(k, out);
                out.push(':');
                write_python(&map[k], out)?;
            }
            out.push('}');
        }
    }
    Some(())
}

/// Python's `repr(float)`: the shortest digits that read back as `f`, in
/// fixed notation when the decimal exponent is in -4..16 (with `.0` when
/// there is no fraction), else `d.ddde±XX` (at least two exponent digits).
/// `None` for infinities and NaN, which JSON text cannot hold.
pub fn python_float_repr(f: f64) -> Option<String> {
    if !f.is_finite() {
        return None;
    }
    // Rust's `{:e}` gives the shortest round-trip digits, as Python's does.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exponent) = sci.split_once('e')?;
    let exponent: i32 = exponent.parse().ok()?;
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if !(-4..16).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exponent < 0 { '-' } else { '+' };
        return Some(format!(
            "{sign}{first}{fraction}e{esign}{:02}",
            exponent.unsigned_abs()
        ));
    }
    let point = exponent + 1; // digits before the decimal point
    let text = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else {
        let point = point as usize;
        if digits.len() <= point {
            format!("{digits}{}.0", "0".repeat(point - digits.len()))
        } else {
            format!("{}.{}", &digits[..point], &digits[point..])
        }
    };
    Some(format!("{sign}{text}"))
}

fn write_python_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{u:04x}"));
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_form_escapes_and_sorts_like_json_dumps() {
        // json.dumps({"b": "é\u007f", "a": [1, "😀"], "\U0001F600": 1, "\uffff": 2},
        //            sort_keys=True, separators=(",", ":"))
        let v = json!({"b": "é\u{7f}", "a": [1, "😀"], "😀": 1, "\u{ffff}": 2});
        let got = String::from_utf8(python_sorted(&v).unwrap()).unwrap();
        assert_eq!(
            got,
            r#"{"a":[1,"\ud83d\ude00"],"b":"\u00e9\u007f","\uffff":2,"\ud83d\ude00":1}"#
        );
        // JCS sorts by UTF-16 units: the astral key comes first there.
        let jcs = String::from_utf8(jcs(&v)).unwrap();
        assert!(jcs.find("😀").unwrap() < jcs.find('\u{ffff}').unwrap());
    }
}
