//! The `dgw` command line: one module per command group.

mod token;

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::keyfile::{self, KeyFileError};

/// dgw: the delegate gateway. Verifies, attenuates and enforces delegated
/// authority for AI agents.
#[derive(Debug, Parser)]
#[command(name = "dgw", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create an Ed25519 key file (mode 0600) and print its principal ID.
    Keygen {
        /// Where to write the key file.
        #[arg(long)]
        out: PathBuf,
        /// Replace an existing file.
        #[arg(long)]
        force: bool,
    },
    /// Issue, attenuate, inspect and verify Delegation Capability Tokens.
    #[command(subcommand)]
    Token(token::TokenCommand),
}

/// A command's outcome that is not success.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad arguments or input: exit 2.
    #[error("{0}")]
    Usage(String),
    /// A key file that cannot be read or written: exit 2.
    #[error(transparent)]
    KeyFile(#[from] KeyFileError),
}

impl CliError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) | CliError::KeyFile(_) => 2,
        }
    }
}

/// How a successful command ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0.
    Success,
    /// The command ran and its answer is "no" (exit 1), already printed.
    Negative,
}

impl From<Outcome> for ExitCode {
    fn from(o: Outcome) -> Self {
        match o {
            Outcome::Success => ExitCode::SUCCESS,
            Outcome::Negative => ExitCode::from(1),
        }
    }
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<Outcome, CliError> {
    match cli.command {
        Command::Keygen { out, force } => {
            let key = keyfile::generate()?;
            keyfile::write(&out, &key, force)?;
            println!("{}", key.principal_id());
            eprintln!("wrote key file {} (mode 0600)", out.display());
            Ok(Outcome::Success)
        }
        Command::Token(cmd) => token::run(cmd),
    }
}

/// Reads an argument that may be `-` for standard input, trimmed.
fn arg_or_stdin(arg: &str, what: &str) -> Result<String, CliError> {
    if arg != "-" {
        return Ok(arg.trim().to_owned());
    }
    let mut text = String::new();
    std::io::stdin()
        .take(16 << 20)
        .read_to_string(&mut text)
        .map_err(|e| CliError::Usage(format!("cannot read {what} from standard input: {e}")))?;
    Ok(text.trim().to_owned())
}

/// Prints a value as pretty JSON on stdout.
fn print_json(value: &impl serde::Serialize) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).expect("CLI output always serializes")
    );
}
