//! `dgw attestation …`: sign and verify attestations.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Subcommand;
use delegateos::attestation::{
    verify_attestation, Attestation, AttestationContext, AttestationDraft,
};
use delegateos::{CheckFunctionRegistry, TaskContract};

use super::{now, print_json, read_file, CliError, Outcome};
use crate::{keyfile, random};
use dgw_protocol::say;

#[derive(Debug, Subcommand)]
pub(super) enum AttestationCommand {
    /// Sign an attestation draft; fills in id, principal, createdAt and outputHash.
    Sign {
        /// The attester's key file.
        #[arg(long)]
        key: PathBuf,
        /// The draft JSON file; `-` reads standard input.
        file: String,
    },
    /// Verify an attestation against its contract (§7.3), and its children.
    Verify {
        /// The attestation JSON file; `-` reads standard input.
        file: String,
        /// The contract the attestation is for (repeatable: children's contracts too).
        #[arg(long = "contract", required = true)]
        contracts: Vec<String>,
        /// A child attestation (repeatable).
        #[arg(long = "child")]
        children: Vec<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub(super) fn run(cmd: AttestationCommand) -> Result<Outcome, CliError> {
    match cmd {
        AttestationCommand::Sign { key, file } => {
            let draft = AttestationDraft::parse(&read_file(&file, "the attestation")?)
                .map_err(|e| CliError::Usage(e.to_string()))?;
            let key = keyfile::read(&key)?;
            let signed = draft
                .sign(&key, random::attestation_id()?, now())
                .map_err(|e| CliError::Usage(e.to_string()))?;
            print_json(&signed);
            Ok(Outcome::Success)
        }
        AttestationCommand::Verify {
            file,
            contracts,
            children,
            json,
        } => verify(&file, &contracts, &children, json),
    }
}

fn attestation(file: &str) -> Result<Attestation, CliError> {
    Attestation::parse(&read_file(file, "the attestation")?)
        .map_err(|e| CliError::Usage(format!("{file}: {e}")))
}

fn verify(
    file: &str,
    contract_files: &[String],
    child_files: &[String],
    json_out: bool,
) -> Result<Outcome, CliError> {
    let top = attestation(file)?;
    let mut contracts = BTreeMap::new();
    for f in contract_files {
        let c = TaskContract::parse(&read_file(f, "the contract")?)
            .map_err(|e| CliError::Usage(format!("{f}: {e}")))?;
        contracts.insert(c.id.clone(), c);
    }
    let mut children = BTreeMap::new();
    for f in child_files {
        let child = attestation(f)?;
        children.insert(child.id.clone(), child);
    }
    let registry = CheckFunctionRegistry::with_builtins();
    let report = verify_attestation(
        &top,
        &AttestationContext {
            contracts: &contracts,
            children: &children,
            registry: &registry,
        },
    )
    .map_err(|e| CliError::Usage(e.to_string()))?;
    if json_out {
        print_json(&report);
    } else {
        match &report.reason {
            None => say!(
                "VALID attestation {} by {} ({} children verified)",
                top.id,
                top.principal,
                report.verified_children.len()
            ),
            Some(r) => say!(
                "INVALID attestation {}: {} {}",
                r.attestation_id,
                r.kind,
                r.detail
            ),
        }
    }
    Ok(if report.valid {
        Outcome::Success
    } else {
        Outcome::Negative
    })
}
