//! `GET /oauth/authorize` (OAuth 2.1 §4.1.1, the MCP authorization spec):
//! an MCP host sends its user here with `response_type=code`, its
//! `client_id`, an exact `redirect_uri`, an S256 PKCE challenge, its
//! `state`, a `scope` of capabilities and the `resource` (RFC 8707, dgw
//! itself). dgw checks the client and the redirect URI first (a failure
//! there is shown to the user and never redirected: the URI is not
//! trusted yet), then the rest (a failure there goes back to the client's
//! redirect URI with the RFC's error, its `state` and dgw's `iss`, RFC
//! 9207), keeps the request as a pending login and sends the user to the
//! identity provider as dgw's own OIDC client (code flow with `state`,
//! `nonce` and PKCE), binding the login to this browser with a cookie.

use base64::Engine;
use delegateos::Capability;
use serde_json::{json, Value};

use crate::code_flow::{CodeFlow, CALLBACK_PATH, PENDING_TTL_SECS};
use crate::expiring::{self, key_of};
use crate::login::{pending_cookie, Pending};
use crate::pkce::CodeChallenge;
use crate::redirect;
use crate::server::AuthorizationServer;

/// The most capabilities a `scope` may name.
const MAX_SCOPES: usize = 64;
/// The longest `state` taken (the client's, echoed back).
const MAX_STATE_BYTES: usize = 512;
/// The most bytes of a browser request's query read.
pub const MAX_QUERY_BYTES: usize = 8 * 1024;

/// What a browser endpoint answers.
#[derive(Debug, Clone, PartialEq)]
pub enum BrowserAnswer {
    /// `302 Found` to `location`, setting `cookie` when given.
    Redirect {
        location: String,
        cookie: Option<String>,
    },
    /// An error shown to the user (JSON, RFC 6749's `error`): never sent
    /// to a redirect URI that is not trusted.
    Refused { status: u16, body: Value },
}

/// An error of the authorization endpoint (RFC 6749 §4.1.2.1, RFC 8707).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthorizeError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    InvalidClient(String),
    #[error("{0}")]
    UnsupportedResponseType(String),
    #[error("{0}")]
    InvalidScope(String),
    #[error("{0}")]
    InvalidTarget(String),
    #[error("{0}")]
    AccessDenied(String),
    #[error("{0}")]
    ServerError(String),
    #[error("{0}")]
    TemporarilyUnavailable(String),
}

impl AuthorizeError {
    /// The RFC's error code, also the denial reason in metrics and audit.
    pub fn code(&self) -> &'static str {
        match self {
            AuthorizeError::InvalidRequest(_) => "invalid_request",
            AuthorizeError::InvalidClient(_) => "invalid_client",
            AuthorizeError::UnsupportedResponseType(_) => "unsupported_response_type",
            AuthorizeError::InvalidScope(_) => "invalid_scope",
            AuthorizeError::InvalidTarget(_) => "invalid_target",
            AuthorizeError::AccessDenied(_) => "access_denied",
            AuthorizeError::ServerError(_) => "server_error",
            AuthorizeError::TemporarilyUnavailable(_) => "temporarily_unavailable",
        }
    }

    /// Shown to the user, not redirected.
    pub fn shown(&self) -> BrowserAnswer {
        BrowserAnswer::Refused {
            status: match self {
                AuthorizeError::ServerError(_) => 500,
                AuthorizeError::TemporarilyUnavailable(_) => 429,
                _ => 400,
            },
            body: json!({"error": self.code(), "error_description": self.to_string()}),
        }
    }
}

impl From<expiring::KeepError> for AuthorizeError {
    fn from(e: expiring::KeepError) -> Self {
        match e {
            expiring::KeepError::Full(_) => AuthorizeError::TemporarilyUnavailable(e.to_string()),
            other => AuthorizeError::ServerError(other.to_string()),
        }
    }
}

/// Where the client is sent back to, with what it must get back.
#[derive(Debug, Clone)]
pub struct ReturnTo {
    pub redirect_uri: String,
    pub state: Option<String>,
    /// dgw's issuer (RFC 9207).
    pub iss: String,
}

impl ReturnTo {
    /// `uri` with `params`, then `state` and `iss`, in its query.
    fn location(&self, params: &[(&str, &str)]) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        query.extend_pairs(params);
        if let Some(s) = &self.state {
            query.append_pair("state", s);
        }
        query.append_pair("iss", &self.iss);
        let sep = if self.redirect_uri.contains('?') {
            '&'
        } else {
            '?'
        };
        format!("{}{sep}{}", self.redirect_uri, query.finish())
    }

    /// The code, back to the client.
    pub fn with_code(&self, code: &str) -> BrowserAnswer {
        BrowserAnswer::Redirect {
            location: self.location(&[("code", code)]),
            cookie: None,
        }
    }

    /// `error`, back to the client.
    pub fn with_error(&self, error: &AuthorizeError) -> BrowserAnswer {
        let description = error.to_string();
        BrowserAnswer::Redirect {
            location: self
                .location(&[("error", error.code()), ("error_description", &description)]),
            cookie: None,
        }
    }
}

/// A request's parameters, in order.
pub(crate) type Params = Vec<(String, String)>;

/// The query's parameters, each at most once.
pub(crate) fn query(text: Option<&str>) -> Result<Params, AuthorizeError> {
    let text = text.unwrap_or_default();
    if text.len() > MAX_QUERY_BYTES {
        return Err(AuthorizeError::InvalidRequest(format!(
            "the query is longer than {MAX_QUERY_BYTES} bytes"
        )));
    }
    crate::server::form(text.as_bytes()).map_err(|e| AuthorizeError::InvalidRequest(e.to_string()))
}

pub(crate) fn get<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    crate::server::param(params, name)
}

/// A fresh random value: 32 bytes, base64url.
pub(crate) fn random() -> Result<String, AuthorizeError> {
    let bytes =
        dgw_core::random::bytes::<32>().map_err(|e| AuthorizeError::ServerError(e.to_string()))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// `scope` as capabilities (`None`: not given, so all the grant has).
pub(crate) fn scope(text: Option<&str>) -> Result<Option<Vec<Capability>>, AuthorizeError> {
    let Some(text) = text.filter(|s| !s.trim().is_empty()) else {
        return Ok(None);
    };
    let asked: Vec<&str> = text.split(' ').filter(|s| !s.is_empty()).collect();
    if asked.len() > MAX_SCOPES {
        return Err(AuthorizeError::InvalidScope(format!(
            "at most {MAX_SCOPES} scopes"
        )));
    }
    asked
        .iter()
        .map(|s| {
            s.parse::<Capability>().map_err(|e| {
                AuthorizeError::InvalidScope(format!(
                    "{:?} is not a capability: {e}",
                    s.chars().take(64).collect::<String>()
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

impl AuthorizationServer {
    /// `GET /oauth/authorize` with `query`, from `source`.
    pub async fn authorize(&self, source: &str, query_text: Option<&str>) -> BrowserAnswer {
        let (flow, params) = match self.browser_request(source, query_text) {
            Ok(r) => r,
            Err(answer) => return answer,
        };
        // The client and its redirect URI first: until both are known
        // good, nothing is sent anywhere but back to this browser.
        let client = match flow.clients.resolve(get(&params, "client_id")).await {
            Ok(c) => c,
            Err(e) => {
                return self
                    .authorization_denied(None, &AuthorizeError::InvalidClient(e.to_string()))
            }
        };
        let redirect_uri =
            match redirect::choose(&client.redirect_uris, get(&params, "redirect_uri")) {
                Ok(_) => get(&params, "redirect_uri").unwrap_or_default().to_owned(),
                Err(e) => {
                    return self
                        .authorization_denied(None, &AuthorizeError::InvalidRequest(e.to_string()))
                }
            };
        let state = get(&params, "state").map(str::to_owned);
        let back = ReturnTo {
            redirect_uri,
            state: state.clone().filter(|s| s.len() <= MAX_STATE_BYTES),
            iss: self.issuer().to_owned(),
        };
        match self
            .start_login(flow, &client.client_id, &params, &back)
            .await
        {
            Ok(answer) => {
                self.gate().trail().event(
                    "oauth_login_started",
                    json!({"clientId": client.client_id, "clientName": client.name, "idp": flow.login.name()}),
                );
                answer
            }
            Err(e) => self.authorization_denied(Some(&back), &e),
        }
    }

    /// The rest of the request checked, the pending login kept, and the
    /// user sent to the identity provider.
    async fn start_login(
        &self,
        flow: &CodeFlow,
        client_id: &str,
        params: &[(String, String)],
        back: &ReturnTo,
    ) -> Result<BrowserAnswer, AuthorizeError> {
        if get(params, "state").is_some_and(|s| s.len() > MAX_STATE_BYTES) {
            return Err(AuthorizeError::InvalidRequest(format!(
                "state is longer than {MAX_STATE_BYTES} bytes"
            )));
        }
        match get(params, "response_type") {
            Some("code") => {}
            Some(_) => {
                return Err(AuthorizeError::UnsupportedResponseType(
                    "response_type must be code".into(),
                ))
            }
            None => {
                return Err(AuthorizeError::InvalidRequest(
                    "response_type is required".into(),
                ))
            }
        }
        if get(params, "response_mode").is_some_and(|m| m != "query") {
            return Err(AuthorizeError::InvalidRequest(
                "response_mode must be query".into(),
            ));
        }
        let challenge = CodeChallenge::parse(
            get(params, "code_challenge"),
            get(params, "code_challenge_method"),
        )
        .map_err(|e| AuthorizeError::InvalidRequest(e.to_string()))?;
        let resource = self
            .resource_of(get(params, "resource"))
            .map_err(AuthorizeError::InvalidTarget)?;
        let scope = scope(get(params, "scope"))?;
        let discovery = flow.login.idp.discovery().await.map_err(|e| {
            AuthorizeError::TemporarilyUnavailable(format!("the identity provider: {e}"))
        })?;
        let endpoint = discovery.authorization_endpoint.ok_or_else(|| {
            AuthorizeError::ServerError(
                "the identity provider's discovery names no authorization_endpoint".into(),
            )
        })?;
        let (idp_state, nonce, verifier, binding) = (random()?, random()?, random()?, random()?);
        let pending = Pending {
            client_id: client_id.to_owned(),
            redirect_uri: back.redirect_uri.clone(),
            state: back.state.clone(),
            challenge: challenge.as_str().to_owned(),
            resource,
            scope: scope.map(|s| s.iter().map(Capability::to_string).collect()),
            nonce: nonce.clone(),
            verifier: verifier.clone(),
            binding: key_of(&binding),
            idp: flow.login.name().to_owned(),
        };
        let key = key_of(&idp_state);
        let mut doc = serde_json::to_value(&pending)
            .map_err(|e| AuthorizeError::ServerError(e.to_string()))?;
        doc["exp"] = json!(expiring::now() + PENDING_TTL_SECS);
        flow.pending.put(&key, &doc).await?;
        let idp_challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(<sha2::Sha256 as sha2::Digest>::digest(verifier.as_bytes()));
        let redirect_uri = format!("{}{CALLBACK_PATH}", self.issuer());
        let query = form_urlencoded::Serializer::new(String::new())
            .extend_pairs([
                ("response_type", "code"),
                ("client_id", flow.login.client_id.as_str()),
                ("redirect_uri", redirect_uri.as_str()),
                ("scope", "openid"),
                ("state", idp_state.as_str()),
                ("nonce", nonce.as_str()),
                ("code_challenge", idp_challenge.as_str()),
                ("code_challenge_method", "S256"),
            ])
            .finish();
        let sep = if endpoint.contains('?') { '&' } else { '?' };
        Ok(BrowserAnswer::Redirect {
            location: format!("{endpoint}{sep}{query}"),
            cookie: Some(pending_cookie(
                &key,
                &binding,
                self.issuer().starts_with("https://"),
            )),
        })
    }

    /// A browser's request to the code flow: the flow (when on), within
    /// the source's rate, and its query's parameters; else the refusal
    /// shown.
    pub(crate) fn browser_request(
        &self,
        source: &str,
        query_text: Option<&str>,
    ) -> Result<(&CodeFlow, Params), BrowserAnswer> {
        let Some(flow) = self.code_flow() else {
            return Err(AuthorizeError::InvalidRequest(
                "the authorization code flow is off".into(),
            )
            .shown());
        };
        if !flow.by_source.allow(source, std::time::Instant::now()) {
            return Err(self.authorization_denied(
                None,
                &AuthorizeError::TemporarilyUnavailable(
                    "too many requests from this address; try again in a minute".into(),
                ),
            ));
        }
        let params = query(query_text).map_err(|e| self.authorization_denied(None, &e))?;
        Ok((flow, params))
    }

    /// A refusal: counted, recorded, and sent back to the client when its
    /// redirect URI is trusted (`back`), else shown.
    pub(crate) fn authorization_denied(
        &self,
        back: Option<&ReturnTo>,
        error: &AuthorizeError,
    ) -> BrowserAnswer {
        crate::metrics::authorization_denied(error.code());
        self.gate().trail().event(
            "oauth_authorization_denied",
            json!({"error": error.code(), "detail": error.to_string()}),
        );
        tracing::info!(error = error.code(), detail = %error, "oauth authorization refused");
        match back {
            Some(b) => b.with_error(error),
            None => error.shown(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_gets_its_state_and_dgws_issuer_back() {
        let back = ReturnTo {
            redirect_uri: "http://127.0.0.1:5/cb?x=1".into(),
            state: Some("a b&c".into()),
            iss: "https://dgw.example".into(),
        };
        let BrowserAnswer::Redirect { location, .. } = back.with_code("C") else {
            panic!()
        };
        assert_eq!(
            location,
            "http://127.0.0.1:5/cb?x=1&code=C&state=a+b%26c&iss=https%3A%2F%2Fdgw.example"
        );
        let BrowserAnswer::Redirect { location, .. } =
            back.with_error(&AuthorizeError::InvalidScope("wide".into()))
        else {
            panic!()
        };
        assert!(location.starts_with(
            "http://127.0.0.1:5/cb?x=1&error=invalid_scope&error_description=wide&state="
        ));
    }

    #[test]
    fn scopes_are_capabilities() {
        assert_eq!(scope(None).unwrap(), None);
        assert_eq!(scope(Some(" ")).unwrap(), None);
        assert_eq!(scope(Some("a:b:c d:e:f")).unwrap().unwrap().len(), 2);
        assert!(matches!(
            scope(Some("openid")),
            Err(AuthorizeError::InvalidScope(_))
        ));
        let many = vec!["a:b:c"; 65].join(" ");
        assert!(matches!(
            scope(Some(&many)),
            Err(AuthorizeError::InvalidScope(_))
        ));
    }
}
