//! What the gateway keeps of Agenta work, in the state seam's record store:
//! offers (every version, immutable), requests (their state, receipts,
//! reservation and callback secret), idempotency keys and payment
//! authorizations. Every change is a compare-and-swap, so two concurrent
//! receipts cannot both move a request.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::refusal::Refusal;
use dgw_core::state::RecordStore;

pub const OFFERS: &str = "agenta_offers";
pub const REQUESTS: &str = "agenta_requests";
/// The requests whose reservation has not ended (key: request ID), so the
/// sweep reads those and not every request ever made.
pub const OPEN: &str = "agenta_open";
pub const IDEMPOTENCY: &str = "agenta_idempotency";
pub const PAYMENT_AUTHORIZATIONS: &str = "agenta_payment_authorizations";

/// An offer's versions, as registered, and which is current.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OfferRecord {
    pub current: String,
    pub versions: BTreeMap<String, Value>,
}

/// A verification result, as recorded on the request it judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerificationRecord {
    pub verification_id: String,
    pub receipt_id: String,
    pub verifier_agent_id: String,
    pub decision: String,
    #[serde(default)]
    pub failure_reasons: Vec<String>,
    pub digest: String,
}

/// A receipt the gateway refused, kept so the buyer sees what the seller tried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RefusedReceipt {
    pub receipt_id: String,
    pub code: String,
    pub message: String,
}

/// One execution request and all that happened to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// The request as the buyer sent it.
    pub request: Value,
    pub offer_id: String,
    pub offer_version: String,
    pub buyer_agent_id: String,
    pub buyer_organization_id: String,
    pub seller_agent_id: String,
    pub currency: String,
    /// The tenant and the delegation (the buyer's DCT's last link) that pay.
    pub tenant: String,
    pub delegation_id: String,
    /// The gateway-signed contract the purchase is made under.
    pub contract_id: String,
    pub reservation_id: Option<String>,
    pub max_microcents: u64,
    pub deadline_ms: u64,
    /// SHA-256 (hex) of the seller's callback secret; never the secret.
    pub callback_secret_sha256: String,
    /// The buyer's own callback, kept for the record (dgw does not call it).
    pub buyer_callback: Option<Value>,
    /// The state (`None`: the seller has not answered yet).
    pub status: Option<String>,
    pub receipts: Vec<Value>,
    #[serde(default)]
    pub refused_receipts: Vec<RefusedReceipt>,
    /// Whether the reservation has been settled or released.
    pub ended: bool,
    /// When it ended (Unix ms; `None` on records from before issue 30:
    /// their deadline, which is never earlier, stands for it).
    #[serde(default)]
    pub ended_ms: Option<u64>,
    pub charged_microcents: Option<u64>,
    /// A seller that asked more than `max_amount`: what it asked.
    pub overcharge_attempt: Option<Value>,
    pub attestation_id: Option<String>,
    #[serde(default)]
    pub verifications: Vec<VerificationRecord>,
    /// Why the seller could not be reached, if it could not.
    pub forward_error: Option<String>,
}

impl RequestRecord {
    pub fn status(&self) -> Option<agenta::Status> {
        self.status.as_deref().and_then(agenta::Status::parse)
    }

    /// The public view: everything but the secret's digest.
    pub fn view(&self, request_id: &str) -> Value {
        let failed_verifications: Vec<&str> = self
            .verifications
            .iter()
            .filter(|v| v.decision == "fail")
            .flat_map(|v| v.failure_reasons.iter().map(String::as_str))
            .collect();
        serde_json::json!({
            "request_id": request_id,
            "offer_id": self.offer_id,
            "offer_version": self.offer_version,
            "status": self.status,
            "receipts": self.receipts,
            "refused_receipts": self.refused_receipts,
            "reservation_id": self.reservation_id,
            "max_microcents": self.max_microcents,
            "charged_microcents": self.charged_microcents,
            "overcharge_attempt": self.overcharge_attempt,
            "contract_id": self.contract_id,
            "delegation_id": self.delegation_id,
            "attestation_id": self.attestation_id,
            "verifications": self.verifications,
            "verification_failures": failed_verifications,
            "forward_error": self.forward_error,
            "deadline_ms": self.deadline_ms,
        })
    }
}

/// An idempotency key: what it was first used with, and the answer once
/// there is one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdempotencyRecord {
    /// `sha256:<hex>` of the request's canonical JSON.
    pub digest: String,
    /// The delegation that paid: another buyer cannot read the answer.
    pub delegation_id: String,
    pub request_id: String,
    pub answer: Option<StoredAnswer>,
    /// When the key was claimed (Unix ms; `None` on records from before
    /// issue 30), so the sweep can tell a claim in flight from one a crash
    /// left.
    #[serde(default)]
    pub claimed_ms: Option<u64>,
}

/// A payment authorization bound to the request it pays for (key: tenant
/// and `payment_authorization_id`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PaymentBinding {
    Bound {
        request_id: String,
        claimed_ms: u64,
    },
    /// As written before issue 30: the request ID alone.
    Legacy(String),
}

impl PaymentBinding {
    pub fn request_id(&self) -> &str {
        match self {
            PaymentBinding::Bound { request_id, .. } | PaymentBinding::Legacy(request_id) => {
                request_id
            }
        }
    }

    /// When it was bound (0: before issue 30, when a binding was written
    /// only after its request).
    pub fn claimed_ms(&self) -> u64 {
        match self {
            PaymentBinding::Bound { claimed_ms, .. } => *claimed_ms,
            PaymentBinding::Legacy(_) => 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredAnswer {
    pub status: u16,
    pub body: Value,
}

/// Typed access to the record store.
#[derive(Clone)]
pub struct Records(pub Arc<dyn RecordStore>);

fn decode<T: DeserializeOwned>(space: &str, v: Value) -> Result<T, Refusal> {
    serde_json::from_value(v).map_err(|e| {
        Refusal::new(
            500,
            "state_corrupt",
            format!("a stored {space} record: {e}"),
        )
    })
}

fn encode<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// How many times a change is retried when another writer got there first.
const RETRIES: usize = 32;

impl Records {
    pub async fn get<T: DeserializeOwned>(
        &self,
        space: &'static str,
        key: &str,
    ) -> Result<Option<T>, Refusal> {
        match self.0.get(space, key).await? {
            Some(v) => decode(space, v).map(Some),
            None => Ok(None),
        }
    }

    pub async fn insert_new<T: Serialize>(
        &self,
        space: &'static str,
        key: &str,
        value: &T,
    ) -> Result<bool, Refusal> {
        Ok(self.0.insert_new(space, key, &encode(value)).await?)
    }

    /// Applies `change` to the record under `key` until it applies to the
    /// current version (compare-and-swap); what `change` returned. A
    /// refusal from `change` changes nothing.
    pub async fn update<T, R>(
        &self,
        space: &'static str,
        key: &str,
        mut change: impl FnMut(&mut T) -> Result<R, Refusal>,
    ) -> Result<R, Refusal>
    where
        T: Serialize + DeserializeOwned,
    {
        for _ in 0..RETRIES {
            let Some(current) = self.0.get(space, key).await? else {
                return Err(Refusal::not_found("request"));
            };
            let mut record: T = decode(space, current.clone())?;
            let out = change(&mut record)?;
            if self
                .0
                .replace(space, key, &current, &encode(&record))
                .await?
            {
                return Ok(out);
            }
        }
        Err(Refusal::new(
            503,
            "concurrent_update",
            "the record kept changing; try again",
        ))
    }

    /// [`Records::insert_new`] unless `space` holds `cap` records.
    pub async fn insert_capped<T: Serialize>(
        &self,
        space: &'static str,
        key: &str,
        value: &T,
        cap: usize,
    ) -> Result<dgw_core::state::Capped, Refusal> {
        Ok(self
            .0
            .insert_capped(space, key, &encode(value), cap)
            .await?)
    }

    pub async fn remove(&self, space: &'static str, key: &str) -> Result<bool, Refusal> {
        Ok(self.0.remove(space, key).await?)
    }

    pub async fn scan<T: DeserializeOwned>(
        &self,
        space: &'static str,
    ) -> Result<Vec<(String, T)>, Refusal> {
        self.0
            .scan(space)
            .await?
            .into_iter()
            .map(|(k, v)| decode(space, v).map(|t| (k, t)))
            .collect()
    }
}
