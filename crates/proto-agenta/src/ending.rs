//! Ending a request: its reservation settled or released exactly once,
//! its final receipt attested by the gateway, open requests past their
//! deadline expired, and one the seller never took forgotten.

use serde_json::{json, Value};

use super::records::{RequestRecord, OPEN, REQUESTS};
use super::{Agenta, Refusal};
use agenta::Status;
use dgw_core::caller::Caller;
use dgw_core::gatekeeper::now;

impl Agenta {
    /// A request the seller never took: `failed` if no receipt moved it,
    /// and its reservation released; then, if no receipt ever moved it, it
    /// is forgotten with its payment authorization and contract (nothing
    /// happened, nothing is charged, and the audit log has both events).
    /// Whether it was forgotten.
    pub(super) async fn fail_to_start(&self, request_id: &str, why: &str) -> bool {
        let unstarted = self
            .records
            .update(REQUESTS, request_id, |r: &mut RequestRecord| {
                r.forward_error = Some(why.to_owned());
                if r.status.is_none() {
                    r.status = Some(agenta::Status::Failed.as_str().to_owned());
                    Ok(true)
                } else {
                    Ok(false)
                }
            })
            .await;
        let unstarted = match unstarted {
            Ok(u) => u,
            Err(e) => {
                tracing::error!(request_id, error = %e, "recording a failed forward");
                false
            }
        };
        if let Err(e) = self.finish(request_id).await {
            tracing::error!(request_id, error = %e, "ending a failed request's reservation");
            return false;
        }
        if !unstarted {
            return false;
        }
        match self.request(request_id).await {
            Ok(record) if record.receipts.is_empty() && record.ended => self
                .forget(request_id, &record, true, "never_started")
                .await
                .is_ok(),
            _ => false,
        }
    }

    /// Ends a final request's reservation once: `completed` settles
    /// `financials.final_amount` (at most the reserved `max_amount`; more is
    /// recorded as an overcharge attempt), anything else releases it; the
    /// last receipt, when it is final and not `rejected`, becomes a
    /// gateway-signed attestation.
    pub(super) async fn finish(&self, request_id: &str) -> Result<(), Refusal> {
        let record = self.request(request_id).await?;
        let Some(status) = record.status().filter(|s| s.is_terminal()) else {
            return Ok(());
        };
        if record.ended {
            return Ok(());
        }
        let last = record
            .receipts
            .last()
            .filter(|r| r["status"] == status.as_str())
            .cloned();
        let receipt: Option<agenta::ExecutionReceipt> =
            last.as_ref().and_then(|r| self.schemas.parse(r).ok());
        let (mut charged, mut overcharge) = (0, None);
        if status == Status::Completed {
            let asked = receipt
                .as_ref()
                .and_then(|r| r.financials.as_ref())
                .and_then(|f| f.get("final_amount"))
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let asked_microcents = self
                .currencies
                .to_microcents(&record.currency, asked)
                .unwrap_or(u64::MAX);
            charged = asked_microcents.min(record.max_microcents);
            if asked_microcents > record.max_microcents {
                overcharge = Some(json!({"final_amount": asked, "currency": record.currency,
                    "charged_microcents": charged}));
            }
            if let Some(id) = &record.reservation_id {
                match self.gate.settle(&Caller::gateway(), id, charged).await {
                    Ok(_) => dgw_core::telemetry::record_protocol_settled(super::ID.name, charged),
                    Err(e) => {
                        tracing::warn!(request_id, error = %e, "settling an Agenta reservation");
                        charged = 0;
                    }
                }
            }
        } else {
            self.release(record.reservation_id.as_deref()).await;
        }
        let attestation_id = match (&receipt, &last) {
            (Some(r), Some(raw)) if status != Status::Rejected => {
                self.attest(&record, r, raw, charged).await
            }
            _ => None,
        };
        self.records
            .update(REQUESTS, request_id, |r: &mut RequestRecord| {
                if !r.ended {
                    r.ended = true;
                    r.ended_ms = Some(now().1);
                    r.charged_microcents = Some(charged);
                    r.overcharge_attempt = overcharge.clone();
                    r.attestation_id = attestation_id.clone();
                }
                Ok(())
            })
            .await?;
        self.records.remove(OPEN, request_id).await?;
        self.audit(
            "request_ended",
            json!({"request_id": request_id, "status": status.as_str(),
                   "charged_microcents": charged, "overcharge_attempt": overcharge,
                   "attestation_id": attestation_id}),
        )
        .await;
        Ok(())
    }

    /// The attestation of a final receipt, signed by the gateway and stored.
    async fn attest(
        &self,
        record: &RequestRecord,
        receipt: &agenta::ExecutionReceipt,
        raw: &Value,
        charged: u64,
    ) -> Option<String> {
        let made = (|| {
            let contract_id: delegateos::ContractId =
                serde_json::from_value(json!(record.contract_id)).ok()?;
            let delegation_id: delegateos::DelegationId =
                serde_json::from_value(json!(record.delegation_id)).ok()?;
            let mut draft = agenta::receipt_to_attestation(
                receipt,
                raw,
                &contract_id,
                &delegation_id,
                &self.currencies,
            )
            .ok()?;
            draft.result.cost_microcents = charged;
            draft
                .sign(&self.key, dgw_core::random::attestation_id().ok()?, now().0)
                .ok()
        })();
        let attestation = made?;
        match self.delegations.put_attestation(&attestation).await {
            Ok(()) => Some(attestation.id.to_string()),
            Err(e) => {
                tracing::error!(error = %e, "storing an Agenta attestation");
                None
            }
        }
    }

    /// Expires open requests past their deadline and ends the reservations
    /// a crash left open on final ones; drops index entries of requests
    /// that ended (or were never recorded). One request that fails is
    /// logged and the others are still swept.
    pub(super) async fn expire_and_finish(&self) -> Result<(), Refusal> {
        let now_ms = now().1;
        for (id, _) in self.records.scan::<Value>(OPEN).await? {
            let record = match self.records.get::<RequestRecord>(REQUESTS, &id).await? {
                Some(r) if !r.ended => r,
                _ => {
                    self.records.remove(OPEN, &id).await?;
                    continue;
                }
            };
            let terminal = record.status().is_some_and(Status::is_terminal);
            if !terminal && now_ms >= record.deadline_ms {
                let expired = self
                    .records
                    .update(REQUESTS, &id, |r: &mut RequestRecord| {
                        let next = Status::after(r.status(), Status::Expired)?;
                        r.status = Some(next.as_str().to_owned());
                        Ok(())
                    })
                    .await;
                if expired.is_ok() {
                    self.audit("request_expired", json!({"request_id": id}))
                        .await;
                }
            }
            if let Err(e) = self.finish(&id).await {
                tracing::error!(request_id = %id, error = %e, "ending an Agenta request");
            }
        }
        Ok(())
    }
}
