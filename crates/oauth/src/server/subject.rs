//! The per-subject delegation every token of a subject attenuates (made
//! once per `subject_budget_period`, kept in the state backend), the
//! tokens issued from it, and its revocation (`dgw/oauth/revoke`).

use delegateos::{Capability, RevocationCheck, Timestamp};
use dgw_core::gatekeeper::GateError;
use serde_json::{json, Value};

use super::{AuthorizationServer, Issued, Policy, TokenError, SUBJECTS};

impl AuthorizationServer {
    /// The subject's delegation (made once per period), then a token
    /// attenuating it to `scope`, issued under `grant` from identity
    /// provider `idp` (`-` for none).
    pub(crate) async fn issue(
        &self,
        (grant, idp): (&'static str, &str),
        subject: &str,
        policy: &Policy,
        scope: Vec<Capability>,
    ) -> Result<Issued, TokenError> {
        let parent = self.subject_delegation(subject, policy).await?;
        let ttl = policy.ttl.min(self.access_token_ttl);
        let until = Timestamp::from_instant(time::OffsetDateTime::now_utc() + ttl);
        let held = self
            .issuing
            .attenuate_held(
                &self.gate,
                &policy.tenant,
                Some(&parent),
                scope.clone(),
                policy.budget_microcents,
                until,
            )
            .map_err(|e| match e {
                GateError::Rejected { kind, detail } if kind == "attenuation_violation" => {
                    TokenError::InvalidScope(format!("wider than the grant: {detail}"))
                }
                GateError::Rejected { detail, .. } => TokenError::AccessDenied(detail),
                other => TokenError::ServerError(other.to_string()),
            })?;
        let expires_in = held
            .expires_at
            .instant()
            .unix_timestamp()
            .saturating_sub(time::OffsetDateTime::now_utc().unix_timestamp())
            .max(0);
        self.gate.trail().event(
            "oauth_token_issued",
            json!({
                "grant": grant,
                "idp": idp,
                "subject": subject,
                "tenant": policy.tenant,
                "delegationId": held.delegation_id,
                "scope": scope,
                "expiresAt": held.expires_at,
                "revocationId": held.revocation_ids.last(),
            }),
        );
        let scope_text: Vec<String> = scope.iter().map(Capability::to_string).collect();
        Ok(Issued {
            body: json!({
                "access_token": held.token,
                "token_type": "Bearer",
                "expires_in": expires_in,
                "scope": scope_text.join(" "),
            }),
            grant,
            idp: idp.to_owned(),
            block: (
                held.revocation_ids.last().cloned().unwrap_or_default(),
                held.expires_at.instant().unix_timestamp(),
            ),
        })
    }

    /// The subject's one delegation for this period: the stored one while
    /// it lasts, else a new one stored once (a concurrent issuer's, on any
    /// replica, wins and is used).
    async fn subject_delegation(
        &self,
        subject: &str,
        policy: &Policy,
    ) -> Result<String, TokenError> {
        let storage = |e: dgw_core::state::StorageError| TokenError::ServerError(e.to_string());
        let key = format!("{}/{subject}", policy.tenant);
        let now = time::OffsetDateTime::now_utc();
        let stored = self.records.get(SUBJECTS, &key).await.map_err(storage)?;
        let live = stored.as_ref().and_then(|v| {
            let until: Timestamp = serde_json::from_value(v.get("expiresAt")?.clone()).ok()?;
            (until.instant() > now).then_some(v)
        });
        if let Some(doc) = live {
            // Revoked (its block, by any means) or otherwise no longer
            // good: refused, never replaced within its period, so revoking
            // a subject ends its budget too (decision 377).
            let revoked = doc
                .get("revocationId")
                .and_then(Value::as_str)
                .is_none_or(|id| {
                    self.gate
                        .revocations()
                        .read()
                        .is_block_revoked(id, self.issuing.gateway())
                });
            if revoked {
                return Err(TokenError::AccessDenied(
                    "the subject's delegation is revoked".into(),
                ));
            }
            let token = doc.get("token").and_then(Value::as_str).ok_or_else(|| {
                TokenError::ServerError("a stored subject delegation has no token".into())
            })?;
            self.gate.dct_grant(token).map_err(|d| {
                TokenError::AccessDenied(format!("the subject's delegation: {}", d.kind.as_str()))
            })?;
            return Ok(token.to_owned());
        }
        let until = Timestamp::from_instant(now + policy.subject_budget_period);
        let held = self
            .issuing
            .attenuate_held(
                &self.gate,
                &policy.tenant,
                None,
                policy.capabilities.clone(),
                policy.budget_microcents,
                until,
            )
            .map_err(|e| match e {
                GateError::Rejected { detail, .. } | GateError::Forbidden { detail, .. } => {
                    TokenError::AccessDenied(detail)
                }
                other => TokenError::ServerError(other.to_string()),
            })?;
        let doc = json!({
            "token": held.token,
            "expiresAt": held.expires_at,
            "delegationId": held.delegation_id,
            "revocationId": held.revocation_ids.last(),
        });
        let won = match &stored {
            None => self
                .records
                .insert_new(SUBJECTS, &key, &doc)
                .await
                .map_err(storage)?,
            Some(old) => self
                .records
                .replace(SUBJECTS, &key, old, &doc)
                .await
                .map_err(storage)?,
        };
        if won {
            return Ok(held.token);
        }
        // Another issuer stored one first: use it.
        let v = self
            .records
            .get(SUBJECTS, &key)
            .await
            .map_err(storage)?
            .ok_or_else(|| TokenError::ServerError("the subject's delegation vanished".into()))?;
        v.get("token")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| {
                TokenError::ServerError("a stored subject delegation has no token".into())
            })
    }
}

impl AuthorizationServer {
    /// `dgw/oauth/revoke`: revokes `subject`'s delegation in `tenant` as
    /// the administrator `caller` (its block, by ID: every token it was
    /// given carries it), so they all end at once; the stored delegation
    /// stays, so the subject gets nothing new until its period ends
    /// (decision 377).
    pub async fn revoke_subject(
        &self,
        caller: &dgw_core::caller::Caller,
        tenant: &str,
        subject: &str,
    ) -> Result<Value, GateError> {
        if !caller.is_authenticated_admin() {
            return Err(GateError::Forbidden {
                kind: dgw_core::gatekeeper::Forbidden::AdminRequired,
                detail: "dgw/oauth/revoke needs an admin token or certificate".into(),
            });
        }
        let key = format!("{tenant}/{subject}");
        let doc = self
            .records
            .get(SUBJECTS, &key)
            .await
            .map_err(GateError::Storage)?
            .ok_or_else(|| GateError::Rejected {
                kind: "subject_not_found".into(),
                detail: format!("tenant {tenant:?} has issued nothing to subject {subject:?}"),
            })?;
        let revocation_id = doc
            .get("revocationId")
            .and_then(Value::as_str)
            .ok_or_else(|| GateError::Rejected {
                kind: "subject_not_found".into(),
                detail: "the stored subject delegation names no block".into(),
            })?;
        let r = self.gate.revoke_by_admin(caller, revocation_id).await?;
        self.gate.trail().event(
            "oauth_subject_revoked",
            json!({"tenant": tenant, "subject": subject, "revocationId": revocation_id, "admin": caller.admin_name()}),
        );
        Ok(json!({
            "tenant": tenant,
            "subject": subject,
            "revocationId": r.revocation_id,
            "newlyRecorded": r.newly_recorded,
        }))
    }
}
