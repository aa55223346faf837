//! What a seller reports after a request is forwarded: receipts (or, from a
//! DelegateOS seller, signed attestations), each authenticated by the
//! request's callback secret, move it through the manifest's states (a
//! final one ends it: `ending.rs`); and who may read a request.

use serde_json::{json, Value};
use subtle::ConstantTimeEq;

use super::buy::sha256_hex;
use super::records::{OfferRecord, RefusedReceipt, RequestRecord, OFFERS, REQUESTS};
use super::{credential, Agenta, Refusal};
use agenta::{FailureMode, Status};
use dgw_core::caller::Caller;
use dgw_core::gatekeeper::now;
use dgw_core::protocol::HttpAnswer;

/// How many refused receipts a request keeps (the latest).
pub(super) const MAX_REFUSED_RECEIPTS: usize = 16;

impl Agenta {
    /// Whether `authorization` carries the seller's callback secret of `record`.
    pub(super) fn is_seller(record: &RequestRecord, authorization: Option<&str>) -> bool {
        credential(authorization, "Bearer").is_some_and(|secret| {
            let presented = sha256_hex(secret.as_bytes());
            presented
                .as_bytes()
                .ct_eq(record.callback_secret_sha256.as_bytes())
                .into()
        })
    }

    /// Whether `authorization` is a DCT of the delegation that paid for `record`.
    pub(super) fn is_buyer(&self, record: &RequestRecord, authorization: Option<&str>) -> bool {
        credential(authorization, "DCT")
            .and_then(|t| self.paying_grant(t).ok())
            .is_some_and(|g| {
                g.chain
                    .iter()
                    .any(|d| d.to_string() == record.delegation_id)
            })
    }

    pub(super) async fn request(&self, request_id: &str) -> Result<RequestRecord, Refusal> {
        self.records
            .get(REQUESTS, request_id)
            .await?
            .ok_or_else(|| Refusal::not_found("request"))
    }

    /// The offer a request was made under, at its version.
    pub(super) async fn offer_of(&self, record: &RequestRecord) -> Result<agenta::Offer, Refusal> {
        let offers: OfferRecord = self
            .records
            .get(OFFERS, &record.offer_id)
            .await?
            .ok_or_else(|| Refusal::not_found("offer"))?;
        let message = offers
            .versions
            .get(&record.offer_version)
            .ok_or_else(|| Refusal::not_found("offer version"))?;
        Ok(self.schemas.parse(message)?)
    }

    /// `POST /agenta/v0/execution-receipts`: a seller's later receipt. A
    /// caller without the request's secret learns nothing and changes nothing.
    pub(super) async fn post_receipt(
        &self,
        authorization: Option<&str>,
        message: &Value,
    ) -> Result<HttpAnswer, Refusal> {
        let unauthorized =
            || Refusal::unauthorized("a receipt needs `Authorization: Bearer <auth_reference>`");
        let request_id = message
            .get("request_id")
            .and_then(Value::as_str)
            .ok_or_else(unauthorized)?;
        let record = self
            .records
            .get::<RequestRecord>(REQUESTS, request_id)
            .await?
            .filter(|r| Self::is_seller(r, authorization))
            .ok_or_else(unauthorized)?;
        self.apply_receipt(request_id, record, message).await?;
        let record = self.request(request_id).await?;
        Ok(HttpAnswer::new(200, record.view(request_id)))
    }

    /// `POST /agenta/v0/execution-requests/{id}/attestation`: a DelegateOS
    /// agent selling through Agenta reports with a signed attestation
    /// instead of a receipt (authenticated by the callback secret, like a
    /// receipt). It must be for the request's contract and delegation and
    /// verify against the contract; it then becomes the receipt
    /// (`attestation_to_receipt`) and is applied as one.
    pub(super) async fn post_attestation(
        &self,
        authorization: Option<&str>,
        request_id: &str,
        body: &[u8],
    ) -> Result<HttpAnswer, Refusal> {
        let record = self
            .records
            .get::<RequestRecord>(REQUESTS, request_id)
            .await?
            .filter(|r| Self::is_seller(r, authorization))
            .ok_or_else(|| {
                Refusal::unauthorized(
                    "an attestation needs `Authorization: Bearer <auth_reference>`",
                )
            })?;
        let invalid = |e: String| Refusal::new(422, "attestation_invalid", e);
        let attestation = delegateos::Attestation::parse(body)
            .map_err(|e| Refusal::new(400, "attestation_invalid", e.to_string()))?;
        if attestation.contract_id.to_string() != record.contract_id
            || attestation.delegation_id.to_string() != record.delegation_id
        {
            return Err(invalid(
                "the attestation is not for this request's contract and delegation".into(),
            ));
        }
        let contract = self
            .delegations
            .contract(&attestation.contract_id)
            .await?
            .ok_or_else(|| Refusal::not_found("contract"))?;
        let report = delegateos::attestation::verify_attestation(
            &attestation,
            &delegateos::attestation::AttestationContext {
                contracts: &[(contract.id.clone(), contract)].into(),
                children: &Default::default(),
                registry: &delegateos::CheckFunctionRegistry::with_builtins(),
            },
        )
        .map_err(|e| invalid(e.to_string()))?;
        if let Some(reason) = report.reason.filter(|_| !report.valid) {
            return Err(invalid(format!("{}: {}", reason.kind, reason.detail)));
        }
        let receipt = agenta::attestation_to_receipt(
            &attestation,
            &agenta::ReceiptContext {
                request_id,
                offer_id: &record.offer_id,
                offer_version: &record.offer_version,
                seller_agent_id: &record.seller_agent_id,
                buyer_agent_id: &record.buyer_agent_id,
                currency: &record.currency,
            },
            &self.currencies,
        )
        .map_err(|e| invalid(e.to_string()))?;
        self.apply_receipt(request_id, record, &receipt).await?;
        let record = self.request(request_id).await?;
        Ok(HttpAnswer::new(200, record.view(request_id)))
    }

    /// Applies a receipt for `request_id` (its sender authenticated; its
    /// `record` as last read): checks it, moves the state (by
    /// compare-and-swap on the stored record), and ends the reservation on a
    /// final status. The state after it.
    pub(super) async fn apply_receipt(
        &self,
        request_id: &str,
        record: RequestRecord,
        as_received: &Value,
    ) -> Result<Status, Refusal> {
        let receipt: agenta::ExecutionReceipt = self.schemas.parse(as_received)?;
        self.config
            .limits
            .check(agenta::MessageType::ExecutionReceipt, as_received)?;
        let mismatch = |what: &str| {
            Refusal::new(
                422,
                "receipt_mismatch",
                format!("the receipt's {what} is not the request's"),
            )
        };
        if receipt.request_id != request_id {
            return Err(mismatch("request_id"));
        }
        if receipt.offer_id != record.offer_id || receipt.offer_version != record.offer_version {
            return Err(mismatch("offer"));
        }
        if receipt.seller_agent_id != record.seller_agent_id {
            return Err(mismatch("seller_agent_id"));
        }
        if receipt.buyer_agent_id != record.buyer_agent_id {
            return Err(mismatch("buyer_agent_id"));
        }
        let status = receipt
            .status()
            .ok_or_else(|| Refusal::mode(FailureMode::SchemaValidationFailure, "status"))?;
        // Past the deadline the request is `expired` (the sweeper says so
        // within a second): a late receipt cannot complete it.
        if now().1 >= record.deadline_ms && !record.status().is_some_and(Status::is_terminal) {
            return Err(Refusal {
                status: 409,
                ..Refusal::mode(
                    FailureMode::DeadlineExceeded,
                    "the request's deadline has passed",
                )
            });
        }
        if status == Status::Completed {
            let offer = self.offer_of(&record).await?;
            let checked = agenta::check_completed(&offer, &receipt).map_err(Refusal::from);
            let checked = checked.and_then(|()| self.check_financials(&record, &receipt));
            if let Err(r) = checked {
                self.remember_refused(request_id, &receipt.receipt_id, &r)
                    .await;
                return Err(r);
            }
        }
        let (next, new) = self
            .records
            .update(REQUESTS, request_id, |r: &mut RequestRecord| {
                // Checked on the record being replaced: a seller retrying a
                // receipt (by callback and in its answer at once) changes
                // nothing, whichever lands first.
                if let Some(same) = r
                    .receipts
                    .iter()
                    .find(|x| x["receipt_id"] == as_received["receipt_id"])
                {
                    return if same == as_received {
                        Ok((r.status().unwrap_or(status), false))
                    } else {
                        Err(Refusal::new(
                            409,
                            "receipt_id_reused",
                            "a different receipt with this receipt_id was received",
                        ))
                    };
                }
                let next = Status::after(r.status(), status)?;
                r.status = Some(next.as_str().to_owned());
                r.receipts.push(as_received.clone());
                Ok((next, true))
            })
            .await?;
        if !new {
            return Ok(next);
        }
        self.notify_buyer(&record, as_received);
        self.audit(
            "execution_receipt",
            json!({"request_id": request_id, "receipt_id": receipt.receipt_id, "status": next.as_str()}),
        )
        .await;
        if next.is_terminal() {
            self.finish(request_id).await?;
        }
        Ok(next)
    }

    /// Passes a receipt on to the buyer's own callback, if it gave one at
    /// an origin `agenta.buyer_callback_hosts` allows: scheme, host and port
    /// (decisions 89 and 155: dgw calls no other URL a request names).
    fn notify_buyer(&self, record: &RequestRecord, receipt: &Value) {
        let Some(callback) = &record.buyer_callback else {
            return;
        };
        let Some(url) = callback.get("url").and_then(Value::as_str) else {
            return;
        };
        let allowed = super::origin::Origin::of_url(url)
            .is_some_and(|o| self.config.buyer_callback_origins.contains(&o));
        if allowed {
            let bearer = callback
                .get("auth_reference")
                .and_then(Value::as_str)
                .map(str::to_owned);
            self.sellers.notify(url.to_owned(), receipt.clone(), bearer);
        }
    }

    /// A completed receipt's amount is in the request's currency.
    fn check_financials(
        &self,
        record: &RequestRecord,
        receipt: &agenta::ExecutionReceipt,
    ) -> Result<(), Refusal> {
        let currency = receipt
            .financials
            .as_ref()
            .and_then(|f| f.get("currency"))
            .and_then(Value::as_str);
        match currency {
            Some(c) if c != record.currency => Err(Refusal::new(
                422,
                "currency_mismatch",
                format!("the request is paid in {}", record.currency),
            )),
            _ => Ok(()),
        }
    }

    async fn remember_refused(&self, request_id: &str, receipt_id: &str, r: &Refusal) {
        let refused = RefusedReceipt {
            receipt_id: receipt_id.to_owned(),
            code: r.code.to_owned(),
            message: r.message.clone(),
        };
        let _ = self
            .records
            .update(REQUESTS, request_id, |rec: &mut RequestRecord| {
                // The last few: a seller's refused attempts never grow a
                // record without bound.
                if rec.refused_receipts.len() >= MAX_REFUSED_RECEIPTS {
                    rec.refused_receipts.remove(0);
                }
                rec.refused_receipts.push(refused.clone());
                Ok(())
            })
            .await;
    }

    /// `GET /agenta/v0/execution-requests/{id}`: for an administrator, the
    /// seller (its callback secret) or the buyer (a DCT of the delegation
    /// that paid).
    pub(super) async fn get_request(
        &self,
        caller: &Caller,
        authorization: Option<&str>,
        request_id: &str,
    ) -> Result<HttpAnswer, Refusal> {
        let record = self.request(request_id).await?;
        if !(caller.is_admin()
            || Self::is_seller(&record, authorization)
            || self.is_buyer(&record, authorization))
        {
            return Err(Refusal::unauthorized(
                "the buyer's DCT, the seller's callback secret or an admin token",
            ));
        }
        let mut view = record.view(request_id);
        // The signed contract and attestation, so anyone can check them
        // with `dgw attestation verify`.
        if let Ok(id) = serde_json::from_value(json!(record.contract_id)) {
            if let Some(c) = self.delegations.contract(&id).await? {
                view["contract"] = json!(c);
            }
        }
        if let Some(id) = record
            .attestation_id
            .as_ref()
            .and_then(|a| serde_json::from_value(json!(a)).ok())
        {
            if let Some(a) = self.delegations.attestation(&id).await? {
                view["attestation"] = json!(a);
            }
        }
        Ok(HttpAnswer::new(200, view))
    }
}
