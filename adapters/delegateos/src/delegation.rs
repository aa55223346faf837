//! Delegation records and the chain invariants of §8.2.

use serde::{Deserialize, Serialize};

use crate::dct::{Dct, SerializedDct};
use crate::ids::{AttestationId, ContractId, DelegationId};
use crate::principal::PrincipalId;
use crate::timestamp::Timestamp;

/// Where a delegation is in its life (§8.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelegationStatus {
    Active,
    Completed,
    Failed,
    Revoked,
}

impl DelegationStatus {
    /// The status after moving to `next`: only `active → completed | failed | revoked`.
    pub fn transition(self, next: DelegationStatus) -> Result<DelegationStatus, ChainError> {
        match (self, next) {
            (
                DelegationStatus::Active,
                DelegationStatus::Completed | DelegationStatus::Failed | DelegationStatus::Revoked,
            ) => Ok(next),
            _ => Err(ChainError::Transition {
                from: self,
                to: next,
            }),
        }
    }
}

/// A delegation (§8.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Delegation {
    pub id: DelegationId,
    pub parent_id: DelegationId,
    pub from: PrincipalId,
    pub to: PrincipalId,
    pub contract_id: ContractId,
    pub dct: SerializedDct,
    pub depth: u32,
    pub status: DelegationStatus,
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attestation_id: Option<AttestationId>,
}

/// A broken chain invariant, one variant per rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    #[error("a root delegation must have parent del_000000000000 and depth 0 (has parent {parent}, depth {depth})")]
    NotARoot { parent: DelegationId, depth: u32 },
    #[error("delegation {child} names parent {named}, but its parent is {actual}")]
    WrongParent {
        child: DelegationId,
        named: DelegationId,
        actual: DelegationId,
    },
    #[error("delegation is from {from}, but the parent delegation went to {parent_to}")]
    FromIsNotParentTo {
        from: PrincipalId,
        parent_to: PrincipalId,
    },
    #[error("depth {depth} is not the parent's depth {parent_depth} + 1")]
    Depth { depth: u32, parent_depth: u32 },
    #[error("depth {depth} exceeds the root token's maxChainDepth {max}")]
    TooDeep { depth: u32, max: u32 },
    #[error("the token is not attenuated from the parent's token: {0}")]
    NotAttenuated(String),
    #[error("the token does not match the delegation: {0}")]
    TokenMismatch(String),
    #[error("the parent delegation is {0:?}, not active")]
    ParentNotActive(DelegationStatus),
    #[error("cannot move a delegation from {from:?} to {to:?}")]
    Transition {
        from: DelegationStatus,
        to: DelegationStatus,
    },
    #[error("the delegation's token is malformed: {0}")]
    MalformedToken(String),
}

impl Delegation {
    fn token(&self) -> Result<Dct, ChainError> {
        Dct::decode(&self.dct.token).map_err(|r| ChainError::MalformedToken(r.detail))
    }

    /// The token's last block names this delegation, its contract, and its
    /// holder; for a child, the last attenuator is the delegator.
    fn check_token(&self, token: &Dct) -> Result<(), ChainError> {
        if token.delegation_id() != &self.id {
            return Err(ChainError::TokenMismatch(format!(
                "its delegationId is {}, the delegation's {}",
                token.delegation_id(),
                self.id
            )));
        }
        if token.contract_id() != &self.contract_id {
            return Err(ChainError::TokenMismatch(format!(
                "its contractId is {}, the delegation's {}",
                token.contract_id(),
                self.contract_id
            )));
        }
        if token.holder() != &self.to {
            return Err(ChainError::TokenMismatch(format!(
                "it is held by {}, the delegation goes to {}",
                token.holder(),
                self.to
            )));
        }
        let signer = token
            .token()
            .attenuations
            .last()
            .map_or(&token.token().authority.issuer, |a| &a.attenuator);
        if signer != &self.from {
            return Err(ChainError::TokenMismatch(format!(
                "its last block is signed by {signer}, the delegation is from {}",
                self.from
            )));
        }
        Ok(())
    }

    /// §8.2 rule 1 (and rule 4 for depth 0): a root delegation.
    pub fn check_root(&self) -> Result<(), ChainError> {
        if !self.parent_id.is_root_parent() || self.depth != 0 {
            return Err(ChainError::NotARoot {
                parent: self.parent_id.clone(),
                depth: self.depth,
            });
        }
        let token = self.token()?;
        if !token.token().attenuations.is_empty() {
            return Err(ChainError::TokenMismatch(
                "a root delegation's token has no attenuations".into(),
            ));
        }
        self.check_token(&token)
    }

    /// §8.2 rules 2–5: this delegation as a child of `parent`, which must be active.
    pub fn check_child_of(&self, parent: &Delegation) -> Result<(), ChainError> {
        if self.parent_id != parent.id {
            return Err(ChainError::WrongParent {
                child: self.id.clone(),
                named: self.parent_id.clone(),
                actual: parent.id.clone(),
            });
        }
        if parent.status != DelegationStatus::Active {
            return Err(ChainError::ParentNotActive(parent.status));
        }
        if self.from != parent.to {
            return Err(ChainError::FromIsNotParentTo {
                from: self.from.clone(),
                parent_to: parent.to.clone(),
            });
        }
        if self.depth != parent.depth.saturating_add(1) {
            return Err(ChainError::Depth {
                depth: self.depth,
                parent_depth: parent.depth,
            });
        }
        let token = self.token()?;
        let parent_token = parent.token()?;
        let max = token.token().authority.max_chain_depth;
        if self.depth > max {
            return Err(ChainError::TooDeep {
                depth: self.depth,
                max,
            });
        }
        let (t, p) = (token.token(), parent_token.token());
        if t.authority != p.authority {
            return Err(ChainError::NotAttenuated(
                "its authority block differs".into(),
            ));
        }
        if t.attenuations.len() <= p.attenuations.len()
            || t.attenuations[..p.attenuations.len()] != p.attenuations[..]
        {
            return Err(ChainError::NotAttenuated(
                "its attenuations do not strictly extend the parent's".into(),
            ));
        }
        self.check_token(&token)
    }
}
