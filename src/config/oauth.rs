//! `[oauth]`: dgw as an OAuth 2.1 protected resource and authorization
//! server (issue 35, docs/oauth.md); off unless the section is there. The
//! names are the issue's, fixed so tools and docs can rely on them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use delegateos::Capability;
use dgw_oauth::public_client::{PublicClient, PublicClients};
use dgw_oauth::redirect::RedirectUri;
use dgw_oauth::server::{ClientAuth, IdpGrant, Policy, TrustedIdp};
use dgw_oauth::ProtectedResource;
use serde::Deserialize;

use super::{Check, ConfigError};

/// The validated `[oauth]` section.
#[derive(Debug, Clone)]
pub struct OAuthConfig {
    /// The public origin (issuer and resource base) and the scopes the
    /// grants can give: what the fronts' metadata and challenges say.
    pub resource: ProtectedResource,
    /// The longest an access token lives (a grant's `ttl` is cut to it).
    pub access_token_ttl: Duration,
    /// The identity providers whose users and agents may be issued tokens.
    pub identity_providers: Vec<IdentityProvider>,
    /// `[[oauth.clients]]`: agents with a secret, for client credentials.
    pub clients: Vec<dgw_oauth::server::Client>,
    /// `[[oauth.public_clients]]`: MCP hosts registered for the
    /// authorization code flow.
    pub public_clients: Vec<PublicClient>,
    /// The hosts client ID metadata documents are fetched from (none:
    /// a URL `client_id` is refused).
    pub client_id_metadata_document_hosts: Vec<String>,
}

/// One `[[oauth.identity_providers]]` entry.
#[derive(Debug, Clone)]
pub struct IdentityProvider {
    pub name: String,
    pub issuer: String,
    pub jwks_uri: Option<String>,
    pub audience: String,
    pub client_id: Option<String>,
    pub client_secret_file: Option<PathBuf>,
    /// dgw's secret at the provider (read from `client_secret_file`).
    pub client_secret: Option<crate::mcp::secret::Secret>,
    pub tenant: String,
    /// First match wins; none matching: `access_denied`.
    pub grants: Vec<GrantRule>,
}

/// One `[[oauth.identity_providers.grants]]` entry.
#[derive(Debug, Clone)]
pub struct GrantRule {
    /// Each listed claim must equal, or (an array) contain, the value.
    pub claims: BTreeMap<String, String>,
    pub capabilities: Vec<Capability>,
    /// Per subject and grant, across every token (not per token).
    pub budget_microcents: u64,
    /// Each issued token's lifetime.
    pub ttl: Duration,
    /// The per-subject delegation's lifetime: a fresh budget after it.
    pub subject_budget_period: Duration,
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOAuth {
    /// The origin clients reach dgw at (`https://dgw.example`): the issuer
    /// and resource base in the metadata and challenges. Required to turn
    /// OAuth on.
    #[serde(default)]
    public_url: Option<String>,
    /// The longest an issued access token lives (default `1h`).
    #[serde(default)]
    access_token_ttl: Option<String>,
    /// The enterprise identity providers (OIDC) tokens are issued from.
    #[serde(default)]
    identity_providers: Vec<RawIdentityProvider>,
    /// Agents registered with a secret (client credentials).
    #[serde(default)]
    clients: Vec<RawClient>,
    /// MCP hosts registered for the authorization code flow (public
    /// clients: no secret, PKCE).
    #[serde(default)]
    public_clients: Vec<RawPublicClient>,
    /// The hosts (names or IP literals, any port) dgw fetches client ID
    /// metadata documents from: a `client_id` that is a URL on one of them
    /// identifies an MCP host without registration. Empty: none accepted.
    #[serde(default)]
    client_id_metadata_document_hosts: Vec<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawPublicClient {
    /// Its ID at dgw (not a URL: a URL names a metadata document).
    client_id: String,
    /// Where codes may be sent: `https://`, or `http://` on a loopback
    /// host; matched exactly, but for the port of a loopback IP.
    redirect_uris: Vec<String>,
    /// What it is called (for the record).
    #[serde(default)]
    client_name: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawIdentityProvider {
    name: String,
    /// The IdP's issuer (`iss`); its discovery document is read from it.
    issuer: String,
    /// The IdP's JWKS, instead of discovery.
    #[serde(default)]
    jwks_uri: Option<String>,
    /// The `aud` the IdP's tokens must carry for dgw.
    audience: String,
    /// dgw as a client of the IdP (the authorization code flow).
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    client_secret_file: Option<PathBuf>,
    /// The tenant whose issuing delegation its tokens attenuate.
    tenant: String,
    #[serde(default)]
    grants: Vec<RawGrant>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawGrant {
    /// Claim name → the value it must equal or contain.
    #[serde(default)]
    claims: BTreeMap<String, String>,
    /// Capabilities (`namespace:action:resource`) the grant gives.
    capabilities: Vec<String>,
    /// The budget per subject and grant, in microcents.
    budget_microcents: u64,
    /// Each issued token's lifetime (`8h`).
    ttl: String,
    /// The per-subject delegation's lifetime (`30d`).
    subject_budget_period: String,
}

/// A URL an IdP is reached at: https, or http on loopback (tests).
fn is_idp_url(text: &str) -> bool {
    let host = |rest: &str| {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        !authority.is_empty() && !authority.contains('@')
    };
    if let Some(rest) = text.strip_prefix("https://") {
        return host(rest);
    }
    text.strip_prefix("http://").is_some_and(|rest| {
        host(rest)
            && ["localhost", "127.0.0.1", "[::1]"].iter().any(|h| {
                rest == *h
                    || rest.starts_with(&format!("{h}:"))
                    || rest.starts_with(&format!("{h}/"))
            })
    })
}

impl RawOAuth {
    pub(super) fn validate(
        self,
        tenants: &[super::Tenant],
        check: &Check<'_>,
    ) -> Result<Option<OAuthConfig>, ConfigError> {
        let names: Vec<&str> = tenants.iter().map(|t| t.name.as_str()).collect();
        let Some(public_url) = self.public_url else {
            for (key, set) in [
                ("oauth.access_token_ttl", self.access_token_ttl.is_some()),
                (
                    "oauth.identity_providers",
                    !self.identity_providers.is_empty(),
                ),
                ("oauth.public_clients", !self.public_clients.is_empty()),
                (
                    "oauth.client_id_metadata_document_hosts",
                    !self.client_id_metadata_document_hosts.is_empty(),
                ),
            ] {
                if set {
                    return Err(check.invalid(key, "has no effect without oauth.public_url".into()));
                }
            }
            return Ok(None);
        };
        let access_token_ttl = check.duration(
            "oauth.access_token_ttl",
            self.access_token_ttl.as_deref().unwrap_or("1h"),
        )?;
        let mut identity_providers = Vec::new();
        for (i, raw) in self.identity_providers.into_iter().enumerate() {
            let idp = raw.validate(&format!("oauth.identity_providers[{i}]"), &names, check)?;
            if identity_providers
                .iter()
                .any(|o: &IdentityProvider| o.name == idp.name)
            {
                return Err(check.invalid(
                    &format!("oauth.identity_providers[{i}].name"),
                    format!("{:?} names another identity provider too", idp.name),
                ));
            }
            identity_providers.push(idp);
        }
        let mut clients: Vec<dgw_oauth::server::Client> = Vec::new();
        for (i, raw) in self.clients.into_iter().enumerate() {
            let key = format!("oauth.clients[{i}]");
            let client = raw.validate(&key, tenants, check)?;
            if clients.iter().any(|c| c.client_id == client.client_id) {
                return Err(check.invalid(
                    &format!("{key}.client_id"),
                    format!("{:?} names another client too", client.client_id),
                ));
            }
            clients.push(client);
        }
        let mut public_clients: Vec<PublicClient> = Vec::new();
        for (i, raw) in self.public_clients.into_iter().enumerate() {
            let key = format!("oauth.public_clients[{i}]");
            let client = raw.validate(&key, check)?;
            if public_clients
                .iter()
                .any(|c| c.client_id == client.client_id)
                || clients.iter().any(|c| c.client_id == client.client_id)
            {
                return Err(check.invalid(
                    &format!("{key}.client_id"),
                    format!("{:?} names another client too", client.client_id),
                ));
            }
            public_clients.push(client);
        }
        for (i, host) in self.client_id_metadata_document_hosts.iter().enumerate() {
            let v6 = host.starts_with('[') && host.ends_with(']');
            let name = host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
            if host.is_empty() || host.len() > 253 || !(v6 || name) {
                return Err(check.invalid(
                    &format!("oauth.client_id_metadata_document_hosts[{i}]"),
                    format!("{host:?} is not a host name or IP literal (no scheme, port or path)"),
                ));
            }
        }
        let mut scopes: Vec<String> = identity_providers
            .iter()
            .flat_map(|p| &p.grants)
            .flat_map(|g| &g.capabilities)
            .chain(clients.iter().flat_map(|c| &c.policy.capabilities))
            .map(Capability::to_string)
            .collect();
        scopes.sort();
        scopes.dedup();
        let resource = ProtectedResource::new(&public_url, scopes)
            .map_err(|e| check.invalid("oauth.public_url", format!("{public_url:?} {e}")))?;
        Ok(Some(OAuthConfig {
            resource,
            access_token_ttl,
            identity_providers,
            clients,
            public_clients,
            client_id_metadata_document_hosts: self.client_id_metadata_document_hosts,
        }))
    }
}

impl RawPublicClient {
    fn validate(self, key: &str, check: &Check<'_>) -> Result<PublicClient, ConfigError> {
        if self.client_id.is_empty()
            || self.client_id.len() > 128
            || self.client_id.chars().any(|c| c.is_control() || c == ':')
        {
            return Err(check.invalid(
                &format!("{key}.client_id"),
                "must be 1-128 printable characters without ':' (a URL names a client ID metadata document, not a registered client)".into(),
            ));
        }
        if self.redirect_uris.is_empty() {
            return Err(check.invalid(
                &format!("{key}.redirect_uris"),
                "must list at least one redirect URI".into(),
            ));
        }
        let redirect_uris = self
            .redirect_uris
            .iter()
            .enumerate()
            .map(|(j, u)| {
                RedirectUri::parse(u)
                    .map_err(|e| check.invalid(&format!("{key}.redirect_uris[{j}]"), e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PublicClient {
            client_id: self.client_id,
            name: self.client_name,
            redirect_uris,
        })
    }
}

impl OAuthConfig {
    /// The authorization code flow, when an identity provider has a
    /// `client_id` (the first such is where people log in, decision 475),
    /// logging in at its provider among `trusted` (one verifier, one key
    /// cache, for every grant).
    pub fn code_flow(
        &self,
        records: std::sync::Arc<dyn dgw_core::state::RecordStore>,
        trusted: &[TrustedIdp],
    ) -> Option<dgw_oauth::code_flow::CodeFlow> {
        let idp = self
            .identity_providers
            .iter()
            .find(|p| p.client_id.is_some())?;
        let provider = trusted
            .iter()
            .find(|t| t.provider.name() == idp.name)?
            .provider
            .clone();
        let login = dgw_oauth::code_flow::Login::new(
            provider,
            idp.client_id.clone()?,
            idp.client_secret.as_ref()?.expose().to_owned(),
        );
        Some(dgw_oauth::code_flow::CodeFlow::new(
            PublicClients::new(
                self.public_clients.clone(),
                self.client_id_metadata_document_hosts.clone(),
            ),
            login,
            records,
        ))
    }
}

impl RawIdentityProvider {
    fn validate(
        self,
        key: &str,
        tenants: &[&str],
        check: &Check<'_>,
    ) -> Result<IdentityProvider, ConfigError> {
        if self.name.is_empty() || self.name.len() > 64 || self.name.chars().any(char::is_control) {
            return Err(check.invalid(
                &format!("{key}.name"),
                "must be 1-64 printable characters".into(),
            ));
        }
        for (field, url) in [
            ("issuer", Some(&self.issuer)),
            ("jwks_uri", self.jwks_uri.as_ref()),
        ] {
            if let Some(url) = url.filter(|u| !is_idp_url(u)) {
                return Err(check.invalid(
                    &format!("{key}.{field}"),
                    format!("{url:?} is not an https:// URL (http:// only on loopback) without credentials"),
                ));
            }
        }
        if self.audience.is_empty() {
            return Err(check.invalid(&format!("{key}.audience"), "must not be empty".into()));
        }
        if self.client_secret_file.is_some() && self.client_id.is_none() {
            return Err(check.invalid(
                &format!("{key}.client_secret_file"),
                "has no effect without client_id".into(),
            ));
        }
        let client_secret = match (&self.client_id, &self.client_secret_file) {
            (Some(_), None) => {
                return Err(check.invalid(
                    &format!("{key}.client_id"),
                    "needs client_secret_file: dgw logs people in as a confidential client of the identity provider".into(),
                ))
            }
            (Some(_), Some(file)) => Some(
                crate::mcp::secret::Secret::from_file(&check.file(file.clone()))
                    .map_err(|e| check.invalid(&format!("{key}.client_secret_file"), e.to_string()))?,
            ),
            _ => None,
        };
        if !tenants.contains(&self.tenant.as_str()) {
            return Err(check.invalid(
                &format!("{key}.tenant"),
                format!("{:?} is not a [[tenants]] name", self.tenant),
            ));
        }
        let mut grants = Vec::new();
        for (j, g) in self.grants.into_iter().enumerate() {
            grants.push(g.validate(&format!("{key}.grants[{j}]"), check)?);
        }
        Ok(IdentityProvider {
            name: self.name,
            issuer: self.issuer,
            jwks_uri: self.jwks_uri,
            audience: self.audience,
            client_id: self.client_id,
            client_secret_file: self.client_secret_file.map(|p| check.file(p)),
            client_secret,
            tenant: self.tenant,
            grants,
        })
    }
}

impl RawGrant {
    fn validate(self, at: &str, check: &Check<'_>) -> Result<GrantRule, ConfigError> {
        let capabilities = self
            .capabilities
            .iter()
            .map(|c| {
                c.parse::<Capability>().map_err(|e| {
                    check.invalid(&format!("{at}.capabilities"), format!("{c:?}: {e}"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if capabilities.is_empty() {
            return Err(check.invalid(
                &format!("{at}.capabilities"),
                "must name at least one capability".into(),
            ));
        }
        if self.budget_microcents > delegateos::canonical::MAX_SAFE_INTEGER {
            return Err(check.invalid(
                &format!("{at}.budget_microcents"),
                format!(
                    "must be at most {}",
                    delegateos::canonical::MAX_SAFE_INTEGER
                ),
            ));
        }
        Ok(GrantRule {
            claims: self.claims,
            capabilities,
            budget_microcents: self.budget_microcents,
            ttl: check.duration(&format!("{at}.ttl"), &self.ttl)?,
            subject_budget_period: check.duration(
                &format!("{at}.subject_budget_period"),
                &self.subject_budget_period,
            )?,
        })
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawClient {
    /// The client's ID at dgw's token endpoint.
    client_id: String,
    /// A file (0600) holding its secret; dgw keeps only its SHA-256.
    #[serde(default)]
    secret_file: Option<PathBuf>,
    /// Instead of a secret: its public keys (a JWK Set), for
    /// `private_key_jwt` (RFC 7523).
    #[serde(default)]
    jwks: Option<serde_json::Value>,
    /// The tenant whose issuing delegation its tokens attenuate.
    tenant: String,
    /// Capabilities (`namespace:action:resource`) its tokens may carry.
    capabilities: Vec<String>,
    /// Its budget across every token, in microcents, per period.
    budget_microcents: u64,
    /// Each token's lifetime (`1h`).
    ttl: String,
    /// How long one budget lasts (`30d`).
    subject_budget_period: String,
}

impl RawClient {
    fn validate(
        self,
        key: &str,
        tenants: &[super::Tenant],
        check: &Check<'_>,
    ) -> Result<dgw_oauth::server::Client, ConfigError> {
        if self.client_id.is_empty()
            || self.client_id.len() > 128
            || self.client_id.chars().any(|c| c.is_control() || c == ':')
        {
            return Err(check.invalid(
                &format!("{key}.client_id"),
                "must be 1-128 printable characters without ':'".into(),
            ));
        }
        let auth = match (self.secret_file, self.jwks) {
            (Some(file), None) => {
                let secret = crate::mcp::secret::Secret::from_file(&check.file(file))
                    .map_err(|e| check.invalid(&format!("{key}.secret_file"), e.to_string()))?;
                if secret.expose().len() < 16 {
                    return Err(check.invalid(
                        &format!("{key}.secret_file"),
                        "the secret must be at least 16 characters".into(),
                    ));
                }
                ClientAuth::Secret(dgw_core::caller::AdminToken::digest(secret.expose()))
            }
            (None, Some(jwks)) => ClientAuth::Jwks(
                dgw_oauth::server::client_key_set(jwks)
                    .map_err(|e| check.invalid(&format!("{key}.jwks"), e))?,
            ),
            _ => {
                return Err(check.invalid(
                    key,
                    "needs secret_file or jwks (private_key_jwt), one of them".into(),
                ))
            }
        };
        match tenants.iter().find(|t| t.name == self.tenant) {
            None => {
                return Err(check.invalid(
                    &format!("{key}.tenant"),
                    format!("{:?} is not a [[tenants]] name", self.tenant),
                ))
            }
            Some(t) if t.issuing_delegation_file.is_none() => {
                return Err(check.invalid(
                    &format!("{key}.tenant"),
                    format!(
                        "tenant {:?} has no issuing_delegation_file: dgw issues nothing for it",
                        self.tenant
                    ),
                ))
            }
            Some(_) => {}
        }
        let grant = RawGrant {
            claims: BTreeMap::new(),
            capabilities: self.capabilities,
            budget_microcents: self.budget_microcents,
            ttl: self.ttl,
            subject_budget_period: self.subject_budget_period,
        }
        .validate(key, check)?;
        Ok(dgw_oauth::server::Client {
            client_id: self.client_id,
            auth,
            policy: Policy {
                tenant: self.tenant,
                capabilities: grant.capabilities,
                budget_microcents: grant.budget_microcents,
                ttl: grant.ttl,
                subject_budget_period: grant.subject_budget_period,
            },
        })
    }
}

impl IdentityProvider {
    /// The provider as the authorization server trusts it: its verifier
    /// (keys fetched on first use) and its grants.
    pub fn trusted(&self) -> TrustedIdp {
        TrustedIdp {
            provider: std::sync::Arc::new(dgw_oauth::idp::IdentityProvider::new(
                &self.name,
                &self.issuer,
                self.jwks_uri.as_deref(),
                &self.audience,
            )),
            grants: self
                .grants
                .iter()
                .map(|g| IdpGrant {
                    claims: g.claims.clone(),
                    policy: Policy {
                        tenant: self.tenant.clone(),
                        capabilities: g.capabilities.clone(),
                        budget_microcents: g.budget_microcents,
                        ttl: g.ttl,
                        subject_budget_period: g.subject_budget_period,
                    },
                })
                .collect(),
        }
    }
}
