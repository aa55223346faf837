//! `dgw`: the delegate-gateway command line.

use std::process::ExitCode;

/// The gateway allocates many short-lived buffers per request (JSON, token
/// bytes, journal frames); mimalloc measured markedly faster than glibc's
/// allocator for that pattern (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use delegate_gateway::cli;
use delegate_gateway::config::Modules;

fn main() -> ExitCode {
    match cli::main(&Modules::shipped()) {
        Ok(code) => code.into(),
        Err(err) => {
            eprintln!("dgw: {err}");
            err.exit_code().into()
        }
    }
}
