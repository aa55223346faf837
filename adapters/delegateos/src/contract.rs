//! Task contracts (§5): what is to be done, how its output is judged, and
//! within which limits; signed by the issuer over every field but `signature`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::canonical::{parse_strict, MAX_SAFE_INTEGER};
use crate::capability::Capability;
use crate::dct::VerifiedDct;
use crate::ids::ContractId;
use crate::principal::{Keypair, PrincipalId};
use crate::signing::{self, without_signature, SignatureError};
use crate::timestamp::Timestamp;
use crate::verification::{
    compile_schema, CheckFunctionRegistry, SpecError, VerificationPlan, VerificationSpec,
};
use crate::version::V01;

/// Largest contract JSON accepted.
pub const MAX_CONTRACT_BYTES: usize = 1 << 20;

/// `namespace:action`, as contracts require them (§5.1). Split at the last
/// colon, so a custom `org:namespace` keeps its colon.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequiredCapability {
    /// The namespace the token must grant.
    pub namespace: String,
    /// The action the token must grant.
    pub action: String,
}

impl RequiredCapability {
    /// Whether `cap` grants this namespace and action (any resource).
    pub fn is_granted_by(&self, cap: &Capability) -> bool {
        (cap.namespace == "*" || cap.namespace == self.namespace)
            && (cap.action == "*" || cap.action == self.action)
    }
}

impl FromStr for RequiredCapability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.rsplit_once(':') {
            Some((ns, action)) if !ns.is_empty() && !action.is_empty() => Ok(Self {
                namespace: ns.to_owned(),
                action: action.to_owned(),
            }),
            _ => Err(format!("required capability {s:?} is not namespace:action")),
        }
    }
}

impl fmt::Display for RequiredCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.namespace, self.action)
    }
}

impl Serialize for RequiredCapability {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RequiredCapability {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// What is to be done (§5.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskSpec {
    /// A short name.
    pub title: String,
    /// What the delegatee is to do.
    pub description: String,
    /// The task's inputs.
    pub inputs: Map<String, Value>,
    /// JSON Schema draft-07 for the output.
    pub output_schema: Value,
}

/// Limits on the task (§5.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskConstraints {
    /// The most the whole task may cost.
    pub max_budget_microcents: u64,
    /// When it must be done.
    pub deadline: Timestamp,
    /// How many times it may be delegated further.
    pub max_chain_depth: u32,
    /// Capabilities a token must grant to be bound to it.
    pub required_capabilities: Vec<RequiredCapability>,
}

/// A signed task contract (§5.1). Holding one means it parsed; call
/// [`TaskContract::verify_signature`] before trusting it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskContract {
    /// `ct_…`.
    pub id: ContractId,
    /// Always `0.1`.
    pub version: V01,
    /// Who issued (and signed) it.
    pub issuer: PrincipalId,
    /// When it was signed.
    pub created_at: Timestamp,
    /// What is to be done.
    pub task: TaskSpec,
    /// How outputs are judged.
    pub verification: VerificationSpec,
    /// Its limits.
    pub constraints: TaskConstraints,
    /// Ed25519 signature over the canonical JSON without it (base64url).
    pub signature: String,
}

/// A contract before signing: what `dgw contract new` writes and
/// `dgw contract sign` reads. Identity fields are filled in at signing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContractDraft {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Filled in at signing when absent.
    pub id: Option<ContractId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Filled in at signing when absent.
    pub version: Option<V01>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Filled in at signing (must be the signer when present).
    pub issuer: Option<PrincipalId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Filled in at signing when absent.
    pub created_at: Option<Timestamp>,
    /// What is to be done.
    pub task: TaskSpec,
    /// How outputs are judged.
    pub verification: VerificationSpec,
    /// Its limits.
    pub constraints: TaskConstraints,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Ignored: signing writes it.
    pub signature: Option<String>,
}

/// Why a contract was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    #[error("contract is not valid JSON: {0}")]
    /// Not JSON (or too large).
    Json(String),
    #[error("contract structure: {0}")]
    /// JSON of the wrong shape.
    Structure(String),
    #[error("contract signature: {0}")]
    /// The signature does not verify.
    Signature(#[from] SignatureError),
    #[error("contract is issued by {issuer}, not {expected}")]
    /// Signed by someone other than its issuer.
    WrongIssuer {
        /// The issuer it names.
        issuer: PrincipalId,
        /// Who signed.
        expected: PrincipalId,
    },
    #[error("contract outputSchema does not compile: {0}")]
    /// The output schema does not compile.
    OutputSchema(String),
    #[error(transparent)]
    /// The verification spec is invalid.
    Spec(#[from] SpecError),
}

/// Why a token does not fit a contract (§5.2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindingError {
    #[error("the token is bound to contract {token}, not {contract}")]
    /// The token names another contract.
    ContractMismatch {
        /// The token's contract.
        token: ContractId,
        /// The contract given.
        contract: ContractId,
    },
    #[error("the token does not grant {0}, which the contract requires")]
    /// The token does not grant a capability the contract requires.
    MissingCapability(RequiredCapability),
}

impl BindingError {
    /// The reason this gives in a §9.3 rejection.
    pub fn reason(&self) -> &'static str {
        match self {
            BindingError::ContractMismatch { .. } => "contract_mismatch",
            BindingError::MissingCapability(_) => "capability_not_granted",
        }
    }
}

fn parse<T: serde::de::DeserializeOwned>(json: &[u8]) -> Result<T, ContractError> {
    let value =
        parse_strict(json, MAX_CONTRACT_BYTES).map_err(|e| ContractError::Json(e.to_string()))?;
    serde_json::from_value(value).map_err(|e| ContractError::Structure(e.to_string()))
}

fn check_constraints(c: &TaskConstraints) -> Result<(), ContractError> {
    if c.max_budget_microcents > MAX_SAFE_INTEGER {
        return Err(ContractError::Structure(
            "maxBudgetMicrocents is above 2^53-1 and cannot be signed exactly".into(),
        ));
    }
    Ok(())
}

impl ContractDraft {
    /// Parses draft JSON (a signed contract parses as a draft too).
    pub fn parse(json: &[u8]) -> Result<Self, ContractError> {
        parse(json)
    }

    /// Signs the draft as `key`, with `id` and `created_at` unless the draft
    /// has them. Refuses a draft naming another issuer, and one whose output
    /// schema or verification spec does not compile against `registry`.
    pub fn sign(
        self,
        key: &Keypair,
        id: ContractId,
        created_at: Timestamp,
        registry: &CheckFunctionRegistry,
    ) -> Result<TaskContract, ContractError> {
        if let Some(issuer) = &self.issuer {
            if issuer != key.principal_id() {
                return Err(ContractError::WrongIssuer {
                    issuer: issuer.clone(),
                    expected: key.principal_id().clone(),
                });
            }
        }
        let mut contract = TaskContract {
            id: self.id.unwrap_or(id),
            version: V01,
            issuer: key.principal_id().clone(),
            created_at: self.created_at.unwrap_or(created_at),
            task: self.task,
            verification: self.verification,
            constraints: self.constraints,
            signature: String::new(),
        };
        contract.check_content(registry)?;
        contract.signature =
            signing::sign(key, &without_signature(&contract).map_err(sig_err)?).map_err(sig_err)?;
        Ok(contract)
    }
}

fn sig_err(e: crate::canonical::JsonError) -> ContractError {
    ContractError::Signature(SignatureError::Json(e))
}

impl TaskContract {
    /// Parses contract JSON (strict: duplicate keys, unknown fields, other versions refused).
    pub fn parse(json: &[u8]) -> Result<Self, ContractError> {
        let contract: TaskContract = parse(json)?;
        check_constraints(&contract.constraints)?;
        Ok(contract)
    }

    /// Checks the issuer's signature over every field but `signature`.
    pub fn verify_signature(&self) -> Result<(), ContractError> {
        let body = without_signature(self).map_err(sig_err)?;
        signing::verify(&self.issuer, &body, &self.signature)?;
        Ok(())
    }

    /// Checks that the output schema and verification spec compile.
    pub fn check_content(
        &self,
        registry: &CheckFunctionRegistry,
    ) -> Result<VerificationPlan, ContractError> {
        check_constraints(&self.constraints)?;
        compile_schema(&self.task.output_schema).map_err(ContractError::OutputSchema)?;
        Ok(VerificationPlan::compile(&self.verification, registry)?)
    }

    /// §5.2: the token's contract (its last block's `contractId`) is this
    /// contract, and its effective capabilities cover every required capability.
    pub fn check_binding(&self, token: &VerifiedDct) -> Result<(), BindingError> {
        let bound = token.dct().contract_id();
        if *bound != self.id {
            return Err(BindingError::ContractMismatch {
                token: bound.clone(),
                contract: self.id.clone(),
            });
        }
        for required in &self.constraints.required_capabilities {
            if !token
                .capabilities()
                .iter()
                .any(|c| required.is_granted_by(c))
            {
                return Err(BindingError::MissingCapability(required.clone()));
            }
        }
        Ok(())
    }
}
