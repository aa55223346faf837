//! Online issuance (`dgw/tokens/issue`): an administrator asks the gateway
//! for a DCT, and the gateway attenuates, with its own key, the tenant's
//! *issuing delegation* — a token the tenant's root signed offline to the
//! gateway's key. The root key is never online; everything the gateway can
//! issue for a tenant is bounded by that delegation's capabilities, budget,
//! expiry and depth, and an attenuation can only narrow them.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use delegateos::dct::AttenuateParams;
use delegateos::{Capability, ContractId, Dct, DelegationId, Keypair, PrincipalId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::caller::Caller;
use crate::gatekeeper::{Forbidden, GateError, Gatekeeper, Missing};

/// The JSON-RPC method (and gRPC `CallProtocol` method) that issues.
pub const METHOD: &str = "dgw/tokens/issue";

/// Longest lifetime an issued token gets when the request names none.
const DEFAULT_TTL: time::Duration = time::Duration::hours(1);

/// Most capabilities one request may name.
const MAX_CAPABILITIES: usize = 64;

/// The gateway's key and each tenant's issuing delegation.
pub struct Issuing {
    key: Arc<Keypair>,
    /// Tenant name → its issuing delegation (serialized), replaced on reload.
    delegations: ArcSwap<HashMap<String, String>>,
}

/// A capability as text (`NAMESPACE:ACTION:RESOURCE`) or as the §3 object.
#[derive(Deserialize)]
#[serde(untagged)]
enum CapabilityParam {
    Text(String),
    Object(Capability),
}

/// `dgw/tokens/issue` params.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IssueParams {
    tenant: String,
    to: PrincipalId,
    capabilities: Vec<CapabilityParam>,
    budget_microcents: u64,
    /// Default: an hour from now, or the issuing delegation's expiry if sooner.
    #[serde(default)]
    expires_at: Option<Timestamp>,
    /// Default: the issuing delegation's.
    #[serde(default)]
    max_chain_depth: Option<u32>,
    /// Default: a fresh one.
    #[serde(default)]
    delegation_id: Option<DelegationId>,
    /// Default: the issuing delegation's.
    #[serde(default)]
    contract_id: Option<ContractId>,
}

/// What `dgw/tokens/issue` answers.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Issued {
    pub token: String,
    pub format: &'static str,
    pub tenant: String,
    pub delegation_id: DelegationId,
    pub contract_id: ContractId,
    pub to: PrincipalId,
    pub capabilities: Vec<Capability>,
    pub budget_microcents: u64,
    pub expires_at: Timestamp,
    /// The new token's blocks, root first; the last is the one to revoke.
    pub revocation_ids: Vec<String>,
}

fn invalid(detail: impl Into<String>) -> GateError {
    GateError::InvalidParams(detail.into())
}

fn wider(detail: String) -> GateError {
    GateError::Rejected {
        kind: "attenuation_violation".into(),
        detail,
    }
}

impl Issuing {
    /// Issuance with `key` (the gateway's) from `delegations` (tenant →
    /// issuing delegation).
    pub fn new(key: Arc<Keypair>, delegations: HashMap<String, String>) -> Self {
        Self {
            key,
            delegations: ArcSwap::from_pointee(delegations),
        }
    }

    /// The gateway's principal, which every issuing delegation must name.
    pub fn gateway(&self) -> &PrincipalId {
        self.key.principal_id()
    }

    /// Issues from exactly these delegations from now on (reload).
    pub fn set(&self, delegations: HashMap<String, String>) {
        self.delegations.store(Arc::new(delegations));
    }

    /// `dgw/tokens/issue`: an authenticated administrator only (a loopback
    /// caller without a secret may read, never create authority); the
    /// request must fit inside the tenant's issuing delegation as it stands
    /// now (verified, not revoked, not expired); recorded in the audit trail.
    pub fn issue(
        &self,
        gate: &Gatekeeper,
        caller: &Caller,
        params: serde_json::Value,
    ) -> Result<Issued, GateError> {
        if !caller.is_authenticated_admin() {
            return Err(GateError::Forbidden {
                kind: Forbidden::AdminRequired,
                detail: format!("{METHOD} needs an admin token or certificate"),
            });
        }
        let p: IssueParams =
            serde_json::from_value(params).map_err(|e| invalid(format!("{METHOD}: {e}")))?;
        if p.capabilities.is_empty() || p.capabilities.len() > MAX_CAPABILITIES {
            return Err(invalid(format!(
                "capabilities: name 1 to {MAX_CAPABILITIES}"
            )));
        }
        let capabilities = p
            .capabilities
            .into_iter()
            .map(|c| match c {
                CapabilityParam::Text(t) => t.parse::<Capability>(),
                CapabilityParam::Object(c) => c.validate().map(|()| c),
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("capabilities: {e}")))?;
        let delegations = self.delegations.load();
        let Some(issuing) = delegations.get(&p.tenant) else {
            return Err(GateError::NotFound {
                kind: Missing::IssuingDelegation,
                id: p.tenant,
            });
        };
        // Verified as the pipeline would verify it now: a revoked or
        // expired issuing delegation issues nothing.
        let grant = gate.dct_grant(issuing).map_err(|d| GateError::Rejected {
            kind: "issuing_delegation_invalid".into(),
            detail: format!(
                "the issuing delegation of tenant {}: {}: {}",
                p.tenant,
                d.kind.as_str(),
                d.detail
            ),
        })?;
        if grant.tenant != p.tenant {
            return Err(GateError::Rejected {
                kind: "issuing_delegation_invalid".into(),
                detail: format!(
                    "the issuing delegation of tenant {} is rooted at tenant {}",
                    p.tenant, grant.tenant
                ),
            });
        }
        let parent = Dct::decode(issuing).map_err(|r| GateError::Rejected {
            kind: "issuing_delegation_invalid".into(),
            detail: r.detail,
        })?;
        if parent.holder() != self.key.principal_id() {
            return Err(GateError::Rejected {
                kind: "issuing_delegation_invalid".into(),
                detail: format!(
                    "the issuing delegation of tenant {} is held by {}, not by this gateway ({})",
                    p.tenant,
                    parent.holder(),
                    self.key.principal_id()
                ),
            });
        }
        let now = time::OffsetDateTime::now_utc();
        let expires_at = match p.expires_at {
            Some(t) => t,
            None => {
                let hour = Timestamp::from_instant(now + DEFAULT_TTL);
                let ceiling = grant_expiry(&parent);
                match ceiling {
                    Some(c) if c.instant() < hour.instant() => c,
                    _ => hour,
                }
            }
        };
        if expires_at.instant() <= now {
            return Err(invalid(format!(
                "expiresAt {expires_at} is not in the future"
            )));
        }
        let delegation_id = match p.delegation_id {
            Some(d) => d,
            None => DelegationId::from_bytes(crate::random::bytes().map_err(|e| {
                GateError::Storage(crate::state::StorageError::Backend(e.to_string()))
            })?),
        };
        let contract_id = p
            .contract_id
            .unwrap_or_else(|| parent.contract_id().clone());
        let issued = parent
            .attenuate(
                &self.key,
                AttenuateParams {
                    delegatee: p.to.clone(),
                    delegation_id: delegation_id.clone(),
                    contract_id: contract_id.clone(),
                    allowed_capabilities: Some(capabilities.clone()),
                    max_budget_microcents: Some(p.budget_microcents),
                    expires_at: Some(expires_at.clone()),
                    max_chain_depth: p.max_chain_depth,
                },
            )
            .map_err(|r| {
                wider(format!(
                    "not within tenant {}'s issuing delegation: {}",
                    p.tenant, r.detail
                ))
            })?;
        let token = issued.encode();
        let revocation_ids = issued.revocation_ids();
        gate.trail().event(
            "token_issued",
            json!({
                "admin": caller.admin_name(),
                "tenant": p.tenant,
                "delegationId": delegation_id,
                "contractId": contract_id,
                "to": p.to,
                "capabilities": capabilities,
                "budgetMicrocents": p.budget_microcents,
                "expiresAt": expires_at,
                "revocationId": revocation_ids.last(),
            }),
        );
        Ok(Issued {
            token,
            format: delegateos::dct::FORMAT,
            tenant: p.tenant,
            delegation_id,
            contract_id,
            to: p.to,
            capabilities,
            budget_microcents: p.budget_microcents,
            expires_at,
            revocation_ids,
        })
    }
}

/// The earliest expiry along a token's chain.
fn grant_expiry(token: &Dct) -> Option<Timestamp> {
    let t = token.token();
    std::iter::once(&t.authority.expires_at)
        .chain(t.attenuations.iter().filter_map(|a| a.expires_at.as_ref()))
        .min_by_key(|e| e.instant())
        .cloned()
}
