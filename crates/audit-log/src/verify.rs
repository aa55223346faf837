//! `dgw audit verify` and `dgw audit export`: reading the chain back.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use delegateos::PrincipalId;

use dgw_core::state::AuditAnchor;

use crate::record::Record;
use crate::report::Report;
use crate::scan::Scan;
use crate::segments::{self, io};
use crate::AuditError;

/// How the log must end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// At rest (its gateway stopped): with the gateway's shutdown seal.
    Closed,
    /// At or past this anchor (the state store's), with the same hash
    /// there: records after it may follow (a gateway still running).
    Anchor(AuditAnchor),
    /// Anywhere: only the chain is checked (a log still being written).
    Chain,
}

/// Reads every segment in `dir` and checks the chain: each record's hash,
/// its link to the one before, sequence numbers without gaps or reversals,
/// each seal's signature by `gateway`, the head it signs and the seal it
/// names before it, that the log starts at its beginning (or where
/// retention recorded it pruned), and that it ends as `expect` says.
pub fn verify(dir: &Path, gateway: &PrincipalId, expect: &Expect) -> Result<Report, AuditError> {
    let watch = match expect {
        Expect::Anchor(a) => Some(a.seq),
        _ => None,
    };
    let mut scan = Scan::new(gateway, true, watch);
    for (_, path) in segments::list(dir)? {
        scan.segment(&path, false)?;
    }
    scan.check_start();
    match expect {
        Expect::Closed => scan.check_closed(),
        Expect::Anchor(anchor) => scan.check_anchor(anchor),
        Expect::Chain => {}
    }
    let closed = scan.closed();
    let mut report = scan.report;
    report.closed = closed;
    Ok(report)
}

/// Writes the events recorded from `since` to `until` (Unix ms, inclusive;
/// `None`: unbounded) as JSON lines, each with its `seq`, `at` and `hash`;
/// seals and retention records included. Returns how many were written.
pub fn export(
    dir: &Path,
    since: Option<i128>,
    until: Option<i128>,
    out: &mut dyn Write,
) -> Result<u64, AuditError> {
    let mut n = 0;
    for (_, path) in segments::list(dir)? {
        let file = std::fs::File::open(&path).map_err(io(&path))?;
        for line in BufReader::new(file).lines() {
            let line = line.map_err(io(&path))?;
            let Ok(record) = serde_json::from_str::<Record>(&line) else {
                continue;
            };
            let Some(at) = record.at_ms() else {
                continue;
            };
            if since.is_some_and(|s| at < s) || until.is_some_and(|u| at > u) {
                continue;
            }
            let line = serde_json::json!({"seq": record.seq, "at": record.at,
                "hash": record.hash, "event": record.event});
            writeln!(out, "{line}").map_err(io(Path::new("standard output")))?;
            n += 1;
        }
    }
    Ok(n)
}
