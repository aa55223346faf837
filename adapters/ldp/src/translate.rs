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
