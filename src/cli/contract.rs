//! `dgw contract …` and `dgw check`: task contracts and output verification.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use delegateos::contract::{
    ContractDraft, RequiredCapability, TaskConstraints, TaskContract, TaskSpec,
};
use delegateos::{
    CheckFunctionRegistry, ContractId, PrincipalId, Timestamp, VerificationPlan, VerificationSpec,
};
use serde_json::{json, Map, Value};

use super::{now, print_json, read_file, timestamp_after, CliError, Outcome};
use crate::{keyfile, random};
use dgw_protocol::say;

#[derive(Debug, Subcommand)]
pub(super) enum ContractCommand {
    /// Write a contract draft (or, with --key, a signed contract).
    New(Box<NewArgs>),
    /// Sign a contract draft and print the signed contract.
    Sign {
        /// The issuer's key file.
        #[arg(long)]
        key: PathBuf,
        /// The draft (or contract) JSON file; `-` reads standard input.
        file: String,
    },
    /// Check a signed contract's signature (exit 0 valid, 1 not).
    Verify {
        /// The contract JSON file; `-` reads standard input.
        file: String,
        /// Require this issuer.
        #[arg(long)]
        issuer: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub(super) struct NewArgs {
    #[arg(long)]
    title: String,
    #[arg(long, default_value = "")]
    description: String,
    /// A task input, KEY=VALUE (VALUE is JSON if it parses, else a string; repeatable).
    #[arg(long = "input")]
    inputs: Vec<String>,
    /// The output's JSON Schema (draft-07): inline JSON or @FILE.
    #[arg(long = "output-schema")]
    output_schema: String,
    /// The verification spec (§6.1): inline JSON or @FILE.
    #[arg(long)]
    verification: String,
    /// The budget in microcents.
    #[arg(long)]
    budget: u64,
    /// The deadline, RFC 3339.
    #[arg(long, conflicts_with = "ttl", required_unless_present = "ttl")]
    deadline: Option<String>,
    /// The deadline as a duration from now, such as 2h.
    #[arg(long)]
    ttl: Option<String>,
    /// The deepest delegation chain allowed.
    #[arg(long = "max-depth")]
    max_depth: u32,
    /// A required capability, NAMESPACE:ACTION (repeatable).
    #[arg(long = "require")]
    required: Vec<String>,
    /// The contract ID (default: random).
    #[arg(long)]
    id: Option<String>,
    /// Sign with this key file instead of printing a draft.
    #[arg(long)]
    key: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(super) struct CheckArgs {
    /// The contract (or draft) whose verification spec judges the output.
    #[arg(long)]
    contract: String,
    /// The output JSON file; `-` reads standard input.
    #[arg(long)]
    output: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(cmd: ContractCommand) -> Result<Outcome, CliError> {
    match cmd {
        ContractCommand::New(args) => new(*args),
        ContractCommand::Sign { key, file } => {
            let draft = parse_draft(&file)?;
            print_json(&sign(draft, &key)?);
            Ok(Outcome::Success)
        }
        ContractCommand::Verify { file, issuer, json } => verify(&file, issuer.as_deref(), json),
    }
}

/// Inline JSON, or `@FILE`.
fn json_arg(text: &str, what: &str) -> Result<Value, CliError> {
    let bytes = match text.strip_prefix('@') {
        Some(path) => read_file(path, what)?,
        None => text.as_bytes().to_vec(),
    };
    delegateos::canonical::parse_strict(&bytes, delegateos::contract::MAX_CONTRACT_BYTES)
        .map_err(|e| CliError::Usage(format!("{what}: {e}")))
}

fn parse_draft(file: &str) -> Result<ContractDraft, CliError> {
    ContractDraft::parse(&read_file(file, "the contract")?)
        .map_err(|e| CliError::Usage(e.to_string()))
}

fn sign(draft: ContractDraft, key: &Path) -> Result<TaskContract, CliError> {
    let key = keyfile::read(key)?;
    draft
        .sign(
            &key,
            random::contract_id()?,
            now(),
            &CheckFunctionRegistry::with_builtins(),
        )
        .map_err(|e| CliError::Usage(e.to_string()))
}

fn new(a: NewArgs) -> Result<Outcome, CliError> {
    let mut inputs = Map::new();
    for input in &a.inputs {
        let (k, v) = input
            .split_once('=')
            .ok_or_else(|| CliError::Usage(format!("--input {input:?} is not KEY=VALUE")))?;
        let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_owned()));
        inputs.insert(k.to_owned(), value);
    }
    let verification: VerificationSpec =
        serde_json::from_value(json_arg(&a.verification, "--verification")?)
            .map_err(|e| CliError::Usage(format!("--verification: {e}")))?;
    let deadline = match (&a.deadline, &a.ttl) {
        (Some(d), _) => {
            Timestamp::parse(d).map_err(|e| CliError::Usage(format!("--deadline: {e}")))?
        }
        (None, Some(ttl)) => timestamp_after(&now(), ttl)?,
        (None, None) => return Err(CliError::Usage("--deadline or --ttl is required".into())),
    };
    let required = a
        .required
        .iter()
        .map(|r| {
            r.parse::<RequiredCapability>()
                .map_err(|e| CliError::Usage(format!("--require: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let draft = ContractDraft {
        id: a
            .id
            .as_deref()
            .map(ContractId::parse)
            .transpose()
            .map_err(|e| CliError::Usage(format!("--id: {e}")))?,
        version: None,
        issuer: None,
        created_at: None,
        task: TaskSpec {
            title: a.title,
            description: a.description,
            inputs,
            output_schema: json_arg(&a.output_schema, "--output-schema")?,
        },
        verification,
        constraints: TaskConstraints {
            max_budget_microcents: a.budget,
            deadline,
            max_chain_depth: a.max_depth,
            required_capabilities: required,
        },
        signature: None,
    };
    match &a.key {
        Some(key) => print_json(&sign(draft, key)?),
        None => {
            // Check the draft now rather than at signing time.
            VerificationPlan::compile(&draft.verification, &CheckFunctionRegistry::with_builtins())
                .map_err(|e| CliError::Usage(e.to_string()))?;
            print_json(&draft);
        }
    }
    Ok(Outcome::Success)
}

fn verify(file: &str, issuer: Option<&str>, json_out: bool) -> Result<Outcome, CliError> {
    let contract = TaskContract::parse(&read_file(file, "the contract")?)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let expected = issuer
        .map(PrincipalId::parse)
        .transpose()
        .map_err(|e| CliError::Usage(format!("--issuer: {e}")))?;
    let verdict = match expected {
        Some(expected) if expected != contract.issuer => {
            Err(format!("issued by {}, not {expected}", contract.issuer))
        }
        _ => contract.verify_signature().map_err(|e| e.to_string()),
    };
    if json_out {
        print_json(&json!({
            "valid": verdict.is_ok(),
            "contractId": contract.id,
            "issuer": contract.issuer,
            "reason": verdict.as_ref().err(),
        }));
    } else {
        match &verdict {
            Ok(()) => say!(
                "VALID contract {} signed by {}",
                contract.id,
                contract.issuer
            ),
            Err(reason) => say!("INVALID contract {}: {reason}", contract.id),
        }
    }
    Ok(if verdict.is_ok() {
        Outcome::Success
    } else {
        Outcome::Negative
    })
}

/// `dgw check`: runs a contract's verification spec against an output.
pub(super) fn check(a: CheckArgs) -> Result<Outcome, CliError> {
    let contract = parse_draft(&a.contract)?;
    let output = delegateos::canonical::parse_strict(
        &read_file(&a.output, "the output")?,
        delegateos::attestation::MAX_ATTESTATION_BYTES,
    )
    .map_err(|e| CliError::Usage(format!("the output: {e}")))?;
    let plan = VerificationPlan::compile(
        &contract.verification,
        &CheckFunctionRegistry::with_builtins(),
    )
    .map_err(|e| CliError::Usage(e.to_string()))?;
    let result = plan.run(&output);
    if a.json {
        print_json(&result);
    } else {
        let verdict = if result.passed { "PASSED" } else { "FAILED" };
        let score = result
            .score
            .map(|s| format!(" (score {s})"))
            .unwrap_or_default();
        let details = result
            .details
            .as_deref()
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        say!("{verdict}{score}{details}");
    }
    Ok(if result.passed {
        Outcome::Success
    } else {
        Outcome::Negative
    })
}
