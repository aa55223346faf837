//! What Agenta keeps, and for how long: an ended request is forgotten
//! `agenta.retention` after it ended, with its idempotency key, its payment
//! authorization and, when no attestation was made of it, its contract.
//! Keys and bindings a crash left without their request are dropped once no
//! purchase can still be making them. The stored-bytes gauges are set on
//! every sweep.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::records::{
    IdempotencyRecord, PaymentBinding, RequestRecord, IDEMPOTENCY, OFFERS, OPEN,
    PAYMENT_AUTHORIZATIONS, REQUESTS,
};
use super::{Agenta, Refusal, ID};
use dgw_core::gatekeeper::now;

/// The record kinds the gauges name, and their spaces.
const KINDS: [(&str, &str); 5] = [
    ("offer", OFFERS),
    ("request", REQUESTS),
    ("open", OPEN),
    ("idempotency", IDEMPOTENCY),
    ("payment_authorization", PAYMENT_AUTHORIZATIONS),
];

/// The retention pass runs at most this often (and at least once per
/// retention), since it reads every stored request.
const MOST_EVERY: Duration = Duration::from_secs(60);

/// Past a claim's seller timeout, how long more a key or binding without
/// its request is left alone: the purchase claiming it may still be
/// reserving and storing.
const CLAIM_GRACE: Duration = Duration::from_secs(65);

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Agenta {
    /// The sweep's share: forgets what the retention is over for (when due)
    /// and sets the stored-bytes gauges.
    pub(super) async fn keep_within_retention(&self) {
        let due = {
            let mut last = self
                .last_retention
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let due = last.is_none_or(|t| t.elapsed() >= self.config.retention.min(MOST_EVERY));
            if due {
                *last = Some(Instant::now());
            }
            due
        };
        if due {
            if let Err(r) = self.forget_expired().await {
                tracing::error!(error = %r, "forgetting ended Agenta requests failed");
            }
        }
        for (kind, space) in KINDS {
            match self.records.0.usage(space).await {
                Ok(u) => {
                    dgw_core::telemetry::set_protocol_stored(ID.name, kind, u.records, u.bytes)
                }
                Err(e) => tracing::error!(space, error = %e, "measuring Agenta records"),
            }
        }
    }

    /// Forgets requests that ended more than the retention ago, and keys
    /// and bindings whose request is gone. One that fails is logged and the
    /// others are still swept.
    async fn forget_expired(&self) -> Result<(), Refusal> {
        let now_ms = now().1;
        let retention = millis(self.config.retention);
        for (id, record) in self.records.scan::<RequestRecord>(REQUESTS).await? {
            let ended_at = record.ended_ms.unwrap_or(record.deadline_ms);
            if record.ended && ended_at.saturating_add(retention) <= now_ms {
                let keep_contract = record.attestation_id.is_some();
                if let Err(r) = self.forget(&id, &record, !keep_contract, "retention").await {
                    tracing::error!(request_id = %id, error = %r, "forgetting an Agenta request");
                }
            }
        }
        let grace = millis(self.config.seller_timeout + CLAIM_GRACE);
        let stale = |claimed_ms: u64| claimed_ms.saturating_add(grace) <= now_ms;
        for (key, claim) in self.records.scan::<IdempotencyRecord>(IDEMPOTENCY).await? {
            if stale(claim.claimed_ms.unwrap_or(0)) && !self.exists(&claim.request_id).await? {
                self.records.remove(IDEMPOTENCY, &key).await?;
            }
        }
        for (key, binding) in self
            .records
            .scan::<PaymentBinding>(PAYMENT_AUTHORIZATIONS)
            .await?
        {
            if stale(binding.claimed_ms()) && !self.exists(binding.request_id()).await? {
                self.records.remove(PAYMENT_AUTHORIZATIONS, &key).await?;
            }
        }
        Ok(())
    }

    async fn exists(&self, request_id: &str) -> Result<bool, Refusal> {
        Ok(self
            .records
            .get::<Value>(REQUESTS, request_id)
            .await?
            .is_some())
    }

    /// Forgets an ended request: its idempotency key and payment
    /// authorization (each only if still its own), its contract if asked,
    /// then the record. A crash part way leaves the record, which the next
    /// sweep forgets again.
    pub(super) async fn forget(
        &self,
        request_id: &str,
        record: &RequestRecord,
        drop_contract: bool,
        why: &'static str,
    ) -> Result<(), Refusal> {
        let request = &record.request;
        if let (Some(org), Some(idem)) = (
            request["buyer_agent"]["organization_id"].as_str(),
            request["idempotency_key"].as_str(),
        ) {
            let key = format!("{org}\n{idem}");
            let claim = self
                .records
                .get::<IdempotencyRecord>(IDEMPOTENCY, &key)
                .await?;
            if claim.is_some_and(|c| c.request_id == request_id) {
                self.records.remove(IDEMPOTENCY, &key).await?;
            }
        }
        if let Some(pay) = request["payment"]["payment_authorization_id"].as_str() {
            let key = format!("{}\n{pay}", record.tenant);
            let binding = self
                .records
                .get::<PaymentBinding>(PAYMENT_AUTHORIZATIONS, &key)
                .await?;
            if binding.is_some_and(|b| b.request_id() == request_id) {
                self.records.remove(PAYMENT_AUTHORIZATIONS, &key).await?;
            }
        }
        if drop_contract {
            if let Ok(id) = serde_json::from_value(json!(record.contract_id)) {
                self.delegations.remove_contract(&id).await?;
            }
        }
        self.records.remove(REQUESTS, request_id).await?;
        self.records.remove(OPEN, request_id).await?;
        self.audit(
            "request_forgotten",
            json!({"request_id": request_id, "why": why}),
        )
        .await;
        Ok(())
    }
}
