//! `GET /oauth/callback`: the identity provider sends the user back here
//! with its code and dgw's `state`. The pending login is taken (once: a
//! replayed or unknown `state` is refused and shown, never redirected),
//! the browser must be the one that started it (its cookie), the
//! provider's `iss` must be its own (RFC 9207), its code is exchanged at
//! its token endpoint with dgw's secret and PKCE verifier, and the ID
//! token verified ([`crate::idp`]) with the login's `nonce`. The claims
//! choose the first grant that applies; dgw then sends the client a
//! short-lived, single-use code bound to it, its PKCE challenge, its
//! redirect URI, the resource and the scope granted ([`crate::code`]).

use delegateos::Capability;
use dgw_net::outbound::OutboundError;
use serde_json::{json, Value};
use subtle::ConstantTimeEq;

use crate::authorize::{get, random, AuthorizeError, BrowserAnswer, ReturnTo};
use crate::code::{Code, CODE_TTL_SECS};
use crate::code_flow::{CodeFlow, CALLBACK_PATH};
use crate::expiring::{self, key_of};
use crate::idp::IdpError;
use crate::login::{bound, Pending};
use crate::server::{AuthorizationServer, TokenError};

impl AuthorizationServer {
    /// `GET /oauth/callback` with `query` and the request's `Cookie`.
    pub async fn callback(
        &self,
        source: &str,
        query_text: Option<&str>,
        cookie: Option<&str>,
    ) -> BrowserAnswer {
        let (flow, params) = match self.browser_request(source, query_text) {
            Ok(r) => r,
            Err(answer) => return answer,
        };
        let Some(state) = get(&params, "state") else {
            return self.authorization_denied(
                None,
                &AuthorizeError::InvalidRequest("state is required".into()),
            );
        };
        let key = key_of(state);
        let pending = match flow.pending.take(&key).await {
            Ok(Some(doc)) => serde_json::from_value::<Pending>(doc).ok(),
            Ok(None) => None,
            Err(e) => {
                return self.authorization_denied(None, &AuthorizeError::ServerError(e.to_string()))
            }
        };
        let Some(pending) = pending else {
            return self.authorization_denied(
                None,
                &AuthorizeError::InvalidRequest(
                    "state names no pending login (unknown, used or expired)".into(),
                ),
            );
        };
        if !bound(cookie, &key, &pending.binding) {
            return self.authorization_denied(
                None,
                &AuthorizeError::InvalidRequest("this browser did not start this login".into()),
            );
        }
        let back = ReturnTo {
            redirect_uri: pending.redirect_uri.clone(),
            state: pending.state.clone(),
            iss: self.issuer().to_owned(),
        };
        match self.finish_login(flow, &pending, &params).await {
            Ok((code, subject)) => {
                crate::metrics::code_issued(flow.login.name());
                self.gate().trail().event(
                    "oauth_code_issued",
                    json!({"clientId": pending.client_id, "subject": subject, "idp": pending.idp}),
                );
                back.with_code(&code)
            }
            Err(e) => self.authorization_denied(Some(&back), &e),
        }
    }

    /// The provider's answer judged; the code for the client and the
    /// subject it is for.
    async fn finish_login(
        &self,
        flow: &CodeFlow,
        pending: &Pending,
        params: &[(String, String)],
    ) -> Result<(String, String), AuthorizeError> {
        let idp = &flow.login.idp;
        let denied = |why: String| AuthorizeError::AccessDenied(why);
        if let Some(iss) = get(params, "iss") {
            if iss != idp.issuer() {
                return Err(denied(
                    "the authorization response names another issuer than the identity provider"
                        .into(),
                ));
            }
        }
        if let Some(error) = get(params, "error") {
            let known =
                error.len() <= 64 && error.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
            return Err(denied(format!(
                "the identity provider answered {}",
                if known { error } else { "an error" }
            )));
        }
        let code = get(params, "code")
            .ok_or_else(|| denied("the identity provider sent no code".into()))?;
        let discovery = idp.discovery().await.map_err(|e| {
            AuthorizeError::TemporarilyUnavailable(format!("the identity provider: {e}"))
        })?;
        let token_endpoint = discovery.token_endpoint.ok_or_else(|| {
            AuthorizeError::ServerError(
                "the identity provider's discovery names no token_endpoint".into(),
            )
        })?;
        let redirect_uri = format!("{}{CALLBACK_PATH}", self.issuer());
        let answer = flow
            .login
            .http
            .post_form(
                &token_endpoint,
                &[
                    ("grant_type", "authorization_code"),
                    ("code", code),
                    ("redirect_uri", &redirect_uri),
                    ("code_verifier", &pending.verifier),
                ],
                Some((&flow.login.client_id, &flow.login.client_secret)),
            )
            .await
            .map_err(|e| match e {
                OutboundError::Status(400 | 401) => {
                    denied("the identity provider refused its code".into())
                }
                other => AuthorizeError::TemporarilyUnavailable(format!(
                    "the identity provider's token endpoint: {other}"
                )),
            })?;
        let id_token = answer
            .get("id_token")
            .and_then(Value::as_str)
            .ok_or_else(|| denied("the identity provider sent no ID token".into()))?;
        let claims = idp
            .verify(id_token, &flow.login.client_id, None)
            .await
            .map_err(|e| match e {
                IdpError::Token(t) => denied(format!("the ID token: {t}")),
                other => AuthorizeError::TemporarilyUnavailable(other.to_string()),
            })?;
        let nonce_ok = claims
            .str("nonce")
            .is_some_and(|n| bool::from(n.as_bytes().ct_eq(pending.nonce.as_bytes())));
        if !nonce_ok {
            return Err(denied("the ID token's nonce is not this login's".into()));
        }
        if claims
            .str("azp")
            .is_some_and(|azp| azp != flow.login.client_id)
        {
            return Err(denied("the ID token was issued to another client".into()));
        }
        let trusted = self.trusted(idp.name()).ok_or_else(|| {
            AuthorizeError::ServerError("the identity provider is not a trusted one".into())
        })?;
        let (grant, subject) = self
            .grant_for(trusted, &claims, TokenError::AccessDenied)
            .map_err(|e| denied(e.to_string()))?;
        let index = trusted
            .grants
            .iter()
            .position(|g| std::ptr::eq(g, grant))
            .unwrap_or(usize::MAX);
        let scope = granted_scope(pending.scope.as_deref(), &grant.policy.capabilities)?;
        let code = random()?;
        let record = Code {
            client_id: pending.client_id.clone(),
            redirect_uri: pending.redirect_uri.clone(),
            challenge: pending.challenge.clone(),
            resource: pending.resource.clone(),
            scope: scope.iter().map(Capability::to_string).collect(),
            subject: subject.clone(),
            idp: idp.name().to_owned(),
            grant: index,
            used: false,
            family: None,
        };
        let mut doc = serde_json::to_value(&record)
            .map_err(|e| AuthorizeError::ServerError(e.to_string()))?;
        doc["exp"] = json!(expiring::now() + CODE_TTL_SECS);
        flow.codes.put(&key_of(&code), &doc).await?;
        Ok((code, subject))
    }
}

/// The scope a code carries: what was asked for that the grant covers
/// (RFC 6749 §3.3 lets the server grant less; the token answer says
/// what), or all the grant has when nothing was asked; nothing covered
/// is `invalid_scope` (decision 473).
fn granted_scope(
    asked: Option<&[String]>,
    grant: &[Capability],
) -> Result<Vec<Capability>, AuthorizeError> {
    let Some(asked) = asked else {
        return Ok(grant.to_vec());
    };
    let covered: Vec<Capability> = asked
        .iter()
        .filter_map(|s| s.parse::<Capability>().ok())
        .filter(|c| c.is_covered_by(grant))
        .collect();
    if covered.is_empty() {
        return Err(AuthorizeError::InvalidScope(
            "none of the scopes asked for is within the user's grant".into(),
        ));
    }
    Ok(covered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scope_granted_is_what_was_asked_within_the_grant() {
        let grant: Vec<Capability> = vec!["docs:read:/p/**".parse().unwrap()];
        assert_eq!(granted_scope(None, &grant).unwrap(), grant);
        let asked = vec!["docs:read:/p/a".to_owned(), "docs:write:/p/a".to_owned()];
        assert_eq!(
            granted_scope(Some(&asked), &grant).unwrap(),
            vec!["docs:read:/p/a".parse::<Capability>().unwrap()]
        );
        let wider = vec!["docs:read:/**".to_owned()];
        assert!(matches!(
            granted_scope(Some(&wider), &grant),
            Err(AuthorizeError::InvalidScope(_))
        ));
    }
}
