//! `dgw config check` and `dgw config schema`.

use std::path::{Path, PathBuf};

use clap::Subcommand;

use super::{CliError, Outcome};
use crate::config::{Config, ConfigError};
use dgw_protocol::say;

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate a config file without starting anything: exit 0 and a
    /// summary when it is valid, 2 and every finding (each naming its
    /// key) when it is not: key values, key files, TLS and secret files,
    /// stdio upstreams' commands, listeners.
    Check {
        /// The configuration file.
        file: PathBuf,
    },
    /// Print the JSON Schema of the configuration file (what
    /// `config/schema.json` holds, for editors).
    Schema,
}

pub fn run(cmd: ConfigCommand) -> Result<Outcome, CliError> {
    match cmd {
        ConfigCommand::Check { file } => check(&file),
        ConfigCommand::Schema => {
            say!("{}", crate::config::schema::text(crate::protocols::MODULES));
            Ok(Outcome::Success)
        }
    }
}

/// Every finding at once: the files and commands the config names, then
/// its keys' values (an error on a key already found is not said twice).
fn check(file: &Path) -> Result<Outcome, CliError> {
    let text = std::fs::read_to_string(file).map_err(|source| {
        CliError::Usage(
            ConfigError::Read {
                path: file.to_owned(),
                source,
            }
            .to_string(),
        )
    })?;
    let mut findings =
        crate::config::files::check(&text, file).map_err(|e| CliError::Usage(e.to_string()))?;
    let config = match Config::load(file) {
        Ok(c) => Some(c),
        Err(ConfigError::Invalid { key, problem, .. }) => {
            let said = findings.problems.iter().any(|p| {
                p.strip_prefix('`').is_some_and(|rest| {
                    rest.starts_with(&format!("{key}`")) || rest.starts_with(&format!("{key}."))
                })
            });
            if !said {
                findings.problems.push(format!("`{key}`: {problem}"));
            }
            None
        }
        Err(e) => return Err(CliError::Usage(e.to_string())),
    };
    if let Some(tls) = config.as_ref().and_then(|c| c.server.tls.as_ref()) {
        if let Err(e) = crate::tls::server_config(tls, &[b"http/1.1"]) {
            // A file that cannot be read is already a finding; what is left
            // is what it holds.
            if !findings
                .problems
                .iter()
                .any(|p| p.starts_with("`server.tls."))
            {
                findings.problems.push(format!("`server.tls`: {e}"));
            }
        }
    }
    for note in &findings.notes {
        eprintln!("{note}");
    }
    if !findings.problems.is_empty() {
        let n = findings.problems.len();
        let lines: Vec<String> = findings
            .problems
            .iter()
            .map(|p| format!("config {}: {p}", file.display()))
            .collect();
        return Err(CliError::Usage(format!(
            "{}\n{}: {n} finding{}",
            lines.join("\n"),
            file.display(),
            if n == 1 { "" } else { "s" }
        )));
    }
    let c = config.expect("no finding: the config parsed");
    for line in upstream_credentials(&c.upstreams) {
        say!("{line}");
    }
    say!(
        "{}: valid (http {}, grpc {}, {} tenant(s), {} upstream(s), {} admin token(s), TLS {}, traces {})",
        file.display(),
        c.server.http,
        c.server.grpc.map_or("off".to_owned(), |g| g.to_string()),
        c.tenants.len(),
        c.upstreams.len(),
        c.admin_tokens.len(),
        if c.server.tls.is_some() { "on" } else { "off" },
        c.telemetry
            .as_ref()
            .map_or("off".to_owned(), |t| format!("to {}", t.endpoint)),
    );
    Ok(Outcome::Success)
}

/// What each upstream is given, by key and source, values redacted.
fn upstream_credentials(upstreams: &[crate::mcp::UpstreamSpec]) -> Vec<String> {
    let mut out = Vec::new();
    for u in upstreams {
        let whom = format!("upstream {}", u.name);
        describe_credentials(&whom, &u.credentials, &mut out);
        for rule in &u.rules.0 {
            if let Some(c) = &rule.credentials {
                let whom = format!("{whom}, tools {:?}", rule.name.as_str());
                describe_credentials(&whom, c, &mut out);
            }
        }
        if let crate::mcp::TransportSpec::Stdio { env, cwd, .. } = &u.transport {
            for (name, s) in env {
                out.push(format!("{whom}: env {name} = {}", shown(s)));
            }
            if let Some(cwd) = cwd {
                out.push(format!("{whom}: cwd {}", cwd.display()));
            }
        }
    }
    out
}

/// A value as `config check` shows it: a secret by its source only.
fn shown(s: &crate::mcp::secret::Secret) -> String {
    match s.is_secret() {
        true => format!("<redacted> from {}", s.source()),
        false => format!("{:?}", s.expose()),
    }
}

/// One line per header and OAuth client of `c`, for `whom`.
fn describe_credentials(whom: &str, c: &crate::mcp::auth::HttpCredentials, out: &mut Vec<String>) {
    for h in &c.headers {
        out.push(format!("{whom}: header {} = {}", h.name, shown(&h.secret)));
    }
    if let Some(o) = &c.oauth {
        let c = &o.config;
        out.push(format!(
            "{whom}: oauth client {:?} at {}, secret {}{}{}",
            c.client_id,
            c.token_url,
            shown(&c.client_secret),
            c.scope
                .as_deref()
                .map(|s| format!(", scope {s:?}"))
                .unwrap_or_default(),
            c.audience
                .as_deref()
                .map(|a| format!(", audience {a:?}"))
                .unwrap_or_default(),
        ));
    }
}
