//! `dgw audit verify` and `dgw audit export`: reading the chain back.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use delegateos::PrincipalId;
use serde_json::Value;

use crate::record::{Record, GENESIS};
use crate::segments::{self, io};
use crate::AuditError;

/// Something wrong with the log, where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `file:line`.
    pub at: String,
    pub message: String,
}

/// What a verification found.
#[derive(Debug, Default)]
pub struct Report {
    pub segments: usize,
    pub records: u64,
    /// The first and last sequence numbers read.
    pub first: Option<u64>,
    pub last: Option<u64>,
    /// The last record a valid seal covers.
    pub sealed_through: Option<u64>,
    pub problems: Vec<Problem>,
}

impl Report {
    /// Records after the last valid seal (not signed yet: the writer seals
    /// every `seal_interval`, and at exit).
    pub fn unsealed(&self) -> u64 {
        match (self.last, self.sealed_through) {
            (Some(last), Some(sealed)) => last.saturating_sub(sealed),
            (Some(_), None) => self.records,
            _ => 0,
        }
    }
}

/// Reads every segment in `dir` and checks the chain: each record's hash,
/// its link to the one before, sequence numbers without gaps or reversals,
/// each seal's signature by `gateway` and the head it signs, and that the
/// log starts at its beginning or where retention recorded it pruned.
pub fn verify(dir: &Path, gateway: &PrincipalId) -> Result<Report, AuditError> {
    let mut report = Report::default();
    let mut previous: Option<(u64, String)> = None;
    // Seen hashes since the last seal, to check what a seal signs.
    let mut window: Vec<(u64, String)> = Vec::new();
    let mut start: Option<(u64, String, String)> = None;
    let mut pruned: Vec<(u64, String)> = Vec::new();
    for (_, path) in segments::list(dir)? {
        report.segments += 1;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let file = std::fs::File::open(&path).map_err(io(&path))?;
        for (i, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(io(&path))?;
            let at = format!("{name}:{}", i + 1);
            let mut problem = |message: String| {
                report.problems.push(Problem {
                    at: at.clone(),
                    message,
                })
            };
            let record: Record = match serde_json::from_str(&line) {
                Ok(r) => r,
                Err(e) => {
                    problem(format!("not a record ({e}): the line was changed"));
                    continue;
                }
            };
            report.records += 1;
            report.first.get_or_insert(record.seq);
            report.last = Some(record.seq);
            if crate::record::hash_of_line(line.as_bytes()).as_deref() != Some(record.hash.as_str())
            {
                problem(format!(
                    "record {} was changed: its content does not match its hash",
                    record.seq
                ));
            }
            match &previous {
                None => start = Some((record.seq, record.prev.clone(), at.clone())),
                Some((seq, hash)) => {
                    if record.seq <= *seq {
                        problem(format!(
                            "record {} is out of order: it comes after record {seq}",
                            record.seq
                        ));
                    } else if record.seq > seq + 1 {
                        let missing = if record.seq == seq + 2 {
                            format!("record {} is missing", seq + 1)
                        } else {
                            format!("records {}..={} are missing", seq + 1, record.seq - 1)
                        };
                        problem(format!("{missing} (removed) before record {}", record.seq));
                    } else if record.prev != *hash {
                        problem(format!(
                            "record {} does not follow record {seq}: the chain is broken there",
                            record.seq
                        ));
                    }
                }
            }
            if let Some(seal) = record.seal() {
                match seal {
                    Err(e) => problem(format!(
                        "record {} holds an unreadable seal: {e}",
                        record.seq
                    )),
                    Ok(seal) => {
                        let signed_head = window
                            .iter()
                            .find(|(s, _)| *s == seal.through)
                            .map(|(_, h)| h.as_str());
                        if !seal.verify(gateway) {
                            problem(format!(
                                "record {}: the seal over records {}..={} is not the gateway's signature ({})",
                                record.seq, seal.from, seal.through, gateway
                            ));
                        } else if signed_head != Some(seal.head.as_str()) {
                            problem(format!(
                                "record {}: the seal signs a head that is not record {}'s hash: the records it covers were rewritten",
                                record.seq, seal.through
                            ));
                        } else {
                            report.sealed_through = Some(record.seq);
                            window.clear();
                        }
                    }
                }
            }
            if record.event.get("event").and_then(Value::as_str) == Some("pruned") {
                if let (Some(through), Some(head)) = (
                    record.event.get("through").and_then(Value::as_u64),
                    record.event.get("head").and_then(Value::as_str),
                ) {
                    pruned.push((through, head.to_owned()));
                }
            }
            window.push((record.seq, record.hash.clone()));
            previous = Some((record.seq, record.hash));
        }
    }
    // The log begins at the beginning, or where retention said it pruned.
    if let Some((seq, prev, at)) = start {
        let anchored = if seq == 0 {
            prev == GENESIS
        } else {
            pruned
                .iter()
                .any(|(through, head)| *through + 1 == seq && *head == prev)
        };
        if !anchored {
            report.problems.insert(
                0,
                Problem {
                    at,
                    message: if seq == 0 {
                        "record 0 does not start the chain".to_owned()
                    } else {
                        format!("records before {seq} are missing (removed), and no retention record says they were pruned")
                    },
                },
            );
        }
    }
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
