//! Refresh tokens (OAuth 2.1 §4.3, the security BCP's rotation): every
//! authorization code redeemed starts a *family*, one record in the state
//! backend (capped; kept until the family ends) holding the digest of the
//! family's one live refresh token and the blocks of the access tokens it
//! was given. A refresh token is the family's ID and a secret; using it
//! rotates it (the old one is then spent), and presenting a spent one of
//! the family, which only a holder of one of its tokens can, revokes the
//! whole family: no more refreshes, and every access token it was given
//! revoked by its block. A family lives as long as its grant's
//! `subject_budget_period`; each refresh attenuates the subject's
//! delegation again, so a revoked subject gets nothing.

use base64::Engine;
use delegateos::Capability;
use dgw_core::caller::Caller;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use subtle::ConstantTimeEq;

use crate::code_flow::CodeFlow;
use crate::expiring::{self, key_of, KeepError};
use crate::server::{param, AuthorizationServer, Issued, Policy, TokenError};

/// How long a family revoked before it was stored stays refused (longer
/// than a code lives, so its redemption cannot outlast it).
const TOMBSTONE_TTL_SECS: i64 = 300;
/// The most live access tokens one family may hold at once (a client
/// refreshing faster than its tokens expire is told to slow down).
const MAX_LIVE_TOKENS: usize = 64;

/// A family as kept (under the digest of its ID).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Family {
    pub client_id: String,
    pub subject: String,
    pub idp: String,
    pub grant: usize,
    pub scope: Vec<String>,
    pub resource: String,
    /// The digest of the live refresh token.
    pub current: String,
    /// The blocks of the access tokens given, with their expiry (Unix
    /// seconds), expired ones dropped.
    pub issued: Vec<(String, i64)>,
    pub revoked: bool,
}

/// A new family's ID: 16 random bytes, base64url.
pub(crate) fn new_family_id() -> Result<String, TokenError> {
    let bytes =
        dgw_core::random::bytes::<16>().map_err(|e| TokenError::ServerError(e.to_string()))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// A refresh token of `family`: its ID, a dot, 32 random bytes.
fn new_token(family: &str) -> Result<String, TokenError> {
    let bytes =
        dgw_core::random::bytes::<32>().map_err(|e| TokenError::ServerError(e.to_string()))?;
    Ok(format!(
        "{family}.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    ))
}

/// A parameter the code flow's grants cannot go without.
pub(crate) fn required<'a>(
    form: &'a [(String, String)],
    name: &str,
) -> Result<&'a str, TokenError> {
    param(form, name).ok_or_else(|| TokenError::InvalidRequest(format!("{name} is required")))
}

fn storage(e: dgw_core::state::StorageError) -> TokenError {
    TokenError::ServerError(e.to_string())
}

impl AuthorizationServer {
    /// The grant's policy for `family`, if the identity provider still
    /// has it.
    fn family_policy(&self, family: &Family) -> Result<&Policy, TokenError> {
        self.trusted(&family.idp)
            .and_then(|t| t.grants.get(family.grant))
            .map(|g| &g.policy)
            .ok_or_else(|| TokenError::InvalidGrant("the grant it was issued under is gone".into()))
    }

    /// An access token for `family` (new: stored with its first refresh
    /// token; else rotated), the token answer with its refresh token.
    pub(crate) async fn issue_with_refresh(
        &self,
        flow: &CodeFlow,
        grant: &'static str,
        family: Family,
        family_id: &str,
        scope: Vec<Capability>,
    ) -> Result<Issued, TokenError> {
        let policy = self.family_policy(&family)?.clone();
        let mut issued = self
            .issue((grant, &family.idp), &family.subject, &policy, scope)
            .await?;
        let block = issued.block.clone();
        let refresh = new_token(family_id)?;
        let now = expiring::now();
        let mut doc_family = family;
        doc_family.current = key_of(&refresh);
        doc_family.issued.retain(|(_, exp)| *exp > now);
        doc_family.issued.push(block.clone());
        let mut doc = serde_json::to_value(&doc_family)
            .map_err(|e| TokenError::ServerError(e.to_string()))?;
        doc["exp"] = json!(now + policy.subject_budget_period.as_secs() as i64);
        match flow.families.put(&key_of(family_id), &doc).await {
            Ok(()) => {}
            Err(KeepError::Taken) => {
                // Revoked before it was stored (its code presented twice).
                self.revoke_blocks(&[block.0]).await;
                return Err(TokenError::InvalidGrant(
                    "the code was already used; what it was redeemed for is revoked".into(),
                ));
            }
            Err(KeepError::Full(_)) => return Err(TokenError::RateLimited("refresh token store")),
            Err(KeepError::Storage(e)) => return Err(storage(e)),
        }
        issued.body["refresh_token"] = json!(refresh);
        Ok(issued)
    }

    /// `grant_type=refresh_token`, when the code flow is on.
    pub(crate) async fn refresh_token(
        &self,
        form: &[(String, String)],
    ) -> Result<Issued, TokenError> {
        self.refresh(self.code_flow_on()?, form).await
    }

    /// The code flow, for its grants: off, they are unsupported.
    pub(crate) fn code_flow_on(&self) -> Result<&CodeFlow, TokenError> {
        self.code_flow().ok_or_else(|| {
            TokenError::UnsupportedGrantType("the authorization code flow is off".into())
        })
    }

    /// `grant_type=refresh_token`: the family's live token rotated into a
    /// new one, with a new access token; a spent one revokes the family.
    pub(crate) async fn refresh(
        &self,
        flow: &CodeFlow,
        form: &[(String, String)],
    ) -> Result<Issued, TokenError> {
        let client_id = required(form, "client_id")?;
        let token = required(form, "refresh_token")?;
        let unknown = || TokenError::InvalidGrant("the refresh token is unknown or expired".into());
        let (family_id, _) = token.split_once('.').ok_or_else(unknown)?;
        let key = key_of(family_id);
        let doc = flow
            .families
            .get(&key)
            .await
            .map_err(storage)?
            .ok_or_else(unknown)?;
        let family: Family = serde_json::from_value(doc.clone()).map_err(|_| unknown())?;
        if family.revoked {
            return Err(TokenError::InvalidGrant(
                "the refresh token's family is revoked".into(),
            ));
        }
        if !bool::from(key_of(token).as_bytes().ct_eq(family.current.as_bytes())) {
            self.revoke_family(flow, family_id, "refresh_token_reused")
                .await;
            return Err(TokenError::InvalidGrant(
                "the refresh token was already used; its family is revoked".into(),
            ));
        }
        if family.client_id != client_id {
            return Err(TokenError::InvalidGrant(
                "the refresh token was not issued to this client".into(),
            ));
        }
        if let Some(asked) = param(form, "resource") {
            if asked != family.resource {
                return Err(TokenError::InvalidTarget(
                    "resource is not the one the refresh token was issued for".into(),
                ));
            }
        }
        let granted: Vec<Capability> = family.scope.iter().filter_map(|s| s.parse().ok()).collect();
        let scope = match crate::authorize::scope(param(form, "scope"))
            .map_err(|e| TokenError::InvalidScope(e.to_string()))?
        {
            None => granted,
            Some(asked) => {
                if let Some(wide) = asked.iter().find(|c| !c.is_covered_by(&granted)) {
                    return Err(TokenError::InvalidScope(format!(
                        "{wide} is wider than the refresh token's scope"
                    )));
                }
                asked
            }
        };
        let now = expiring::now();
        if family.issued.iter().filter(|(_, exp)| *exp > now).count() >= MAX_LIVE_TOKENS {
            return Err(TokenError::RateLimited("refresh token family"));
        }
        let policy = self.family_policy(&family)?.clone();
        let mut issued = self
            .issue(
                (crate::grant::REFRESH_TOKEN, &family.idp),
                &family.subject,
                &policy,
                scope,
            )
            .await?;
        let block = issued.block.clone();
        let refresh = new_token(family_id)?;
        let mut next = family;
        next.current = key_of(&refresh);
        next.issued.retain(|(_, exp)| *exp > now);
        next.issued.push(block.clone());
        let mut next_doc =
            serde_json::to_value(&next).map_err(|e| TokenError::ServerError(e.to_string()))?;
        next_doc["exp"] = doc.get("exp").cloned().unwrap_or(Value::Null);
        if !flow
            .families
            .replace(&key, &doc, &next_doc)
            .await
            .map_err(storage)?
        {
            // Rotated by a concurrent request with the same token: a reuse.
            self.revoke_blocks(&[block.0]).await;
            self.revoke_family(flow, family_id, "refresh_token_reused")
                .await;
            return Err(TokenError::InvalidGrant(
                "the refresh token was already used; its family is revoked".into(),
            ));
        }
        issued.body["refresh_token"] = json!(refresh);
        Ok(issued)
    }

    /// Revokes `family_id`: marked revoked (a tombstone when it is not
    /// stored yet, so it never will be), and its access tokens' blocks.
    pub(crate) async fn revoke_family(&self, flow: &CodeFlow, family_id: &str, why: &str) {
        let key = key_of(family_id);
        for _ in 0..3 {
            match flow.families.get(&key).await {
                Ok(Some(doc)) => {
                    let Ok(mut family) = serde_json::from_value::<Family>(doc.clone()) else {
                        return;
                    };
                    let blocks: Vec<String> =
                        family.issued.iter().map(|(b, _)| b.clone()).collect();
                    family.revoked = true;
                    let mut revoked = serde_json::to_value(&family).unwrap_or_default();
                    revoked["exp"] = doc.get("exp").cloned().unwrap_or(Value::Null);
                    match flow.families.replace(&key, &doc, &revoked).await {
                        Ok(true) => {
                            self.revoke_blocks(&blocks).await;
                            self.gate().trail().event(
                                "oauth_family_revoked",
                                json!({"reason": why, "subject": family.subject, "clientId": family.client_id, "accessTokens": blocks.len()}),
                            );
                            return;
                        }
                        Ok(false) => continue,
                        Err(e) => {
                            tracing::warn!(error = %e, "revoking a refresh token family");
                            return;
                        }
                    }
                }
                Ok(None) => {
                    let tomb =
                        json!({"revoked": true, "exp": expiring::now() + TOMBSTONE_TTL_SECS});
                    match flow.families.put(&key, &tomb).await {
                        Ok(()) => {
                            self.gate().trail().event(
                                "oauth_family_revoked",
                                json!({"reason": why, "accessTokens": 0}),
                            );
                            return;
                        }
                        Err(KeepError::Taken) => continue,
                        Err(e) => {
                            tracing::warn!(error = %e, "revoking a refresh token family");
                            return;
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "revoking a refresh token family");
                    return;
                }
            }
        }
    }

    /// Revokes each block as the gateway itself.
    async fn revoke_blocks(&self, blocks: &[String]) {
        for b in blocks {
            if let Err(e) = self.gate().revoke_by_admin(&Caller::gateway(), b).await {
                tracing::warn!(error = %e, "revoking an access token of a revoked family");
            }
        }
    }
}
