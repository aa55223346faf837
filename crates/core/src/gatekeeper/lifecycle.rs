//! The DelegateOS delegation lifecycle (§9): accepting a delegation once,
//! and completing it with a verified attestation that charges its cost.

use std::collections::BTreeMap;

use delegateos::attestation::{
    verify_attestation, AttestationContext, AttestationFailure, FailureKind,
};
use delegateos::dct;
use delegateos::messages::{CompleteParams, DelegateParams, DelegateResponse};
use delegateos::{Delegation, DelegationStatus};
use time::OffsetDateTime;

use super::{
    ledger_error, now, AttestationsById, Completion, ContractsById, DecisionEvent, DecisionKind,
    GateError, Gatekeeper,
};
use crate::budget::LedgerError;
use crate::error::{Conflict, Missing};
use crate::state::ContractPut;
use crate::telemetry;

/// Why a delegation is rejected: the wire reason and its details.
struct Rejection(String, String);

impl Gatekeeper {
    /// DelegateOS's delegate (§9.1): accept or reject a delegation, recording it once.
    pub async fn delegate(&self, p: DelegateParams) -> Result<DelegateResponse, GateError> {
        let chain = vec![p.parent_delegation_id.clone(), p.delegation_id.clone()];
        let response = self.decide_delegation(p).await?;
        self.publish(|| {
            let (allowed, denial_type, detail) = match &response {
                DelegateResponse::Accept(_) => (true, None, None),
                DelegateResponse::Reject(r) => {
                    (false, Some(r.reason.clone()), Some(r.details.clone()))
                }
            };
            DecisionEvent {
                at: OffsetDateTime::now_utc(),
                kind: DecisionKind::Delegate,
                allowed,
                tenant: None,
                chain,
                request: None,
                cost_microcents: 0,
                reservation_id: None,
                denial_type,
                detail,
                request_id: crate::request_id::current(),
                protocol: Some(super::DELEGATEOS.name),
                front: crate::request_id::front(),
                tool: None,
            }
        });
        Ok(response)
    }

    async fn decide_delegation(&self, p: DelegateParams) -> Result<DelegateResponse, GateError> {
        let decided = match self.check_delegation(&p).await? {
            Ok((record, token)) => self.record_delegation(&p, record, &token).await?,
            Err(rejection) => Err(rejection),
        };
        Ok(match decided {
            Ok(id) => DelegateResponse::accept(id),
            Err(Rejection(reason, details)) => {
                telemetry::record_denial("delegateos", &reason);
                DelegateResponse::reject(&reason, details)
            }
        })
    }

    /// The delegation a request describes, if its token verifies, is in good
    /// standing, is bound to the contract and names this delegation and its
    /// parent, within the contract's depth.
    async fn check_delegation(
        &self,
        p: &DelegateParams,
    ) -> Result<Result<(Delegation, dct::Dct), Rejection>, GateError> {
        let reject = |reason: &str, details: String| Ok(Err(Rejection(reason.to_owned(), details)));
        if let Err(r) = dct::check_format(&p.dct_format) {
            return reject(r.kind.as_str(), format!("dctFormat: {}", r.detail));
        }
        let contract = &p.contract;
        if let Err(e) = contract.verify_signature() {
            return reject("invalid_contract", e.to_string());
        }
        if let Err(e) = contract.check_content(&self.registry) {
            return reject("invalid_contract", e.to_string());
        }
        let (now, _) = now();
        let verified = match self.verified(&p.dct) {
            Ok(v) => v,
            Err(r) => return reject(r.kind.as_str(), r.detail),
        };
        let levels = &verified.levels;
        let spent = self
            .budgets
            .spent(&levels.last().expect("a chain has a level").0)
            .await
            .map_err(super::ledger_error)?;
        if let Err(r) = verified
            .token
            .check_standing(&self.revocations.read(), &now, spent)
        {
            return reject(r.kind.as_str(), r.detail);
        }
        let token = verified.token.dct();
        if !verified
            .token
            .levels()
            .iter()
            .any(|l| l.signer == contract.issuer)
        {
            return reject(
                "invalid_contract",
                format!(
                    "the contract is issued by {}, who signed no block of the token",
                    contract.issuer
                ),
            );
        }
        if let Err(e) = contract.check_binding(&verified.token) {
            return reject(e.reason(), e.to_string());
        }
        if *token.delegation_id() != p.delegation_id {
            return reject(
                "delegation_mismatch",
                format!(
                    "the token's delegation is {}, not {}",
                    token.delegation_id(),
                    p.delegation_id
                ),
            );
        }
        let chain = verified.token.levels();
        let expected_parent = match chain.len() {
            1 => token.token().authority.parent_delegation_id.clone(),
            n => chain[n - 2].delegation_id.clone(),
        };
        if p.parent_delegation_id != expected_parent {
            return reject(
                "delegation_mismatch",
                format!(
                    "the token's parent delegation is {expected_parent}, not {}",
                    p.parent_delegation_id
                ),
            );
        }
        let depth = token.token().authority.chain_depth + token.token().attenuations.len() as u32;
        if depth > contract.constraints.max_chain_depth {
            return reject(
                "chain_invariant",
                format!(
                    "depth {depth} exceeds the contract's maxChainDepth {}",
                    contract.constraints.max_chain_depth
                ),
            );
        }
        let record = Delegation {
            id: p.delegation_id.clone(),
            parent_id: p.parent_delegation_id.clone(),
            from: chain.last().expect("a chain has a level").signer.clone(),
            to: token.holder().clone(),
            contract_id: contract.id.clone(),
            dct: token.to_serialized(),
            depth,
            status: DelegationStatus::Active,
            created_at: now,
            completed_at: None,
            attestation_id: None,
        };
        Ok(Ok((record, token.clone())))
    }

    /// Records an accepted delegation once: its place in the recorded
    /// chain (§8.2 invariants), its contract (one per ID) and itself.
    async fn record_delegation(
        &self,
        p: &DelegateParams,
        record: Delegation,
        token: &dct::Dct,
    ) -> Result<Result<delegateos::DelegationId, Rejection>, GateError> {
        let reject = |reason: &str, details: String| Ok(Err(Rejection(reason.to_owned(), details)));
        let contract = &p.contract;

        let invariant = if record.parent_id.is_root_parent() {
            record.check_root()
        } else {
            match self.delegations.get(&record.parent_id).await? {
                Some(parent) => record.check_child_of(&parent),
                None => {
                    return reject(
                        "unknown_parent",
                        format!(
                            "parent delegation {} is not recorded here",
                            record.parent_id
                        ),
                    )
                }
            }
        };
        if let Err(e) = invariant {
            return reject("chain_invariant", e.to_string());
        }
        if self.delegations.put_contract(contract).await? == ContractPut::Conflict {
            return reject(
                "contract_conflict",
                format!("another contract with ID {} is recorded", contract.id),
            );
        }
        if !self.delegations.insert_new(&record, token).await? {
            return reject(
                "replay",
                format!("delegation {} was already accepted", record.id),
            );
        }
        self.delegations.sync().await?;
        Ok(Ok(record.id))
    }

    /// DelegateOS's complete (§9.4): verify the attestation against the stored
    /// contract, charge its cost, and close the delegation.
    pub async fn complete(&self, p: CompleteParams) -> Result<Completion, GateError> {
        let delegation = self
            .delegations
            .get(&p.delegation_id)
            .await?
            .ok_or_else(|| GateError::NotFound {
                kind: Missing::Delegation,
                id: p.delegation_id.to_string(),
            })?;
        if delegation.status != DelegationStatus::Active {
            return Err(GateError::Conflict {
                kind: Conflict::DelegationNotActive,
                detail: format!("delegation {} is {:?}", delegation.id, delegation.status),
            });
        }
        let att = &p.attestation;
        if att.delegation_id != delegation.id || att.contract_id != delegation.contract_id {
            return Err(GateError::InvalidParams(format!(
                "the attestation is for {} under {}, not {} under {}",
                att.delegation_id, att.contract_id, delegation.id, delegation.contract_id
            )));
        }
        if att.principal != delegation.to {
            return Err(GateError::Rejected {
                kind: "principal_mismatch".into(),
                detail: format!(
                    "the attestation is by {}, but the delegation went to {}",
                    att.principal, delegation.to
                ),
            });
        }
        let contract = self
            .delegations
            .contract(&delegation.contract_id)
            .await?
            .ok_or_else(|| GateError::NotFound {
                kind: Missing::Contract,
                id: delegation.contract_id.to_string(),
            })?;
        let (children, contracts) = self.stored_children(att, contract).await?;
        let report = verify_attestation(
            att,
            &AttestationContext {
                contracts: &contracts,
                children: &children,
                registry: &self.registry,
            },
        )
        .map_err(|e| GateError::Rejected {
            kind: "invalid_contract".into(),
            detail: e.to_string(),
        })?;
        if let Some(f) = &report.reason {
            if f.attestation_id == att.id && f.kind == FailureKind::InvalidSignature {
                // A forgery changes nothing: the delegation stays active.
                return Err(GateError::Rejected {
                    kind: "invalid_signature".into(),
                    detail: f.detail.clone(),
                });
            }
        }
        // Charge the reported cost against every level of the delegation's chain.
        let verified = self
            .verified(&delegation.dct.token)
            .map_err(|r| GateError::Conflict {
                kind: Conflict::TokenInvalid,
                detail: r.detail,
            })?;
        let cost = att.result.cost_microcents;
        let mut reason = report.reason.clone();
        let charged = match self.budgets.charge(&verified.levels, cost).await {
            Ok(()) => cost,
            Err(e @ LedgerError::Exceeded { .. }) => {
                reason.get_or_insert(AttestationFailure {
                    attestation_id: att.id.clone(),
                    kind: FailureKind::BudgetExceeded,
                    detail: e.to_string(),
                });
                0
            }
            Err(e) => return Err(ledger_error(e)),
        };
        let status = if reason.is_none() && att.result.success {
            DelegationStatus::Completed
        } else {
            DelegationStatus::Failed
        };
        let mut closed = delegation.clone();
        closed.status = delegation
            .status
            .transition(status)
            .map_err(|e| GateError::Conflict {
                kind: Conflict::DelegationNotActive,
                detail: e.to_string(),
            })?;
        closed.completed_at = Some(now().0);
        closed.attestation_id = Some(att.id.clone());
        self.delegations.put_attestation(att).await?;
        if !self.delegations.replace(&delegation, &closed).await? {
            return Err(GateError::Conflict {
                kind: Conflict::ConcurrentUpdate,
                detail: format!("delegation {} changed while completing", delegation.id),
            });
        }
        self.delegations.sync().await?;
        Ok(Completion {
            delegation_id: closed.id,
            status: closed.status,
            charged_microcents: charged,
            verification: report.verification,
            reason,
        })
    }

    /// The stored attestations below `att` (bounded), and the contracts they need.
    async fn stored_children(
        &self,
        att: &delegateos::Attestation,
        contract: delegateos::TaskContract,
    ) -> Result<(AttestationsById, ContractsById), GateError> {
        let mut contracts = BTreeMap::from([(contract.id.clone(), contract)]);
        let mut children = BTreeMap::new();
        let mut queue: Vec<delegateos::AttestationId> = att.child_attestations.clone();
        while let Some(id) = queue.pop() {
            if children.len() >= 1024 || children.contains_key(&id) {
                continue;
            }
            if let Some(child) = self.delegations.attestation(&id).await? {
                if !contracts.contains_key(&child.contract_id) {
                    if let Some(c) = self.delegations.contract(&child.contract_id).await? {
                        contracts.insert(c.id.clone(), c);
                    }
                }
                queue.extend(child.child_attestations.iter().cloned());
                children.insert(id, child);
            }
        }
        Ok((children, contracts))
    }
}
