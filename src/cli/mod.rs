//! The `dgw` command line: one module per command group.

mod attestation;
mod audit;
mod config;
mod contract;
mod oauth;
mod revoke;
mod token;

use std::io::Read;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use delegateos::Timestamp;

use crate::config::Modules;
use crate::keyfile::{self, KeyFileError};
use dgw_protocol::command::CommandError;
use dgw_protocol::say;

// What the protocols' commands share with these (dgw_protocol's `command`):
// input, output and how a command ends.
pub use dgw_protocol::command::Exit as Outcome;
pub(crate) use dgw_protocol::command::{print_json, read_file};

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
    /// Run the gateway.
    Serve {
        /// The configuration file.
        #[arg(long, default_value = "config/gateway.toml")]
        config: PathBuf,
        /// Keep budgets, delegations, revocations and audit in memory
        /// instead of data_dir: a restart forgets them all (tests, demos).
        #[arg(long)]
        ephemeral: bool,
        /// Begin a new audit log, chained to the anchor the state store
        /// keeps for the old one, in an empty `[audit] dir`: after dgw
        /// refused a log cut or rewritten while it was down, and the
        /// operator moved that log aside (docs/operations.md, "Audit log").
        #[arg(long)]
        new_audit_log: bool,
        /// Log format.
        #[arg(long = "log-format", value_enum, default_value = "text")]
        log_format: crate::logs::LogFormat,
    },
    /// Serve MCP on stdin/stdout: an MCP client runs dgw as its server, and
    /// dgw enforces every tools/call before the configured upstreams see it.
    Mcp {
        /// The configuration file (its [[upstreams]] and tenants).
        #[arg(long, default_value = "config/gateway.toml")]
        config: PathBuf,
        /// Log format (logs go to stderr).
        #[arg(long = "log-format", value_enum, default_value = "text")]
        log_format: crate::logs::LogFormat,
        /// A file holding the DCT every call of the session runs under
        /// (0600, 0400 or 0440); else the `DGW_DCT` environment variable.
        #[arg(long = "dct-file")]
        dct_file: Option<PathBuf>,
    },
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
    /// Write, sign and verify task contracts.
    #[command(subcommand)]
    Contract(contract::ContractCommand),
    /// Run a contract's verification spec against an output
    /// (exit 0 passed, 1 failed, 2 invalid spec).
    Check(contract::CheckArgs),
    /// Sign and verify attestations.
    #[command(subcommand)]
    Attestation(attestation::AttestationCommand),
    /// Verify and export the tamper-evident audit log.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// Hand a signed revocation entry to a running gateway, or, as an
    /// administrator, revoke a token's block without its signer's key.
    Revoke(revoke::SubmitArgs),
    /// The OAuth authorization server's operator commands ([oauth]).
    #[command(name = "oauth", subcommand)]
    OAuth(oauth::OAuthCommand),
    /// Create admin tokens for `[[admin.tokens]]`.
    #[command(name = "admin-token", subcommand)]
    AdminToken(AdminTokenCommand),
    /// Check configuration files; print the configuration's JSON Schema.
    #[command(subcommand)]
    Config(config::ConfigCommand),
}

#[derive(Debug, Subcommand)]
enum AdminTokenCommand {
    /// Print a fresh 256-bit admin secret (first line, for the caller's
    /// `Authorization: Bearer`), then the config lines that admit it (only
    /// its SHA-256 is stored).
    New {
        /// The token's name, as logs show it.
        #[arg(long)]
        name: String,
    },
}

/// `dgw serve`, or `dgw mcp` when `stdio`.
fn run_gateway(
    config: &std::path::Path,
    log_format: crate::logs::LogFormat,
    stdio: Option<Option<String>>,
    ephemeral: bool,
    new_audit_log: bool,
) -> Result<Outcome, CliError> {
    // Before any secret is read: a core would hold them all.
    let cores = no_core_dumps();
    let mut config =
        crate::config::Config::load(config).map_err(|e| CliError::Usage(e.to_string()))?;
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = config.server.workers {
        runtime.worker_threads(n);
    }
    let runtime = runtime
        .enable_all()
        .build()
        .map_err(|e| CliError::Usage(format!("cannot start the runtime: {e}")))?;
    // Traces only when configured: otherwise no layer exists at all.
    let traces = config
        .telemetry
        .as_ref()
        .map(|t| crate::traces::Traces::start(t, runtime.handle().clone()))
        .transpose()
        .map_err(|e| CliError::Usage(e.to_string()))?;
    crate::logs::init_logs(
        log_format,
        traces.as_ref().map(crate::traces::Traces::tracer),
    );
    if let Some(t) = &config.telemetry {
        dgw_net::trace_context::enable();
        tracing::info!(endpoint = %t.endpoint, sampling_ratio = t.sampling_ratio, "exporting traces");
    }
    let cores = match cores {
        Ok(limit) => Some(limit),
        Err(e) => {
            tracing::warn!(error = %e, "cannot turn core dumps off");
            None
        }
    };
    if config.server.core_dumps {
        if let Some(limit) = cores {
            let _ = rustix::process::setrlimit(rustix::process::Resource::Core, limit);
        }
    }
    config.ephemeral = ephemeral;
    config.new_audit_log = new_audit_log;
    // Checked when the file was read.
    let _ = crate::logs::set_level(&config.log_level);
    let run = async {
        match stdio {
            Some(dct) => crate::serve::run_stdio(config, dct).await,
            None => crate::serve::run(config).await,
        }
    };
    let ran = runtime.block_on(run);
    // Off the runtime's threads, while it still runs the last exports.
    if let Some(traces) = traces {
        traces.shutdown();
    }
    ran.map_err(|e| CliError::Usage(e.to_string()))?;
    Ok(Outcome::Success)
}

/// The DCT `dgw mcp` runs its session under: `--dct-file`, else `DGW_DCT`.
fn session_dct(file: Option<&std::path::Path>) -> Result<Option<String>, CliError> {
    if let Some(path) = file {
        let secret = crate::mcp::secret::Secret::from_file(path)
            .map_err(|e| CliError::Usage(format!("--dct-file: {e}")))?;
        return Ok(Some(secret.expose().trim().to_owned()));
    }
    match std::env::var("DGW_DCT") {
        Ok(v) if !v.trim().is_empty() => Ok(Some(v.trim().to_owned())),
        _ => Ok(None),
    }
}

/// Sets the soft core-size limit to 0; returns the limit it replaced (the
/// hard limit is left, so `[server] core_dumps = true` can restore it).
fn no_core_dumps() -> Result<rustix::process::Rlimit, rustix::io::Errno> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let before = getrlimit(Resource::Core);
    let off = Rlimit {
        current: Some(0),
        maximum: before.maximum,
    };
    setrlimit(Resource::Core, off).map(|()| before)
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
    /// No randomness for an ID: exit 2.
    #[error(transparent)]
    Random(#[from] crate::random::RandomError),
}

/// A shared command part's refusal (bad input, an unreachable gateway).
impl From<CommandError> for CliError {
    fn from(e: CommandError) -> Self {
        CliError::Usage(e.0)
    }
}

impl CliError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) | CliError::KeyFile(_) | CliError::Random(_) => 2,
        }
    }
}

/// The whole command line: the gateway's own commands, and each protocol
/// module's `dgw <section> …` group.
pub fn command(modules: &Modules) -> clap::Command {
    let mut command = <Cli as clap::CommandFactory>::command();
    for group in modules.iter().filter_map(|m| m.command()) {
        command = command.subcommand(group);
    }
    command
}

/// Parses the process's arguments with [`command`] and runs them: a
/// protocol's group is run by its module.
pub fn main(modules: &Modules) -> Result<Outcome, CliError> {
    use clap::FromArgMatches;
    let matches = command(modules).get_matches();
    if let Some((name, sub)) = matches.subcommand() {
        if let Some(module) = modules
            .iter()
            .find(|m| m.section() == name && m.command().is_some())
        {
            return Ok(module.run_command(sub)?);
        }
    }
    run(Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit()))
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<Outcome, CliError> {
    match cli.command {
        Command::Serve {
            config,
            ephemeral,
            new_audit_log,
            log_format,
        } => run_gateway(&config, log_format, None, ephemeral, new_audit_log),
        Command::Mcp {
            config,
            log_format,
            dct_file,
        } => {
            let dct = session_dct(dct_file.as_deref())?;
            run_gateway(&config, log_format, Some(dct), false, false)
        }
        Command::Keygen { out, force } => {
            let key = keyfile::generate()?;
            keyfile::write(&out, &key, force)?;
            say!("{}", key.principal_id());
            eprintln!("wrote key file {} (mode 0600)", out.display());
            Ok(Outcome::Success)
        }
        Command::Token(cmd) => token::run(cmd),
        Command::Contract(cmd) => contract::run(cmd),
        Command::Check(args) => contract::check(args),
        Command::Attestation(cmd) => attestation::run(cmd),
        Command::Audit(cmd) => audit::run(cmd),
        Command::Revoke(args) => revoke::submit(args),
        Command::OAuth(cmd) => oauth::run(cmd),
        Command::Config(cmd) => config::run(cmd),
        Command::AdminToken(AdminTokenCommand::New { name }) => {
            if name.is_empty() || name.contains(['"', '\\', '\n']) {
                return Err(CliError::Usage(
                    "--name must be a non-empty name without quotes, backslashes or newlines"
                        .into(),
                ));
            }
            let secret = crate::caller::new_admin_secret()?;
            let digest: String = crate::caller::AdminToken::digest(&secret)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            say!("{secret}");
            say!("[[admin.tokens]]\nname = \"{name}\"\nsha256 = \"{digest}\"");
            eprintln!("the first line is the secret: give it to the admin client; the rest goes in the config");
            Ok(Outcome::Success)
        }
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

/// The current time.
fn now() -> Timestamp {
    Timestamp::from_instant(time::OffsetDateTime::now_utc())
}

/// `start` plus a duration such as `1h` or `15m`.
fn timestamp_after(start: &Timestamp, duration: &str) -> Result<Timestamp, CliError> {
    let bad = |e: String| CliError::Usage(format!("duration {duration:?}: {e}"));
    let d = humantime::parse_duration(duration).map_err(|e| bad(e.to_string()))?;
    let d = time::Duration::try_from(d).map_err(|e| bad(e.to_string()))?;
    start
        .checked_add(d)
        .ok_or_else(|| bad("too far in the future".into()))
}
