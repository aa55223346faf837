//! `private_key_jwt` (RFC 7523 §2.2 and §3): a registered client with
//! `jwks` proves itself with a JWT it signed: `iss` = `sub` = its
//! `client_id`, `aud` the token endpoint, `exp` at most
//! [`ASSERTION_MAX_LIFETIME_SECS`] away, and a `jti` used once. Any fault
//! is `invalid_client`, saying what was wrong, never the assertion.

use super::identity::{now, unverified_issuer, ASSERTION_MAX_LIFETIME_SECS};
use super::request::param;
use super::{AuthorizationServer, Client, ClientAuth, TokenError};
use crate::jwt::{self, Expect};

/// The only `client_assertion_type` (RFC 7523 §2.2).
pub const CLIENT_ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

impl AuthorizationServer {
    /// The client a `client_assertion` authenticates.
    pub(crate) async fn asserted_client(
        &self,
        form: &[(String, String)],
    ) -> Result<&Client, TokenError> {
        match param(form, "client_assertion_type") {
            Some(CLIENT_ASSERTION_TYPE) => {}
            _ => {
                return Err(TokenError::InvalidRequest(format!(
                    "client_assertion_type must be {CLIENT_ASSERTION_TYPE}"
                )))
            }
        }
        let assertion = param(form, "client_assertion").ok_or_else(|| {
            TokenError::InvalidRequest("client_assertion_type without client_assertion".into())
        })?;
        let refused = |why: String| {
            tracing::info!(reason = %why, "a client assertion refused");
            TokenError::InvalidClient { basic: false }
        };
        let id = unverified_issuer(assertion)
            .ok_or_else(|| refused("the assertion has no iss".into()))?;
        if param(form, "client_id").is_some_and(|named| named != id) {
            return Err(TokenError::InvalidRequest(
                "client_id differs from the assertion's iss".into(),
            ));
        }
        let (client, keys) = self
            .clients
            .iter()
            .find_map(|c| match &c.auth {
                ClientAuth::Jwks(keys) if c.client_id == id => Some((c, keys)),
                _ => None,
            })
            .ok_or_else(|| refused("no client with jwks has this client_id".into()))?;
        let header = jwt::header(assertion).map_err(|e| refused(e.to_string()))?;
        let key = jwt::find_key(keys, &header)
            .ok_or_else(|| refused("no key of the client matches the assertion's kid".into()))?;
        let audience = self.token_endpoint();
        let claims = jwt::verify(
            assertion,
            &header,
            key,
            &Expect {
                issuer: &client.client_id,
                audience: &audience,
                typ: None,
                max_lifetime_secs: Some(ASSERTION_MAX_LIFETIME_SECS),
                now: now(),
            },
        )
        .map_err(|e| refused(e.to_string()))?;
        if claims.str("sub") != Some(client.client_id.as_str()) {
            return Err(refused("the assertion's sub is not its iss".into()));
        }
        // Last: a refused assertion is not remembered.
        self.use_jti(&format!("client:{}", client.client_id), &claims, |why| {
            tracing::info!(reason = %why, "a client assertion refused");
            TokenError::InvalidClient { basic: false }
        })
        .await?;
        Ok(client)
    }
}

/// A client's `jwks`: public signing keys jsonwebtoken can use, never a
/// private or a symmetric key (a secret in the config's clear text).
pub fn client_key_set(jwks: serde_json::Value) -> Result<jsonwebtoken::jwk::JwkSet, String> {
    let keys = jwks
        .get("keys")
        .and_then(serde_json::Value::as_array)
        .ok_or("must be a JWK Set: { keys = [ ... ] }")?;
    for k in keys {
        if k.get("d").is_some() || k.get("kty").and_then(|t| t.as_str()) == Some("oct") {
            return Err("holds a private or symmetric key: give only the public keys".into());
        }
    }
    let given = keys.len();
    let set = crate::idp::parse_key_set(jwks)?;
    if set.keys.is_empty() || set.keys.len() != given {
        return Err("must hold public signing keys (RSA, EC or OKP), each readable".into());
    }
    Ok(set)
}
