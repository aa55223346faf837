//! Agenta's panel on the operator console: its offers (the current version
//! of each) and its requests counted by state, read from the record store
//! when the page is shown, so every replica shows the same.

use std::collections::BTreeMap;

use dgw_protocol::Panel;

use super::records::{OfferRecord, RequestRecord, OFFERS, REQUESTS};
use super::Agenta;

/// Offers listed by name at most (the rest counted).
const OFFERS_SHOWN: usize = 50;

impl Agenta {
    /// The panel; a store that cannot be read says so in its rows.
    pub async fn panel(&self) -> Panel {
        let mut rows = Vec::new();
        match self.records.scan::<OfferRecord>(OFFERS).await {
            Ok(offers) => {
                rows.push(("offers".to_owned(), format!("{} registered", offers.len())));
                for (id, o) in offers.iter().take(OFFERS_SHOWN) {
                    rows.push((
                        format!("offer {id}"),
                        format!(
                            "current version {} ({} registered)",
                            o.current,
                            o.versions.len()
                        ),
                    ));
                }
                if offers.len() > OFFERS_SHOWN {
                    rows.push((
                        "more offers".to_owned(),
                        format!("{} not listed", offers.len() - OFFERS_SHOWN),
                    ));
                }
            }
            Err(e) => rows.push(("offers".to_owned(), format!("cannot be read: {e}"))),
        }
        // Bounded: Agenta keeps at most `max_stored_requests`.
        match self.records.scan::<RequestRecord>(REQUESTS).await {
            Ok(requests) => {
                let mut by_state: BTreeMap<String, usize> = BTreeMap::new();
                for (_, r) in &requests {
                    let state = r
                        .status
                        .clone()
                        .unwrap_or_else(|| "not answered by the seller yet".to_owned());
                    *by_state.entry(state).or_default() += 1;
                }
                if by_state.is_empty() {
                    rows.push(("requests".to_owned(), "none kept".to_owned()));
                }
                for (state, n) in by_state {
                    rows.push((format!("requests {state}"), n.to_string()));
                }
            }
            Err(e) => rows.push(("requests".to_owned(), format!("cannot be read: {e}"))),
        }
        Panel {
            title: "Agenta".to_owned(),
            rows,
        }
    }
}
