//! An execution request: checked against its schema, its bounds and its
//! offer, its payment authorization bound, paid with the buyer's DCT through
//! the one pipeline (reserved until the request's deadline), recorded
//! durably within the cap on stored requests, then forwarded to the seller
//! with a fresh callback secret. Idempotency keys make a retried request
//! return the first answer without a second reservation or forward. Every
//! refusal, and a request the seller never took, leaves nothing stored.

use std::time::Duration;

use delegateos::CapabilityRequest;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use super::records::{
    IdempotencyRecord, PaymentBinding, RequestRecord, StoredAnswer, IDEMPOTENCY, OPEN,
    PAYMENT_AUTHORIZATIONS, REQUESTS,
};
use super::{credential, Agenta, Refusal, ID};
use agenta::FailureMode;
use dgw_core::budget::Hold;
use dgw_core::caller::Caller;
use dgw_core::gatekeeper::now;
use dgw_core::protocol::{Decision, Grant, HttpAnswer};
use dgw_core::state::Capped;

/// How often a duplicate waits for the first request's answer.
const DUPLICATE_POLL: Duration = Duration::from_millis(20);

/// How many times a duplicate tries a key that the first request freed.
const MAX_CLAIMS: usize = 8;

fn in_progress() -> Refusal {
    Refusal::new(
        409,
        "idempotency_in_progress",
        "the first request with this idempotency_key has not been answered yet",
    )
}

/// A purchase the gateway recorded, to forward to the seller.
struct Recorded {
    request_id: String,
    endpoint: String,
    /// The request as forwarded (dgw's callback in it).
    message: Value,
    record: Box<RequestRecord>,
}

/// What a request was checked to be, before anything is reserved.
struct Checked {
    request: agenta::ExecutionRequest,
    offer: agenta::Offer,
    endpoint: String,
    cost_microcents: u64,
    deadline: OffsetDateTime,
}

pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl Agenta {
    /// `POST /agenta/v0/execution-requests`.
    pub(super) async fn execute(
        &self,
        authorization: Option<&str>,
        message: &Value,
    ) -> Result<HttpAnswer, Refusal> {
        let request: agenta::ExecutionRequest = self.schemas.parse(message)?;
        self.config
            .limits
            .check(agenta::MessageType::ExecutionRequest, message)?;
        let token = credential(authorization, "DCT").ok_or_else(|| Refusal {
            status: 401,
            ..Refusal::budget("pay with `Authorization: DCT <token>`")
        })?;
        let grant = self.paying_grant(token)?;
        let delegation_id = leaf(&grant);
        let digest = agenta::translate::digest(message)
            .map_err(|e| Refusal::new(400, "schema_validation_failure", e.to_string()))?;
        let key = format!(
            "{}\n{}",
            request.buyer_agent.organization_id, request.idempotency_key
        );
        let first = IdempotencyRecord {
            digest: digest.clone(),
            delegation_id: delegation_id.clone(),
            request_id: request.request_id.clone(),
            answer: None,
            claimed_ms: Some(now().1),
        };
        // Claimed before the offer is looked at: a retry gets the first
        // answer even if the offer has moved on since. A duplicate waits for
        // the first's answer; if the first was refused before anything was
        // recorded, the key is free again and the duplicate tries it itself.
        let mut claims = 0;
        while !self.records.insert_new(IDEMPOTENCY, &key, &first).await? {
            if let Some(answer) = self.repeated(&key, &digest, &delegation_id).await? {
                return Ok(answer);
            }
            claims += 1;
            if claims >= MAX_CLAIMS {
                return Err(in_progress());
            }
        }
        let recorded = match self.check_request(request).await {
            Ok(checked) => self.buy(checked, grant, token, message).await,
            Err(r) => Err(r),
        };
        let recorded = match recorded {
            Ok(r) => r,
            Err(r) => {
                // Nothing was reserved or recorded: a retry is evaluated
                // afresh (after the offer is registered, the budget raised…).
                self.records.remove(IDEMPOTENCY, &key).await?;
                return Err(r);
            }
        };
        let (answer, kept) = self.forward(recorded).await;
        if !kept {
            // The seller never took it and nothing of it is kept, its key
            // included (`forget`): a retry once the seller is back is bought.
            return answer;
        }
        let stored = match &answer {
            Ok(a) => StoredAnswer {
                status: a.status,
                body: a.body.clone(),
            },
            Err(r) => StoredAnswer {
                status: r.status,
                body: r.body(),
            },
        };
        let kept = self
            .records
            .update(IDEMPOTENCY, &key, |i: &mut IdempotencyRecord| {
                i.answer = Some(stored.clone());
                Ok(())
            })
            .await;
        match kept {
            // Forgotten meanwhile (a retention shorter than the request).
            Err(r) if r.code == "not_found" => {}
            other => other?,
        }
        answer
    }

    /// The offer (current version, seller, buyers, input), the price and
    /// the deadline of a request whose schema passed.
    async fn check_request(&self, request: agenta::ExecutionRequest) -> Result<Checked, Refusal> {
        let (_, offer) = self.current_offer(&request.offer_id).await?;
        if offer.offer_version.as_deref() != Some(request.offer_version.as_str()) {
            return Err(Refusal::mode(
                FailureMode::OfferVersionMismatch,
                format!(
                    "offer {} is at version {}, not {}",
                    offer.offer_id,
                    offer.offer_version.as_deref().unwrap_or("?"),
                    request.offer_version
                ),
            ));
        }
        if request.seller_agent_id != offer.seller_agent.agent_id {
            return Err(Refusal::new(
                422,
                "seller_mismatch",
                "seller_agent_id is not the offer's seller",
            ));
        }
        if let Some(allowed) = &offer.allowed_buyer_agents {
            if !allowed.contains(&request.buyer_agent.agent_id) {
                return Err(Refusal::new(
                    403,
                    "buyer_not_allowed",
                    "the offer does not sell to this buyer agent",
                ));
            }
        }
        agenta::check_input(&offer, &request.input)?;
        if request.payment.currency != offer.pricing.currency {
            return Err(Refusal::new(
                422,
                "currency_mismatch",
                format!("the offer is priced in {}", offer.pricing.currency),
            ));
        }
        if offer.pricing.pricing_model == "fixed"
            && request.payment.max_amount < offer.pricing.amount
        {
            return Err(Refusal::budget(format!(
                "payment.max_amount {} is below the offer's fixed price {}",
                request.payment.max_amount, offer.pricing.amount
            )));
        }
        let cost_microcents = self
            .currencies
            .to_microcents(&request.payment.currency, request.payment.max_amount)
            .map_err(|e| Refusal::new(422, "unknown_currency", e.to_string()))?;
        let now = OffsetDateTime::now_utc();
        let asked = request
            .execution_constraints
            .get("deadline_at")
            .and_then(Value::as_str)
            .and_then(|t| {
                OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
            })
            .ok_or_else(|| Refusal::mode(FailureMode::SchemaValidationFailure, "deadline_at"))?;
        let most = now
            + time::Duration::seconds(
                i64::try_from(offer.service_levels.max_completion_seconds).unwrap_or(i64::MAX / 2),
            );
        let deadline = asked.min(most);
        if deadline <= now {
            return Err(Refusal {
                status: 422,
                ..Refusal::mode(FailureMode::DeadlineExceeded, "deadline_at has passed")
            });
        }
        let endpoint =
            offer.seller_agent.endpoint.clone().ok_or_else(|| {
                Refusal::new(422, "seller_endpoint_required", "the offer has none")
            })?;
        Ok(Checked {
            request,
            offer,
            endpoint,
            cost_microcents,
            deadline,
        })
    }

    /// The buyer's DCT as a grant of the configured tenant.
    pub(super) fn paying_grant(&self, token: &str) -> Result<Grant, Refusal> {
        let mut grant = self
            .gate
            .dct_grant(token)
            .map_err(|d| Refusal::budget(d.message()))?;
        if grant.tenant != self.config.tenant {
            return Err(Refusal::budget(format!(
                "Agenta work is paid by tenant {}'s DCTs",
                self.config.tenant
            )));
        }
        grant.protocol = ID;
        Ok(grant)
    }

    /// A request whose idempotency key was used before: the first answer,
    /// once there is one, if the body and the paying delegation are the
    /// same; `None` when the key is free again.
    async fn repeated(
        &self,
        key: &str,
        digest: &str,
        delegation_id: &str,
    ) -> Result<Option<HttpAnswer>, Refusal> {
        let patience = self.config.seller_timeout + Duration::from_secs(5);
        let started = std::time::Instant::now();
        loop {
            let Some(first) = self
                .records
                .get::<IdempotencyRecord>(IDEMPOTENCY, key)
                .await?
            else {
                return Ok(None);
            };
            if first.digest != digest || first.delegation_id != delegation_id {
                return Err(Refusal::new(
                    409,
                    "idempotency_conflict",
                    "this idempotency_key was used with another request",
                ));
            }
            if let Some(a) = first.answer {
                return Ok(Some(HttpAnswer::new(a.status, a.body)));
            }
            if started.elapsed() > patience {
                return Err(in_progress());
            }
            tokio::time::sleep(DUPLICATE_POLL).await;
        }
    }

    /// Binds the payment authorization, reserves and records a purchase; a
    /// refusal here has changed nothing.
    async fn buy(
        &self,
        checked: Checked,
        grant: Grant,
        token: &str,
        message: &Value,
    ) -> Result<Recorded, Refusal> {
        let bound = format!(
            "{}\n{}",
            grant.tenant, checked.request.payment.payment_authorization_id
        );
        let binding = PaymentBinding::Bound {
            request_id: checked.request.request_id.clone(),
            claimed_ms: now().1,
        };
        // Bound before anything is reserved or stored: a reused one is
        // refused having changed nothing.
        if !self
            .records
            .insert_new(PAYMENT_AUTHORIZATIONS, &bound, &binding)
            .await?
        {
            return Err(Refusal::budget(
                "payment.payment_authorization_id is already bound to another request",
            ));
        }
        let bought = self
            .reserve_and_record(checked, grant, token, message)
            .await;
        if bought.is_err() {
            self.records.remove(PAYMENT_AUTHORIZATIONS, &bound).await?;
        }
        bought
    }

    /// Reserves and records a purchase whose payment authorization is
    /// bound; a refusal here has released what it reserved and removed
    /// what it stored.
    async fn reserve_and_record(
        &self,
        checked: Checked,
        grant: Grant,
        token: &str,
        message: &Value,
    ) -> Result<Recorded, Refusal> {
        let Checked {
            request,
            offer,
            endpoint,
            cost_microcents,
            deadline,
        } = checked;
        let deadline_ms = (deadline.unix_timestamp_nanos() / 1_000_000).max(0) as u64;
        let asked = [CapabilityRequest {
            namespace: agenta::translate::CAPABILITY.0.into(),
            action: agenta::translate::CAPABILITY.1.into(),
            resource: agenta::translate::offer_resource(&offer.offer_id),
        }];
        let authorization = match self
            .gate
            .authorize_grant(
                &grant,
                token,
                &asked,
                cost_microcents,
                Hold::brokered_until(deadline_ms),
            )
            .await
        {
            Ok(Decision::Allowed(a)) => a,
            Ok(Decision::Denied(d)) => return Err(Refusal::budget(d.message())),
            Err(e) => return Err(Refusal::new(503, "state_unavailable", e.to_string())),
        };
        let reservation_id = authorization.reservation.map(|r| r.reservation_id);
        let contract = agenta::request_to_contract(&offer, &request, &self.currencies, deadline)
            .map_err(|e| Refusal::new(422, "untranslatable", e.to_string()));
        let contract = match contract.and_then(|draft| self.sign_contract(draft)) {
            Ok(c) => c,
            Err(r) => {
                self.release(reservation_id.as_deref()).await;
                return Err(r);
            }
        };
        let secret = match dgw_core::random::bytes::<32>() {
            Ok(b) => hex::encode(b),
            Err(e) => {
                self.release(reservation_id.as_deref()).await;
                return Err(Refusal::new(503, "random_unavailable", e.to_string()));
            }
        };
        let record = RequestRecord {
            request: message.clone(),
            offer_id: offer.offer_id.clone(),
            offer_version: request.offer_version.clone(),
            buyer_agent_id: request.buyer_agent.agent_id.clone(),
            buyer_organization_id: request.buyer_agent.organization_id.clone(),
            seller_agent_id: request.seller_agent_id.clone(),
            currency: request.payment.currency.clone(),
            tenant: grant.tenant.clone(),
            delegation_id: leaf(&grant),
            contract_id: contract.id.to_string(),
            reservation_id: reservation_id.clone(),
            max_microcents: cost_microcents,
            deadline_ms,
            callback_secret_sha256: sha256_hex(secret.as_bytes()),
            buyer_callback: request.callback.clone().map(Value::Object),
            status: None,
            receipts: Vec::new(),
            refused_receipts: Vec::new(),
            ended: false,
            ended_ms: None,
            charged_microcents: None,
            overcharge_attempt: None,
            attestation_id: None,
            verifications: Vec::new(),
            forward_error: None,
        };
        let stored = self
            .store(&request.request_id, &record, deadline_ms, &contract)
            .await;
        if let Err(r) = stored {
            self.release(reservation_id.as_deref()).await;
            return Err(r);
        }
        self.audit(
            "execution_request",
            json!({
                "request_id": request.request_id,
                "offer_id": offer.offer_id,
                "tenant": grant.tenant,
                "delegation_id": record.delegation_id,
                "reservation_id": reservation_id,
                "reserved_microcents": cost_microcents,
            }),
        )
        .await;
        let mut forwarded = message.clone();
        forwarded["callback"] = json!({"url": self.receipts_url(), "auth_reference": secret});
        Ok(Recorded {
            request_id: request.request_id,
            endpoint,
            message: forwarded,
            record: Box::new(record),
        })
    }

    /// Stores a purchase: its contract, its entry in the open index, and
    /// its record within the cap on stored requests. A refusal removes
    /// what it stored.
    async fn store(
        &self,
        request_id: &str,
        record: &RequestRecord,
        deadline_ms: u64,
        contract: &delegateos::TaskContract,
    ) -> Result<(), Refusal> {
        self.delegations.put_contract(contract).await?;
        // Indexed as open first: a crash after it leaves an entry the sweep
        // drops, never a request the sweep cannot find.
        let indexed = match self
            .records
            .insert_new(OPEN, request_id, &deadline_ms)
            .await
        {
            Ok(indexed) => indexed,
            Err(r) => {
                self.unstore(request_id, false, &contract.id).await;
                return Err(r);
            }
        };
        let refusal = match self
            .records
            .insert_capped(
                REQUESTS,
                request_id,
                record,
                self.config.max_stored_requests,
            )
            .await
        {
            Ok(Capped::Inserted) => return Ok(()),
            Ok(Capped::Taken) => Refusal::new(
                409,
                "duplicate_request_id",
                "a request with this request_id exists",
            ),
            Ok(Capped::Full) => Refusal::new(
                429,
                "too_many_stored_requests",
                format!(
                    "dgw keeps at most {} Agenta requests (agenta.max_stored_requests) and \
                     holds that many: ended ones are forgotten agenta.retention after they end",
                    self.config.max_stored_requests
                ),
            ),
            Err(r) => r,
        };
        self.unstore(request_id, indexed, &contract.id).await;
        Err(refusal)
    }

    /// Undoes [`Agenta::store`] short of the record: the open index entry
    /// (if this purchase made it) and the contract.
    async fn unstore(&self, request_id: &str, indexed: bool, contract: &delegateos::ContractId) {
        if indexed {
            if let Err(e) = self.records.remove(OPEN, request_id).await {
                tracing::error!(request_id, error = %e, "removing a refused request's index entry");
            }
        }
        if let Err(e) = self.delegations.remove_contract(contract).await {
            tracing::error!(request_id, error = %e, "removing a refused request's contract");
        }
    }

    /// Forwards a recorded purchase to its seller and applies the receipt
    /// it answers with; whether the request is still kept (a seller that
    /// never took it leaves nothing).
    async fn forward(&self, recorded: Recorded) -> (Result<HttpAnswer, Refusal>, bool) {
        let Recorded {
            request_id,
            endpoint,
            message: forwarded,
            record,
        } = recorded;
        let why = match self.sellers.post(&endpoint, &forwarded, None).await {
            Ok(answer) => match self.apply_receipt(&request_id, *record, &answer).await {
                Ok(status) => {
                    let code = if status.is_terminal() { 200 } else { 202 };
                    return (Ok(HttpAnswer::new(code, answer)), true);
                }
                Err(r) => format!("the seller answered with no valid receipt: {r}"),
            },
            Err(e) => e.to_string(),
        };
        let kept = !self.fail_to_start(&request_id, &why).await;
        (
            Err(Refusal::mode(FailureMode::UpstreamDependencyFailed, why)),
            kept,
        )
    }

    fn sign_contract(
        &self,
        draft: delegateos::contract::ContractDraft,
    ) -> Result<delegateos::TaskContract, Refusal> {
        let id = dgw_core::random::contract_id()
            .map_err(|e| Refusal::new(503, "random_unavailable", e.to_string()))?;
        draft
            .sign(
                &self.key,
                id,
                now().0,
                &delegateos::CheckFunctionRegistry::with_builtins(),
            )
            .map_err(|e| Refusal::new(422, "untranslatable", e.to_string()))
    }

    /// Releases a reservation the gateway holds (one that already ended is
    /// no error).
    pub(super) async fn release(&self, reservation_id: Option<&str>) {
        if let Some(id) = reservation_id {
            if let Err(e) = self.gate.release(&Caller::gateway(), id).await {
                tracing::debug!(reservation_id = id, error = %e, "release");
            }
        }
    }
}

/// The delegation that pays: the DCT's last link.
fn leaf(grant: &Grant) -> String {
    grant
        .chain
        .last()
        .map(|d| d.to_string())
        .unwrap_or_default()
}
