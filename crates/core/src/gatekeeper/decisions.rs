//! Every allow/deny decision, published to watchers (gRPC
//! `WatchDecisions`) whichever front asked for it.

use std::sync::Arc;

use delegateos::{CapabilityRequest, DelegationId};
use time::OffsetDateTime;

use super::{Denial, Gatekeeper, Grant};
use crate::budget::Reservation;

/// Which decision was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecisionKind {
    Authorize,
    Delegate,
}

impl DecisionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Authorize => "authorize",
            DecisionKind::Delegate => "delegate",
        }
    }
}

/// One allow/deny decision, as published to watchers (gRPC
/// `WatchDecisions`), whichever front asked for it.
#[derive(Debug, Clone)]
pub struct DecisionEvent {
    pub at: OffsetDateTime,
    pub kind: DecisionKind,
    pub allowed: bool,
    /// The tenant, when the token verified and its root is a tenant.
    pub tenant: Option<String>,
    /// The delegation IDs of the token's chain (root first) when it
    /// verified; for a delegation, its parent's and its own.
    pub chain: Vec<DelegationId>,
    pub request: Option<CapabilityRequest>,
    pub cost_microcents: u64,
    pub reservation_id: Option<String>,
    pub denial_type: Option<String>,
    pub detail: Option<String>,
}

/// Decisions kept for a slow watcher before it misses some.
pub(super) const DECISION_BACKLOG: usize = 4096;

impl Gatekeeper {
    /// Every decision from now on.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Arc<DecisionEvent>> {
        self.decisions.subscribe()
    }

    /// Publishes a decision when someone watches (built only then).
    pub(super) fn publish(&self, make: impl FnOnce() -> DecisionEvent) {
        if self.decisions.receiver_count() > 0 {
            let _ = self.decisions.send(Arc::new(make()));
        }
    }

    /// An authorization decision.
    pub(super) fn publish_authorize(
        &self,
        grant: Option<&Grant>,
        request: &CapabilityRequest,
        cost_microcents: u64,
        outcome: Result<Option<&Reservation>, &Denial>,
    ) {
        self.publish_decision(
            || grant.map(|g| g.tenant.clone()),
            || grant.map(|g| g.chain.clone()).unwrap_or_default(),
            request,
            cost_microcents,
            outcome,
        );
    }

    pub(super) fn publish_decision(
        &self,
        tenant: impl FnOnce() -> Option<String>,
        chain: impl FnOnce() -> Vec<DelegationId>,
        request: &CapabilityRequest,
        cost_microcents: u64,
        outcome: Result<Option<&Reservation>, &Denial>,
    ) {
        self.publish(|| DecisionEvent {
            at: OffsetDateTime::now_utc(),
            kind: DecisionKind::Authorize,
            allowed: outcome.is_ok(),
            tenant: tenant(),
            chain: chain(),
            request: Some(request.clone()),
            cost_microcents,
            reservation_id: outcome.ok().flatten().map(|r| r.reservation_id.clone()),
            denial_type: outcome.err().map(|d| d.kind.as_str().to_owned()),
            detail: outcome.err().map(|d| d.detail.clone()),
        });
    }
}
