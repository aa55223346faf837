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
    /// The request it was made for ([`crate::request_id`]).
    pub request_id: Option<std::sync::Arc<str>>,
    /// The protocol whose credential was presented (its `ProtocolId`
    /// name: `delegateos`, …); for a denial, the protocol that refused.
    pub protocol: Option<&'static str>,
    /// The front the request came in on (`mcp`, `jsonrpc`, `grpc`,
    /// `http`; [`crate::request_id::front`]).
    pub front: Option<&'static str>,
    /// The tool the call named ([`crate::protocol::Call::tool`]: an MCP
    /// tool's name, or `dgw/authorize`'s `tool`), when the front gave one.
    pub tool: Option<String>,
}

/// A decision as the audit trail records it (no credential in it).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct DecisionRecord<'a> {
    event: &'static str,
    at: u64,
    decision: &'static str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tenant: Option<&'a str>,
    chain: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<RequestRecord<'a>>,
    cost_microcents: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    reservation_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    denial_type: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
    // Added for the console's filters (issue 38): absent from records
    // written before, and from those that have none, so an old record
    // reads as it did and its bytes (and the chain's hashes) are unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    protocol: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    front: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool: Option<&'a str>,
}

#[derive(serde::Serialize)]
struct RequestRecord<'a> {
    namespace: &'a str,
    action: &'a str,
    resource: &'a str,
}

impl crate::trail::Record for DecisionEvent {
    fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        serde_json::to_writer(
            out,
            &DecisionRecord {
                event: "decision",
                at: (self.at.unix_timestamp_nanos() / 1_000_000).max(0) as u64,
                decision: self.kind.as_str(),
                allowed: self.allowed,
                request_id: self.request_id.as_deref(),
                tenant: self.tenant.as_deref(),
                chain: self.chain.iter().map(|d| d.as_str()).collect(),
                request: self.request.as_ref().map(|r| RequestRecord {
                    namespace: &r.namespace,
                    action: &r.action,
                    resource: &r.resource,
                }),
                cost_microcents: self.cost_microcents,
                reservation_id: self.reservation_id.as_deref(),
                denial_type: self.denial_type.as_deref(),
                detail: self.detail.as_deref(),
                protocol: self.protocol,
                front: self.front,
                tool: self.tool.as_deref(),
            },
        )
    }
}

/// Decisions kept for a slow watcher before it misses some.
pub(super) const DECISION_BACKLOG: usize = 4096;

impl Gatekeeper {
    /// Every decision from now on.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Arc<DecisionEvent>> {
        self.decisions.subscribe()
    }

    /// Publishes a decision to watchers and the trail (built only when
    /// one of them takes it).
    pub(super) fn publish(&self, make: impl FnOnce() -> DecisionEvent) {
        let watched = self.decisions.receiver_count() > 0;
        if !watched && !self.trail.is_set() {
            return;
        }
        let audit = crate::stage_span!("audit");
        let _in = audit.enter();
        let event = Arc::new(make());
        if !audit.is_disabled() {
            audit.record(
                "dgw.decision",
                if event.allowed { "allowed" } else { "denied" },
            );
            if let Some(t) = &event.tenant {
                audit.record("dgw.tenant", t.as_str());
            }
            if let Some(leaf) = event.chain.last() {
                audit.record("dgw.delegation", leaf.as_str());
            }
            if let Some(d) = &event.denial_type {
                audit.record("dgw.denial", d.as_str());
            }
        }
        self.trail
            .record(|| crate::trail::TrailEntry::Decision(event.clone()));
        if watched {
            let _ = self.decisions.send(event);
        }
    }

    /// An authorization decision: for `grant` when its credential
    /// verified, on the call's `tool` when the front named one. Its
    /// protocol is the denial's, else the grant's.
    pub(super) fn publish_authorize(
        &self,
        grant: Option<&Grant>,
        tool: Option<&str>,
        request: &CapabilityRequest,
        cost_microcents: u64,
        outcome: Result<Option<&Reservation>, &Denial>,
    ) {
        self.publish(|| DecisionEvent {
            at: OffsetDateTime::now_utc(),
            kind: DecisionKind::Authorize,
            allowed: outcome.is_ok(),
            tenant: grant.map(|g| g.tenant.clone()),
            chain: grant.map(|g| g.chain.clone()).unwrap_or_default(),
            request: Some(request.clone()),
            cost_microcents,
            reservation_id: outcome.ok().flatten().map(|r| r.reservation_id.clone()),
            denial_type: outcome.err().map(|d| d.kind.as_str().to_owned()),
            detail: outcome.err().map(|d| d.detail.clone()),
            request_id: crate::request_id::current(),
            protocol: outcome
                .err()
                .map(|d| d.protocol.name)
                .or(grant.map(|g| g.protocol.name)),
            front: crate::request_id::front(),
            tool: tool.map(str::to_owned),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trail::Record;

    fn event() -> DecisionEvent {
        DecisionEvent {
            at: OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap(),
            kind: DecisionKind::Authorize,
            allowed: false,
            tenant: Some("acme".into()),
            chain: vec![DelegationId::parse("del_000000000001").unwrap()],
            request: Some(CapabilityRequest {
                namespace: "demo".into(),
                action: "echo".into(),
                resource: "/text".into(),
            }),
            cost_microcents: 10,
            reservation_id: None,
            denial_type: Some("revoked".into()),
            detail: Some("gone".into()),
            request_id: Some(Arc::from("r1")),
            protocol: None,
            front: None,
            tool: None,
        }
    }

    fn json(e: &DecisionEvent) -> String {
        let mut out = Vec::new();
        e.write_json(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Without a protocol, front or tool, a record is byte for byte what
    /// was written before they existed (old logs and their hashes stay as
    /// they were); with them, they follow the fields that were there.
    #[test]
    fn protocol_front_and_tool_are_added_only_when_known() {
        let old = r#"{"event":"decision","at":1700000000000,"decision":"authorize","allowed":false,"requestId":"r1","tenant":"acme","chain":["del_000000000001"],"request":{"namespace":"demo","action":"echo","resource":"/text"},"costMicrocents":10,"denialType":"revoked","detail":"gone"}"#;
        assert_eq!(json(&event()), old);
        let mut e = event();
        e.protocol = Some("toy");
        e.front = Some("mcp");
        e.tool = Some("<img src=x>".into());
        assert_eq!(
            json(&e),
            format!(
                "{},\"protocol\":\"toy\",\"front\":\"mcp\",\"tool\":\"<img src=x>\"}}",
                &old[..old.len() - 1]
            )
        );
    }
}
