//! RFC 3339 timestamps that keep their signed text and compare as instants.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime, UtcOffset};

/// Why a timestamp was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid RFC 3339 timestamp {text:?}: {reason}")]
pub struct TimestampError {
    text: String,
    reason: String,
}

/// An instant parsed from RFC 3339 text (with or without fractional seconds,
/// any offset). The original text is kept because it is what was signed;
/// equality and order are by instant, never by text.
#[derive(Clone)]
pub struct Timestamp {
    text: String,
    instant: OffsetDateTime,
}

impl Timestamp {
    /// Parses RFC 3339 text.
    pub fn parse(text: &str) -> Result<Self, TimestampError> {
        // Longest valid form is ~35 chars with nanoseconds and an offset.
        if text.len() > 64 {
            return Err(TimestampError {
                text: text.chars().take(64).collect(),
                reason: "too long".into(),
            });
        }
        let instant = OffsetDateTime::parse(text, &Rfc3339).map_err(|e| TimestampError {
            text: text.to_owned(),
            reason: e.to_string(),
        })?;
        Ok(Self {
            text: text.to_owned(),
            instant,
        })
    }

    /// The instant, rendered the way JavaScript's `toISOString` does
    /// (UTC, milliseconds, `Z`), so tokens we mint look like the reference's.
    pub fn from_instant(instant: OffsetDateTime) -> Self {
        let utc = instant.to_offset(UtcOffset::UTC);
        let text = format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            utc.year(),
            u8::from(utc.month()),
            utc.day(),
            utc.hour(),
            utc.minute(),
            utc.second(),
            utc.millisecond()
        );
        // Re-parse so the instant carries exactly the precision of the text.
        Self::parse(&text).unwrap_or(Self { text, instant: utc })
    }

    /// The text as signed.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The instant.
    pub fn instant(&self) -> OffsetDateTime {
        self.instant
    }

    /// This instant moved by `duration`, or `None` past the representable range.
    pub fn checked_add(&self, duration: Duration) -> Option<Self> {
        self.instant.checked_add(duration).map(Self::from_instant)
    }
}

impl PartialEq for Timestamp {
    fn eq(&self, other: &Self) -> bool {
        self.instant == other.instant
    }
}
impl Eq for Timestamp {}
impl PartialOrd for Timestamp {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Timestamp {
    fn cmp(&self, other: &Self) -> Ordering {
        self.instant.cmp(&other.instant)
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({})", self.text)
    }
}
impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Timestamp::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_instants_not_text() {
        let a = Timestamp::parse("2026-01-01T00:00:00Z").unwrap();
        let b = Timestamp::parse("2026-01-01T00:00:00.000Z").unwrap();
        let c = Timestamp::parse("2026-01-01T01:00:00+01:00").unwrap();
        let d = Timestamp::parse("2026-01-01T00:00:00.5Z").unwrap();
        assert_eq!(a, b);
        assert_eq!(a, c);
        assert!(d > a);
        // As strings, "…00Z" > "…00.5Z" ('Z' > '.'); as instants it is the other way.
        assert!(a.as_str() > d.as_str());
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "2026-13-01T00:00:00Z",
            "2026-01-01",
            "yesterday",
            "2026-01-01T00:00:00",
        ] {
            assert!(Timestamp::parse(bad).is_err(), "{bad}");
        }
        assert!(Timestamp::parse(&"9".repeat(10_000)).is_err());
    }

    #[test]
    fn renders_like_to_iso_string() {
        let t = Timestamp::parse("2026-02-17T10:20:30.123456+02:00").unwrap();
        assert_eq!(
            Timestamp::from_instant(t.instant()).as_str(),
            "2026-02-17T08:20:30.123Z"
        );
    }
}
