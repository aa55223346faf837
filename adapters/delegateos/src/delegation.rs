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
    /// Accepted and running.
    Active,
    /// Completed with a verified attestation.
    Completed,
    /// Completed, but its attestation or verification failed.
    Failed,
    /// A block of its token was revoked.
    Revoked,
}

impl DelegationStatus {
    /// The wire name (`active`, …), as messages name it.
    pub fn as_str(self) -> &'static str {
        match self {
            DelegationStatus::Active => "active",
            DelegationStatus::Completed => "completed",
            DelegationStatus::Failed => "failed",
            DelegationStatus::Revoked => "revoked",
        }
    }

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
    /// `del_…`.
    pub id: DelegationId,
    /// The delegation it descends from.
    pub parent_id: DelegationId,
    /// Who delegated.
    pub from: PrincipalId,
    /// Who it is delegated to.
    pub to: PrincipalId,
    /// The contract it is under.
    pub contract_id: ContractId,
    /// The token that carries it.
    pub dct: SerializedDct,
    /// Its depth in the chain.
    pub depth: u32,
    /// Where it is in its lifecycle (§8.2).
    pub status: DelegationStatus,
    /// When it was accepted.
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// When it completed or failed.
    pub completed_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The attestation it completed with.
    pub attestation_id: Option<AttestationId>,
}

/// A broken chain invariant, one variant per rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    #[error("a root delegation must have parent del_000000000000 and depth 0 (has parent {parent}, depth {depth})")]
    /// A root does not name the root parent, or has a depth.
    NotARoot {
        /// The parent it names.
        parent: DelegationId,
        /// Its depth.
        depth: u32,
    },
    #[error("delegation {child} names parent {named}, but its parent is {actual}")]
    /// A child names a parent other than its own.
    WrongParent {
        /// The child.
        child: DelegationId,
        /// The parent it names.
        named: DelegationId,
        /// Its actual parent.
        actual: DelegationId,
    },
    #[error("delegation is from {from}, but the parent delegation went to {parent_to}")]
    /// A child is not delegated by its parent's delegatee.
    FromIsNotParentTo {
        /// Who delegated the child.
        from: PrincipalId,
        /// Who the parent was delegated to.
        parent_to: PrincipalId,
    },
    #[error("depth {depth} is not the parent's depth {parent_depth} + 1")]
    /// A child's depth is not its parent's plus one.
    Depth {
        /// The child's depth.
        depth: u32,
        /// The parent's.
        parent_depth: u32,
    },
    #[error("depth {depth} exceeds the root token's maxChainDepth {max}")]
    /// Deeper than the root token allows.
    TooDeep {
        /// The delegation's depth.
        depth: u32,
        /// The root token's `maxChainDepth`.
        max: u32,
    },
    #[error("the token is not attenuated from the parent's token: {0}")]
    /// A child's token does not narrow its parent's.
    NotAttenuated(String),
    #[error("the token does not match the delegation: {0}")]
    /// The token is not the delegation's.
    TokenMismatch(String),
    #[error("the parent delegation is {}, not active", .0.as_str())]
    /// The parent is no longer active.
    ParentNotActive(DelegationStatus),
    #[error("cannot move a delegation from {} to {}", .from.as_str(), .to.as_str())]
    /// A status change §8.2 does not allow.
    Transition {
        /// The current status.
        from: DelegationStatus,
        /// The status asked for.
        to: DelegationStatus,
    },
    #[error("the delegation's token is malformed: {0}")]
    /// The token cannot be decoded.
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
