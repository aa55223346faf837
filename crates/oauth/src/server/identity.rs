//! What the grants that start from an identity provider's token share:
//! the trusted providers with their grants (`[[oauth.identity_providers]]`
//! and `.grants`), the first grant whose claims a verified token matches,
//! the subject it is issued to, and the single use of an assertion's `jti`
//! (kept in the state backend until it expires, bounded).

use std::collections::BTreeMap;
use std::sync::Arc;

use dgw_core::state::Capped;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::{AuthorizationServer, Policy, TokenError};
use crate::idp::{IdentityProvider, IdpError};
use crate::jwt::{Claims, SKEW_SECS};

/// The record space of the assertion IDs (`jti`) already used.
const USED_JTIS: &str = "oauth_used_jti";
/// The most `jti`s kept at once; when full, expired ones are swept, and a
/// new assertion is refused (`temporarily_unavailable`) if none has.
const MAX_USED_JTIS: usize = 100_000;
/// The longest an assertion (an ID-JAG, a client assertion) may live: it
/// bounds how long its `jti` is kept.
pub const ASSERTION_MAX_LIFETIME_SECS: i64 = 300;
/// The longest `sub` dgw issues to.
const MAX_SUBJECT_BYTES: usize = 255;

/// One grant of an identity provider: the claims a token must carry, and
/// what its subject then gets.
#[derive(Debug, Clone)]
pub struct IdpGrant {
    /// Each listed claim must equal, or (an array) contain, the value.
    pub claims: BTreeMap<String, String>,
    pub policy: Policy,
}

/// A trusted identity provider and its grants, first match wins.
#[derive(Debug, Clone)]
pub struct TrustedIdp {
    pub provider: Arc<IdentityProvider>,
    pub grants: Vec<IdpGrant>,
}

impl IdpGrant {
    /// Whether `claims` carry every claim this grant lists.
    pub fn matches(&self, claims: &Claims) -> bool {
        self.claims
            .iter()
            .all(|(name, want)| match claims.0.get(name) {
                Some(Value::String(s)) => s == want,
                Some(Value::Array(all)) => all.iter().any(|v| v.as_str() == Some(want.as_str())),
                _ => false,
            })
    }
}

/// `idp` refusing a token: the token's fault is `refuse`'s error (the
/// grant's RFC code), the provider's unavailability a server error.
pub(crate) fn idp_error(e: IdpError, refuse: fn(String) -> TokenError) -> TokenError {
    match e {
        IdpError::Token(t) => refuse(t.to_string()),
        unavailable @ IdpError::Unavailable { .. } => {
            TokenError::Unavailable(unavailable.to_string())
        }
    }
}

/// The `iss` of a JWT, read before it is verified, to choose the provider
/// that must verify it (nothing else is trusted from it).
pub(crate) fn unverified_issuer(token: &str) -> Option<String> {
    use base64::Engine;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    v.get("iss")?.as_str().map(str::to_owned)
}

impl AuthorizationServer {
    /// The trusted provider whose `issuer` is `token`'s `iss`, exactly.
    pub(crate) fn provider_of(&self, token: &str) -> Option<&TrustedIdp> {
        let iss = unverified_issuer(token)?;
        self.idps.iter().find(|t| t.provider.issuer() == iss)
    }

    /// The first grant of `idp` that `claims` match, and the subject it is
    /// issued to (`idp/<provider>/<grant index>/<sub>`: one budget per
    /// subject and grant); none matching is `access_denied`.
    pub(crate) fn grant_for<'a>(
        &self,
        idp: &'a TrustedIdp,
        claims: &Claims,
        refuse: fn(String) -> TokenError,
    ) -> Result<(&'a IdpGrant, String), TokenError> {
        let sub = claims.required("sub").map_err(|e| refuse(e.to_string()))?;
        if sub.len() > MAX_SUBJECT_BYTES || sub.chars().any(char::is_control) {
            return Err(refuse(format!(
                "sub must be at most {MAX_SUBJECT_BYTES} bytes without control characters"
            )));
        }
        let (index, grant) = idp
            .grants
            .iter()
            .enumerate()
            .find(|(_, g)| g.matches(claims))
            .ok_or_else(|| {
                TokenError::AccessDenied(format!(
                    "no grant of identity provider {:?} matches the token's claims",
                    idp.provider.name()
                ))
            })?;
        Ok((grant, format!("idp/{}/{index}/{sub}", idp.provider.name())))
    }

    /// Records the single use of the assertion `jti` from `issuer` until
    /// `exp`; a second use while it is kept is `refuse`'s error.
    pub(crate) async fn use_jti(
        &self,
        issuer: &str,
        claims: &Claims,
        refuse: fn(String) -> TokenError,
    ) -> Result<(), TokenError> {
        let jti = claims.required("jti").map_err(|e| refuse(e.to_string()))?;
        let key = jti_key(issuer, jti);
        let until = claims.exp().saturating_add(SKEW_SECS);
        let doc = json!({"until": until});
        let storage = |e: dgw_core::state::StorageError| TokenError::ServerError(e.to_string());
        let mut outcome = self
            .records
            .insert_capped(USED_JTIS, &key, &doc, MAX_USED_JTIS)
            .await
            .map_err(storage)?;
        if outcome == Capped::Taken {
            // Kept past its end (a sweep not yet run): free it if so.
            let old = self.records.get(USED_JTIS, &key).await.map_err(storage)?;
            let ended = old
                .as_ref()
                .and_then(|o| o.get("until")?.as_i64())
                .is_some_and(|u| u < now());
            if let (true, Some(old)) = (ended, old) {
                if self
                    .records
                    .replace(USED_JTIS, &key, &old, &doc)
                    .await
                    .map_err(storage)?
                {
                    return Ok(());
                }
            }
            return Err(refuse("the assertion was used already (jti)".into()));
        }
        if outcome == Capped::Full {
            self.sweep_jtis().await.map_err(storage)?;
            outcome = self
                .records
                .insert_capped(USED_JTIS, &key, &doc, MAX_USED_JTIS)
                .await
                .map_err(storage)?;
        }
        match outcome {
            Capped::Inserted => Ok(()),
            Capped::Taken => Err(refuse("the assertion was used already (jti)".into())),
            Capped::Full => Err(TokenError::Unavailable(
                "too many assertions are in use; try again in a few minutes".into(),
            )),
        }
    }

    /// Forgets a `jti` recorded for a request that then issued nothing.
    pub(crate) async fn forget_jti(&self, issuer: &str, claims: &Claims) {
        if let Some(jti) = claims.str("jti") {
            if let Err(e) = self.records.remove(USED_JTIS, &jti_key(issuer, jti)).await {
                tracing::warn!(error = %e, "forgetting an unused assertion's jti");
            }
        }
    }

    async fn sweep_jtis(&self) -> Result<(), dgw_core::state::StorageError> {
        let now = now();
        for (key, doc) in self.records.scan(USED_JTIS).await? {
            if doc
                .get("until")
                .and_then(Value::as_i64)
                .is_none_or(|u| u < now)
            {
                self.records.remove(USED_JTIS, &key).await?;
            }
        }
        Ok(())
    }
}

/// Where a `jti` of `issuer` is kept: a digest, so neither its length nor
/// its bytes reach the store.
fn jti_key(issuer: &str, jti: &str) -> String {
    Sha256::digest(format!("{issuer}\0{jti}").as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub(crate) fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(claims: &[(&str, &str)]) -> IdpGrant {
        IdpGrant {
            claims: claims
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            policy: Policy {
                tenant: "acme".into(),
                capabilities: vec![],
                budget_microcents: 0,
                ttl: std::time::Duration::from_secs(1),
                subject_budget_period: std::time::Duration::from_secs(1),
            },
        }
    }

    fn claims(v: Value) -> Claims {
        Claims(v.as_object().cloned().unwrap_or_default())
    }

    #[test]
    fn a_grant_matches_claims_equal_to_or_containing_each_value() {
        let eng = grant(&[("groups", "engineering"), ("tier", "gold")]);
        assert!(eng.matches(&claims(
            json!({"groups": ["sales", "engineering"], "tier": "gold"})
        )));
        assert!(eng.matches(&claims(json!({"groups": "engineering", "tier": "gold"}))));
        // Every listed claim, of a string type: a missing, different or
        // non-string one fails.
        assert!(!eng.matches(&claims(json!({"groups": ["engineering"]}))));
        assert!(!eng.matches(&claims(json!({"groups": ["eng"], "tier": "gold"}))));
        assert!(!eng.matches(&claims(
            json!({"groups": {"engineering": true}, "tier": "gold"})
        )));
        assert!(!eng.matches(&claims(json!({"groups": "engineering", "tier": ["gold!"]}))));
        // No claims listed: everyone the provider vouches for.
        assert!(grant(&[]).matches(&claims(json!({}))));
    }

    #[test]
    fn the_unverified_issuer_is_read_from_the_payload_only() {
        use base64::Engine;
        let b64 = |v: &Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string().as_bytes())
        };
        let t = format!(
            "{}.{}.sig",
            b64(&json!({"alg": "RS256", "iss": "h"})),
            b64(&json!({"iss": "p"}))
        );
        assert_eq!(unverified_issuer(&t).as_deref(), Some("p"));
        assert_eq!(unverified_issuer("not a token"), None);
        let no_iss = format!("x.{}.y", b64(&json!({"sub": "a"})));
        assert_eq!(unverified_issuer(&no_iss), None);
    }
}
