//! Motebit in DelegateOS terms (docs/adapters/motebit.md has the tables):
//! a delegation scope as capabilities, a call as capability requests, a
//! verified receipt tree as gateway-signed attestations, and a DelegateOS
//! attestation as a Motebit receipt signed by the gateway.

use delegateos::attestation::{Attestation, AttestationDraft};
use delegateos::{
    AttestationId, Capability as DosCapability, CapabilityRequest, ContractId, DelegationId,
    Keypair, Timestamp,
};
use serde_json::{json, Value};

use crate::encoding;
use crate::identity;
use crate::receipt::{ChainNode, Receipt, Status};
use crate::scope::Scope;
use crate::{Failure, SUITE};

/// The capabilities a scope grants: each capability name `X` (a tool,
/// delegation-v1 §7.0) is namespace `X` with every action on every
/// resource; `*` is every namespace.
pub fn capabilities(scope: &Scope) -> Vec<DosCapability> {
    match scope.names() {
        None => DosCapability::new("*", "*", "*").into_iter().collect(),
        Some(names) => names
            .iter()
            .filter_map(|n| DosCapability::new(n, "*", "*").ok())
            .collect(),
    }
}

/// The requests a call makes in Motebit terms: the tool is the capability
/// asked (namespace), with the front's action and each resource (`/` when
/// it names none).
pub fn requests(tool: &str, action: &str, resources: &[String]) -> Vec<CapabilityRequest> {
    let resources: Vec<String> = if resources.is_empty() {
        vec!["/".to_owned()]
    } else {
        resources.to_vec()
    };
    resources
        .into_iter()
        .map(|resource| CapabilityRequest {
            namespace: tool.to_owned(),
            action: action.to_owned(),
            resource,
        })
        .collect()
}

/// What an attestation made from a receipt is made under.
#[derive(Debug, Clone)]
pub struct AttestationContext<'a> {
    /// The contract the work was done under.
    pub contract_id: &'a ContractId,
    /// The delegation it completes.
    pub delegation_id: &'a DelegationId,
    /// What the call cost (the root only; nested receipts cost nothing here).
    pub cost_microcents: u64,
    /// When the gateway attests.
    pub created_at: Timestamp,
}

/// A verified receipt tree as gateway-signed attestations, children before
/// their parent (the root last). Each attests the receipt's outcome
/// (`status` `completed` → success) with the receipt as evidence: its
/// digest (`hex(SHA-256(JCS(receipt)))`), signer, key and key source; a
/// parent lists its children's attestations. Refused unless every receipt
/// of the tree verified in `report`.
pub fn receipt_to_attestations(
    receipt: &Receipt,
    report: &ChainNode,
    key: &Keypair,
    context: &AttestationContext<'_>,
) -> Result<Vec<Attestation>, Failure> {
    if let Some((task, failure)) = report.first_failure() {
        return Err(Failure::new(
            crate::Reason::ChildInvalid,
            format!("receipt {task:?} did not verify: {failure}"),
        ));
    }
    let mut out = Vec::new();
    attest(receipt, report, key, context, 0, &mut out)?;
    Ok(out)
}

fn attest(
    receipt: &Receipt,
    report: &ChainNode,
    key: &Keypair,
    context: &AttestationContext<'_>,
    depth: usize,
    out: &mut Vec<Attestation>,
) -> Result<AttestationId, Failure> {
    let mut children = Vec::new();
    for (child, child_report) in receipt.delegations.iter().zip(&report.delegations) {
        children.push(attest(child, child_report, key, context, depth + 1, out)?);
    }
    let digest = encoding::digest(&receipt.raw)?;
    let duration = (receipt.completed_at - receipt.submitted_at).max(0.0);
    let draft = json!({
        "contractId": context.contract_id,
        "delegationId": context.delegation_id,
        "type": "completion",
        "result": {
            "success": receipt.status == Status::Completed,
            "output": {
                "receipt": {
                    "task_id": receipt.task_id,
                    "motebit_id": receipt.motebit_id,
                    "status": receipt.status.as_str(),
                    "result_hash": receipt.result_hash,
                    "prompt_hash": receipt.prompt_hash,
                    "relay_task_id": receipt.relay_task_id,
                },
                "evidence": {
                    "receiptDigest": digest,
                    "signer": receipt.motebit_id,
                    "publicKey": report.key,
                    "keySource": report.key_source.map(|s| s.as_str()),
                },
            },
            "costMicrocents": if depth == 0 { context.cost_microcents } else { 0 },
            "durationMs": duration as u64,
        },
        "childAttestations": children,
    });
    let draft: AttestationDraft = serde_json::from_value(draft)
        .map_err(|e| Failure::malformed(format!("attestation draft: {e}")))?;
    // Content-addressed: the same receipt tree attests to the same ids.
    let id = AttestationId::from_bytes(id_bytes(&digest, context));
    let signed = draft
        .sign(key, id, context.created_at.clone())
        .map_err(|e| Failure::malformed(format!("signing the attestation: {e}")))?;
    let id = signed.id.clone();
    out.push(signed);
    Ok(id)
}

fn id_bytes(digest: &str, context: &AttestationContext<'_>) -> [u8; 6] {
    encoding::id_bytes(&format!(
        "{digest}\0{}\0{}",
        context.contract_id, context.delegation_id
    ))
}

/// The identity the gateway signs Motebit receipts as: its sovereign
/// `motebit_id` and its key.
pub fn gateway_identity(key: &Keypair) -> (String, String) {
    let public = key.public_key();
    (identity::sovereign_id(&public), encoding::key_hex(&public))
}

/// A DelegateOS attestation as a Motebit execution receipt signed by the
/// gateway (so DelegateOS agents answer Motebit delegators):
///
/// | receipt | from |
/// | --- | --- |
/// | `task_id` | the attestation id |
/// | `relay_task_id` | the delegation id (the economic binding) |
/// | `motebit_id`, `public_key` | the gateway's sovereign id and key |
/// | `device_id` | `dgw` |
/// | `submitted_at`, `completed_at` | `createdAt` less `durationMs`, `createdAt` |
/// | `status` | `success` → `completed`, else `failed` |
/// | `result` | the output as canonical JSON (empty when none) |
/// | `prompt_hash` | `hex(SHA-256(contract id))` (the prompt is not known) |
/// | `result_hash` | `hex(SHA-256(result))` |
/// | `tools_used`, `memories_formed` | `[]`, `0` |
pub fn attestation_to_receipt(attestation: &Attestation, key: &Keypair) -> Result<Value, Failure> {
    let (motebit_id, public_key) = gateway_identity(key);
    let result = match &attestation.result.output {
        Some(output) => String::from_utf8(encoding::canonical(output)?)
            .map_err(|_| Failure::malformed("output is not UTF-8"))?,
        None => String::new(),
    };
    let completed = attestation.created_at.instant().unix_timestamp_nanos() / 1_000_000;
    let submitted = completed - i128::from(attestation.result.duration_ms);
    let mut receipt = json!({
        "task_id": attestation.id,
        "relay_task_id": attestation.delegation_id,
        "motebit_id": motebit_id,
        "device_id": "dgw",
        "submitted_at": submitted as i64,
        "completed_at": completed as i64,
        "status": if attestation.result.success { "completed" } else { "failed" },
        "result_hash": encoding::sha256_hex(result.as_bytes()),
        "result": result,
        "tools_used": [],
        "memories_formed": 0,
        "prompt_hash": encoding::sha256_hex(attestation.contract_id.as_str().as_bytes()),
        "public_key": public_key,
        "suite": SUITE,
    });
    encoding::sign(key, &mut receipt)?;
    Ok(receipt)
}

/// The gateway's own receipt for work it brokered: a receipt signed by the
/// gateway (its sovereign id and key) that nests the worker's receipt in
/// `delegation_receipts` (delegation-v1 §5.5, the gateway as the middle
/// hop), so a caller that pinned the gateway's key verifies what it gets
/// and still holds the worker's own signature. Status, result, hashes and
/// times are the worker's; `task_id` is `task_id` (the attestation of it),
/// `tools_used` the tool called.
pub fn countersign(
    worker: &Receipt,
    task_id: &str,
    tool: &str,
    key: &Keypair,
) -> Result<Value, Failure> {
    let (motebit_id, public_key) = gateway_identity(key);
    let mut receipt = json!({
        "task_id": task_id,
        "motebit_id": motebit_id,
        "device_id": "dgw",
        "submitted_at": worker.raw.get("submitted_at"),
        "completed_at": worker.raw.get("completed_at"),
        "status": worker.status.as_str(),
        "result": worker.result,
        "tools_used": [tool],
        "memories_formed": 0,
        "prompt_hash": worker.prompt_hash,
        "result_hash": worker.result_hash,
        "delegation_receipts": [worker.raw],
        "public_key": public_key,
        "suite": SUITE,
    });
    encoding::sign(key, &mut receipt)?;
    Ok(receipt)
}
