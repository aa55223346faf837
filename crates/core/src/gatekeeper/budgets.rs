//! Ending reservations (by their holder, the gateway or an administrator),
//! and the budget gauges.

use std::collections::BTreeMap;

use super::{forbidden, ledger_error, GateError, Gatekeeper};
use crate::budget::{HolderDigest, Settlement};
use crate::caller::Caller;
use crate::error::Forbidden;
use crate::telemetry;
use crate::trail::TrailEntry;
use tracing::Instrument;

/// How many delegations get a spend gauge of their own.
pub const TOP_DELEGATIONS: usize = 10;

impl Gatekeeper {
    /// Whether `caller` may end `reservation_id`: its holder (the same
    /// credential, compared by digest), the gateway, or an administrator who
    /// proved it with a secret. Anything else is `not_reservation_holder`.
    pub(super) async fn check_holder(
        &self,
        caller: &Caller,
        reservation_id: &str,
    ) -> Result<(), GateError> {
        if caller.is_authenticated_admin() {
            return Ok(());
        }
        let holder = self
            .budgets
            .holder(reservation_id)
            .await
            .map_err(ledger_error)?;
        let presented = caller.credential().map(HolderDigest::of);
        match (holder, presented) {
            (Some(h), Some(p)) if h.matches(&p) => Ok(()),
            _ => Err(forbidden(
                Forbidden::NotReservationHolder,
                "only the credential that made a reservation (or an admin) may settle or release it",
            )),
        }
    }

    /// Charges the actual cost of a reservation and releases the rest.
    pub async fn settle(
        &self,
        caller: &Caller,
        reservation_id: &str,
        actual_microcents: u64,
    ) -> Result<Settlement, GateError> {
        self.check_holder(caller, reservation_id).await?;
        let settled = self
            .budgets
            .settle(reservation_id, actual_microcents)
            .instrument(settle_span("charged"))
            .await
            .map_err(ledger_error)?;
        self.trail_settlement(&settled, caller);
        Ok(settled)
    }

    fn trail_settlement(&self, s: &Settlement, caller: &Caller) {
        self.trail.record(|| {
            Ended::now(
                "settle",
                &s.reservation_id,
                Some(s.charged_microcents),
                s.released_microcents,
                caller,
            )
        });
    }

    /// Settles a reservation made with [`OnExpiry::Charge`] without waiting
    /// for the disk (see [`BudgetStore::settle_charged`]).
    pub async fn settle_charged(
        &self,
        reservation_id: &str,
        actual_microcents: u64,
    ) -> Result<Settlement, GateError> {
        let settled = self
            .budgets
            .settle_charged(reservation_id, actual_microcents)
            .instrument(settle_span("charged"))
            .await
            .map_err(ledger_error)?;
        self.trail_settlement(&settled, &Caller::gateway());
        Ok(settled)
    }

    /// Cancels a reservation.
    pub async fn release(&self, caller: &Caller, reservation_id: &str) -> Result<u64, GateError> {
        self.check_holder(caller, reservation_id).await?;
        let released = self
            .budgets
            .release(reservation_id)
            .instrument(settle_span("released"))
            .await
            .map_err(ledger_error)?;
        self.trail
            .record(|| Ended::now("release", reservation_id, None, released, caller));
        Ok(released)
    }

    /// Whether the state can be used now (`/readyz`): the budgets ready
    /// (a shared backend reachable) and the revocation index current.
    /// Sets `dgw_state_writable`.
    pub async fn state_ready(&self) -> Result<(), crate::state::StorageError> {
        let ready = match self.budgets.ready().await {
            Ok(()) if !self.revocations.is_current() => Err(
                crate::state::StorageError::Unavailable("the revocation feed is lost".into()),
            ),
            other => other,
        };
        telemetry::set_state_writable(ready.is_ok());
        ready
    }

    /// Refreshes the gauges (before a scrape): per tenant, and for the
    /// [`TOP_DELEGATIONS`] top-level delegations that spent most.
    pub async fn refresh_gauges(&self) {
        telemetry::set_revocation_index_complete(self.revocations.is_current());
        if self.state_ready().await.is_err() {
            return;
        }
        let (Ok(mut tops), Ok(open)) = (
            self.budgets.top_levels().await,
            self.budgets.open_reservations().await,
        ) else {
            tracing::error!("reading the budgets for the gauges failed");
            return;
        };
        let totals = crate::budget::tenant_totals(&tops);
        let mut per_tenant: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        let adapter_roots = self.adapter_roots.read().unwrap_or_else(|p| p.into_inner());
        let tenants = self.tenants.load();
        let roots = tenants
            .names
            .iter()
            .map(|(root, name)| (root.to_string(), name.as_str()))
            .chain(adapter_roots.iter().map(|(r, n)| (r.clone(), n.as_str())));
        for (root, name) in roots {
            let t = totals.get(root.as_str()).copied().unwrap_or_default();
            let sum = per_tenant.entry(name).or_default();
            sum.0 += t.spent;
            sum.1 += t.remaining;
        }
        for (name, (spent, remaining)) in &per_tenant {
            telemetry::set_budget_gauges(name, *spent, *remaining, open);
        }
        // The delegations that spent most, and only those: a label per
        // delegation for all of them would be unbounded.
        tops.sort_by_key(|t| std::cmp::Reverse(t.level.spent_microcents));
        let tenant_of = |root: &str| {
            tenants
                .names
                .iter()
                .find(|(r, _)| r.as_str() == root)
                .map(|(_, n)| n.as_str())
                .or_else(|| {
                    adapter_roots
                        .iter()
                        .find(|(r, _)| r == root)
                        .map(|(_, n)| n.as_str())
                })
                .unwrap_or("unknown")
        };
        for t in tops
            .iter()
            .filter(|t| t.level.spent_microcents > 0)
            .take(TOP_DELEGATIONS)
        {
            telemetry::set_delegation_gauges(
                tenant_of(&t.root),
                &t.level.delegation_id,
                t.level.spent_microcents,
                t.level.budget_microcents,
            );
        }
    }

    /// Counts the budgets under `root` (an adapter's budget-key root, such
    /// as `<protocol>:<issuer DID>`) in `tenant`'s gauges.
    pub fn add_budget_root(&self, root: String, tenant: String) {
        self.adapter_roots
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push((root, tenant));
    }

    /// Replaces every adapter budget root (reload).
    pub fn set_budget_roots(&self, roots: Vec<(String, String)>) {
        *self
            .adapter_roots
            .write()
            .unwrap_or_else(|p| p.into_inner()) = roots;
    }
}

/// A reservation settled or released, as the trail records it: the bytes
/// the event's JSON object gave (its keys in their sorted order), written
/// without building the object and its keys per call (issue 36).
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Ended {
    at: u64,
    by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    charged_microcents: Option<u64>,
    event: &'static str,
    released_microcents: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<std::sync::Arc<str>>,
    reservation_id: String,
}

impl Ended {
    fn now(
        event: &'static str,
        reservation_id: &str,
        charged_microcents: Option<u64>,
        released_microcents: u64,
        caller: &Caller,
    ) -> TrailEntry {
        TrailEntry::Typed(std::sync::Arc::new(Self {
            at: crate::trail::TrailSlot::now_ms(),
            by: caller.admin_name(),
            charged_microcents,
            event,
            released_microcents,
            request_id: crate::request_id::current(),
            reservation_id: reservation_id.to_owned(),
        }))
    }
}

impl crate::trail::Record for Ended {
    fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        serde_json::to_writer(out, self)
    }
}

/// The settle stage's span: a reservation charged or released.
fn settle_span(decision: &'static str) -> tracing::Span {
    let span = crate::stage_span!("settle");
    span.record("dgw.decision", decision);
    span
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// What `TrailSlot::event` made of the same fields.
    fn as_event(kind: &str, at: u64, request_id: Option<&str>, fields: Value) -> Value {
        let mut record = json!({"event": kind, "at": at});
        if let (Some(r), Some(id)) = (record.as_object_mut(), request_id) {
            r.insert("requestId".into(), id.into());
        }
        if let (Some(r), Value::Object(f)) = (record.as_object_mut(), fields) {
            r.extend(f);
        }
        record
    }

    fn typed(e: &Ended) -> Vec<u8> {
        let mut out = Vec::new();
        crate::trail::Record::write_json(e, &mut out).unwrap();
        out
    }

    /// The typed record writes the very bytes the JSON event did, so the
    /// audit log reads (and hashes) as before: settle and release, with and
    /// without a request ID and an administrator.
    #[test]
    fn a_reservations_end_is_written_as_the_event_was() {
        for request_id in [None, Some("req_7")] {
            for by in [None, Some("token:ops".to_owned())] {
                let settle = Ended {
                    at: 1_764_000_000_123,
                    by: by.clone(),
                    charged_microcents: Some(7),
                    event: "settle",
                    released_microcents: 3,
                    request_id: request_id.map(std::sync::Arc::from),
                    reservation_id: "res_abc".into(),
                };
                let old = as_event(
                    "settle",
                    1_764_000_000_123,
                    request_id,
                    json!({"reservationId": "res_abc", "chargedMicrocents": 7,
                        "releasedMicrocents": 3, "by": by}),
                );
                assert_eq!(typed(&settle), serde_json::to_vec(&old).unwrap());
                let release = Ended {
                    charged_microcents: None,
                    event: "release",
                    ..settle
                };
                let old = as_event(
                    "release",
                    1_764_000_000_123,
                    request_id,
                    json!({"reservationId": "res_abc", "releasedMicrocents": 3, "by": by}),
                );
                assert_eq!(typed(&release), serde_json::to_vec(&old).unwrap());
            }
        }
    }
}
