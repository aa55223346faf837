//! Agenta in DelegateOS terms: an offer becomes the contract a purchase of
//! it is delegated under (docs/adapters/agenta.md, "Offers as contracts").

use std::collections::BTreeMap;

use delegateos::contract::ContractDraft;
use serde_json::json;
use time::OffsetDateTime;

use crate::message::Offer;

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
    /// The contract draft is not valid DelegateOS.
    #[error("the contract draft is not valid: {0}")]
    Draft(String),
}

/// The DelegateOS contract draft an offer is bought under, as of `now`:
///
/// - the task: the offer's title and description; its `input_schema` and
///   the verification mode in `inputs`; its `output_schema` as the output
///   schema;
/// - verification: `schema_match` against `output_schema` (the one check
///   dgw can run itself; the offer's `mode` says who else verifies);
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
    let draft = json!({
        "task": {
            "title": offer.title,
            "description": offer.description,
            "inputs": {
                "agentaOfferId": offer.offer_id,
                "agentaOfferVersion": offer.offer_version,
                "inputSchema": offer.input_schema,
                "verificationMode": offer.verification_policy.mode,
            },
            "outputSchema": offer.output_schema,
        },
        "verification": {"method": "schema_match", "schema": offer.output_schema},
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
