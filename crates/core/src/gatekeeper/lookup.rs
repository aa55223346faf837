//! Reading recorded state: a delegation (never its token) and the budgets
//! along its chains, for administrators and for the holder of the
//! delegation's own token.

use delegateos::{DelegationId, PrincipalId, Timestamp};
use serde::Serialize;

use super::{forbidden, BudgetReport, GateError, Gatekeeper};
use crate::caller::Caller;
use crate::error::{Forbidden, Missing};
use delegateos::DelegationStatus;

/// A recorded delegation as lookups return it: everything but the token,
/// which is a bearer credential (decisions.md).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DelegationView {
    pub id: DelegationId,
    pub parent_id: DelegationId,
    pub from: PrincipalId,
    pub to: PrincipalId,
    pub contract_id: delegateos::ContractId,
    pub depth: u32,
    pub status: DelegationStatus,
    pub created_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attestation_id: Option<delegateos::AttestationId>,
    /// The capabilities, budget and expiry in effect for the token it was
    /// recorded with (absent when that token no longer verifies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<delegateos::Capability>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_microcents: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
}

impl Gatekeeper {
    /// The delegation a token is for (its last level), if its signatures
    /// verify against a tenant root; revocation and expiry do not matter
    /// for reading one's own records.
    fn own_delegation(&self, token: &str) -> Option<DelegationId> {
        let verified = self.signed_chain(token)?;
        Some(verified.dct().delegation_id().clone())
    }

    /// Whether `caller` may read delegation `id`'s record and budget: an
    /// administrator, or the holder presenting a token (verified, in good
    /// standing or not) whose own delegation is `id`.
    async fn check_reader(&self, caller: &Caller, id: &DelegationId) -> Result<(), GateError> {
        if caller.is_admin() {
            return Ok(());
        }
        let holds = caller
            .credential()
            .and_then(|token| self.own_delegation(token))
            .is_some_and(|own| own == *id);
        if holds {
            Ok(())
        } else {
            Err(forbidden(
                Forbidden::AdminRequired,
                "reading a delegation or its budget needs an admin token, or the delegation's own DCT",
            ))
        }
    }

    /// A recorded delegation, without its token.
    pub async fn delegation(
        &self,
        caller: &Caller,
        id: &DelegationId,
    ) -> Result<DelegationView, GateError> {
        self.check_reader(caller, id).await?;
        let d = self
            .delegations
            .get(id)
            .await?
            .ok_or_else(|| GateError::NotFound {
                kind: Missing::Delegation,
                id: id.to_string(),
            })?;
        let verified = self.signed_chain(&d.dct.token);
        Ok(DelegationView {
            capabilities: verified.as_ref().map(|v| v.capabilities().to_vec()),
            budget_microcents: verified.as_ref().map(|v| v.budget_microcents()),
            expires_at: verified.as_ref().map(|v| v.expires_at().clone()),
            id: d.id,
            parent_id: d.parent_id,
            from: d.from,
            to: d.to,
            contract_id: d.contract_id,
            depth: d.depth,
            status: d.status,
            created_at: d.created_at,
            completed_at: d.completed_at,
            attestation_id: d.attestation_id,
        })
    }

    /// `dgw/budget` (DelegateOS's budget method too): spent, reserved and
    /// remaining at each level.
    pub async fn budget(
        &self,
        caller: &Caller,
        delegation_id: &DelegationId,
    ) -> Result<BudgetReport, GateError> {
        self.check_reader(caller, delegation_id).await?;
        let mut chains = self
            .budgets
            .report(delegation_id.as_str())
            .await
            .map_err(super::ledger_error)?;
        if chains.is_empty() {
            if let Some(d) = self.delegations.get(delegation_id).await? {
                if let Ok(v) = self.verified(&d.dct.token) {
                    let levels = self
                        .budgets
                        .report_levels(&v.levels)
                        .await
                        .map_err(super::ledger_error)?;
                    chains.push(levels);
                }
            }
        }
        if chains.is_empty() {
            return Err(GateError::NotFound {
                kind: Missing::BudgetForDelegation,
                id: delegation_id.to_string(),
            });
        }
        Ok(BudgetReport {
            delegation_id: delegation_id.clone(),
            chains,
        })
    }
}
