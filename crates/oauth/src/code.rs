//! Authorization codes: made at the callback, bound to the client, its
//! PKCE challenge, its exact redirect URI, the resource and the scope
//! granted, alive [`CODE_TTL_SECS`], and redeemed once at `POST
//! /oauth/token` (`grant_type=authorization_code`) into a DCT attenuating
//! the subject's delegation, plus a refresh token ([`crate::refresh`]).
//! The first redemption marks the code used whatever its outcome, so a
//! code presented by the wrong client, with the wrong verifier or the
//! wrong redirect URI is spent (decision 474); a used code presented
//! again revokes what it was redeemed for (RFC 6749 §4.1.2).

use delegateos::Capability;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::code_flow::CodeFlow;
use crate::pkce::CodeChallenge;
use crate::refresh::required;
use crate::server::{param, AuthorizationServer, Issued, TokenError};

/// How long a code lives.
pub const CODE_TTL_SECS: i64 = 60;

/// A code as kept (under the digest of its value).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Code {
    pub client_id: String,
    pub redirect_uri: String,
    pub challenge: String,
    pub resource: String,
    pub scope: Vec<String>,
    pub subject: String,
    pub idp: String,
    /// The index of the identity provider's grant that applied.
    pub grant: usize,
    /// Redeemed (or tried): never good again.
    pub used: bool,
    /// The refresh token family it was redeemed into, once it was.
    pub family: Option<String>,
}

impl AuthorizationServer {
    /// `grant_type=authorization_code`, when the code flow is on.
    pub(crate) async fn authorization_code(
        &self,
        form: &[(String, String)],
    ) -> Result<Issued, TokenError> {
        self.redeem_code(self.code_flow_on()?, form).await
    }

    /// `resource` as a code binds it: dgw's (RFC 8707), its root when
    /// not given.
    pub(crate) fn resource_of(&self, resource: Option<&str>) -> Result<String, String> {
        self.check_resource(resource).map_err(|e| e.to_string())?;
        Ok(resource.unwrap_or(self.issuer()).to_owned())
    }

    /// `grant_type=authorization_code`: the public client names itself
    /// (`client_id`), proves it holds the verifier, and names the same
    /// redirect URI.
    pub(crate) async fn redeem_code(
        &self,
        flow: &CodeFlow,
        form: &[(String, String)],
    ) -> Result<Issued, TokenError> {
        let client_id = required(form, "client_id")?;
        let code = required(form, "code")?;
        let family = crate::refresh::new_family_id()?;
        let record = self.claim_code(flow, code, &family).await?;
        let wrong =
            |what: &str| TokenError::InvalidGrant(format!("the code was not issued {what}"));
        if record.client_id != client_id {
            return Err(wrong("to this client"));
        }
        if param(form, "redirect_uri") != Some(record.redirect_uri.as_str()) {
            return Err(wrong("for this redirect_uri"));
        }
        CodeChallenge::stored(&record.challenge)
            .and_then(|c| c.verify(param(form, "code_verifier")))
            .map_err(|e| TokenError::InvalidGrant(e.to_string()))?;
        if let Some(asked) = param(form, "resource") {
            if asked != record.resource {
                return Err(TokenError::InvalidTarget(
                    "resource is not the one the code was issued for".into(),
                ));
            }
        }
        let scope: Vec<Capability> = record.scope.iter().filter_map(|s| s.parse().ok()).collect();
        self.issue_with_refresh(
            flow,
            crate::grant::AUTHORIZATION_CODE,
            crate::refresh::Family {
                client_id: record.client_id,
                subject: record.subject,
                idp: record.idp,
                grant: record.grant,
                scope: record.scope,
                resource: record.resource,
                current: String::new(),
                issued: vec![],
                revoked: false,
            },
            &family,
            scope,
        )
        .await
    }

    /// The code's record, marked used (with the family it is redeemed
    /// into) before anything else: one redemption, whatever its outcome.
    async fn claim_code(
        &self,
        flow: &CodeFlow,
        code: &str,
        family: &str,
    ) -> Result<Code, TokenError> {
        let storage = |e: dgw_core::state::StorageError| TokenError::ServerError(e.to_string());
        let unknown = || TokenError::InvalidGrant("the code is unknown or expired".into());
        let key = crate::expiring::key_of(code);
        let doc = flow
            .codes
            .get(&key)
            .await
            .map_err(storage)?
            .ok_or_else(unknown)?;
        let record: Code = serde_json::from_value(doc.clone()).map_err(|_| unknown())?;
        if !record.used {
            let mut spent = doc.clone();
            spent["used"] = json!(true);
            spent["family"] = json!(family);
            if flow
                .codes
                .replace(&key, &doc, &spent)
                .await
                .map_err(storage)?
            {
                return Ok(record);
            }
        }
        // Used before (or just now, by a concurrent request): whatever it
        // was redeemed for is revoked.
        let now = flow.codes.get(&key).await.map_err(storage)?;
        if let Some(f) = now
            .as_ref()
            .and_then(|d| d.get("family"))
            .and_then(Value::as_str)
        {
            self.revoke_family(flow, f, "code_reused").await;
        }
        Err(TokenError::InvalidGrant(
            "the code was already used; what it was redeemed for is revoked".into(),
        ))
    }
}
