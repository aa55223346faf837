//! dgw as an OAuth 2.1 authorization server (issue 35; docs/oauth.md):
//! its metadata (RFC 8414) and `POST /oauth/token`. Every access token is
//! a DCT: an attenuation, to this request's scope and lifetime, of ONE
//! per-subject delegation (kept in the state backend, lifetime
//! `subject_budget_period`), itself an attenuation of the tenant's issuing
//! delegation. Spend is charged at every level of a chain, so all the
//! tokens a subject is given share the subject's budget, whichever replica
//! issued or checks them: asking again never mints fresh budget.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use delegateos::{Capability, RevocationCheck, Timestamp};
use dgw_core::gatekeeper::{GateError, Gatekeeper};
use dgw_core::issuing::Issuing;
use dgw_core::state::RecordStore;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::limit::RateLimit;
use crate::resource::ProtectedResource;

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

/// A client registered in `[[oauth.clients]]`.
#[derive(Debug, Clone)]
pub struct Client {
    pub client_id: String,
    /// The SHA-256 of its secret; the secret itself is never kept.
    pub secret_sha256: [u8; 32],
    /// What its client-credentials tokens get (its subject is its ID).
    pub policy: Policy,
}

/// An RFC 6749 §5.2 error, or a failure to decide.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("the client is unknown or its secret is wrong")]
    InvalidClient { basic: bool },
    #[error("{0}")]
    InvalidGrant(String),
    #[error("{0}")]
    UnsupportedGrantType(String),
    #[error("{0}")]
    InvalidScope(String),
    #[error("{0}")]
    InvalidTarget(String),
    #[error("{0}")]
    AccessDenied(String),
    #[error("{0}")]
    ServerError(String),
    /// Over the rate limit of its source or its client: 429.
    #[error("too many token requests from this {0}; try again in a minute")]
    RateLimited(&'static str),
}

impl TokenError {
    /// The RFC's error code, also the denial reason in metrics and audit.
    pub fn code(&self) -> &'static str {
        match self {
            TokenError::InvalidRequest(_) => "invalid_request",
            TokenError::InvalidClient { .. } => "invalid_client",
            TokenError::InvalidGrant(_) => "invalid_grant",
            TokenError::UnsupportedGrantType(_) => "unsupported_grant_type",
            TokenError::InvalidScope(_) => "invalid_scope",
            TokenError::InvalidTarget(_) => "invalid_target",
            TokenError::AccessDenied(_) => "access_denied",
            TokenError::ServerError(_) => "server_error",
            TokenError::RateLimited(_) => "temporarily_unavailable",
        }
    }

    /// The HTTP status (RFC 6749 §5.2: 401 for a client that tried Basic).
    pub fn status(&self) -> u16 {
        match self {
            TokenError::InvalidClient { .. } => 401,
            TokenError::ServerError(_) => 500,
            TokenError::RateLimited(_) => 429,
            _ => 400,
        }
    }
}

/// The token endpoint's answer.
#[derive(Debug, Clone)]
pub struct TokenAnswer {
    pub status: u16,
    pub body: Value,
    /// `WWW-Authenticate`, for a client that authenticated with Basic.
    pub www_authenticate: Option<&'static str>,
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
}

/// Token requests a source address may make per minute.
pub const PER_SOURCE_PER_MINUTE: u32 = 120;
/// Token requests an authenticated client may make per minute.
pub const PER_CLIENT_PER_MINUTE: u32 = 60;
/// The most sources and clients each limit tracks at once.
const MAX_LIMITED_KEYS: usize = 100_000;

/// A form's parameters, each at most once (RFC 6749 §3.1).
fn form(body: &[u8]) -> Result<Vec<(String, String)>, TokenError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (k, v) in form_urlencoded::parse(body) {
        if out.iter().any(|(o, _)| *o == k) {
            return Err(TokenError::InvalidRequest(format!(
                "{k} is given more than once"
            )));
        }
        out.push((k.into_owned(), v.into_owned()));
    }
    Ok(out)
}

fn param<'a>(form: &'a [(String, String)], name: &str) -> Option<&'a str> {
    form.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

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
        }
    }

    /// The metadata (RFC 8414): what is built, and nothing else.
    pub fn metadata(&self) -> Value {
        let issuer = self.resource.public_url();
        json!({
            "issuer": issuer,
            "token_endpoint": format!("{issuer}{TOKEN_PATH}"),
            "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "response_types_supported": [],
            "scopes_supported": self.resource.scopes(),
        })
    }

    /// `POST /oauth/token`: `content_type` and `authorization` are the
    /// request's headers. Nothing is issued or stored on an error.
    pub async fn token(
        &self,
        content_type: Option<&str>,
        authorization: Option<&str>,
        body: &[u8],
    ) -> Result<Value, TokenError> {
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
        let client = self.client(authorization, &form)?;
        if !self
            .by_client
            .allow(&client.client_id, std::time::Instant::now())
        {
            return Err(TokenError::RateLimited("client"));
        }
        match param(&form, "grant_type") {
            Some("client_credentials") => {}
            Some(other) => {
                return Err(TokenError::UnsupportedGrantType(format!(
                    "grant_type {:?} is not supported",
                    other.chars().take(64).collect::<String>()
                )))
            }
            None => return Err(TokenError::InvalidRequest("grant_type is required".into())),
        }
        self.check_resource(param(&form, "resource"))?;
        let scope = self.scope(param(&form, "scope"), &client.policy)?;
        let subject = format!("client/{}", client.client_id);
        self.issue(&subject, &client.policy, scope).await
    }

    /// The client the request authenticates as: HTTP Basic, or
    /// `client_id` + `client_secret` in the form, never both.
    fn client(
        &self,
        authorization: Option<&str>,
        form: &[(String, String)],
    ) -> Result<&Client, TokenError> {
        let basic = authorization.and_then(|a| {
            let (scheme, rest) = a.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("basic").then_some(rest.trim())
        });
        let (id, secret, basic) = match (basic, param(form, "client_secret")) {
            (Some(_), Some(_)) => {
                return Err(TokenError::InvalidRequest(
                    "the client authenticates once: Basic or client_secret, not both".into(),
                ))
            }
            (Some(b), None) => {
                let bad = || TokenError::InvalidClient { basic: true };
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .map_err(|_| bad())?;
                let text = String::from_utf8(decoded).map_err(|_| bad())?;
                let (id, secret) = text.split_once(':').ok_or_else(bad)?;
                let dec = |s: &str| {
                    form_urlencoded::parse(format!("x={s}").as_bytes())
                        .next()
                        .map(|(_, v)| v.into_owned())
                };
                (dec(id).ok_or_else(bad)?, dec(secret).ok_or_else(bad)?, true)
            }
            (None, Some(secret)) => {
                let id = param(form, "client_id").ok_or_else(|| {
                    TokenError::InvalidRequest("client_secret without client_id".into())
                })?;
                (id.to_owned(), secret.to_owned(), false)
            }
            (None, None) => return Err(TokenError::InvalidClient { basic: false }),
        };
        if let Some(named) = param(form, "client_id") {
            if named != id {
                return Err(TokenError::InvalidRequest(
                    "client_id differs from the authenticated client".into(),
                ));
            }
        }
        let digest: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
        // Every client's digest is compared, so timing tells neither which
        // client matched nor how much of a secret did.
        let mut found = None;
        for c in &self.clients {
            let same_id = c.client_id.as_bytes().ct_eq(id.as_bytes());
            let same_secret = c.secret_sha256.ct_eq(&digest);
            if bool::from(same_id & same_secret) {
                found = Some(c);
            }
        }
        found.ok_or(TokenError::InvalidClient { basic })
    }

    /// RFC 8707: a `resource` must be dgw's (its root or `/mcp`).
    fn check_resource(&self, resource: Option<&str>) -> Result<(), TokenError> {
        let Some(r) = resource else { return Ok(()) };
        let base = self.resource.public_url();
        if r == base || r == format!("{base}/") || r == format!("{base}/mcp") {
            Ok(())
        } else {
            Err(TokenError::InvalidTarget(format!(
                "resource must be {base} or {base}/mcp"
            )))
        }
    }

    /// `scope`: capabilities, each within the policy; none: all of it.
    fn scope(&self, scope: Option<&str>, policy: &Policy) -> Result<Vec<Capability>, TokenError> {
        let Some(text) = scope.filter(|s| !s.trim().is_empty()) else {
            return Ok(policy.capabilities.clone());
        };
        let asked: Vec<&str> = text.split(' ').filter(|s| !s.is_empty()).collect();
        if asked.len() > MAX_SCOPES {
            return Err(TokenError::InvalidScope(format!(
                "at most {MAX_SCOPES} scopes"
            )));
        }
        asked
            .iter()
            .map(|s| {
                let cap = s.parse::<Capability>().map_err(|e| {
                    TokenError::InvalidScope(format!("{s:?} is not a capability: {e}"))
                })?;
                // Checked before anything is made or stored.
                if cap.is_covered_by(&policy.capabilities) {
                    Ok(cap)
                } else {
                    Err(TokenError::InvalidScope(format!(
                        "{s:?} is wider than the grant"
                    )))
                }
            })
            .collect()
    }

    /// The subject's delegation (made once per period), then a token
    /// attenuating it to `scope`.
    async fn issue(
        &self,
        subject: &str,
        policy: &Policy,
        scope: Vec<Capability>,
    ) -> Result<Value, TokenError> {
        let parent = self.subject_delegation(subject, policy).await?;
        let ttl = policy.ttl.min(self.access_token_ttl);
        let until = Timestamp::from_instant(time::OffsetDateTime::now_utc() + ttl);
        let held = self
            .issuing
            .attenuate_held(
                &self.gate,
                &policy.tenant,
                Some(&parent),
                scope.clone(),
                policy.budget_microcents,
                until,
            )
            .map_err(|e| match e {
                GateError::Rejected { kind, detail } if kind == "attenuation_violation" => {
                    TokenError::InvalidScope(format!("wider than the grant: {detail}"))
                }
                GateError::Rejected { detail, .. } => TokenError::AccessDenied(detail),
                other => TokenError::ServerError(other.to_string()),
            })?;
        let expires_in = held
            .expires_at
            .instant()
            .unix_timestamp()
            .saturating_sub(time::OffsetDateTime::now_utc().unix_timestamp())
            .max(0);
        self.gate.trail().event(
            "oauth_token_issued",
            json!({
                "grant": "client_credentials",
                "subject": subject,
                "tenant": policy.tenant,
                "delegationId": held.delegation_id,
                "scope": scope,
                "expiresAt": held.expires_at,
                "revocationId": held.revocation_ids.last(),
            }),
        );
        let scope_text: Vec<String> = scope.iter().map(Capability::to_string).collect();
        Ok(json!({
            "access_token": held.token,
            "token_type": "Bearer",
            "expires_in": expires_in,
            "scope": scope_text.join(" "),
        }))
    }

    /// The subject's one delegation for this period: the stored one while
    /// it lasts, else a new one stored once (a concurrent issuer's, on any
    /// replica, wins and is used).
    async fn subject_delegation(
        &self,
        subject: &str,
        policy: &Policy,
    ) -> Result<String, TokenError> {
        let storage = |e: dgw_core::state::StorageError| TokenError::ServerError(e.to_string());
        let key = format!("{}/{subject}", policy.tenant);
        let now = time::OffsetDateTime::now_utc();
        let stored = self.records.get(SUBJECTS, &key).await.map_err(storage)?;
        let live = stored.as_ref().and_then(|v| {
            let until: Timestamp = serde_json::from_value(v.get("expiresAt")?.clone()).ok()?;
            (until.instant() > now).then_some(v)
        });
        if let Some(doc) = live {
            // Revoked (its block, by any means) or otherwise no longer
            // good: refused, never replaced within its period, so revoking
            // a subject ends its budget too (decision 377).
            let revoked = doc
                .get("revocationId")
                .and_then(Value::as_str)
                .is_none_or(|id| {
                    self.gate
                        .revocations()
                        .read()
                        .is_block_revoked(id, self.issuing.gateway())
                });
            if revoked {
                return Err(TokenError::AccessDenied(
                    "the subject's delegation is revoked".into(),
                ));
            }
            let token = doc.get("token").and_then(Value::as_str).ok_or_else(|| {
                TokenError::ServerError("a stored subject delegation has no token".into())
            })?;
            self.gate.dct_grant(token).map_err(|d| {
                TokenError::AccessDenied(format!("the subject's delegation: {}", d.kind.as_str()))
            })?;
            return Ok(token.to_owned());
        }
        let until = Timestamp::from_instant(now + policy.subject_budget_period);
        let held = self
            .issuing
            .attenuate_held(
                &self.gate,
                &policy.tenant,
                None,
                policy.capabilities.clone(),
                policy.budget_microcents,
                until,
            )
            .map_err(|e| match e {
                GateError::Rejected { detail, .. } | GateError::Forbidden { detail, .. } => {
                    TokenError::AccessDenied(detail)
                }
                other => TokenError::ServerError(other.to_string()),
            })?;
        let doc = json!({
            "token": held.token,
            "expiresAt": held.expires_at,
            "delegationId": held.delegation_id,
            "revocationId": held.revocation_ids.last(),
        });
        let won = match &stored {
            None => self
                .records
                .insert_new(SUBJECTS, &key, &doc)
                .await
                .map_err(storage)?,
            Some(old) => self
                .records
                .replace(SUBJECTS, &key, old, &doc)
                .await
                .map_err(storage)?,
        };
        if won {
            return Ok(held.token);
        }
        // Another issuer stored one first: use it.
        let v = self
            .records
            .get(SUBJECTS, &key)
            .await
            .map_err(storage)?
            .ok_or_else(|| TokenError::ServerError("the subject's delegation vanished".into()))?;
        v.get("token")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| {
                TokenError::ServerError("a stored subject delegation has no token".into())
            })
    }
}

impl AuthorizationServer {
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
            Ok(body) => {
                crate::metrics::issued("client_credentials", "-");
                TokenAnswer {
                    status: 200,
                    body,
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

impl AuthorizationServer {
    /// `dgw/oauth/revoke`: revokes `subject`'s delegation in `tenant` as
    /// the administrator `caller` (its block, by ID: every token it was
    /// given carries it), so they all end at once; the stored delegation
    /// stays, so the subject gets nothing new until its period ends
    /// (decision 377).
    pub async fn revoke_subject(
        &self,
        caller: &dgw_core::caller::Caller,
        tenant: &str,
        subject: &str,
    ) -> Result<Value, GateError> {
        if !caller.is_authenticated_admin() {
            return Err(GateError::Forbidden {
                kind: dgw_core::gatekeeper::Forbidden::AdminRequired,
                detail: "dgw/oauth/revoke needs an admin token or certificate".into(),
            });
        }
        let key = format!("{tenant}/{subject}");
        let doc = self
            .records
            .get(SUBJECTS, &key)
            .await
            .map_err(GateError::Storage)?
            .ok_or_else(|| GateError::Rejected {
                kind: "subject_not_found".into(),
                detail: format!("tenant {tenant:?} has issued nothing to subject {subject:?}"),
            })?;
        let revocation_id = doc
            .get("revocationId")
            .and_then(Value::as_str)
            .ok_or_else(|| GateError::Rejected {
                kind: "subject_not_found".into(),
                detail: "the stored subject delegation names no block".into(),
            })?;
        let r = self.gate.revoke_by_admin(caller, revocation_id).await?;
        self.gate.trail().event(
            "oauth_subject_revoked",
            json!({"tenant": tenant, "subject": subject, "revocationId": revocation_id, "admin": caller.admin_name()}),
        );
        Ok(json!({
            "tenant": tenant,
            "subject": subject,
            "revocationId": r.revocation_id,
            "newlyRecorded": r.newly_recorded,
        }))
    }
}

/// `error` as the token endpoint answers it (RFC 6749 §5.2).
pub fn error_answer(error: &TokenError) -> TokenAnswer {
    TokenAnswer {
        status: error.status(),
        body: json!({"error": error.code(), "error_description": error.to_string()}),
        www_authenticate: match error {
            TokenError::InvalidClient { basic: true } => Some("Basic realm=\"dgw\""),
            _ => None,
        },
    }
}
