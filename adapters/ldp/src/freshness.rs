//! Message freshness: the timestamp must parse (RFC 3339) and lie within
//! the window of now, both ways. Unlike the reference, which lets a
//! timestamp it cannot parse through, an unparseable one is stale.

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::{Reason, Refusal};

/// The default window, seconds (the reference's replay guard default).
pub const WINDOW_SECS: i64 = 300;

/// `Ok` when `timestamp` is within `window_secs` of `now`.
pub fn check(timestamp: &str, now: OffsetDateTime, window_secs: i64) -> Result<(), Refusal> {
    let at = OffsetDateTime::parse(timestamp, &Rfc3339).map_err(|_| {
        Refusal::new(
            Reason::Stale,
            format!("timestamp {timestamp:?} is not RFC 3339"),
        )
    })?;
    let skew = (now - at).whole_seconds().abs();
    if skew > window_secs {
        return Err(Refusal::new(
            Reason::Stale,
            format!("timestamp {timestamp:?} is {skew} s from now (window {window_secs} s)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn unparseable_and_far_timestamps_are_stale() {
        let now = datetime!(2026-03-09 10:00:04 UTC);
        assert!(check("2026-03-09T10:00:04Z", now, 300).is_ok());
        assert!(check("2026-03-09T10:04:00.123456+00:00", now, 300).is_ok());
        assert!(check("2026-03-09T10:05:05Z", now, 300).is_err());
        assert!(check("2026-03-09T09:54:00Z", now, 300).is_err());
        for junk in ["", "yesterday", "2026-03-09 10:00:04", "1773050404"] {
            assert_eq!(
                check(junk, now, 300).unwrap_err().reason,
                Reason::Stale,
                "{junk}"
            );
        }
    }
}
