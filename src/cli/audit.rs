//! `dgw audit …`: verify and export the tamper-evident audit log.

use std::path::PathBuf;

use clap::{Subcommand, ValueEnum};
use delegateos::PrincipalId;

use super::output::say;
use super::{CliError, Outcome};

#[derive(Debug, Subcommand)]
pub(super) enum AuditCommand {
    /// Check the log's chain and seals; name every changed, removed or
    /// reordered record (exit 0: intact, 1: problems found, 2: unreadable).
    Verify {
        /// The log's directory (`[audit] dir`, by default `<data_dir>/audit`).
        dir: PathBuf,
        /// The gateway's principal ID, whose key must have sealed the log
        /// (`dgw serve` logs it at start as `gateway`).
        #[arg(long)]
        gateway: String,
    },
    /// Print the records of a period as JSON lines, for a SIEM.
    Export {
        dir: PathBuf,
        /// From this time (RFC 3339), inclusive.
        #[arg(long)]
        since: Option<String>,
        /// Until this time (RFC 3339), inclusive.
        #[arg(long)]
        until: Option<String>,
        #[arg(long, value_enum, default_value = "jsonl")]
        format: Format,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(super) enum Format {
    /// One JSON object per line.
    Jsonl,
}

fn unix_ms(option: &str, text: &Option<String>) -> Result<Option<i128>, CliError> {
    text.as_deref()
        .map(|t| {
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                .map(|t| t.unix_timestamp_nanos() / 1_000_000)
                .map_err(|e| {
                    CliError::Usage(format!("--{option} {t:?} is not an RFC 3339 time: {e}"))
                })
        })
        .transpose()
}

pub(super) fn run(cmd: AuditCommand) -> Result<Outcome, CliError> {
    match cmd {
        AuditCommand::Verify { dir, gateway } => {
            let gateway = PrincipalId::parse(&gateway)
                .map_err(|e| CliError::Usage(format!("--gateway: {e}")))?;
            let report = dgw_audit_log::verify(&dir, &gateway)
                .map_err(|e| CliError::Usage(e.to_string()))?;
            if report.records == 0 {
                return Err(CliError::Usage(format!(
                    "{}: no audit records",
                    dir.display()
                )));
            }
            for p in &report.problems {
                say!("{}: {}", p.at, p.message);
            }
            let range = match (report.first, report.last) {
                (Some(a), Some(b)) => format!("records {a}..={b}"),
                _ => "no records".to_owned(),
            };
            if report.problems.is_empty() {
                say!(
                    "intact: {range} in {} segment(s), sealed by {gateway} through record {}{}",
                    report.segments,
                    report
                        .sealed_through
                        .map_or("none".into(), |s| s.to_string()),
                    match report.unsealed() {
                        0 => String::new(),
                        n => format!("; the last {n} not sealed yet"),
                    }
                );
                Ok(Outcome::Success)
            } else {
                say!("{} problem(s) in {range}", report.problems.len());
                Ok(Outcome::Negative)
            }
        }
        AuditCommand::Export {
            dir,
            since,
            until,
            format: Format::Jsonl,
        } => {
            let (since, until) = (unix_ms("since", &since)?, unix_ms("until", &until)?);
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            match dgw_audit_log::export(&dir, since, until, &mut out) {
                // The reader stopped reading (`| head`): end quietly.
                Err(dgw_audit_log::AuditError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::BrokenPipe => {}
                Err(e) => return Err(CliError::Usage(e.to_string())),
                Ok(_) => {}
            }
            Ok(Outcome::Success)
        }
    }
}
