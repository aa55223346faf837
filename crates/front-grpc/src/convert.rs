//! Gatekeeper results as `delegate_gateway.v1` messages.

use delegateos::{
    AuthorizedScope, Capability, CapabilityRequest, DelegationStatus, RevocationScope,
};
use time::OffsetDateTime;

use super::pb;
use dgw_core::budget::Settlement;
use dgw_core::gatekeeper::{
    Authorization, BudgetReport, Completion, DecisionEvent, DelegationView, Revocation,
};

/// An instant as a `google.protobuf.Timestamp`.
pub fn timestamp(t: OffsetDateTime) -> prost_types::Timestamp {
    let nanos = t.unix_timestamp_nanos();
    prost_types::Timestamp {
        seconds: nanos.div_euclid(1_000_000_000) as i64,
        nanos: nanos.rem_euclid(1_000_000_000) as i32,
    }
}

/// Unix milliseconds as a `google.protobuf.Timestamp`.
pub fn timestamp_ms(ms: u64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: (ms / 1000) as i64,
        nanos: ((ms % 1000) * 1_000_000) as i32,
    }
}

pub fn request(r: &CapabilityRequest) -> pb::CapabilityRequest {
    pb::CapabilityRequest {
        namespace: r.namespace.clone(),
        action: r.action.clone(),
        resource: r.resource.clone(),
    }
}

fn capability(c: &Capability) -> pb::Capability {
    pb::Capability {
        namespace: c.namespace.clone(),
        action: c.action.clone(),
        resource: c.resource.as_str().to_owned(),
    }
}

pub fn scope(s: &AuthorizedScope) -> pb::AuthorizedScope {
    pb::AuthorizedScope {
        capabilities: s.capabilities.iter().map(capability).collect(),
        remaining_budget_microcents: s.remaining_budget_microcents,
        chain_depth: s.chain_depth,
        max_chain_depth: s.max_chain_depth,
        contract_id: s.contract_id.to_string(),
        delegation_id: s.delegation_id.to_string(),
    }
}

pub fn authorization(a: &Authorization) -> pb::AuthorizeResponse {
    pb::AuthorizeResponse {
        reservation_id: a
            .reservation
            .as_ref()
            .map(|r| r.reservation_id.clone())
            .unwrap_or_default(),
        amount_microcents: a.reservation.as_ref().map_or(0, |r| r.amount_microcents),
        deadline_time: a.reservation.as_ref().map(|r| timestamp_ms(r.deadline_ms)),
        scope: a.scope.as_ref().map(scope),
        tenant: a.tenant.clone(),
    }
}

pub fn settlement(s: &Settlement) -> pb::SettleResponse {
    pb::SettleResponse {
        reservation_id: s.reservation_id.clone(),
        charged_microcents: s.charged_microcents,
        released_microcents: s.released_microcents,
    }
}

pub fn budget(r: &BudgetReport) -> pb::GetBudgetResponse {
    pb::GetBudgetResponse {
        delegation_id: r.delegation_id.to_string(),
        chains: r
            .chains
            .iter()
            .map(|levels| pb::BudgetChain {
                levels: levels
                    .iter()
                    .map(|l| pb::BudgetLevel {
                        delegation_id: l.delegation_id.clone(),
                        budget_microcents: l.budget_microcents,
                        spent_microcents: l.spent_microcents,
                        reserved_microcents: l.reserved_microcents,
                        remaining_microcents: l.remaining_microcents,
                    })
                    .collect(),
            })
            .collect(),
    }
}

pub fn status(s: DelegationStatus) -> pb::DelegationStatus {
    match s {
        DelegationStatus::Active => pb::DelegationStatus::Active,
        DelegationStatus::Completed => pb::DelegationStatus::Completed,
        DelegationStatus::Failed => pb::DelegationStatus::Failed,
        DelegationStatus::Revoked => pb::DelegationStatus::Revoked,
    }
}

pub fn delegation(d: &DelegationView) -> pb::Delegation {
    pb::Delegation {
        delegation_id: d.id.to_string(),
        parent_delegation_id: d.parent_id.to_string(),
        from_principal: d.from.to_string(),
        to_principal: d.to.to_string(),
        contract_id: d.contract_id.to_string(),
        depth: d.depth,
        status: status(d.status) as i32,
        create_time: Some(timestamp(d.created_at.instant())),
        complete_time: d.completed_at.as_ref().map(|t| timestamp(t.instant())),
        attestation_id: d
            .attestation_id
            .as_ref()
            .map(|a| a.to_string())
            .unwrap_or_default(),
        capabilities: d.capabilities.iter().flatten().map(capability).collect(),
        budget_microcents: d.budget_microcents.unwrap_or_default(),
        expire_time: d.expires_at.as_ref().map(|t| timestamp(t.instant())),
    }
}

pub fn completion(c: &Completion) -> pb::CompleteResponse {
    pb::CompleteResponse {
        delegation_id: c.delegation_id.to_string(),
        status: status(c.status) as i32,
        charged_microcents: c.charged_microcents,
        verification: c.verification.as_ref().map(|v| pb::CheckResult {
            passed: v.passed,
            score: v.score,
            details: v.details.clone().unwrap_or_default(),
        }),
        failure: c.reason.as_ref().map(|f| pb::AttestationFailure {
            attestation_id: f.attestation_id.to_string(),
            r#type: f.kind.to_string(),
            detail: f.detail.clone(),
        }),
    }
}

pub fn revocation(r: &Revocation) -> pb::RevokeResponse {
    pb::RevokeResponse {
        revocation_id: r.revocation_id.clone(),
        scope: match r.scope {
            RevocationScope::Block => pb::RevocationScope::Block,
            RevocationScope::Chain => pb::RevocationScope::Chain,
        } as i32,
        newly_recorded: r.newly_recorded,
        revoked_delegation_ids: r
            .revoked_delegations
            .iter()
            .map(|d| d.to_string())
            .collect(),
    }
}

pub fn decision(e: &DecisionEvent) -> pb::Decision {
    pb::Decision {
        decide_time: Some(timestamp(e.at)),
        kind: e.kind.as_str().to_owned(),
        outcome: if e.allowed {
            pb::DecisionOutcome::Allowed
        } else {
            pb::DecisionOutcome::Denied
        } as i32,
        tenant: e.tenant.clone().unwrap_or_default(),
        chain_delegation_ids: e.chain.iter().map(|d| d.to_string()).collect(),
        request: e.request.as_ref().map(request),
        cost_microcents: e.cost_microcents,
        reservation_id: e.reservation_id.clone().unwrap_or_default(),
        denial_type: e.denial_type.clone().unwrap_or_default(),
        detail: e.detail.clone().unwrap_or_default(),
        protocol: e.protocol.unwrap_or_default().to_owned(),
        front: e.front.unwrap_or_default().to_owned(),
        tool: e.tool.clone().unwrap_or_default(),
    }
}
