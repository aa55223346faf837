//! `[agenta]`: which tenant's DCTs pay, the currency table, where sellers
//! call back, and offers preloaded from files.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// The validated section.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentaConfig {
    /// The DelegateOS tenant whose DCTs pay for Agenta work.
    pub tenant: String,
    /// Microcents per minor unit, by ISO 4217 code.
    pub currencies: BTreeMap<String, u64>,
    /// The base URL sellers reach this gateway at (`https://dgw.example`);
    /// `None`: the HTTP listener's own address.
    pub public_url: Option<String>,
    /// How long a seller has to answer a forwarded request.
    pub seller_timeout: Duration,
    /// Offer files registered at start.
    pub offers: Vec<PathBuf>,
    /// Hosts of buyers' callbacks dgw passes receipts on to (none: it calls
    /// no URL a request names).
    pub buyer_callback_hosts: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAgenta {
    tenant: String,
    #[serde(default)]
    currencies: BTreeMap<String, u64>,
    public_url: Option<String>,
    #[serde(default = "default_seller_timeout")]
    seller_timeout: String,
    #[serde(default)]
    offers: Vec<RawOffer>,
    #[serde(default)]
    buyer_callback_hosts: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOffer {
    file: PathBuf,
}

fn default_seller_timeout() -> String {
    "10s".into()
}

impl RawAgenta {
    /// The section, validated; an error names the key and the problem.
    pub fn validate(self) -> Result<AgentaConfig, (String, String)> {
        if self.tenant.is_empty() {
            return Err(("agenta.tenant".into(), "must name a tenant".into()));
        }
        for (code, rate) in &self.currencies {
            let key = format!("agenta.currencies.{code}");
            if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_uppercase()) {
                return Err((key, "must be an ISO 4217 code (three capitals)".into()));
            }
            if *rate == 0 {
                return Err((key, "must be at least 1 microcent per minor unit".into()));
            }
        }
        if let Some(url) = &self.public_url {
            let ok = (url.starts_with("http://") || url.starts_with("https://"))
                && url.parse::<hyper::Uri>().is_ok();
            if !ok {
                return Err((
                    "agenta.public_url".into(),
                    format!("{url:?} is not an http(s) URL"),
                ));
            }
        }
        let seller_timeout = humantime::parse_duration(&self.seller_timeout)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                (
                    "agenta.seller_timeout".to_owned(),
                    format!(
                        "{:?} is not a duration longer than zero",
                        self.seller_timeout
                    ),
                )
            })?;
        Ok(AgentaConfig {
            tenant: self.tenant,
            currencies: self.currencies,
            public_url: self.public_url.map(|u| u.trim_end_matches('/').to_owned()),
            seller_timeout,
            offers: self.offers.into_iter().map(|o| o.file).collect(),
            buyer_callback_hosts: self
                .buyer_callback_hosts
                .into_iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
        })
    }
}
