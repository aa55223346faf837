//! A module's `dgw <name> …` commands: how they end.

/// How a command that ran ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Exit 0.
    Success,
    /// The command ran and its answer is "no" (exit 1), already printed.
    Negative,
}

/// Why a command could not run (exit 2): bad arguments or input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CommandError(pub String);
