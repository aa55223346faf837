//! OAuth 2.0 client credentials (RFC 6749 §4.4) toward an HTTP upstream:
//! dgw fetches a bearer token from the token endpoint with its own client
//! secret, caches it until shortly before it expires, and fetches anew
//! once when the upstream answers 401. The token endpoint's answer is as
//! hostile as anything else: bounded, and only a bearer token is taken.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use hyper::{Request, Uri};
use serde_json::Value;

use super::secret::Secret;

/// The most dgw reads of a token endpoint's answer.
pub const MAX_TOKEN_RESPONSE_BYTES: usize = 64 * 1024;
/// A token is refetched this long before it expires (or a tenth of its
/// lifetime, whichever is smaller).
const REFRESH_MARGIN: Duration = Duration::from_secs(30);

/// What the config says about one upstream's OAuth client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthConfig {
    pub token_url: Uri,
    pub client_id: String,
    pub client_secret: Secret,
    pub scope: Option<String>,
    pub audience: Option<String>,
    /// The upstream's `timeout`; each fetch gets nine tenths of it.
    pub timeout: Duration,
}

/// A client-credentials client with its token cache. Clones share the
/// cache; equality is the configuration's.
#[derive(Debug, Clone)]
pub struct OAuth {
    pub config: OAuthConfig,
    /// Held across a fetch, so concurrent calls share one.
    cache: Arc<tokio::sync::Mutex<Option<Cached>>>,
    /// Every token handed out so far, for scrubbing from answers.
    issued: Arc<Mutex<Vec<Arc<str>>>>,
}

impl PartialEq for OAuth {
    fn eq(&self, other: &Self) -> bool {
        self.config == other.config
    }
}
impl Eq for OAuth {}

#[derive(Debug)]
struct Cached {
    token: Arc<str>,
    /// `None`: no `expires_in` was given; used until a 401.
    refresh_at: Option<Instant>,
}

/// Why no token could be had. Never carries the secret or a token.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("the token endpoint could not be reached: {0}")]
    Unreachable(String),
    #[error("the token endpoint gave no answer within {}", dgw_core::units::show_duration(*.0))]
    Timeout(Duration),
    #[error("the token endpoint answered HTTP {status}{}", error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default())]
    Refused { status: u16, error: Option<String> },
    #[error("the token endpoint's answer is unusable: {0}")]
    Malformed(&'static str),
}

impl OAuth {
    pub fn new(config: OAuthConfig) -> Self {
        Self {
            config,
            cache: Arc::default(),
            issued: Arc::default(),
        }
    }

    /// A token to present: the cached one while it is fresh, else a new one.
    pub async fn token(&self, client: &dgw_net::tls::HttpClient) -> Result<Arc<str>, TokenError> {
        let mut cache = self.cache.lock().await;
        if let Some(c) = cache.as_ref() {
            if c.refresh_at.is_none_or(|at| Instant::now() < at) {
                return Ok(c.token.clone());
            }
        }
        // Nine tenths of the call's own timeout, so that a call waiting on
        // a stuck endpoint is answered `upstream_unavailable` (nothing sent,
        // nothing charged) before the call's timeout would answer it.
        let limit = self.config.timeout.mul_f64(0.9);
        let fetched = tokio::time::timeout(limit, self.fetch(client))
            .await
            .map_err(|_| TokenError::Timeout(limit))??;
        let token = fetched.token.clone();
        {
            let mut issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
            // Bounded: the oldest tokens have long expired.
            if issued.len() >= 16 {
                issued.remove(0);
            }
            issued.push(token.clone());
        }
        *cache = Some(fetched);
        Ok(token)
    }

    /// Forgets `used` after the upstream refused it (a newer token fetched
    /// meanwhile by another call is kept).
    pub async fn refused(&self, used: &str) {
        let mut cache = self.cache.lock().await;
        if cache.as_ref().is_some_and(|c| &*c.token == used) {
            *cache = None;
        }
    }

    /// The tokens handed to the upstream, to scrub from what it sends back.
    pub fn issued(&self) -> Vec<Arc<str>> {
        self.issued
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    async fn fetch(&self, client: &dgw_net::tls::HttpClient) -> Result<Cached, TokenError> {
        let c = &self.config;
        let mut form = vec![("grant_type", "client_credentials")];
        if let Some(s) = &c.scope {
            form.push(("scope", s));
        }
        if let Some(a) = &c.audience {
            form.push(("audience", a));
        }
        let body = form
            .iter()
            .map(|(k, v)| format!("{k}={}", form_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        // client_secret_basic: each part form-encoded first (RFC 6749 §2.3.1).
        let basic = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            form_encode(&c.client_id),
            form_encode(c.client_secret.expose())
        ));
        let mut auth = HeaderValue::from_str(&format!("Basic {basic}"))
            .map_err(|_| TokenError::Malformed("credentials"))?;
        auth.set_sensitive(true);
        let req = Request::post(c.token_url.clone())
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json")
            .header(AUTHORIZATION, auth)
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| TokenError::Unreachable(e.to_string()))?;
        let resp = client.request(req).await.map_err(|e| {
            TokenError::Unreachable(
                std::error::Error::source(&e)
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| e.to_string()),
            )
        })?;
        let status = resp.status();
        let bytes = Limited::new(resp.into_body(), MAX_TOKEN_RESPONSE_BYTES)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .map_err(|_| TokenError::Malformed("over 64 KiB, or cut short"))?;
        let value: Option<Value> = serde_json::from_slice(&bytes).ok();
        if !status.is_success() {
            // Only an RFC 6749 §5.2 error code is shown, never free text.
            let error = value
                .as_ref()
                .and_then(|v| v.get("error"))
                .and_then(Value::as_str)
                .filter(|e| {
                    !e.is_empty()
                        && e.len() <= 40
                        && e.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                })
                .map(str::to_owned);
            return Err(TokenError::Refused {
                status: status.as_u16(),
                error,
            });
        }
        parse_token(
            value.as_ref().ok_or(TokenError::Malformed("not JSON"))?,
            Instant::now(),
        )
    }
}

/// A bearer token out of a successful answer (RFC 6749 §5.1).
fn parse_token(v: &Value, now: Instant) -> Result<Cached, TokenError> {
    let kind = v
        .get("token_type")
        .and_then(Value::as_str)
        .ok_or(TokenError::Malformed("no token_type"))?;
    if !kind.eq_ignore_ascii_case("bearer") {
        return Err(TokenError::Malformed("token_type is not bearer"));
    }
    let token = v
        .get("access_token")
        .and_then(Value::as_str)
        .ok_or(TokenError::Malformed("no access_token string"))?;
    // RFC 6750 b64token: what may stand in an Authorization header.
    let ok = !token.is_empty()
        && token.len() <= 8192
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b));
    if !ok {
        return Err(TokenError::Malformed("access_token is not a bearer token"));
    }
    let refresh_at = match v.get("expires_in") {
        None | Some(Value::Null) => None,
        Some(e) => {
            let secs = e
                .as_u64()
                .ok_or(TokenError::Malformed("expires_in is not a whole number"))?
                .min(365 * 24 * 3600);
            let life = Duration::from_secs(secs);
            Some(now + life.saturating_sub(REFRESH_MARGIN.min(life / 10)))
        }
    };
    Ok(Cached {
        token: token.into(),
        refresh_at,
    })
}

/// `application/x-www-form-urlencoded` (unreserved kept, space as `+`).
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn refresh_margin_is_30s_or_a_tenth_of_the_lifetime() {
        let now = Instant::now();
        let c = parse_token(
            &json!({"token_type":"Bearer","access_token":"a","expires_in":3600}),
            now,
        )
        .unwrap();
        assert_eq!(c.refresh_at, Some(now + Duration::from_secs(3570)));
        let c = parse_token(
            &json!({"token_type":"bearer","access_token":"a","expires_in":100}),
            now,
        )
        .unwrap();
        assert_eq!(c.refresh_at, Some(now + Duration::from_secs(90)));
        let c = parse_token(&json!({"token_type":"BEARER","access_token":"a"}), now).unwrap();
        assert_eq!(c.refresh_at, None);
    }

    #[test]
    fn hostile_token_answers_are_refused() {
        let now = Instant::now();
        for bad in [
            json!({"token_type":"mac","access_token":"a"}),
            json!({"access_token":"a"}),
            json!({"token_type":"Bearer","access_token":5}),
            json!({"token_type":"Bearer","access_token":""}),
            json!({"token_type":"Bearer","access_token":"a\r\nX-Evil: 1"}),
            json!({"token_type":"Bearer","access_token":"a","expires_in":-1}),
            json!({"token_type":"Bearer","access_token":"a","expires_in":"60"}),
            json!(["token_type"]),
        ] {
            assert!(parse_token(&bad, now).is_err(), "{bad}");
        }
    }

    #[test]
    fn form_encoding_escapes_everything_but_unreserved() {
        assert_eq!(form_encode("a b:c/d%é"), "a+b%3Ac%2Fd%25%C3%A9");
    }
}
