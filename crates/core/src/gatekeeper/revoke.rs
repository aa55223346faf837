//! Revocation (§9.5): who may record an entry, recording it, and closing
//! the delegations whose tokens carry the revoked block. An administrator
//! may also revoke a block without its signer's key (a stolen agent key is
//! the case that needs it).

use delegateos::messages::RevokeParams;
use delegateos::{DelegationId, DelegationStatus, PrincipalId, RevocationScope};

use super::{forbidden, now, GateError, Gatekeeper, Revocation};
use crate::caller::Caller;
use crate::error::Forbidden;
use crate::revocations::RevokeError;
use crate::telemetry;

impl Gatekeeper {
    /// `dgw/revocations/submit` (DelegateOS's revoke, §9.5):
    /// record the entry durably; from then on every token carrying the
    /// block is denied, and the delegations recorded with such tokens are
    /// marked revoked.
    pub async fn revoke(&self, caller: &Caller, p: RevokeParams) -> Result<Revocation, GateError> {
        let entry = p.revocation;
        self.check_revoker(caller, &entry)?;
        let newly_recorded = self
            .revocations
            .add(entry.clone())
            .await
            .map_err(|e| match e {
                RevokeError::Invalid(e) => GateError::Rejected {
                    kind: "invalid_revocation".into(),
                    detail: e.to_string(),
                },
                RevokeError::Storage(e) => GateError::Storage(e),
            })?;
        if newly_recorded {
            telemetry::record_revocation();
        }
        // Only the block's own signer revokes it (decision 10).
        let revoked = self
            .close_carrying(&entry.revocation_id, Some(&entry.revoked_by))
            .await?;
        Ok(Revocation {
            revocation_id: entry.revocation_id,
            scope: entry.scope,
            newly_recorded,
            revoked_delegations: revoked,
        })
    }

    /// `dgw/revoke`: an administrator revokes the block `revocation_id`
    /// (whoever signed it) without a signed entry; every token carrying it
    /// is denied from then on.
    pub async fn revoke_by_admin(
        &self,
        caller: &Caller,
        revocation_id: &str,
    ) -> Result<Revocation, GateError> {
        if !caller.is_authenticated_admin() {
            return Err(forbidden(
                Forbidden::AdminRequired,
                "revoking without a signed entry needs an admin token or certificate",
            ));
        }
        let newly_recorded = self
            .revocations
            .add_by_admin(revocation_id, caller.admin_name())
            .await
            .map_err(|e| match e {
                RevokeError::Invalid(e) => GateError::InvalidParams(e.to_string()),
                RevokeError::Storage(e) => GateError::Storage(e),
            })?;
        if newly_recorded {
            telemetry::record_revocation();
        }
        let revoked = self.close_carrying(revocation_id, None).await?;
        Ok(Revocation {
            revocation_id: revocation_id.to_owned(),
            scope: RevocationScope::Block,
            newly_recorded,
            revoked_delegations: revoked,
        })
    }

    /// Marks revoked every active delegation whose token carries the block,
    /// (when `signer` is given) only where that principal signed it; syncs.
    async fn close_carrying(
        &self,
        revocation_id: &str,
        signer: Option<&PrincipalId>,
    ) -> Result<Vec<DelegationId>, GateError> {
        let mut revoked = Vec::new();
        for id in self.delegations.carrying_block(revocation_id).await? {
            let Some(d) = self.delegations.get(&id).await? else {
                continue;
            };
            if d.status != DelegationStatus::Active {
                continue;
            }
            let applies = self.signed_chain(&d.dct.token).is_some_and(|v| {
                v.levels().iter().any(|l| {
                    l.revocation_id == revocation_id && signer.is_none_or(|s| l.signer == *s)
                })
            });
            if !applies {
                continue;
            }
            let mut closed = d.clone();
            closed.status = DelegationStatus::Revoked;
            closed.completed_at = Some(now().0);
            if self.delegations.replace(&d, &closed).await? {
                revoked.push(id);
            }
        }
        self.delegations.sync().await?;
        Ok(revoked)
    }

    /// Whether `caller` may record `entry` (decisions.md, "Trusted
    /// revocations"): its signer is a tenant root; or the caller presents
    /// the DCT that carries the revoked block and the signer signed that
    /// block or one above it; or the caller is an administrator who proved
    /// it with a secret. Otherwise `untrusted_revoker`, and nothing is stored.
    fn check_revoker(
        &self,
        caller: &Caller,
        entry: &delegateos::RevocationEntry,
    ) -> Result<(), GateError> {
        if caller.is_authenticated_admin() || self.is_tenant_root(&entry.revoked_by) {
            return Ok(());
        }
        let signed_at_or_above = caller
            .credential()
            .and_then(|token| self.signed_chain(token))
            .is_some_and(|v| {
                let levels = v.levels();
                levels
                    .iter()
                    .position(|l| l.revocation_id == entry.revocation_id)
                    .is_some_and(|block| {
                        levels[..=block]
                            .iter()
                            .any(|l| l.signer == entry.revoked_by)
                    })
            });
        if signed_at_or_above {
            return Ok(());
        }
        Err(forbidden(
            Forbidden::UntrustedRevoker,
            format!(
                "{} is not a tenant root, and no presented DCT shows it signed the revoked block or one above it",
                entry.revoked_by
            ),
        ))
    }
}
