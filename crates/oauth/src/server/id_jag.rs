//! The JWT bearer grant (RFC 7523 §2.1) with an Identity Assertion JWT
//! Authorization Grant (ID-JAG: the MCP enterprise-managed authorization
//! extension, draft-ietf-oauth-identity-assertion-authz-grant): the
//! enterprise's identity provider signed, for dgw's issuer as audience and
//! for one client of dgw, that its user may have a token. Checked as the
//! draft says: header `typ` `oauth-id-jag+jwt`, `aud` dgw's issuer,
//! `client_id` the authenticated client, `resource` (when given) dgw's;
//! its `jti` is used once (kept until it expires), its lifetime bounded.
//! Its `scope` (when given) and the request's narrow the grant. Any fault
//! is `invalid_grant` (RFC 7523 §3.1), `access_denied` when no grant
//! matches.

use super::identity::{idp_error, ASSERTION_MAX_LIFETIME_SECS};
use super::request::param;
use super::{grant, AuthorizationServer, Client, Issued, TokenError};

/// The header `typ` of an ID-JAG.
pub const ID_JAG_TYPE: &str = "oauth-id-jag+jwt";

impl AuthorizationServer {
    pub(crate) async fn jwt_bearer(
        &self,
        client: &Client,
        form: &[(String, String)],
    ) -> Result<Issued, TokenError> {
        let bad = TokenError::InvalidGrant;
        let assertion = param(form, "assertion")
            .ok_or_else(|| TokenError::InvalidRequest("assertion is required".into()))?;
        self.check_resource(param(form, "resource"))?;
        let idp = self.provider_of(assertion).ok_or_else(|| {
            bad("the assertion's issuer is not a trusted identity provider".into())
        })?;
        let claims = idp
            .provider
            .verify(assertion, self.resource.public_url(), Some(ID_JAG_TYPE))
            .await
            .map_err(|e| idp_error(e, TokenError::InvalidGrant))?;
        let lifetime = claims
            .time("iat")
            .ok()
            .flatten()
            .map(|iat| claims.exp().saturating_sub(iat));
        if lifetime.is_none_or(|l| l > ASSERTION_MAX_LIFETIME_SECS) {
            return Err(bad(format!(
                "an ID-JAG may live at most {ASSERTION_MAX_LIFETIME_SECS} seconds"
            )));
        }
        if claims.str("client_id") != Some(client.client_id.as_str()) {
            return Err(bad(
                "the ID-JAG's client_id is not the authenticated client".into(),
            ));
        }
        if let Some(resource) = claims.0.get("resource") {
            let named = resource
                .as_str()
                .ok_or_else(|| bad("the ID-JAG's resource is not a string".into()))?;
            self.check_resource(Some(named))
                .map_err(|_| bad("the ID-JAG names another resource".into()))?;
        }
        let (rule, subject) = self.grant_for(idp, &claims, TokenError::InvalidGrant)?;
        // The assertion's scope narrows the grant, the request's further.
        let allowed = match claims.0.get("scope") {
            None => rule.policy.capabilities.clone(),
            Some(s) => {
                let text = s
                    .as_str()
                    .ok_or_else(|| bad("the ID-JAG's scope is not a string".into()))?;
                self.scope(Some(text), &rule.policy.capabilities)?
            }
        };
        let scope = self.scope(param(form, "scope"), &allowed)?;
        // Remembered only once everything else holds: a refused ID-JAG
        // leaves nothing behind, an accepted one is never accepted again.
        let issuer = format!("idp:{}", idp.provider.issuer());
        self.use_jti(&issuer, &claims, TokenError::InvalidGrant)
            .await?;
        let issued = self
            .issue(
                (grant::JWT_BEARER, idp.provider.name()),
                &subject,
                &rule.policy,
                scope,
            )
            .await;
        if issued.is_err() {
            self.forget_jti(&issuer, &claims).await;
        }
        issued
    }
}
