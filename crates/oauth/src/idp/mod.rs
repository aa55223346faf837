//! A trusted identity provider (`[[oauth.identity_providers]]`): its keys,
//! found by OpenID discovery from its `issuer` (or a configured
//! `jwks_uri`), fetched through dgw-net's outbound client with a size and
//! a time limit, cached, and fetched again when a token names a `kid` the
//! cache lacks, at most once per [`REFRESH_MIN_INTERVAL`]; and the tokens
//! it signs verified by [`crate::jwt`]. The caller says which audience and
//! type a token must have, and checks what only it knows (an ID token's
//! `nonce`, an assertion's `jti`).

use std::time::{Duration, Instant};

use dgw_net::outbound::{JsonClient, OutboundError};
use jsonwebtoken::jwk::JwkSet;
use serde_json::Value;
use tokio::sync::Mutex;

use crate::jwt::{self, Claims, Expect, JwtError};

/// How long a fetch of discovery or keys may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The most bytes of a discovery document or key set.
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// The most keys a key set may hold.
pub const MAX_KEYS: usize = 64;
/// The least time between two fetches of the keys.
pub const REFRESH_MIN_INTERVAL: Duration = Duration::from_secs(30);
/// How long fetched keys are used before they are fetched again.
pub const KEYS_MAX_AGE: Duration = Duration::from_secs(3600);

/// Why an identity provider's token is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdpError {
    /// The token itself is wrong: the caller's fault.
    #[error("{0}")]
    Token(#[from] JwtError),
    /// The provider's documents could not be had: nobody's fault here.
    #[error("identity provider {idp:?}: {detail}")]
    Unavailable { idp: String, detail: String },
}

/// What discovery says about the provider (OpenID Connect Discovery 1.0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    pub jwks_uri: String,
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: Option<String>,
}

#[derive(Default)]
struct Cache {
    discovery: Option<Discovery>,
    keys: Option<(JwkSet, Instant)>,
    last_fetch: Option<Instant>,
}

/// One identity provider dgw trusts.
pub struct IdentityProvider {
    name: String,
    issuer: String,
    jwks_uri: Option<String>,
    audience: String,
    client: JsonClient,
    /// Held across a fetch, so concurrent verifications fetch once.
    cache: Mutex<Cache>,
}

impl std::fmt::Debug for IdentityProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityProvider")
            .field("name", &self.name)
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

/// `url` as dgw fetches from an identity provider: https, or http on
/// loopback (tests), without credentials in it.
pub fn is_fetchable(url: &str) -> bool {
    let Ok(uri) = JsonClient::check_endpoint(url) else {
        return false;
    };
    let loopback = matches!(uri.host(), Some("localhost" | "127.0.0.1" | "[::1]"));
    let userinfo = uri.authority().is_some_and(|a| a.as_str().contains('@'));
    !userinfo && (uri.scheme_str() == Some("https") || loopback)
}

impl IdentityProvider {
    /// `jwks_uri` instead of discovery when given; `audience` is the `aud`
    /// its tokens carry for dgw.
    pub fn new(name: &str, issuer: &str, jwks_uri: Option<&str>, audience: &str) -> Self {
        Self {
            name: name.to_owned(),
            issuer: issuer.to_owned(),
            jwks_uri: jwks_uri.map(str::to_owned),
            audience: audience.to_owned(),
            client: JsonClient::new(FETCH_TIMEOUT).with_max_answer_bytes(MAX_DOCUMENT_BYTES),
            cache: Mutex::new(Cache::default()),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The `aud` its tokens must carry for dgw.
    pub fn audience(&self) -> &str {
        &self.audience
    }

    fn unavailable(&self, detail: String) -> IdpError {
        IdpError::Unavailable {
            idp: self.name.clone(),
            detail,
        }
    }

    /// The provider's discovery document, fetched once (its `issuer` must
    /// be the configured one, exactly).
    pub async fn discovery(&self) -> Result<Discovery, IdpError> {
        let mut cache = self.cache.lock().await;
        self.discovered(&mut cache).await
    }

    async fn discovered(&self, cache: &mut Cache) -> Result<Discovery, IdpError> {
        if let Some(d) = &cache.discovery {
            return Ok(d.clone());
        }
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.issuer.trim_end_matches('/')
        );
        let doc = self
            .client
            .get(&url)
            .await
            .map_err(|e| self.unavailable(format!("discovery at {url}: {e}")))?;
        if doc.get("issuer").and_then(Value::as_str) != Some(self.issuer.as_str()) {
            return Err(self.unavailable(format!(
                "discovery at {url} names another issuer than {:?}",
                self.issuer
            )));
        }
        let endpoint = |name: &str| -> Result<Option<String>, IdpError> {
            match doc.get(name) {
                None => Ok(None),
                Some(Value::String(u)) if is_fetchable(u) => Ok(Some(u.clone())),
                Some(_) => Err(self.unavailable(format!(
                    "discovery's {name} is not an https URL (http only on loopback)"
                ))),
            }
        };
        let jwks_uri = match &self.jwks_uri {
            Some(u) => Some(u.clone()),
            None => endpoint("jwks_uri")?,
        }
        .ok_or_else(|| self.unavailable("discovery names no jwks_uri".into()))?;
        let found = Discovery {
            jwks_uri,
            authorization_endpoint: endpoint("authorization_endpoint")?,
            token_endpoint: endpoint("token_endpoint")?,
        };
        cache.discovery = Some(found.clone());
        Ok(found)
    }

    /// Fetches the key set (at most once per [`REFRESH_MIN_INTERVAL`]);
    /// on a failure the keys held stay.
    async fn refresh(&self, cache: &mut Cache) -> Result<(), IdpError> {
        let now = Instant::now();
        if cache
            .last_fetch
            .is_some_and(|t| now.duration_since(t) < REFRESH_MIN_INTERVAL)
        {
            return Ok(());
        }
        cache.last_fetch = Some(now);
        let uri = match &self.jwks_uri {
            Some(u) => u.clone(),
            None => self.discovered(cache).await?.jwks_uri,
        };
        let doc = self
            .client
            .get(&uri)
            .await
            .map_err(|e: OutboundError| self.unavailable(format!("keys at {uri}: {e}")))?;
        let set =
            parse_key_set(doc).map_err(|e| self.unavailable(format!("keys at {uri}: {e}")))?;
        cache.keys = Some((set, now));
        Ok(())
    }

    /// Verifies `token` as signed by this provider for `audience` (its
    /// configured one for tokens presented to dgw; dgw's client ID at the
    /// provider for the code flow's ID token), with the header `typ` when
    /// given. The claims are the caller's to judge further.
    pub async fn verify(
        &self,
        token: &str,
        audience: &str,
        typ: Option<&str>,
    ) -> Result<Claims, IdpError> {
        let header = jwt::header(token)?;
        let mut cache = self.cache.lock().await;
        let stale = cache
            .keys
            .as_ref()
            .is_none_or(|(_, at)| at.elapsed() > KEYS_MAX_AGE);
        if stale {
            let first = cache.keys.is_none();
            match self.refresh(&mut cache).await {
                Err(e) if first => return Err(e),
                Err(e) => tracing::warn!(idp = %self.name, error = %e, "keeping the keys held"),
                Ok(()) => {}
            }
        }
        if cache.keys.is_none() {
            return Err(self.unavailable("no keys fetched yet; retrying shortly".into()));
        }
        let held = |cache: &Cache| {
            cache
                .keys
                .as_ref()
                .and_then(|(set, _)| jwt::find_key(set, &header).cloned())
        };
        let key = match held(&cache) {
            Some(k) => k,
            None => {
                // Perhaps rotated: fetch again, within the rate bound.
                if let Err(e) = self.refresh(&mut cache).await {
                    tracing::warn!(idp = %self.name, error = %e, "refreshing keys for an unknown kid");
                }
                held(&cache).ok_or_else(|| {
                    JwtError::UnknownKey(header.kid.clone().unwrap_or_else(|| "-".into()))
                })?
            }
        };
        drop(cache);
        let expect = Expect {
            issuer: &self.issuer,
            audience,
            typ,
            max_lifetime_secs: None,
            now: time::OffsetDateTime::now_utc().unix_timestamp(),
        };
        Ok(jwt::verify(token, &header, &key, &expect)?)
    }
}

/// A JWK Set document, bounded to [`MAX_KEYS`] keys; symmetric (`oct`)
/// keys, and keys of a type jsonwebtoken does not know, are left out
/// rather than failing the set: a shared secret is never a provider's key.
pub fn parse_key_set(doc: Value) -> Result<JwkSet, String> {
    let keys = doc
        .get("keys")
        .and_then(Value::as_array)
        .ok_or("not a JWK Set (no keys array)")?;
    if keys.len() > MAX_KEYS {
        return Err(format!("more than {MAX_KEYS} keys"));
    }
    let keys = keys
        .iter()
        .filter(|k| k.get("kty").and_then(Value::as_str) != Some("oct"))
        .filter_map(|k| serde_json::from_value(k.clone()).ok())
        .collect();
    Ok(JwkSet { keys })
}

#[cfg(test)]
mod tests;
