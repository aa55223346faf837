//! LDP in DelegateOS terms (docs/adapters/ldp.md has the table): a task's
//! skill at a delegate is the capability `ldp:<skill>:<delegate>`, and a
//! TASK_RESULT becomes a gateway-signed attestation whose evidence is the
//! provenance and the output's digest.

use delegateos::attestation::AttestationDraft;
use delegateos::{CapabilityRequest, ContractId, DelegationId};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::message::Provenance;
use crate::{Reason, Refusal};

/// The capability a TASK_SUBMIT of `skill` to `delegate` asks.
pub fn task_request(skill: &str, delegate: &str) -> CapabilityRequest {
    CapabilityRequest {
        namespace: "ldp".into(),
        action: skill.into(),
        resource: delegate.into(),
    }
}

/// The output every LDP result attestation has (its `ldp` reference and
/// its `evidence`), which the task's contract checks.
fn result_schema() -> Value {
    json!({"type": "object", "required": ["ldp", "evidence"]})
}

/// A TASK_SUBMIT as the DelegateOS contract it is done under: the skill at
/// the delegate (the input by digest, not copied), the task's cost as the
/// budget, the session's end as the deadline, no further delegation, the
/// capability `ldp:<skill>:<delegate name>` required; verified by the
/// shape of the result attestation's output.
#[allow(clippy::too_many_arguments)]
pub fn task_contract(
    skill: &str,
    delegate_id: &str,
    session_id: &str,
    task_id: &str,
    input: &Value,
    cost_microcents: u64,
    deadline: &delegateos::Timestamp,
) -> Result<delegateos::contract::ContractDraft, Refusal> {
    let draft = json!({
        "task": {
            "title": format!("LDP {skill} at {delegate_id}"),
            "description": format!("Task {task_id} of LDP session {session_id}"),
            "inputs": {"ldpSkill": skill, "ldpDelegate": delegate_id, "ldpSession": session_id,
                       "ldpTask": task_id, "inputDigest": digest(input)},
            "outputSchema": result_schema(),
        },
        "verification": {"method": "schema_match", "schema": result_schema()},
        "constraints": {
            "maxBudgetMicrocents": cost_microcents,
            "deadline": deadline,
            "maxChainDepth": 0,
            "requiredCapabilities": [format!("ldp:{skill}")],
        },
    });
    serde_json::from_value(draft)
        .map_err(|e| Refusal::new(Reason::Malformed, format!("contract draft: {e}")))
}

/// `hex(SHA-256(JCS(value)))`.
pub fn digest(value: &Value) -> String {
    hex::encode(Sha256::digest(serde_jcs::to_vec(value).unwrap_or_default()))
}

/// What an attestation of a result is made under.
#[derive(Debug, Clone)]
pub struct ResultContext<'a> {
    /// The session.
    pub session_id: &'a str,
    /// The task.
    pub task_id: &'a str,
    /// The delegate's ID.
    pub delegate_id: &'a str,
    /// What the task was charged.
    pub cost_microcents: u64,
    /// The contract and delegation IDs it is filed under.
    pub contract_id: &'a ContractId,
    /// …
    pub delegation_id: &'a DelegationId,
}

/// A TASK_RESULT as an attestation draft: success, the output's digest
/// (not the output: it may be large or private), the provenance as
/// evidence, the cost charged.
pub fn result_to_attestation(
    output: &Value,
    provenance: &Provenance,
    context: &ResultContext<'_>,
) -> Result<AttestationDraft, Refusal> {
    let draft = json!({
        "contractId": context.contract_id,
        "delegationId": context.delegation_id,
        "type": "completion",
        "result": {
            "success": true,
            "output": {
                "ldp": {"session_id": context.session_id, "task_id": context.task_id,
                        "delegate": context.delegate_id},
                "evidence": {"outputDigest": digest(output), "provenance": provenance},
            },
            "costMicrocents": context.cost_microcents,
            "durationMs": 0,
        },
    });
    serde_json::from_value(draft)
        .map_err(|e| Refusal::new(Reason::Malformed, format!("attestation draft: {e}")))
}

/// The `claim.type` of an ATTESTATION carrying a DelegateOS attestation.
pub const DELEGATEOS_CLAIM: &str = "delegateos.attestation";

/// A DelegateOS attestation as an LDP ATTESTATION body: the claim names
/// it and its outcome, the evidence is the signed attestation itself (so
/// any party verifies it with the attester's key).
pub fn attestation_body(attestation: &delegateos::Attestation) -> crate::message::Body {
    crate::message::Body::Attestation {
        claim: json!({
            "type": DELEGATEOS_CLAIM,
            "attestation_id": attestation.id,
            "principal": attestation.principal,
            "success": attestation.result.success,
            "output_hash": attestation.result.output_hash,
        }),
        evidence: serde_json::to_value(attestation).unwrap_or(Value::Null),
    }
}

/// The DelegateOS attestation an ATTESTATION body carries, if its claim
/// says it carries one: `Some(Err)` when it does not parse or its
/// signature does not verify (then the message is refused).
pub fn attestation_of(
    claim: &Value,
    evidence: &Value,
) -> Option<Result<delegateos::Attestation, Refusal>> {
    if claim.get("type").and_then(Value::as_str) != Some(DELEGATEOS_CLAIM) {
        return None;
    }
    let parsed = serde_json::from_value::<delegateos::Attestation>(evidence.clone())
        .map_err(|e| {
            Refusal::new(
                Reason::Malformed,
                format!("the evidence is not a DelegateOS attestation: {e}"),
            )
        })
        .and_then(|a| {
            let body = delegateos::signing::without_signature(&a)
                .map_err(|e| Refusal::new(Reason::Malformed, e.to_string()))?;
            delegateos::signing::verify(&a.principal, &body, &a.signature).map_err(|_| {
                Refusal::new(
                    Reason::BadSignature,
                    "the attestation's signature does not verify",
                )
            })?;
            Ok(a)
        });
    Some(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attestations_travel_as_attestation_messages_and_back() {
        let key = delegateos::Keypair::from_seed([3; 32]);
        let draft = result_to_attestation(
            &json!({"a": 1}),
            &serde_json::from_value(
                json!({"produced_by": "ldp:delegate:x", "model_version": "m",
                "payload_mode_used": "text"}),
            )
            .unwrap(),
            &ResultContext {
                session_id: "s",
                task_id: "t",
                delegate_id: "ldp:delegate:x",
                cost_microcents: 5,
                contract_id: &ContractId::from_bytes([1; 6]),
                delegation_id: &DelegationId::from_bytes([2; 6]),
            },
        )
        .unwrap();
        let att = draft
            .sign(
                &key,
                delegateos::AttestationId::from_bytes([9; 6]),
                delegateos::Timestamp::parse("2026-03-09T10:00:00Z").unwrap(),
            )
            .unwrap();
        let crate::message::Body::Attestation { claim, evidence } = attestation_body(&att) else {
            panic!()
        };
        assert_eq!(attestation_of(&claim, &evidence).unwrap().unwrap(), att);
        let mut forged = evidence.clone();
        forged["result"]["costMicrocents"] = json!(1);
        assert_eq!(
            attestation_of(&claim, &forged).unwrap().unwrap_err().reason,
            Reason::BadSignature
        );
        assert!(attestation_of(&json!({"type": "other"}), &evidence).is_none());
        assert_eq!(
            attestation_of(&claim, &json!([]))
                .unwrap()
                .unwrap_err()
                .reason,
            Reason::Malformed
        );
    }
}
