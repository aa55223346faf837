//! The command line's shared parts: how a command ends, what it reads and
//! prints, and the admin JSON-RPC client its calls to a running gateway
//! take. The binary's own commands and every module's `dgw <name> …`
//! commands use these, so both behave alike.

pub mod admin;
mod input;
pub mod output;

pub use input::read_file;
pub use output::print_json;

use std::process::ExitCode;

/// How a command that ran ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Exit 0.
    Success,
    /// The command ran and its answer is "no" (exit 1), already printed.
    Negative,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        match exit {
            Exit::Success => ExitCode::SUCCESS,
            Exit::Negative => ExitCode::from(1),
        }
    }
}

/// Why a command could not run (exit 2): bad arguments or input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CommandError(pub String);
