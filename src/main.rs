//! `dgw`: the delegate-gateway command line.

use std::process::ExitCode;

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
