//! `[agenta]`: which tenant's DCTs pay, the currency table, where sellers
//! call back, offers preloaded from files, the buyers' callback origins, and
//! how much is kept: free-form members' bounds, how many requests are
//! stored, and for how long after they end.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dgw_core::units::Size;
use serde::Deserialize;

use super::origin::Origin;

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
    /// Origins of buyers' callbacks dgw passes receipts on to (none: it
    /// calls no URL a request names).
    pub buyer_callback_origins: Vec<Origin>,
    /// Bounds on the members the schemas leave unbounded.
    pub limits: agenta::Limits,
    /// How many requests are stored at most (the tenant's: Agenta is paid
    /// by one).
    pub max_stored_requests: usize,
    /// How long an ended request, its idempotency key and its payment
    /// authorization are kept.
    pub retention: Duration,
}

#[derive(Deserialize, schemars::JsonSchema)]
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
    max_input_bytes: Option<Size>,
    max_result_bytes: Option<Size>,
    max_metadata_bytes: Option<Size>,
    max_string_bytes: Option<Size>,
    #[serde(default = "default_max_stored_requests")]
    max_stored_requests: usize,
    #[serde(default = "default_retention")]
    retention: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawOffer {
    file: PathBuf,
}

fn default_seller_timeout() -> String {
    "10s".into()
}

fn default_max_stored_requests() -> usize {
    10_000
}

fn default_retention() -> String {
    "7d".into()
}

/// The shortest string bound: an RFC 3339 timestamp and a short URL fit.
const LEAST_STRING_BYTES: usize = 64;

impl RawAgenta {
    /// The section, validated; an error names the key and the problem.
    /// Offer files are relative to `base`, the config file's directory.
    pub fn validate(self, base: &Path) -> Result<AgentaConfig, (String, String)> {
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
        let seller_timeout = dgw_core::units::duration(&self.seller_timeout)
            .map_err(|e| ("agenta.seller_timeout".to_owned(), e))?;
        let buyer_callback_origins = self
            .buyer_callback_hosts
            .iter()
            .enumerate()
            .map(|(i, entry)| {
                Origin::parse_entry(entry)
                    .map_err(|e| (format!("agenta.buyer_callback_hosts[{i}]"), e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let defaults = agenta::Limits::default();
        let bound = |key: &str, value: Option<Size>, default: usize, least: usize| {
            let key = format!("agenta.{key}");
            let value = match value {
                None => default,
                Some(size) => {
                    let n = size.bytes().map_err(|e| (key.clone(), e))?;
                    usize::try_from(n).map_err(|_| {
                        (
                            key.clone(),
                            format!("{n} bytes is more than this machine can address"),
                        )
                    })?
                }
            };
            if value < least {
                Err((
                    key,
                    format!("{value} is below the least bound, {least} bytes"),
                ))
            } else {
                Ok(value)
            }
        };
        let limits = agenta::Limits {
            input_bytes: bound(
                "max_input_bytes",
                self.max_input_bytes,
                defaults.input_bytes,
                2,
            )?,
            result_bytes: bound(
                "max_result_bytes",
                self.max_result_bytes,
                defaults.result_bytes,
                2,
            )?,
            metadata_bytes: bound(
                "max_metadata_bytes",
                self.max_metadata_bytes,
                defaults.metadata_bytes,
                2,
            )?,
            string_bytes: bound(
                "max_string_bytes",
                self.max_string_bytes,
                defaults.string_bytes,
                LEAST_STRING_BYTES,
            )?,
        };
        if self.max_stored_requests == 0 {
            return Err((
                "agenta.max_stored_requests".into(),
                "must be at least 1".into(),
            ));
        }
        let retention = dgw_core::units::duration(&self.retention)
            .map_err(|e| ("agenta.retention".to_owned(), e))?;
        Ok(AgentaConfig {
            tenant: self.tenant,
            currencies: self.currencies,
            public_url: self.public_url.map(|u| u.trim_end_matches('/').to_owned()),
            seller_timeout,
            offers: self.offers.into_iter().map(|o| base.join(o.file)).collect(),
            buyer_callback_origins,
            limits,
            max_stored_requests: self.max_stored_requests,
            retention,
        })
    }
}
