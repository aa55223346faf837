//! dgw as an OAuth 2.1 authorization server (issue 35; docs/oauth.md):
//! its metadata (RFC 8414) and `POST /oauth/token`. Every access token is
//! a DCT: an attenuation, to this request's scope and lifetime, of ONE
//! per-subject delegation (kept in the state backend, lifetime
//! `subject_budget_period`), itself an attenuation of the tenant's issuing
//! delegation. Spend is charged at every level of a chain, so all the
//! tokens a subject is given share the subject's budget, whichever replica
//! issued or checks them: asking again never mints fresh budget.

mod assertion;
mod client_auth;
mod error;
mod exchange;
mod id_jag;
mod identity;
mod request;
mod subject;

use std::sync::Arc;
use std::time::Duration;

use delegateos::Capability;
use dgw_core::gatekeeper::Gatekeeper;
use dgw_core::issuing::Issuing;
use dgw_core::state::RecordStore;
use serde_json::{json, Value};

use crate::limit::RateLimit;
use crate::resource::ProtectedResource;
pub use assertion::client_key_set;
pub use error::{error_answer, TokenAnswer, TokenError};
pub use identity::{IdpGrant, TrustedIdp};
pub(crate) use request::{form, param};

/// The token endpoint's path.
pub const TOKEN_PATH: &str = "/oauth/token";
/// The authorization server metadata's path (RFC 8414 §3).
pub const METADATA_PATH: &str = "/.well-known/oauth-authorization-server";
/// The record space of the per-subject delegations.
const SUBJECTS: &str = "oauth_subjects";
/// The most bytes of a token request dgw reads.
pub const MAX_REQUEST_BYTES: usize = 16 * 1024;
/// The most capabilities a `scope` may name.
const MAX_SCOPES: usize = 64;

/// What a grant gives a subject.
#[derive(Debug, Clone)]
pub struct Policy {
    pub tenant: String,
    pub capabilities: Vec<Capability>,
    /// Per subject, across every token (the per-subject delegation's).
    pub budget_microcents: u64,
    /// Each token's lifetime (cut to `access_token_ttl`).
    pub ttl: Duration,
    /// The per-subject delegation's lifetime.
    pub subject_budget_period: Duration,
}

pub use crate::grant;

/// A client registered in `[[oauth.clients]]`.
#[derive(Debug, Clone)]
pub struct Client {
    pub client_id: String,
    /// How it proves it is itself.
    pub auth: ClientAuth,
    /// What its client-credentials tokens get (its subject is its ID).
    pub policy: Policy,
}

/// A registered client's credential.
#[derive(Debug, Clone)]
pub enum ClientAuth {
    /// The SHA-256 of its secret; the secret itself is never kept.
    Secret([u8; 32]),
    /// Its public keys, for `private_key_jwt` (RFC 7523 §2.2).
    Jwks(jsonwebtoken::jwk::JwkSet),
}

/// A token issued: the endpoint's answer, and its grant and identity
/// provider (`-` for none) for the metrics.
#[derive(Debug, Clone)]
pub struct Issued {
    pub body: Value,
    pub grant: &'static str,
    pub idp: String,
    /// The token's own block (its revocation ID) and its expiry (Unix
    /// seconds): what a refresh token family revokes.
    pub block: (String, i64),
}

/// The authorization server.
pub struct AuthorizationServer {
    resource: ProtectedResource,
    access_token_ttl: Duration,
    clients: Vec<Client>,
    issuing: Arc<Issuing>,
    gate: Arc<Gatekeeper>,
    records: Arc<dyn RecordStore>,
    /// Requests per source address, checked before anything else.
    by_source: RateLimit,
    /// Requests per authenticated client (never per claimed ID, so a
    /// stranger cannot use up a client's allowance).
    by_client: RateLimit,
    /// The identity providers whose tokens are exchanged.
    idps: Vec<TrustedIdp>,
    /// The authorization code flow (docs/oauth.md), when configured.
    code_flow: Option<crate::code_flow::CodeFlow>,
}

/// Token requests a source address may make per minute.
pub const PER_SOURCE_PER_MINUTE: u32 = 120;
/// Token requests an authenticated client may make per minute.
pub const PER_CLIENT_PER_MINUTE: u32 = 60;
/// The most sources and clients each limit tracks at once.
const MAX_LIMITED_KEYS: usize = 100_000;

impl AuthorizationServer {
    pub fn new(
        resource: ProtectedResource,
        access_token_ttl: Duration,
        clients: Vec<Client>,
        issuing: Arc<Issuing>,
        gate: Arc<Gatekeeper>,
        records: Arc<dyn RecordStore>,
    ) -> Self {
        Self {
            resource,
            access_token_ttl,
            clients,
            issuing,
            gate,
            records,
            by_source: RateLimit::new(
                PER_SOURCE_PER_MINUTE,
                Duration::from_secs(60),
                MAX_LIMITED_KEYS,
            ),
            by_client: RateLimit::new(
                PER_CLIENT_PER_MINUTE,
                Duration::from_secs(60),
                MAX_LIMITED_KEYS,
            ),
            idps: Vec::new(),
            code_flow: None,
        }
    }

    /// The same server, with the authorization code flow.
    pub fn with_code_flow(mut self, flow: Option<crate::code_flow::CodeFlow>) -> Self {
        self.code_flow = flow;
        self
    }

    /// The trusted identity provider named `name`.
    pub(crate) fn trusted(&self, name: &str) -> Option<&TrustedIdp> {
        self.idps.iter().find(|t| t.provider.name() == name)
    }

    /// The code flow, when on.
    pub(crate) fn code_flow(&self) -> Option<&crate::code_flow::CodeFlow> {
        self.code_flow.as_ref()
    }

    /// dgw's issuer: its public URL.
    pub(crate) fn issuer(&self) -> &str {
        self.resource.public_url()
    }

    pub(crate) fn gate(&self) -> &Gatekeeper {
        &self.gate
    }

    /// The same server, exchanging the tokens of `idps`.
    pub fn with_identity_providers(mut self, idps: Vec<TrustedIdp>) -> Self {
        self.idps = idps;
        self
    }

    /// The grant types answered: the identity providers' only with one.
    fn grant_types(&self) -> Vec<&'static str> {
        let mut out = vec![grant::CLIENT_CREDENTIALS];
        if !self.idps.is_empty() {
            out.extend([grant::TOKEN_EXCHANGE, grant::JWT_BEARER]);
        }
        if self.code_flow.is_some() {
            out.extend([grant::AUTHORIZATION_CODE, grant::REFRESH_TOKEN]);
        }
        out
    }

    /// The token endpoint's URL, the `aud` of a client assertion.
    pub fn token_endpoint(&self) -> String {
        format!("{}{TOKEN_PATH}", self.resource.public_url())
    }

    /// The metadata (RFC 8414): what is built, and nothing else.
    pub fn metadata(&self) -> Value {
        let issuer = self.resource.public_url();
        let mut metadata = json!({
            "issuer": issuer,
            "token_endpoint": self.token_endpoint(),
            "grant_types_supported": self.grant_types(),
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "private_key_jwt"],
            "token_endpoint_auth_signing_alg_values_supported": crate::jwt::ALGORITHMS,
            "response_types_supported": [],
            "scopes_supported": self.resource.scopes(),
        });
        if let Some(flow) = &self.code_flow {
            flow.describe(issuer, &mut metadata);
        }
        metadata
    }

    /// `POST /oauth/token`: `content_type` and `authorization` are the
    /// request's headers. Nothing is issued or stored on an error.
    pub async fn token(
        &self,
        content_type: Option<&str>,
        authorization: Option<&str>,
        body: &[u8],
    ) -> Result<Issued, TokenError> {
        let form_type = content_type
            .and_then(|c| c.split(';').next())
            .is_some_and(|c| {
                c.trim()
                    .eq_ignore_ascii_case("application/x-www-form-urlencoded")
            });
        if !form_type {
            return Err(TokenError::InvalidRequest(
                "the body must be application/x-www-form-urlencoded".into(),
            ));
        }
        let form = form(body)?;
        let client = self.authenticate(authorization, &form).await?;
        if let Some(client) = client {
            if !self
                .by_client
                .allow(&client.client_id, std::time::Instant::now())
            {
                return Err(TokenError::RateLimited("client"));
            }
        }
        let anonymous = || TokenError::InvalidClient { basic: false };
        match param(&form, "grant_type") {
            Some(grant::CLIENT_CREDENTIALS) => {
                self.client_credentials(client.ok_or_else(anonymous)?, &form)
                    .await
            }
            Some(grant::TOKEN_EXCHANGE) => self.token_exchange(&form).await,
            Some(grant::JWT_BEARER) => self.jwt_bearer(client.ok_or_else(anonymous)?, &form).await,
            Some(grant::AUTHORIZATION_CODE) => self.authorization_code(&form).await,
            Some(grant::REFRESH_TOKEN) => self.refresh_token(&form).await,
            Some(other) => Err(TokenError::UnsupportedGrantType(format!(
                "grant_type {:?} is not supported",
                other.chars().take(64).collect::<String>()
            ))),
            None if client.is_none() => Err(anonymous()),
            None => Err(TokenError::InvalidRequest("grant_type is required".into())),
        }
    }

    /// `client_credentials`: a registered client, its own subject.
    async fn client_credentials(
        &self,
        client: &Client,
        form: &[(String, String)],
    ) -> Result<Issued, TokenError> {
        self.check_resource(param(form, "resource"))?;
        let scope = self.scope(param(form, "scope"), &client.policy.capabilities)?;
        let subject = format!("client/{}", client.client_id);
        self.issue(
            (grant::CLIENT_CREDENTIALS, "-"),
            &subject,
            &client.policy,
            scope,
        )
        .await
    }

    /// [`AuthorizationServer::token`] as the endpoint answers it, each
    /// issuance and denial in the audit trail (never a secret or token).
    pub async fn answer(
        &self,
        source: Option<std::net::IpAddr>,
        content_type: Option<&str>,
        authorization: Option<&str>,
        body: &[u8],
    ) -> TokenAnswer {
        let source = source.map_or_else(|| "-".to_owned(), |ip| ip.to_string());
        let result = if self.by_source.allow(&source, std::time::Instant::now()) {
            self.token(content_type, authorization, body).await
        } else {
            Err(TokenError::RateLimited("source"))
        };
        match result {
            Ok(issued) => {
                crate::metrics::issued(issued.grant, &issued.idp);
                TokenAnswer {
                    status: 200,
                    body: issued.body,
                    www_authenticate: None,
                }
            }
            Err(e) => {
                crate::metrics::denied(e.code());
                self.gate.trail().event(
                    "oauth_token_denied",
                    json!({"error": e.code(), "detail": e.to_string()}),
                );
                tracing::info!(error = e.code(), detail = %e, "oauth token refused");
                error_answer(&e)
            }
        }
    }
}
