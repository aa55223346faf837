//! Attestations (§7): signed claims that a task was done, and their
//! verification, recursively through child attestations when those are given.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::{parse_strict, MAX_SAFE_INTEGER};
use crate::contract::{ContractError, TaskContract};
use crate::ids::{AttestationId, ContractId, DelegationId};
use crate::principal::{Keypair, PrincipalId};
use crate::signing::{self, hash_id, without_signature, SignatureError};
use crate::timestamp::Timestamp;
use crate::verification::{
    compile_schema, present, schema_result, CheckFunctionRegistry, CheckResult,
};
use crate::version::V01;

/// Largest attestation JSON accepted.
pub const MAX_ATTESTATION_BYTES: usize = 4 << 20;
/// Deepest chain of child attestations followed.
pub const MAX_CHILD_DEPTH: usize = 32;

/// What an attestation attests (§7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttestationType {
    /// The delegatee reports the task done (or failed).
    Completion,
    /// A delegator attests it verified a sub-delegation's result.
    DelegationVerification,
}

/// The verification the attester claims to have run (§7.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerificationOutcome {
    /// The verification method (`schema_match`, `deterministic_check`, `composite`).
    pub method: String,
    /// Whether it passed.
    pub passed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Its score, 0 to 1, when the method scores.
    pub score: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Why, for people.
    pub details: Option<String>,
}

/// The attested result (§7.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttestationResult {
    /// Whether the task succeeded.
    pub success: bool,
    /// The output; an explicit `null` output is a value.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub output: Option<Value>,
    /// `base64url(BLAKE2b-256(canonical(output)))`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_hash: Option<String>,
    /// What the work cost, in microcents.
    pub cost_microcents: u64,
    /// How long it took, in milliseconds.
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The verification the attester claims to have run.
    pub verification_outcome: Option<VerificationOutcome>,
}

/// A signed attestation (§7.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Attestation {
    /// `att_…`.
    pub id: AttestationId,
    /// Always `0.1`.
    pub version: V01,
    /// The contract the work was done under.
    pub contract_id: ContractId,
    /// The delegation it completes.
    pub delegation_id: DelegationId,
    /// Who attests (and signs).
    pub principal: PrincipalId,
    /// When it was signed.
    pub created_at: Timestamp,
    #[serde(rename = "type")]
    /// What it attests.
    pub kind: AttestationType,
    /// The result reported.
    pub result: AttestationResult,
    /// Attestations of the sub-delegations this result relies on.
    pub child_attestations: Vec<AttestationId>,
    /// Ed25519 signature over the canonical JSON without it (base64url).
    pub signature: String,
}

/// An attestation before signing: `dgw attestation sign` fills in `id`,
/// `version`, `principal`, `createdAt` and `result.outputHash`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttestationDraft {
    #[serde(default)]
    /// Filled in at signing when absent.
    pub id: Option<AttestationId>,
    #[serde(default)]
    /// Filled in at signing when absent.
    pub version: Option<V01>,
    /// The contract the work was done under.
    pub contract_id: ContractId,
    /// The delegation it completes.
    pub delegation_id: DelegationId,
    #[serde(default)]
    /// Filled in at signing (must be the signer when present).
    pub principal: Option<PrincipalId>,
    #[serde(default)]
    /// Filled in at signing when absent.
    pub created_at: Option<Timestamp>,
    #[serde(rename = "type")]
    /// What it attests.
    pub kind: AttestationType,
    /// The result reported; `outputHash` is computed at signing.
    pub result: AttestationResult,
    #[serde(default)]
    /// Attestations of the sub-delegations this result relies on.
    pub child_attestations: Vec<AttestationId>,
    #[serde(default)]
    /// Ignored: signing writes it.
    pub signature: Option<String>,
}

/// Why an attestation could not even be considered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttestationError {
    #[error("attestation is not valid JSON: {0}")]
    /// Not JSON (or too large).
    Json(String),
    #[error("attestation structure: {0}")]
    /// JSON of the wrong shape.
    Structure(String),
    #[error("attestation is by {principal}, not {expected}")]
    /// Signed by someone other than the principal it names.
    WrongPrincipal {
        /// The principal it names.
        principal: PrincipalId,
        /// Who signed.
        expected: PrincipalId,
    },
    #[error("outputHash {claimed} does not match the output ({actual})")]
    /// `outputHash` is not the output's hash.
    OutputHash {
        /// The hash the attestation claims.
        claimed: String,
        /// The output's hash.
        actual: String,
    },
    #[error("cannot sign: {0}")]
    /// Signing failed.
    Sign(String),
}

/// The base64url BLAKE2b-256 of an output's canonical JSON (§7.1).
pub fn output_hash(output: &Value) -> Result<String, AttestationError> {
    hash_id(output).map_err(|e| AttestationError::Structure(e.to_string()))
}

fn check_amounts(result: &AttestationResult) -> Result<(), AttestationError> {
    for (what, v) in [
        ("costMicrocents", result.cost_microcents),
        ("durationMs", result.duration_ms),
    ] {
        if v > MAX_SAFE_INTEGER {
            return Err(AttestationError::Structure(format!(
                "{what} is above 2^53-1"
            )));
        }
    }
    Ok(())
}

impl AttestationDraft {
    /// Parses draft JSON (a signed attestation parses as a draft too).
    pub fn parse(json: &[u8]) -> Result<Self, AttestationError> {
        let value = parse_strict(json, MAX_ATTESTATION_BYTES)
            .map_err(|e| AttestationError::Json(e.to_string()))?;
        serde_json::from_value(value).map_err(|e| AttestationError::Structure(e.to_string()))
    }

    /// Signs as `key`. The output hash is computed when absent and checked when present.
    pub fn sign(
        self,
        key: &Keypair,
        id: AttestationId,
        created_at: Timestamp,
    ) -> Result<Attestation, AttestationError> {
        if let Some(p) = &self.principal {
            if p != key.principal_id() {
                return Err(AttestationError::WrongPrincipal {
                    principal: p.clone(),
                    expected: key.principal_id().clone(),
                });
            }
        }
        let mut result = self.result;
        check_amounts(&result)?;
        if let Some(output) = &result.output {
            let actual = output_hash(output)?;
            match &result.output_hash {
                Some(claimed) if *claimed != actual => {
                    return Err(AttestationError::OutputHash {
                        claimed: claimed.clone(),
                        actual,
                    })
                }
                _ => result.output_hash = Some(actual),
            }
        }
        let mut attestation = Attestation {
            id: self.id.unwrap_or(id),
            version: V01,
            contract_id: self.contract_id,
            delegation_id: self.delegation_id,
            principal: key.principal_id().clone(),
            created_at: self.created_at.unwrap_or(created_at),
            kind: self.kind,
            result,
            child_attestations: self.child_attestations,
            signature: String::new(),
        };
        let body =
            without_signature(&attestation).map_err(|e| AttestationError::Sign(e.to_string()))?;
        attestation.signature =
            signing::sign(key, &body).map_err(|e| AttestationError::Sign(e.to_string()))?;
        Ok(attestation)
    }
}

/// The kinds of verification failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The signature does not verify.
    InvalidSignature,
    /// Not for the delegation's contract or delegation.
    ContractMismatch,
    /// The result has no output to verify.
    OutputMissing,
    /// `outputHash` is not the output's hash.
    OutputHashMismatch,
    /// The output does not match the contract's output schema.
    SchemaMismatch,
    /// The contract's verification failed.
    VerificationFailed,
    /// The reported cost does not fit the budget.
    BudgetExceeded,
    /// The children cost more than this attestation reports.
    ChildCostExceedsParent,
    /// A child attestation it names was not supplied.
    ChildMissing,
    /// Child attestations name each other in a cycle.
    ChildCycle,
    /// Child attestations nest deeper than allowed.
    ChildDepthExceeded,
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_value(self).ok();
        f.write_str(text.as_ref().and_then(Value::as_str).unwrap_or("failure"))
    }
}

/// Which attestation failed, how, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttestationFailure {
    /// The attestation that failed.
    pub attestation_id: AttestationId,
    #[serde(rename = "type")]
    /// How.
    pub kind: FailureKind,
    /// Why, for people.
    pub detail: String,
}

/// The outcome of verifying an attestation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttestationReport {
    /// Whether the attestation and its children verified.
    pub valid: bool,
    /// The first failure, naming the attestation it is in.
    pub reason: Option<AttestationFailure>,
    /// The contract's verification of the top attestation's output, when it was run.
    pub verification: Option<CheckResult>,
    /// The child attestations that were verified, depth first.
    pub verified_children: Vec<AttestationId>,
}

/// What verification needs besides the attestation: the contracts by ID,
/// the supplied child attestations by ID, and the check functions.
pub struct AttestationContext<'a> {
    /// Contracts by ID.
    pub contracts: &'a BTreeMap<ContractId, TaskContract>,
    /// The supplied child attestations, by ID.
    pub children: &'a BTreeMap<AttestationId, Attestation>,
    /// The check functions verification specs may name.
    pub registry: &'a CheckFunctionRegistry,
}

/// Verifies an attestation (§7.3) and, beyond v0.1, its supplied children.
///
/// For the top attestation: its contract must be supplied and its content
/// must compile (else `Err`: an invalid spec is not a verdict). Then, in
/// order: signature by `principal`; output hash; if `success`, the output
/// against the task's `outputSchema` and the contract's verification spec;
/// cost within `maxBudgetMicrocents`. Each child named in
/// `childAttestations` that is supplied is verified the same way (against
/// its own contract when supplied, otherwise signature and hash only), and
/// the children's costs together may not exceed the parent's.
pub fn verify_attestation(
    attestation: &Attestation,
    ctx: &AttestationContext<'_>,
) -> Result<AttestationReport, ContractError> {
    let contract = ctx.contracts.get(&attestation.contract_id).ok_or_else(|| {
        ContractError::Structure(format!(
            "contract {} of attestation {} was not supplied",
            attestation.contract_id, attestation.id
        ))
    })?;
    let mut walk = Walk {
        ctx,
        visiting: BTreeSet::new(),
        verified: Vec::new(),
        top_verification: None,
    };
    let outcome = walk.node(attestation, Some(contract), 0)?;
    Ok(AttestationReport {
        valid: outcome.is_ok(),
        reason: outcome.err(),
        verification: walk.top_verification,
        verified_children: walk.verified,
    })
}

struct Walk<'a, 'c> {
    ctx: &'a AttestationContext<'c>,
    visiting: BTreeSet<AttestationId>,
    verified: Vec<AttestationId>,
    top_verification: Option<CheckResult>,
}

type Verdict = Result<(), AttestationFailure>;

impl Walk<'_, '_> {
    fn node(
        &mut self,
        att: &Attestation,
        contract: Option<&TaskContract>,
        depth: usize,
    ) -> Result<Verdict, ContractError> {
        let fail = |kind, detail: String| {
            Ok(Err(AttestationFailure {
                attestation_id: att.id.clone(),
                kind,
                detail,
            }))
        };
        // 1. Signature by the claimed principal.
        let body = without_signature(att).map_err(|e| ContractError::Structure(e.to_string()))?;
        if let Err(e) = signing::verify(&att.principal, &body, &att.signature) {
            let detail = match e {
                SignatureError::Mismatch => {
                    format!("signature by {} does not verify", att.principal)
                }
                other => other.to_string(),
            };
            return fail(FailureKind::InvalidSignature, detail);
        }
        // The output hash, whenever both are present.
        if let (Some(output), Some(claimed)) = (&att.result.output, &att.result.output_hash) {
            let actual = hash_id(output).map_err(|e| ContractError::Structure(e.to_string()))?;
            if *claimed != actual {
                return fail(
                    FailureKind::OutputHashMismatch,
                    format!("outputHash {claimed} does not match the output's {actual}"),
                );
            }
        }
        if let Some(contract) = contract {
            if att.contract_id != contract.id {
                return fail(
                    FailureKind::ContractMismatch,
                    format!(
                        "attests contract {}, verified against {}",
                        att.contract_id, contract.id
                    ),
                );
            }
            let plan = contract.check_content(self.ctx.registry)?;
            if att.result.success {
                let Some(output) = &att.result.output else {
                    return fail(
                        FailureKind::OutputMissing,
                        "a successful attestation carries no output".into(),
                    );
                };
                // 2. The task's output schema (always: it is the contract's promise).
                let schema = compile_schema(&contract.task.output_schema)
                    .map_err(ContractError::OutputSchema)?;
                let shape = schema_result(&schema, output);
                if !shape.passed {
                    return fail(
                        FailureKind::SchemaMismatch,
                        shape
                            .details
                            .unwrap_or_else(|| "output does not match outputSchema".into()),
                    );
                }
                // 3. The contract's verification spec.
                let result = plan.run(output);
                if depth == 0 {
                    self.top_verification = Some(result.clone());
                }
                if !result.passed {
                    return fail(
                        FailureKind::VerificationFailed,
                        result
                            .details
                            .unwrap_or_else(|| "the contract's verification did not pass".into()),
                    );
                }
            }
            // 4. Cost within the contract's budget.
            let budget = contract.constraints.max_budget_microcents;
            if att.result.cost_microcents > budget {
                return fail(
                    FailureKind::BudgetExceeded,
                    format!(
                        "cost {} exceeds the contract's {budget} microcents",
                        att.result.cost_microcents
                    ),
                );
            }
        }
        self.children(att, depth)
    }

    fn children(&mut self, att: &Attestation, depth: usize) -> Result<Verdict, ContractError> {
        let fail = |kind, detail: String| {
            Ok(Err(AttestationFailure {
                attestation_id: att.id.clone(),
                kind,
                detail,
            }))
        };
        if att.child_attestations.is_empty() {
            return Ok(Ok(()));
        }
        if depth >= MAX_CHILD_DEPTH {
            return fail(
                FailureKind::ChildDepthExceeded,
                format!("child attestations nest deeper than {MAX_CHILD_DEPTH}"),
            );
        }
        self.visiting.insert(att.id.clone());
        let mut children_cost: u64 = 0;
        for child_id in &att.child_attestations {
            if self.visiting.contains(child_id) {
                return fail(
                    FailureKind::ChildCycle,
                    format!("child {child_id} is also an ancestor"),
                );
            }
            let Some(child) = self.ctx.children.get(child_id) else {
                // v0.1 verifies one level; children are followed when supplied.
                continue;
            };
            if child.id != *child_id {
                return fail(
                    FailureKind::ChildMissing,
                    format!("child {child_id} was supplied under another ID"),
                );
            }
            let contract = self.ctx.contracts.get(&child.contract_id);
            if let Err(failure) = self.node(child, contract, depth + 1)? {
                return Ok(Err(failure));
            }
            self.verified.push(child_id.clone());
            children_cost = children_cost.saturating_add(child.result.cost_microcents);
        }
        self.visiting.remove(&att.id);
        if children_cost > att.result.cost_microcents {
            return fail(
                FailureKind::ChildCostExceedsParent,
                format!(
                    "children cost {children_cost} microcents together, more than the {} this attestation reports",
                    att.result.cost_microcents
                ),
            );
        }
        Ok(Ok(()))
    }
}

impl Attestation {
    /// Parses a signed attestation (strict).
    pub fn parse(json: &[u8]) -> Result<Self, AttestationError> {
        let value = parse_strict(json, MAX_ATTESTATION_BYTES)
            .map_err(|e| AttestationError::Json(e.to_string()))?;
        let att: Attestation = serde_json::from_value(value)
            .map_err(|e| AttestationError::Structure(e.to_string()))?;
        check_amounts(&att.result)?;
        Ok(att)
    }
}
