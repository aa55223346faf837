//! `[ldp]`: the LDP delegates dgw stands in front of, their shared
//! secrets and trust domains, whose DCTs pay, and what a task costs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// The section as written.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLdp {
    /// Where routers reach dgw (the `endpoint` of the cards it serves);
    /// default: its HTTP listener.
    #[serde(default)]
    public_url: Option<String>,
    /// How far a message's timestamp may be from now, e.g. `5m`: whole
    /// seconds, 1s to 1h.
    #[serde(default = "default_window")]
    freshness: String,
    /// The former spelling of `freshness` (a bare number of seconds):
    /// refused, naming the new key (decision 300). Not in the schema.
    #[serde(default)]
    #[schemars(skip)]
    freshness_secs: Option<i64>,
    /// A delegate's time to answer, e.g. `30s`.
    #[serde(default = "default_timeout")]
    delegate_timeout: String,
    #[serde(default)]
    delegates: Vec<RawDelegate>,
    #[serde(default)]
    domains: Vec<RawDomain>,
    #[serde(default)]
    identity: Option<RawIdentity>,
}

/// `[ldp.identity]`: dgw's own card.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawIdentity {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    trust_domain: Option<String>,
    #[serde(default)]
    jurisdiction: Option<String>,
}

/// dgw's own identity card's particulars.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnIdentity {
    /// `ldp:delegate:<name>` (default `dgw`).
    pub name: String,
    /// Its purpose.
    pub description: Option<String>,
    /// Its trust domain (default `dgw`).
    pub trust_domain: String,
    /// Where it runs.
    pub jurisdiction: Option<String>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawDomain {
    name: String,
    tenant: String,
    budget_microcents: u64,
}

/// A trust domain whose routers' tasks a tenant pays without a DCT.
#[derive(Debug, Clone, PartialEq)]
pub struct PayingDomain {
    /// The routers' trust domain (SESSION_PROPOSE's `trust_domain`).
    pub name: String,
    /// The tenant that pays.
    pub tenant: String,
    /// Its budget, over all its routers' tasks.
    pub budget_microcents: u64,
}

fn default_window() -> String {
    format!("{}s", ldp::freshness::WINDOW_SECS)
}

/// The longest freshness window: an hour.
const MAX_WINDOW_SECS: u64 = 3600;

/// `freshness` as written: a duration of whole seconds, 1s to 1h; the
/// former `freshness_secs` refused with what to write instead.
fn freshness_window(written: &str, former: Option<i64>) -> Result<i64, (String, String)> {
    if let Some(secs) = former {
        return Err((
            "ldp.freshness_secs".into(),
            format!("is replaced by `ldp.freshness`, a duration: write freshness = \"{secs}s\""),
        ));
    }
    let key = || "ldp.freshness".to_owned();
    let window = dgw_core::units::duration(written).map_err(|e| (key(), e))?;
    if window.subsec_nanos() != 0 || window.as_secs() > MAX_WINDOW_SECS {
        return Err((
            key(),
            format!("{written:?} must be whole seconds, from 1s to 1h"),
        ));
    }
    i64::try_from(window.as_secs()).map_err(|_| (key(), "is too long".into()))
}

fn default_timeout() -> String {
    "30s".into()
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawDelegate {
    name: String,
    url: String,
    #[serde(default)]
    secret: Option<String>,
    #[serde(default)]
    secret_file: Option<PathBuf>,
    trust_domain: String,
    #[serde(default)]
    trusted_peers: Vec<String>,
    tenant: String,
    cost_microcents: u64,
    #[serde(default)]
    skill_costs: BTreeMap<String, u64>,
    #[serde(default)]
    session_budget_microcents: Option<u64>,
    #[serde(default)]
    nonce: bool,
    #[serde(default)]
    payload_digest: bool,
    #[serde(default)]
    routers: Vec<RawRouter>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawRouter {
    id: String,
    #[serde(default)]
    secret: Option<String>,
    #[serde(default)]
    secret_file: Option<PathBuf>,
    #[serde(default)]
    trust_domain: Option<String>,
}

/// A router with a secret of its own (decision 145): what it signs is
/// known to be its, and only dgw and the delegate hold the delegate's.
#[derive(Clone, PartialEq)]
pub struct Router {
    /// Its `ldp:delegate:<name>` ID, the `from` of its messages.
    pub id: String,
    /// The secret it and dgw share.
    pub secret: Vec<u8>,
    /// The one trust domain it may open sessions in, when pinned.
    pub trust_domain: Option<String>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("Router")
            .field("id", &self.id)
            .field("trust_domain", &self.trust_domain)
            .finish()
    }
}

/// A secret given inline or in a file (trailing whitespace dropped), at
/// least 16 bytes; an error names the key.
fn read_secret(
    secret: Option<String>,
    file: Option<PathBuf>,
    base: &Path,
    key: &dyn Fn(&str) -> String,
) -> Result<Vec<u8>, (String, String)> {
    let secret = match (secret, file) {
        (Some(s), None) => s.into_bytes(),
        (None, Some(path)) => std::fs::read_to_string(base.join(&path))
            .map_err(|e| (key("secret_file"), format!("{}: {e}", path.display())))?
            .trim_end()
            .as_bytes()
            .to_vec(),
        _ => {
            return Err((
                key("secret"),
                "give exactly one of secret or secret_file".into(),
            ))
        }
    };
    if secret.len() < 16 {
        return Err((key("secret"), "must be at least 16 bytes".into()));
    }
    Ok(secret)
}

/// A delegate behind dgw.
#[derive(Clone, PartialEq)]
pub struct Delegate {
    /// Its path segment: `/ldp/{name}/…`.
    pub name: String,
    /// The real delegate's base URL.
    pub url: String,
    /// The secret dgw and the delegate share (and its routers, unless
    /// they have their own).
    pub secret: Vec<u8>,
    /// Routers with secrets of their own; when any is listed, only they
    /// are taken, each by its own secret.
    pub routers: Vec<Router>,
    /// Its trust domain (cross-domain peers listed allow cross-domain sessions).
    pub trust_domain: ldp::trust::TrustDomain,
    /// Whose DCTs pay its tasks.
    pub tenant: String,
    /// What one TASK_SUBMIT reserves.
    pub cost_microcents: u64,
    /// Per skill, instead.
    pub skill_costs: BTreeMap<String, u64>,
    /// The most one session may spend (its router may ask less).
    pub session_budget_microcents: Option<u64>,
    /// Whether dgw signs toward it with a nonce.
    pub nonce: bool,
    /// Whether its routers and it bind payloads (`payload_digest`, both
    /// ends dgw or digest-aware): then every message from either side must
    /// carry a valid digest, and dgw sends one.
    pub payload_digest: bool,
}

impl std::fmt::Debug for Delegate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("Delegate")
            .field("name", &self.name)
            .field("url", &self.url)
            .finish()
    }
}

impl Delegate {
    /// The secret messages from `router` are signed with, and answers to
    /// it: its own when routers are listed (none for one not listed), else
    /// the delegate's.
    pub fn router_secret(&self, router: &str) -> Option<&[u8]> {
        if self.routers.is_empty() {
            return Some(&self.secret);
        }
        self.routers
            .iter()
            .find(|r| r.id == router)
            .map(|r| r.secret.as_slice())
    }

    /// A listed router's pinned trust domain.
    pub fn router_domain(&self, router: &str) -> Option<&str> {
        self.routers
            .iter()
            .find(|r| r.id == router)
            .and_then(|r| r.trust_domain.as_deref())
    }

    /// What a task of `skill` reserves.
    pub fn cost(&self, skill: &str) -> u64 {
        self.skill_costs
            .get(skill)
            .copied()
            .unwrap_or(self.cost_microcents)
    }
}

/// The section, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct LdpConfig {
    /// Where routers reach dgw.
    pub public_url: Option<String>,
    /// The freshness window (`freshness`), in whole seconds.
    pub freshness_secs: i64,
    /// A delegate's time to answer.
    pub delegate_timeout: Duration,
    /// The delegates.
    pub delegates: Vec<Delegate>,
    /// Trust domains whose routers a tenant pays for.
    pub domains: Vec<PayingDomain>,
    /// dgw's own card.
    pub identity: OwnIdentity,
}

impl RawLdp {
    /// Every `secret_file` the section names, by key (`dgw config check`).
    pub fn secret_files(&self) -> Vec<(String, PathBuf)> {
        let mut out = Vec::new();
        for (i, d) in self.delegates.iter().enumerate() {
            if let Some(f) = &d.secret_file {
                out.push((format!("ldp.delegates[{i}].secret_file"), f.clone()));
            }
            for (j, r) in d.routers.iter().enumerate() {
                if let Some(f) = &r.secret_file {
                    out.push((
                        format!("ldp.delegates[{i}].routers[{j}].secret_file"),
                        f.clone(),
                    ));
                }
            }
        }
        out
    }

    /// Validated (secret files read, relative to `base`, the config file's
    /// directory); an error names the key.
    pub fn validate(self, base: &Path) -> Result<LdpConfig, (String, String)> {
        let delegate_timeout = dgw_core::units::duration(&self.delegate_timeout)
            .map_err(|e| ("ldp.delegate_timeout".to_owned(), e))?;
        let freshness_secs = freshness_window(&self.freshness, self.freshness_secs)?;
        let mut delegates: Vec<Delegate> = Vec::new();
        for (i, d) in self.delegates.into_iter().enumerate() {
            let key = |field: &str| format!("ldp.delegates[{i}].{field}");
            let name_ok = !d.name.is_empty()
                && d.name.len() <= 64
                && d.name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !name_ok {
                return Err((key("name"), "must be 1 to 64 of a-z, 0-9 and -".into()));
            }
            if delegates.iter().any(|x| x.name == d.name) {
                return Err((key("name"), format!("{:?} is listed twice", d.name)));
            }
            if !(d.url.starts_with("http://") || d.url.starts_with("https://")) {
                return Err((key("url"), "must be an http(s) URL".into()));
            }
            let secret = read_secret(d.secret, d.secret_file, base, &key)?;
            let mut routers: Vec<Router> = Vec::new();
            for (j, r) in d.routers.into_iter().enumerate() {
                let key = |field: &str| format!("ldp.delegates[{i}].routers[{j}].{field}");
                let named =
                    r.id.strip_prefix(ldp::identity::DELEGATE_PREFIX)
                        .is_some_and(|n| !n.is_empty() && n.len() <= 128);
                if !named || routers.iter().any(|x| x.id == r.id) {
                    return Err((
                        key("id"),
                        "must be an ldp:delegate:<name> ID, listed once".into(),
                    ));
                }
                let own = read_secret(r.secret, r.secret_file, base, &key)?;
                if own == secret || routers.iter().any(|x| x.secret == own) {
                    return Err((
                        key("secret"),
                        "must be the router's own: not the delegate's, nor another router's".into(),
                    ));
                }
                routers.push(Router {
                    id: r.id,
                    secret: own,
                    trust_domain: r.trust_domain,
                });
            }
            if d.trust_domain.is_empty() || d.tenant.is_empty() {
                return Err((
                    key("trust_domain"),
                    "trust_domain and tenant must be named".into(),
                ));
            }
            delegates.push(Delegate {
                name: d.name,
                url: d.url.trim_end_matches('/').to_owned(),
                secret,
                routers,
                trust_domain: ldp::trust::TrustDomain {
                    name: d.trust_domain,
                    allow_cross_domain: !d.trusted_peers.is_empty(),
                    trusted_peers: d.trusted_peers,
                },
                tenant: d.tenant,
                cost_microcents: d.cost_microcents,
                skill_costs: d.skill_costs,
                session_budget_microcents: d.session_budget_microcents,
                nonce: d.nonce,
                payload_digest: d.payload_digest,
            });
        }
        let mut domains: Vec<PayingDomain> = Vec::new();
        for (i, d) in self.domains.into_iter().enumerate() {
            if d.name.is_empty() || domains.iter().any(|x| x.name == d.name) {
                return Err((
                    format!("ldp.domains[{i}].name"),
                    "must be named, once".into(),
                ));
            }
            domains.push(PayingDomain {
                name: d.name,
                tenant: d.tenant,
                budget_microcents: d.budget_microcents,
            });
        }
        let raw = self.identity.unwrap_or(RawIdentity {
            name: None,
            description: None,
            trust_domain: None,
            jurisdiction: None,
        });
        let identity = OwnIdentity {
            name: raw.name.unwrap_or_else(|| "dgw".to_owned()),
            description: raw.description,
            trust_domain: raw.trust_domain.unwrap_or_else(|| "dgw".to_owned()),
            jurisdiction: raw.jurisdiction,
        };
        let ok = |n: &str| !n.is_empty() && n.len() <= 64;
        if !ok(&identity.name) || !ok(&identity.trust_domain) {
            return Err((
                "ldp.identity".into(),
                "name and trust_domain must be 1 to 64 bytes".into(),
            ));
        }
        Ok(LdpConfig {
            identity,
            domains,
            public_url: self.public_url.map(|u| u.trim_end_matches('/').to_owned()),
            freshness_secs,
            delegate_timeout,
            delegates,
        })
    }
}
