//! RFC 8785 (JCS) canonical JSON, and the strict parser for untrusted JSON.
//!
//! Canonicalization is `serde_jcs` (ECMAScript number formatting, keys sorted
//! by UTF-16 code units); `tests/jcs_vectors.rs` holds it to the RFC's own
//! vectors. Parsing is strict because two different texts must never
//! canonicalize to the same signed bytes: duplicate keys (which `serde_json`
//! would silently collapse) are refused, and size and depth are capped.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::Serialize;
use serde_json::{Map, Value};

/// Largest integer that survives JCS (numbers are IEEE 754 doubles): 2^53 - 1.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Nesting depth allowed in untrusted JSON.
pub const MAX_DEPTH: usize = 64;

/// Why JSON was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    /// Larger than the caller's limit.
    #[error("JSON is {actual} bytes, more than the limit of {limit}")]
    /// Longer than accepted.
    TooLarge {
        /// Its length in bytes.
        actual: usize,
        /// The most accepted.
        limit: usize,
    },
    /// Not JSON, a duplicate key, or nested too deep.
    #[error("invalid JSON: {0}")]
    Syntax(String),
    /// A value JCS cannot represent.
    #[error("cannot canonicalize: {0}")]
    Canonicalize(String),
}

/// The RFC 8785 canonical bytes of any serializable value.
pub fn canonicalize<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, JsonError> {
    serde_jcs::to_vec(value).map_err(|e| JsonError::Canonicalize(e.to_string()))
}

/// Parses untrusted JSON of at most `limit` bytes, refusing duplicate keys,
/// nesting deeper than [`MAX_DEPTH`] and trailing garbage.
pub fn parse_strict(bytes: &[u8], limit: usize) -> Result<Value, JsonError> {
    if bytes.len() > limit {
        return Err(JsonError::TooLarge {
            actual: bytes.len(),
            limit,
        });
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = StrictValue { depth: 0 }
        .deserialize(&mut de)
        .map_err(|e| JsonError::Syntax(e.to_string()))?;
    de.end().map_err(|e| JsonError::Syntax(e.to_string()))?;
    Ok(value)
}

/// Builds a `serde_json::Value` like `Value::deserialize`, but fails on
/// duplicate object keys and on depth beyond [`MAX_DEPTH`].
struct StrictValue {
    depth: usize,
}

impl StrictValue {
    fn nested<E: de::Error>(&self) -> Result<StrictValue, E> {
        if self.depth >= MAX_DEPTH {
            return Err(E::custom(format!("nesting deeper than {MAX_DEPTH}")));
        }
        Ok(StrictValue {
            depth: self.depth + 1,
        })
    }
}

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("non-finite number"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.nested()?)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            let value = map.next_value_seed(self.nested()?)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_duplicates_depth_and_size() {
        assert!(parse_strict(br#"{"a":1,"a":2}"#, 100).is_err());
        assert!(parse_strict(br#"{"a":{"b":1,"b":1}}"#, 100).is_err());
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(parse_strict(deep.as_bytes(), 1 << 20).is_err());
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse_strict(ok.as_bytes(), 1 << 20).is_ok());
        let huge = "[".repeat(100_000);
        assert!(parse_strict(huge.as_bytes(), 1 << 20).is_err());
        assert!(matches!(
            parse_strict(b"[1,2,3]", 3),
            Err(JsonError::TooLarge { .. })
        ));
        assert!(parse_strict(b"{} x", 100).is_err());
    }
}
