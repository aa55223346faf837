//! `dgw audit …`: verify and export the tamper-evident audit log.

use std::path::PathBuf;

use clap::{Subcommand, ValueEnum};
use delegateos::PrincipalId;
use dgw_audit_log::{AuditAnchor, Expect};
use serde_json::{json, Value};

use super::{CliError, Outcome};
use dgw_protocol::say;

#[derive(Debug, Subcommand)]
pub(super) enum AuditCommand {
    /// Check the log's chain and seals; name every changed, removed or
    /// reordered record, a removed seal, and an end cut off (exit 0:
    /// intact, 1: problems found, 2: unreadable). Without an anchor the
    /// log must be at rest: ending with its gateway's shutdown seal.
    Verify {
        /// The log's directory (`[audit] dir`, by default `<data_dir>/audit`).
        dir: PathBuf,
        /// The gateway's principal ID, whose key must have sealed the log
        /// (`dgw serve` logs it at start as `gateway`). It may begin with
        /// `-` (base64url).
        #[arg(long, allow_hyphen_values = true)]
        gateway: String,
        /// The anchor the log must reach, `SEQ:HASH` (the state store's,
        /// as `dgw/audit/head` answers it): a log that ends before it, or
        /// differs there, fails. Records after it may follow.
        #[arg(long, value_name = "SEQ:HASH", conflicts_with = "gateway_url")]
        expect_head: Option<String>,
        /// A running gateway's JSON-RPC URL: its anchor is asked for with
        /// `dgw/audit/head` (as an administrator) and checked as
        /// `--expect-head` does; its store is not opened.
        #[arg(long, value_name = "URL")]
        gateway_url: Option<String>,
        #[command(flatten)]
        auth: dgw_protocol::command::admin::AdminAuth,
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

/// `SEQ:HASH`.
fn parse_anchor(text: &str) -> Result<AuditAnchor, CliError> {
    let bad = || {
        CliError::Usage(format!(
            "--expect-head {text:?} is not SEQ:HASH (a record number and 64 lowercase hex digits)"
        ))
    };
    let (seq, head) = text.split_once(':').ok_or_else(bad)?;
    let seq = seq.parse().map_err(|_| bad())?;
    if head.len() != 64
        || !head
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(bad());
    }
    Ok(AuditAnchor {
        seq,
        head: head.to_owned(),
    })
}

/// The anchor a running gateway holds (`dgw/audit/head`, as an admin).
fn anchor_of(
    auth: &dgw_protocol::command::admin::AdminAuth,
    url: &str,
) -> Result<AuditAnchor, CliError> {
    let answer = dgw_protocol::command::admin::call(auth, url, "dgw/audit/head", json!({}))?;
    if let Some(error) = answer.get("error") {
        return Err(CliError::Usage(format!(
            "the gateway at {url} refused dgw/audit/head: {}",
            dgw_protocol::command::admin::message(error)
        )));
    }
    match answer.get("result").map(|r| &r["anchor"]) {
        Some(Value::Null) => Err(CliError::Usage(format!(
            "the gateway at {url} has no anchor for its log yet (nothing sealed)"
        ))),
        Some(anchor) => serde_json::from_value(anchor.clone())
            .map_err(|e| CliError::Usage(format!("the gateway at {url} answered no anchor: {e}"))),
        None => Err(CliError::Usage(format!(
            "the gateway at {url} answered no JSON-RPC result"
        ))),
    }
}

pub(super) fn run(cmd: AuditCommand) -> Result<Outcome, CliError> {
    match cmd {
        AuditCommand::Verify {
            dir,
            gateway,
            expect_head,
            gateway_url,
            auth,
        } => {
            let gateway = PrincipalId::parse(&gateway)
                .map_err(|e| CliError::Usage(format!("--gateway: {e}")))?;
            let expect = match (expect_head, gateway_url) {
                (Some(text), _) => Expect::Anchor(parse_anchor(&text)?),
                (None, Some(url)) => Expect::Anchor(anchor_of(&auth, &url)?),
                (None, None) => Expect::Closed,
            };
            let report = dgw_audit_log::verify(&dir, &gateway, &expect)
                .map_err(|e| CliError::Usage(e.to_string()))?;
            if report.records == 0 && !matches!(expect, Expect::Anchor(_)) {
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
                let end = match &expect {
                    Expect::Anchor(a) => format!("; it reaches its anchor (record {})", a.seq),
                    _ => "; it ends with the gateway's shutdown seal".to_owned(),
                };
                say!(
                    "intact: {range} in {} segment(s), sealed by {gateway} through record {}{end}{}",
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
