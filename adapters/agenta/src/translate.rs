//! Agenta in DelegateOS terms: an offer becomes the contract a purchase of
//! it is delegated under (docs/adapters/agenta.md, "Offers as contracts").

use std::collections::BTreeMap;

use delegateos::attestation::{Attestation, AttestationDraft};
use delegateos::contract::ContractDraft;
use delegateos::{ContractId, DelegationId};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::message::{ExecutionReceipt, ExecutionRequest, Offer};
use crate::state::Status;

/// The namespace and action a DCT must grant to buy an offer; the resource
/// is `offer:<offer_id>`.
pub const CAPABILITY: (&str, &str) = ("agenta", "execute");

/// Microcents per minor unit of each currency (`[agenta.currencies]`,
/// `USD = 1000000`: a cent is a million microcents). A currency not listed
/// is refused, never guessed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Currencies(BTreeMap<String, u64>);

impl Currencies {
    /// The table, by ISO 4217 code.
    pub fn new(rates: impl IntoIterator<Item = (String, u64)>) -> Self {
        Self(rates.into_iter().collect())
    }

    /// `amount` minor units of `currency`, in microcents.
    pub fn to_microcents(&self, currency: &str, amount: u64) -> Result<u64, Untranslatable> {
        let rate = self
            .0
            .get(currency)
            .ok_or_else(|| Untranslatable::UnknownCurrency(currency.to_owned()))?;
        amount.checked_mul(*rate).ok_or(Untranslatable::TooLarge {
            currency: currency.to_owned(),
            amount,
        })
    }
}

/// Why a message has no DelegateOS form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Untranslatable {
    /// The currency is not in the table.
    #[error("currency {0} is not in [agenta.currencies]")]
    UnknownCurrency(String),
    /// The amount does not fit in microcents.
    #[error("{amount} {currency} does not fit in 64-bit microcents")]
    TooLarge {
        /// The currency.
        currency: String,
        /// The amount, in minor units.
        amount: u64,
    },
    /// The draft is not valid DelegateOS.
    #[error("the draft is not valid: {0}")]
    Draft(String),
    /// Only a final receipt (`completed`, `failed`, …) attests anything.
    #[error("a receipt with status {0} is not final")]
    NotFinal(String),
}

/// The DelegateOS contract draft an offer is bought under, as of `now`:
///
/// - the task: the offer's title and description; its `input_schema` and
///   the verification mode in `inputs`; as output, the receipt's `result`
///   (which must match the offer's `output_schema`) with its evidence
///   ([`receipt_to_attestation`]);
/// - verification: `schema_match` against that output (the one check dgw
///   can run itself; the offer's `mode` says who else verifies);
/// - constraints: the price converted to microcents as the budget, a
///   deadline `max_completion_seconds` from `now`, no further delegation
///   (`maxChainDepth` 0), and `agenta:execute` required.
pub fn offer_to_contract(
    offer: &Offer,
    currencies: &Currencies,
    now: OffsetDateTime,
) -> Result<ContractDraft, Untranslatable> {
    let budget = currencies.to_microcents(&offer.pricing.currency, offer.pricing.amount)?;
    let seconds = i64::try_from(offer.service_levels.max_completion_seconds)
        .map_err(|_| Untranslatable::Draft("max_completion_seconds is too large".into()))?;
    let deadline = now
        .checked_add(time::Duration::seconds(seconds))
        .ok_or_else(|| Untranslatable::Draft("the deadline is out of range".into()))?;
    contract_draft(offer, budget, deadline, json!({}))
}

/// The DelegateOS contract one purchase is delegated under: the offer's
/// contract ([`offer_to_contract`]) with the buyer's `payment.max_amount`
/// (converted) as the budget, `deadline` (the earlier of the request's
/// `deadline_at` and the offer's `max_completion_seconds`, which the
/// gateway computes) and the request's ID and input in the task's inputs.
pub fn request_to_contract(
    offer: &Offer,
    request: &ExecutionRequest,
    currencies: &Currencies,
    deadline: OffsetDateTime,
) -> Result<ContractDraft, Untranslatable> {
    let budget = currencies.to_microcents(&request.payment.currency, request.payment.max_amount)?;
    contract_draft(
        offer,
        budget,
        deadline,
        json!({"agentaRequestId": request.request_id, "input": request.input}),
    )
}

fn contract_draft(
    offer: &Offer,
    budget: u64,
    deadline: OffsetDateTime,
    request: Value,
) -> Result<ContractDraft, Untranslatable> {
    let mut inputs = json!({
        "agentaOfferId": offer.offer_id,
        "agentaOfferVersion": offer.offer_version,
        "inputSchema": offer.input_schema,
        "verificationMode": offer.verification_policy.mode,
    });
    if let (Some(inputs), Value::Object(request)) = (inputs.as_object_mut(), request) {
        inputs.extend(request);
    }
    let draft = json!({
        "task": {
            "title": offer.title,
            "description": offer.description,
            "inputs": inputs,
            "outputSchema": output_schema(&offer.output_schema),
        },
        "verification": {"method": "schema_match", "schema": output_schema(&offer.output_schema)},
        "constraints": {
            "maxBudgetMicrocents": budget,
            "deadline": delegateos::Timestamp::from_instant(deadline),
            "maxChainDepth": 0,
            "requiredCapabilities": [format!("{}:{}", CAPABILITY.0, CAPABILITY.1)],
        },
    });
    serde_json::from_value(draft).map_err(|e| Untranslatable::Draft(e.to_string()))
}

/// The resource a DCT names to buy `offer_id`.
pub fn offer_resource(offer_id: &str) -> String {
    format!("offer:{offer_id}")
}

/// The DelegateOS output of an Agenta purchase: the receipt's `result`
/// (matching the offer's `output_schema`) and the evidence it came with.
pub fn output_schema(offer_output_schema: &Value) -> Value {
    json!({
        "type": "object",
        "required": ["result", "evidence"],
        "properties": {"result": offer_output_schema, "evidence": {"type": "object"}},
    })
}

/// `sha256:<hex>` of a message's canonical JSON (RFC 8785): the digest
/// convention of this gateway's evidence (docs/adapters/agenta.md).
pub fn digest(message: &Value) -> Result<String, Untranslatable> {
    let bytes = delegateos::canonical::canonicalize(message)
        .map_err(|e| Untranslatable::Draft(e.to_string()))?;
    let hash = Sha256::digest(&bytes);
    Ok(format!(
        "sha256:{}",
        hash.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}

/// The attestation draft a final receipt becomes, for the delegation
/// (under its contract) that bought the work; the gateway signs it. The
/// output is the receipt's `result` with its evidence: the digest of the
/// receipt as received, and each artifact's URI and `digest`. The cost is
/// `financials.final_amount` in microcents (nothing charged without it);
/// the duration `usage.compute_seconds` when given.
pub fn receipt_to_attestation(
    receipt: &ExecutionReceipt,
    as_received: &Value,
    contract_id: &ContractId,
    delegation_id: &DelegationId,
    currencies: &Currencies,
) -> Result<AttestationDraft, Untranslatable> {
    let status = receipt
        .status()
        .filter(|s| s.is_terminal() && *s != Status::Rejected)
        .ok_or_else(|| Untranslatable::NotFinal(receipt.status.clone()))?;
    let cost = match &receipt.financials {
        Some(f) => match (
            f.get("currency").and_then(Value::as_str),
            f.get("final_amount").and_then(Value::as_u64),
        ) {
            (Some(currency), Some(amount)) => currencies.to_microcents(currency, amount)?,
            (None, Some(_)) => return Err(Untranslatable::UnknownCurrency(String::new())),
            _ => 0,
        },
        None => 0,
    };
    let duration_ms = receipt
        .usage
        .as_ref()
        .and_then(|u| u.get("compute_seconds"))
        .and_then(Value::as_f64)
        .map_or(0, |s| (s * 1000.0).round().max(0.0) as u64);
    let artifacts: Vec<Value> = receipt
        .artifacts
        .iter()
        .flatten()
        .map(|a| json!({"artifactType": a.artifact_type, "uri": a.uri, "digest": a.digest}))
        .collect();
    let draft = json!({
        "contractId": contract_id,
        "delegationId": delegation_id,
        "type": "completion",
        "result": {
            "success": status == Status::Completed,
            "output": {
                "result": receipt.result.clone().map_or(Value::Null, Value::Object),
                "evidence": {
                    "receiptId": receipt.receipt_id,
                    "receiptDigest": digest(as_received)?,
                    "artifacts": artifacts,
                },
            },
            "costMicrocents": cost,
            "durationMs": duration_ms,
        },
    });
    serde_json::from_value(draft).map_err(|e| Untranslatable::Draft(e.to_string()))
}

/// What an Agenta receipt names that a DelegateOS attestation does not.
#[derive(Debug, Clone)]
pub struct ReceiptContext<'a> {
    /// The request it answers.
    pub request_id: &'a str,
    /// The offer and its version.
    pub offer_id: &'a str,
    /// The offer version.
    pub offer_version: &'a str,
    /// Who sells and who buys.
    pub seller_agent_id: &'a str,
    /// Who buys.
    pub buyer_agent_id: &'a str,
    /// The currency the receipt states its amount in.
    pub currency: &'a str,
}

/// And back: a DelegateOS attestation as the Agenta `execution_receipt` a
/// DelegateOS agent selling through Agenta sends (`completed` or `failed`;
/// the cost in the currency's minor unit, rounded down). Its evidence is
/// the attestation itself: a `result_payload` artifact at
/// `urn:delegateos:attestation:<id>` with the attestation's digest.
pub fn attestation_to_receipt(
    attestation: &Attestation,
    context: &ReceiptContext<'_>,
    currencies: &Currencies,
) -> Result<Value, Untranslatable> {
    let rate = currencies.to_microcents(context.currency, 1)?;
    let output = attestation.result.output.clone().unwrap_or(Value::Null);
    // An attestation made from a receipt carries the result inside its output.
    let result = match output.get("result") {
        Some(Value::Object(r)) if output.get("evidence").is_some() => Value::Object(r.clone()),
        _ => match output {
            Value::Object(o) => Value::Object(o),
            other => json!({"output": other}),
        },
    };
    let status = if attestation.result.success {
        "completed"
    } else {
        "failed"
    };
    let mut receipt = json!({
        "protocol_version": crate::PROTOCOL_ID,
        "message_type": "execution_receipt",
        "receipt_id": format!("rcpt-{}", attestation.id),
        "request_id": context.request_id,
        "offer_id": context.offer_id,
        "offer_version": context.offer_version,
        "seller_agent_id": context.seller_agent_id,
        "buyer_agent_id": context.buyer_agent_id,
        "status": status,
        "financials": {"currency": context.currency,
                       "final_amount": attestation.result.cost_microcents / rate.max(1)},
        "issued_at": attestation.created_at,
        "artifacts": [{
            "artifact_type": "result_payload",
            "uri": format!("urn:delegateos:attestation:{}", attestation.id),
            "digest": digest(&serde_json::to_value(attestation)
                .map_err(|e| Untranslatable::Draft(e.to_string()))?)?,
        }],
    });
    if attestation.result.success {
        receipt["result"] = result;
    }
    Ok(receipt)
}
