//! Receipts in upstream answers (a Motebit service's `motebit_task` answers
//! with its signed `ExecutionReceipt`, as JSON in a text content item
//! followed by an identity tag): each is verified before the caller sees
//! it, with the key dgw holds for its `motebit_id` when there is one (a
//! configured delegator's, else a pin; else its embedded key, which is
//! then pinned for the receipt's own signer, not for the nested ones the
//! upstream vouches for), and becomes gateway-signed DelegateOS
//! attestations (named in the result's `_meta["dgw/attestation"]`); an
//! invalid one is withheld and the call is not charged.

use delegateos::{ContractId, DelegationId};
use motebit::receipt::{self, KnownKeys, Receipt};
use motebit::translate::{self, AttestationContext};
use motebit::{Failure, Reason};
use serde_json::{json, Value};

use super::pins::PinError;
use super::{now_ms, Motebit};
use dgw_core::protocol::{Call, Review};

/// Where the root attestation's ID is added to a result.
pub const ATTESTATION_META: &str = "dgw/attestation";

/// The receipt a text content item carries, if it is one: JSON with the
/// members that make it a signed receipt (`task_id`, `motebit_id`,
/// `signature`), optionally followed by the reference's `[motebit:…
/// key:…]` tag on its last line. Not `suite`: a receipt without it is one
/// the reference judges (fail closed), so it is verified and withheld,
/// never passed on as if it were no receipt.
fn receipt_in(text: &str) -> Option<Value> {
    let text = text.trim();
    let body = match text.rsplit_once('\n') {
        Some((body, tag)) if tag.starts_with("[motebit:") && tag.ends_with(']') => body,
        _ => text,
    };
    if !body.starts_with('{') || !body.contains("\"signature\"") {
        return None;
    }
    let value: Value = serde_json::from_str(body).ok()?;
    ["task_id", "motebit_id", "signature"]
        .iter()
        .all(|m| value.get(m).is_some())
        .then_some(value)
}

/// The receipts an MCP result carries (in its text content), with the
/// index of the content item each is in.
fn receipts_in(result: &Value) -> Vec<(usize, Value)> {
    result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, c)| c.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|(i, c)| Some((i, receipt_in(c.get("text")?.as_str()?)?)))
        .collect()
}

/// IDs for the attestation of a receipt outside any DelegateOS contract:
/// derived from the receipt, so the same receipt always has the same.
fn ids_for(digest: &str) -> (ContractId, DelegationId) {
    let bytes = |salt: &str| motebit::encoding::id_bytes(&format!("{salt}\0{digest}"));
    (
        ContractId::from_bytes(bytes("contract")),
        DelegationId::from_bytes(bytes("delegation")),
    )
}

impl Motebit {
    /// Reviews an upstream's answer: every receipt in it verified, pinned
    /// and attested, or the answer withheld.
    pub(super) async fn review_answer(&self, call: &Call<'_>, result: &mut Value) -> Review {
        let found = receipts_in(result);
        if found.is_empty() {
            return Review::Pass;
        }
        let mut attested = Vec::new();
        for (index, raw) in found {
            match self.check_receipt(&raw, call).await {
                Ok((id, ours)) => {
                    attested.push(id);
                    // The caller gets the gateway's receipt, the worker's nested in it.
                    if let Some(item) = result.pointer_mut(&format!("/content/{index}")) {
                        item["text"] = json!(ours);
                    }
                }
                Err(f) => {
                    self.audit(
                        "receipt_withheld",
                        json!({"tool": call.tool,
                        "task_id": raw.get("task_id"), "motebit_id": raw.get("motebit_id"),
                        "reason": f.reason.as_str(), "detail": f.detail}),
                    )
                    .await;
                    return Review::Withhold {
                        reason: f.reason.as_str(),
                        detail: format!("its Motebit receipt does not verify: {}", f.detail),
                    };
                }
            }
        }
        if let Value::Object(r) = result {
            let meta = r.entry("_meta").or_insert_with(|| json!({}));
            if let Value::Object(m) = meta {
                m.insert(ATTESTATION_META.into(), json!(attested));
            }
        }
        Review::Pass
    }

    /// One receipt: verified (the pinned key first), its signers pinned,
    /// attested and stored; the root attestation's ID, and the text of the
    /// gateway's receipt nesting it.
    async fn check_receipt(
        &self,
        raw: &Value,
        call: &Call<'_>,
    ) -> Result<(String, String), Failure> {
        let parsed = Receipt::from_value(raw)?;
        let mut ids = Vec::new();
        super::inspect::receipt_signers(&parsed, &mut ids);
        let mut known = KnownKeys::new();
        let config = self.config.load_full();
        for id in &ids {
            if let Some(key) = config.key_of(id) {
                known.insert(id.clone(), *key);
                continue;
            }
            let pin = self.pins.get(id).await.map_err(storage)?;
            if let Some(pin) = pin {
                if pin.severed_by.is_some() {
                    return Err(Failure::new(
                        Reason::KeyMismatch,
                        format!("{id:?} is severed until re-pinned"),
                    ));
                }
                known.insert(id.clone(), motebit::encoding::parse_key(&pin.public_key)?);
            }
        }
        let report = receipt::verify_chain(&parsed, &known);
        if let Some((task, f)) = report.first_failure() {
            return Err(Failure::new(
                f.reason,
                format!("receipt {task:?}: {}", f.detail),
            ));
        }
        pin_signer(self, &report).await?;
        let digest = motebit::encoding::digest(raw)?;
        let (contract_id, delegation_id) = ids_for(&digest);
        let context = AttestationContext {
            contract_id: &contract_id,
            delegation_id: &delegation_id,
            cost_microcents: call.cost_microcents,
            created_at: dgw_core::gatekeeper::now().0,
        };
        let attestations =
            translate::receipt_to_attestations(&parsed, &report, &self.key, &context)?;
        for a in &attestations {
            self.delegations.put_attestation(a).await.map_err(storage)?;
        }
        let root = attestations
            .last()
            .map(|a| a.id.to_string())
            .unwrap_or_default();
        dgw_core::telemetry::record_protocol_settled(super::ID.name, call.cost_microcents);
        self.audit(
            "receipt_attested",
            json!({"tool": call.tool, "task_id": parsed.task_id,
            "motebit_id": parsed.motebit_id, "status": parsed.status.as_str(),
            "receipt_digest": digest, "attestation": root, "at_ms": now_ms()}),
        )
        .await;
        let ours = translate::countersign(&parsed, &root, call.tool, &self.key)?;
        let (id, key) = translate::gateway_identity(&self.key);
        Ok((root, super::identity_text(&ours, &id, &key)))
    }
}

fn storage(e: impl std::fmt::Display) -> Failure {
    Failure::new(
        Reason::Untrusted,
        format!("the gateway's state is unavailable: {e}"),
    )
}

/// Pins the signer of a verified receipt (first use), refusing a
/// mismatch. A configured delegator is never pinned, and the signers of
/// nested receipts are the upstream's word: they are checked against the
/// keys dgw holds, never pinned.
async fn pin_signer(m: &Motebit, node: &receipt::ChainNode) -> Result<(), Failure> {
    let Some(key) = &node.key else {
        return Ok(());
    };
    if m.config.load().key_of(&node.motebit_id).is_some() {
        return Ok(());
    }
    match m.pins.first_use(&node.motebit_id, key, now_ms()).await {
        Ok(()) => Ok(()),
        Err(PinError::Refused(f)) => Err(f),
        Err(PinError::Storage(e)) => Err(storage(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipts_are_found_with_or_without_the_identity_tag() {
        let r = json!({"task_id": "t", "motebit_id": "m", "signature": "s", "suite": "x"});
        let tagged = format!("{r}\n[motebit:0123abcd key:0011223344556677]");
        assert_eq!(receipt_in(&tagged), Some(r.clone()));
        assert_eq!(receipt_in(&r.to_string()), Some(r.clone()));
        assert_eq!(receipt_in("plain text"), None);
        assert_eq!(receipt_in(r#"{"signature": 1}"#), None);
        // Without its suite it is still a receipt (to be judged, and withheld).
        let no_suite = json!({"task_id": "t", "motebit_id": "m", "signature": "s"});
        assert_eq!(receipt_in(&no_suite.to_string()), Some(no_suite));
        let result = json!({"content": [{"type": "text", "text": "hello"}, {"type": "text", "text": tagged}]});
        assert_eq!(receipts_in(&result), vec![(1, r)]);
    }
}
