//! `dgw`: the delegate-gateway command line.

use std::process::ExitCode;

/// The gateway allocates many short-lived buffers per request (JSON, token
/// bytes, journal frames); mimalloc measured markedly faster than glibc's
/// allocator for that pattern (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;
use delegate_gateway::cli::{self, Cli};

fn main() -> ExitCode {
    let args = Cli::parse();
    match cli::run(args) {
        Ok(code) => code.into(),
        Err(err) => {
            eprintln!("dgw: {err}");
            err.exit_code().into()
        }
    }
}
