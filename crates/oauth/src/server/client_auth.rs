//! Client authentication at the token endpoint: a client secret (HTTP
//! Basic or in the form; every registered digest compared in constant
//! time) or a signed assertion (`private_key_jwt`, [`super::assertion`]);
//! one method at most.

use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::request::param;
use super::{AuthorizationServer, Client, ClientAuth, TokenError};

impl AuthorizationServer {
    /// The client the request authenticates as, if it tries: `None` for a
    /// request that names no credential (a public client).
    pub(crate) async fn authenticate(
        &self,
        authorization: Option<&str>,
        form: &[(String, String)],
    ) -> Result<Option<&Client>, TokenError> {
        let basic = authorization.is_some_and(|a| {
            a.trim()
                .split_once(' ')
                .is_some_and(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
        });
        let asserted = param(form, "client_assertion").is_some()
            || param(form, "client_assertion_type").is_some();
        let secret = param(form, "client_secret").is_some();
        if [basic, asserted, secret].iter().filter(|m| **m).count() > 1 {
            return Err(TokenError::InvalidRequest(
                "the client authenticates once: Basic, client_secret or client_assertion, not two"
                    .into(),
            ));
        }
        if asserted {
            return self.asserted_client(form).await.map(Some);
        }
        if basic || secret {
            return self.client(authorization, form).map(Some);
        }
        Ok(None)
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
            let same_secret = match &c.auth {
                ClientAuth::Secret(sha256) => sha256.ct_eq(&digest),
                ClientAuth::Jwks(_) => subtle::Choice::from(0),
            };
            if bool::from(same_id & same_secret) {
                found = Some(c);
            }
        }
        found.ok_or(TokenError::InvalidClient { basic })
    }
}
