//! The delegates' identity cards, fetched from each delegate (the
//! reference's `/ldp/identity`, else `/.well-known/ldp-identity`),
//! validated, and kept once read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ldp::identity::IdentityCard;

use super::config::Delegate;
use dgw_net::outbound::JsonClient;

/// The cards read so far, by delegate name.
#[derive(Clone)]
pub struct Cards {
    client: JsonClient,
    known: Arc<Mutex<HashMap<String, IdentityCard>>>,
}

impl Cards {
    pub fn new(client: JsonClient) -> Self {
        Self {
            client,
            known: Arc::default(),
        }
    }

    /// `delegate`'s card: kept, else fetched and validated.
    pub async fn get(&self, delegate: &Delegate) -> Result<IdentityCard, String> {
        let known = || self.known.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(card) = known().get(&delegate.name) {
            return Ok(card.clone());
        }
        let mut last = String::new();
        for path in ["/ldp/identity", "/.well-known/ldp-identity"] {
            match self.client.get(&format!("{}{path}", delegate.url)).await {
                Ok(value) => {
                    let card = IdentityCard::from_value(value).map_err(|e| e.to_string())?;
                    known().insert(delegate.name.clone(), card.clone());
                    return Ok(card);
                }
                Err(e) => last = e.to_string(),
            }
        }
        Err(format!("the delegate's identity card: {last}"))
    }
}
