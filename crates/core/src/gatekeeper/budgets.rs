//! Ending reservations (by their holder, the gateway or an administrator),
//! and the budget gauges.

use std::collections::BTreeMap;

use super::error::Forbidden;
use super::{forbidden, ledger_error, GateError, Gatekeeper};
use crate::budget::{HolderDigest, Settlement};
use crate::caller::Caller;
use crate::telemetry;
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
        self.trail.event(
            "settle",
            serde_json::json!({"reservationId": s.reservation_id,
                "chargedMicrocents": s.charged_microcents,
                "releasedMicrocents": s.released_microcents,
                "by": caller.admin_name()}),
        );
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
        self.trail.event(
            "release",
            serde_json::json!({"reservationId": reservation_id,
                "releasedMicrocents": released, "by": caller.admin_name()}),
        );
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
    /// as `talos:<issuer DID>`) in `tenant`'s gauges.
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

/// The settle stage's span: a reservation charged or released.
fn settle_span(decision: &'static str) -> tracing::Span {
    let span = crate::stage_span!("settle");
    span.record("dgw.decision", decision);
    span
}
