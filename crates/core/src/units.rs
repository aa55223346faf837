//! Sizes and durations as a configuration writes them: the one parser of
//! each, so every key that takes a size or a duration reads the same forms
//! and refuses the rest with the same words (the caller names the key).

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// The forms a size may take, for error messages.
pub const SIZE_FORMS: &str = "a whole number of bytes (1048576) or a whole number with a unit: B, kB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), as in \"1MB\" or \"64KiB\"";

/// The forms a duration may take, for error messages.
pub const DURATION_FORMS: &str =
    "a number with a unit, as in \"30s\", \"500ms\", \"5m\", \"2h\", \"7d\" or \"1h 30m\"";

/// A size as written, parsed by [`Size::bytes`]: anything scalar is taken
/// here so that a wrong one is refused with its key and the accepted forms,
/// not with a deserializer's `expected usize`.
#[derive(Debug, Clone, PartialEq)]
pub enum Size {
    /// A bare integer: bytes.
    Integer(i128),
    /// Text with a unit (or without: bytes).
    Text(String),
    /// A float, a boolean, a table: refused.
    Other(&'static str),
}

/// In `dgw config schema`: a whole number of bytes, or text with a unit.
impl schemars::JsonSchema for Size {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Size".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": SIZE_FORMS,
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": "^[0-9]+ ?(B|kB|MB|GB|TB|KiB|MiB|GiB|TiB)?$"}
            ]
        })
    }
}

impl Size {
    /// `n` bytes, as a default is written.
    pub const fn of(n: u64) -> Self {
        Size::Integer(n as i128)
    }

    /// The number of bytes, or why not (with the accepted forms).
    pub fn bytes(&self) -> Result<u64, String> {
        let refuse = |what: String| Err(format!("{what} is not a size: write {SIZE_FORMS}"));
        match self {
            Size::Integer(n) => u64::try_from(*n).or_else(|_| refuse(n.to_string())),
            Size::Other(kind) => refuse(format!("a {kind}")),
            Size::Text(text) => {
                let t = text.trim();
                let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
                let (number, unit) = (&t[..split], t[split..].trim_start());
                let Ok(n) = number.parse::<u64>() else {
                    return refuse(format!("{text:?}"));
                };
                let Some(scale) = unit_scale(unit) else {
                    return refuse(format!("{text:?} (unknown unit {unit:?})"));
                };
                n.checked_mul(scale)
                    .map_or_else(|| refuse(format!("{text:?} (over 2^64 bytes)")), Ok)
            }
        }
    }
}

/// Bytes per unit; units are read without regard to case, but `i` marks
/// the binary ones.
fn unit_scale(unit: &str) -> Option<u64> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return None,
    })
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Any;
        impl<'de> Visitor<'de> for Any {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(SIZE_FORMS)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Size, E> {
                Ok(Size::Integer(v.into()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Size, E> {
                Ok(Size::Integer(v.into()))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Size, E> {
                Ok(Size::Other("fraction"))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Size, E> {
                Ok(Size::Other("boolean"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Size, E> {
                Ok(Size::Text(v.to_owned()))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<Size, A::Error> {
                while a.next_element::<de::IgnoredAny>()?.is_some() {}
                Ok(Size::Other("list"))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut a: A) -> Result<Size, A::Error> {
                while a.next_entry::<de::IgnoredAny, de::IgnoredAny>()?.is_some() {}
                Ok(Size::Other("table"))
            }
        }
        d.deserialize_any(Any)
    }
}

/// A duration longer than zero, written as [`DURATION_FORMS`] says; the
/// error says why not and what is accepted.
pub fn duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text)
        .map_err(|e| format!("{text:?} is not a duration ({e}): write {DURATION_FORMS}"))?;
    if d.is_zero() {
        return Err(format!("{text:?} must be longer than zero"));
    }
    Ok(d)
}

/// `d` as a configuration writes it (`1m 30s`), for logs and messages.
pub fn show_duration(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes(text: &str) -> Result<u64, String> {
        Size::Text(text.into()).bytes()
    }

    #[test]
    fn sizes_read_decimal_and_binary_units_and_bare_bytes() {
        assert_eq!(bytes("1MB"), Ok(1_000_000));
        assert_eq!(bytes("64KiB"), Ok(65_536));
        assert_eq!(bytes("64 KiB"), Ok(65_536));
        assert_eq!(bytes("2gib"), Ok(2 << 30));
        assert_eq!(bytes("512"), Ok(512));
        assert_eq!(bytes("512B"), Ok(512));
        assert_eq!(Size::of(1 << 20).bytes(), Ok(1 << 20));
        for bad in [
            "",
            "MB",
            "1.5MB",
            "-1MB",
            "1 XB",
            "1MBB",
            "1e6",
            "18446744073709551616",
        ] {
            let e = bytes(bad).unwrap_err();
            assert!(
                e.contains("is not a size: write a whole number"),
                "{bad}: {e}"
            );
        }
        assert!(bytes("20000000TB").unwrap_err().contains("over 2^64 bytes"));
        assert!(Size::Integer(-1)
            .bytes()
            .unwrap_err()
            .starts_with("-1 is not a size"));
        assert!(Size::Other("fraction")
            .bytes()
            .unwrap_err()
            .starts_with("a fraction is not"));
    }

    #[test]
    fn durations_say_what_is_accepted() {
        assert_eq!(duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert!(duration("0s").unwrap_err().contains("longer than zero"));
        let e = duration("30").unwrap_err();
        assert!(
            e.contains("\"30\" is not a duration") && e.contains("\"30s\""),
            "{e}"
        );
        assert_eq!(show_duration(Duration::from_millis(90_500)), "1m 30s 500ms");
    }

    proptest! {
        /// Every unit scales exactly, and a bare number is bytes.
        #[test]
        fn units_scale_exactly(n in 0u64..1_000_000, unit in prop::sample::select(vec![
            ("", 1u64), ("B", 1), ("kB", 1_000), ("KB", 1_000), ("MB", 1_000_000),
            ("GB", 1_000_000_000), ("KiB", 1024), ("MiB", 1 << 20), ("GiB", 1 << 30),
        ])) {
            prop_assert_eq!(bytes(&format!("{n}{}", unit.0)), Ok(n * unit.1));
            prop_assert_eq!(Size::Integer(n.into()).bytes(), Ok(n));
        }
    }
}
