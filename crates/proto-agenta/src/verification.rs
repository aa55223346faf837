//! Verification results: who may send one follows the offer's policy; the
//! decision is recorded beside the request's attestation.

use serde_json::{json, Value};

use super::records::{RequestRecord, VerificationRecord, REQUESTS};
use super::{Agenta, Refusal};
use agenta::Status;
use dgw_core::caller::Caller;
use dgw_core::protocol::HttpAnswer;

/// How many verifications a request keeps: a verifier cannot grow a
/// record without bound.
const MAX_VERIFICATIONS: usize = 16;

impl Agenta {
    /// `POST /agenta/v0/verification-results`: who may verify follows the
    /// offer's `verification_policy.mode`: the seller (its callback secret)
    /// for `seller_attested`, the buyer (a DCT of the delegation that paid)
    /// for `buyer_verified`, an administrator for `third_party_verified`.
    pub(super) async fn post_verification(
        &self,
        caller: &Caller,
        authorization: Option<&str>,
        message: &Value,
    ) -> Result<HttpAnswer, Refusal> {
        let v: agenta::VerificationResult = self.schemas.parse(message)?;
        self.config
            .limits
            .check(agenta::MessageType::VerificationResult, message)?;
        let record = self.request(&v.request_id).await?;
        let offer = self.offer_of(&record).await?;
        let (allowed, who) = match offer.verification_policy.mode.as_str() {
            "seller_attested" => (
                Self::is_seller(&record, authorization)
                    && v.verifier_agent.agent_id == record.seller_agent_id,
                "the seller",
            ),
            "buyer_verified" => (
                self.is_buyer(&record, authorization)
                    && v.verifier_agent.agent_id == record.buyer_agent_id,
                "the buyer",
            ),
            _ => (
                super::admin_secret(caller, "a third-party verification").is_ok(),
                "an administrator's",
            ),
        };
        if !allowed {
            return Err(Refusal::unauthorized(format!(
                "this offer's verification ({}) is {who}'s",
                offer.verification_policy.mode
            )));
        }
        if record.status() != Some(Status::Completed) {
            return Err(Refusal::new(
                409,
                "invalid_state_transition",
                "only a completed request is verified",
            ));
        }
        let completed = record
            .receipts
            .iter()
            .rev()
            .find(|r| r["status"] == "completed");
        if completed.map(|r| &r["receipt_id"]) != Some(&json!(v.receipt_id)) {
            return Err(Refusal::new(
                422,
                "receipt_mismatch",
                "receipt_id is not the request's completed receipt",
            ));
        }
        let entry = VerificationRecord {
            verification_id: v.verification_id.clone(),
            receipt_id: v.receipt_id.clone(),
            verifier_agent_id: v.verifier_agent.agent_id.clone(),
            decision: v.decision.clone(),
            failure_reasons: v.failure_reasons.clone().unwrap_or_default(),
            digest: agenta::translate::digest(message)
                .map_err(|e| Refusal::new(400, "schema_validation_failure", e.to_string()))?,
        };
        self.records
            .update(REQUESTS, &v.request_id, |r: &mut RequestRecord| {
                match r
                    .verifications
                    .iter()
                    .find(|x| x.verification_id == entry.verification_id)
                {
                    Some(x) if *x == entry => Ok(()),
                    Some(_) => Err(Refusal::new(
                        409,
                        "verification_id_reused",
                        "a different verification with this verification_id was received",
                    )),
                    None if r.verifications.len() >= MAX_VERIFICATIONS => Err(Refusal::new(
                        409,
                        "too_many_verifications",
                        format!("a request keeps at most {MAX_VERIFICATIONS} verifications"),
                    )),
                    None => {
                        r.verifications.push(entry.clone());
                        Ok(())
                    }
                }
            })
            .await?;
        self.audit(
            "verification_result",
            json!({"request_id": v.request_id, "verification_id": v.verification_id,
                   "decision": v.decision, "attestation_id": record.attestation_id}),
        )
        .await;
        let record = self.request(&v.request_id).await?;
        Ok(HttpAnswer::new(200, record.view(&v.request_id)))
    }
}
