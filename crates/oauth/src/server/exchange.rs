//! Token exchange (RFC 8693): an ID token or a JWT access token a trusted
//! identity provider issued for dgw's audience becomes a DCT attenuating
//! its subject's per-subject delegation under the first grant its claims
//! match, `scope` narrowing within the grant and `resource` checked.
//! A subject token that does not verify is `invalid_request` (RFC 8693
//! §2.2.2); no grant matching, `access_denied` (the issue's reading).

use super::id_jag::ID_JAG_TYPE;
use super::identity::idp_error;
use super::request::param;
use super::{grant, AuthorizationServer, Issued, TokenError};

/// `subject_token_type`s accepted (RFC 8693 §3).
pub const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";
pub const JWT: &str = "urn:ietf:params:oauth:token-type:jwt";
/// The one token type dgw issues.
pub const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";

impl AuthorizationServer {
    pub(crate) async fn token_exchange(
        &self,
        form: &[(String, String)],
    ) -> Result<Issued, TokenError> {
        let bad = TokenError::InvalidRequest;
        let subject_token =
            param(form, "subject_token").ok_or_else(|| bad("subject_token is required".into()))?;
        match param(form, "subject_token_type") {
            Some(ID_TOKEN | JWT) => {}
            Some(_) => {
                return Err(bad(format!(
                    "subject_token_type must be {ID_TOKEN} or {JWT}"
                )))
            }
            None => return Err(bad("subject_token_type is required".into())),
        }
        if param(form, "actor_token").is_some() || param(form, "actor_token_type").is_some() {
            return Err(bad("actor_token is not supported (decision 463)".into()));
        }
        if param(form, "requested_token_type").is_some_and(|t| t != ACCESS_TOKEN) {
            return Err(bad(format!("requested_token_type must be {ACCESS_TOKEN}")));
        }
        if let Some(audience) = param(form, "audience") {
            if audience != self.resource.public_url() {
                return Err(TokenError::InvalidTarget(format!(
                    "audience must be {}",
                    self.resource.public_url()
                )));
            }
        }
        self.check_resource(param(form, "resource"))?;
        let idp = self.provider_of(subject_token).ok_or_else(|| {
            bad("the subject token's issuer is not a trusted identity provider".into())
        })?;
        let claims = idp
            .provider
            .verify(subject_token, idp.provider.audience(), None)
            .await
            .map_err(|e| idp_error(e, TokenError::InvalidRequest))?;
        // An assertion meant for the jwt-bearer grant is not a subject token.
        let header = crate::jwt::header(subject_token).map_err(|e| bad(e.to_string()))?;
        if header
            .typ
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case(ID_JAG_TYPE))
        {
            return Err(bad("an ID-JAG is redeemed with the jwt-bearer grant".into()));
        }
        let (rule, subject) = self.grant_for(idp, &claims, TokenError::InvalidRequest)?;
        let scope = self.scope(param(form, "scope"), &rule.policy.capabilities)?;
        let mut issued = self
            .issue(
                (grant::TOKEN_EXCHANGE, idp.provider.name()),
                &subject,
                &rule.policy,
                scope,
            )
            .await?;
        issued.body["issued_token_type"] = ACCESS_TOKEN.into();
        Ok(issued)
    }
}
