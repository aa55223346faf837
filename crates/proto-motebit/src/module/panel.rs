//! Motebit's panel on the operator console: its key pins (each id's
//! pinned key, who pinned it and when), read from the record store when
//! the page is shown, so every replica shows the same.

use std::sync::Arc;

use dgw_core::state::RecordStore;
use dgw_protocol::Panel;

use super::super::pins::{Pin, Pins, SPACE};

/// Pins listed by id at most (the rest counted).
const PINS_SHOWN: usize = 50;

/// A pin in the operator's words.
fn words(pin: &Pin) -> String {
    let who = match pin.by.strip_prefix("admin:") {
        Some(name) => format!("pinned by administrator {name}"),
        None => "pinned on first use".to_owned(),
    };
    let at = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(pin.at) * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| pin.at.to_string());
    let severed = match &pin.severed_by {
        Some(by) => format!("; severed by {by}: refuses every key until pinned again"),
        None => String::new(),
    };
    format!("key {}, {who} at {at}{severed}", pin.public_key)
}

/// The panel over the gateway's `records`; a store that cannot be read
/// says so in its rows.
pub async fn panel(records: &Arc<dyn RecordStore>) -> Panel {
    let mut rows = Vec::new();
    match records.scan(SPACE).await {
        Ok(all) => {
            rows.push(("pins".to_owned(), format!("{} kept", all.len())));
            let pins = Pins::new(records.clone());
            for (id, _) in all.iter().take(PINS_SHOWN) {
                if let Ok(Some(pin)) = pins.get(id).await {
                    rows.push((format!("pin {id}"), words(&pin)));
                }
            }
            if all.len() > PINS_SHOWN {
                rows.push((
                    "more pins".to_owned(),
                    format!("{} not listed", all.len() - PINS_SHOWN),
                ));
            }
        }
        Err(e) => rows.push(("pins".to_owned(), format!("cannot be read: {e}"))),
    }
    Panel {
        title: "Motebit".to_owned(),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_reads_as_words() {
        let pin = Pin {
            public_key: "ab".repeat(32),
            by: "admin:ops".into(),
            at: 0,
            severed_by: None,
        };
        assert_eq!(
            words(&pin),
            format!(
                "key {}, pinned by administrator ops at 1970-01-01T00:00:00Z",
                "ab".repeat(32)
            )
        );
        let first = Pin {
            by: "first_use".into(),
            severed_by: Some("key_mismatch".into()),
            ..pin
        };
        assert!(words(&first).contains("pinned on first use"));
        assert!(words(&first).contains("refuses every key"));
    }
}
