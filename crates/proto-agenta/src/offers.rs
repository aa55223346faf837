//! Offers: registered by administrators, every `(offer_id, offer_version)`
//! immutable once stored; the last version registered is current.

use serde_json::Value;

use super::records::{OfferRecord, OFFERS};
use super::{Agenta, Refusal};
use dgw_core::protocol::HttpAnswer;
use dgw_net::outbound::JsonClient;

impl Agenta {
    /// Registers an offer (`201`, or `200` when this exact version was
    /// already registered).
    pub(super) async fn register_offer(&self, message: &Value) -> Result<HttpAnswer, Refusal> {
        let offer: agenta::Offer = self.schemas.parse(message)?;
        let Some(version) = offer.offer_version.clone() else {
            return Err(Refusal::new(
                422,
                "offer_version_required",
                "dgw keeps offers by version: the offer needs an offer_version",
            ));
        };
        let endpoint = offer.seller_agent.endpoint.as_deref().ok_or_else(|| {
            Refusal::new(
                422,
                "seller_endpoint_required",
                "dgw forwards requests to seller_agent.endpoint: the offer needs one",
            )
        })?;
        JsonClient::check_endpoint(endpoint)
            .map_err(|e| Refusal::new(422, "seller_endpoint_invalid", e.to_string()))?;
        // Refused now rather than at the first purchase.
        self.currencies
            .to_microcents(&offer.pricing.currency, offer.pricing.amount)
            .map_err(|e| Refusal::new(422, "unknown_currency", e.to_string()))?;
        let new = OfferRecord {
            current: version.clone(),
            versions: [(version.clone(), message.clone())].into(),
        };
        if self
            .records
            .insert_new(OFFERS, &offer.offer_id, &new)
            .await?
        {
            self.audit(
                "offer_registered",
                serde_json::json!({"offer_id": offer.offer_id, "offer_version": version}),
            )
            .await;
            return Ok(HttpAnswer::new(201, message.clone()));
        }
        let created = self
            .records
            .update(OFFERS, &offer.offer_id, |o: &mut OfferRecord| {
                match o.versions.get(&version) {
                    Some(existing) if existing == message => Ok(false),
                    Some(_) => Err(Refusal::new(
                        409,
                        "offer_version_immutable",
                        format!(
                            "offer {} version {version} is registered with other contents",
                            offer.offer_id
                        ),
                    )),
                    None => {
                        o.versions.insert(version.clone(), message.clone());
                        o.current = version.clone();
                        Ok(true)
                    }
                }
            })
            .await?;
        if created {
            self.audit(
                "offer_registered",
                serde_json::json!({"offer_id": offer.offer_id, "offer_version": version}),
            )
            .await;
        }
        Ok(HttpAnswer::new(
            if created { 201 } else { 200 },
            message.clone(),
        ))
    }

    /// The current version of an offer, as registered.
    pub(super) async fn current_offer(
        &self,
        offer_id: &str,
    ) -> Result<(Value, agenta::Offer), Refusal> {
        let record: OfferRecord = self
            .records
            .get(OFFERS, offer_id)
            .await?
            .ok_or_else(|| Refusal::not_found("offer"))?;
        let message = record
            .versions
            .get(&record.current)
            .cloned()
            .ok_or_else(|| Refusal::not_found("offer"))?;
        let offer = self.schemas.parse(&message)?;
        Ok((message, offer))
    }

    /// `GET /agenta/v0/offers/{offer_id}`.
    pub(super) async fn get_offer(&self, offer_id: &str) -> Result<HttpAnswer, Refusal> {
        let (message, _) = self.current_offer(offer_id).await?;
        Ok(HttpAnswer::new(200, message))
    }
}
