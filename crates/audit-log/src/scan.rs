//! Reading the chain back, record by record: the checks `dgw audit
//! verify` makes over a whole log, and the writer over its tail at start.

use std::io::{BufRead, BufReader};
use std::path::Path;

use delegateos::PrincipalId;
use dgw_core::state::AuditAnchor;
use serde_json::Value;

use crate::record::{Record, SealKind, GENESIS};
use crate::report::{Problem, Report};
use crate::segments::io;
use crate::AuditError;

/// The last valid seal read.
#[derive(Debug, Clone)]
pub(crate) struct SealSeen {
    /// Its record.
    pub(crate) at: AuditAnchor,
    /// `None`: a v1 seal.
    pub(crate) kind: Option<SealKind>,
}

/// The first record read.
struct Start {
    seq: u64,
    prev: String,
    at: String,
    /// A `new_log` record's `after`: the anchor of the log it follows.
    after: Option<AuditAnchor>,
}

/// The state of a reading, one record after another.
pub(crate) struct Scan<'a> {
    gateway: &'a PrincipalId,
    /// Whether the reading starts at the log's first segment: only then is
    /// where the log begins (and its first seal's predecessor) checked.
    whole: bool,
    pub(crate) report: Report,
    /// The last record read (`seq`, hash) and where.
    pub(crate) last: Option<(u64, String)>,
    last_at: String,
    /// Hashes since the last seal, to check what a seal signs.
    window: Vec<(u64, String)>,
    start: Option<Start>,
    /// `pruned` records: the head retention removed through.
    pruned: Vec<(u64, String)>,
    pub(crate) last_seal: Option<SealSeen>,
    /// Whether the last record read is a valid seal.
    ends_sealed: bool,
    /// The record whose hash is wanted (an anchor's), and its hash.
    watch: Option<u64>,
    watched: Option<String>,
}

impl<'a> Scan<'a> {
    pub(crate) fn new(gateway: &'a PrincipalId, whole: bool, watch: Option<u64>) -> Self {
        Self {
            gateway,
            whole,
            report: Report::default(),
            last: None,
            last_at: String::new(),
            window: Vec::new(),
            start: None,
            pruned: Vec::new(),
            last_seal: None,
            ends_sealed: false,
            watch,
            watched: None,
        }
    }

    /// Reads one segment. With `cut_end`, a last line without its newline
    /// (a crash mid-write) is left out; returns its length.
    pub(crate) fn segment(&mut self, path: &Path, cut_end: bool) -> Result<u64, AuditError> {
        self.report.segments += 1;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut file = BufReader::new(std::fs::File::open(path).map_err(io(path))?);
        let mut line = Vec::new();
        for i in 1.. {
            line.clear();
            if file.read_until(b'\n', &mut line).map_err(io(path))? == 0 {
                break;
            }
            if line.last() == Some(&b'\n') {
                line.pop();
            } else if cut_end {
                return Ok(line.len() as u64);
            }
            self.line(format!("{name}:{i}"), &line);
        }
        Ok(0)
    }

    fn problem(&mut self, at: &str, message: String) {
        self.report.problems.push(Problem {
            at: at.to_owned(),
            message,
        });
    }

    /// Checks one line: its hash, its link to the one before, its place in
    /// the sequence, and a seal's signature, head and predecessor.
    fn line(&mut self, at: String, line: &[u8]) {
        let record: Record = match serde_json::from_slice(line) {
            Ok(r) => r,
            Err(e) => {
                self.problem(&at, format!("not a record ({e}): the line was changed"));
                return;
            }
        };
        self.report.records += 1;
        self.report.first.get_or_insert(record.seq);
        self.report.last = Some(record.seq);
        if crate::record::hash_of_line(line).as_deref() != Some(record.hash.as_str()) {
            self.problem(
                &at,
                format!(
                    "record {} was changed: its content does not match its hash",
                    record.seq
                ),
            );
        }
        match self.last.clone() {
            None => {
                let after = (record.event.get("event").and_then(Value::as_str) == Some("new_log"))
                    .then(|| serde_json::from_value(record.event["after"].clone()).ok())
                    .flatten();
                self.start = Some(Start {
                    seq: record.seq,
                    prev: record.prev.clone(),
                    at: at.clone(),
                    after,
                });
            }
            Some((seq, hash)) => {
                if record.seq <= seq {
                    self.problem(
                        &at,
                        format!(
                            "record {} is out of order: it comes after record {seq}",
                            record.seq
                        ),
                    );
                } else if record.seq > seq + 1 {
                    let missing = if record.seq == seq + 2 {
                        format!("record {} is missing", seq + 1)
                    } else {
                        format!("records {}..={} are missing", seq + 1, record.seq - 1)
                    };
                    self.problem(
                        &at,
                        format!("{missing} (removed) before record {}", record.seq),
                    );
                } else if record.prev != hash {
                    self.problem(
                        &at,
                        format!(
                            "record {} does not follow record {seq}: the chain is broken there",
                            record.seq
                        ),
                    );
                }
            }
        }
        self.ends_sealed = false;
        if let Some(seal) = record.seal() {
            self.seal(&at, &record, seal);
        }
        if record.event.get("event").and_then(Value::as_str) == Some("pruned") {
            if let (Some(through), Some(head)) = (
                record.event.get("through").and_then(Value::as_u64),
                record.event.get("head").and_then(Value::as_str),
            ) {
                self.pruned.push((through, head.to_owned()));
            }
        }
        if self.watch == Some(record.seq) {
            self.watched = Some(record.hash.clone());
        }
        self.window.push((record.seq, record.hash.clone()));
        self.last = Some((record.seq, record.hash));
        self.last_at = at;
    }

    fn seal(&mut self, at: &str, record: &Record, seal: Result<crate::record::Seal, AuditError>) {
        let seal = match seal {
            Ok(s) => s,
            Err(e) => {
                self.problem(
                    at,
                    format!("record {} holds an unreadable seal: {e}", record.seq),
                );
                return;
            }
        };
        let signed_head = self
            .window
            .iter()
            .find(|(s, _)| *s == seal.through)
            .map(|(_, h)| h.as_str());
        if !seal.verify(self.gateway) {
            self.problem(
                at,
                format!(
                    "record {}: the seal over records {}..={} is not the gateway's signature ({})",
                    record.seq, seal.from, seal.through, self.gateway
                ),
            );
            return;
        }
        if signed_head != Some(seal.head.as_str()) {
            self.problem(
                at,
                format!(
                    "record {}: the seal signs a head that is not record {}'s hash: the records it covers were rewritten",
                    record.seq, seal.through
                ),
            );
            return;
        }
        if let Some(problem) = self.link(record.seq, &seal) {
            self.problem(at, problem);
        }
        self.report.sealed_through = Some(record.seq);
        self.window.clear();
        self.ends_sealed = true;
        self.last_seal = Some(SealSeen {
            at: AuditAnchor {
                seq: record.seq,
                head: record.hash.clone(),
            },
            kind: seal.kind,
        });
    }

    /// What is wrong with how a valid seal follows the one before it.
    fn link(&self, seq: u64, seal: &crate::record::Seal) -> Option<String> {
        let Some(kind) = seal.kind else {
            // v1 seals name no predecessor; none comes after a v2 one.
            return self
                .last_seal
                .as_ref()
                .is_some_and(|s| s.kind.is_some())
                .then(|| format!("record {seq}: a v1 seal after v2 seals"));
        };
        if seal.from > seal.through + 1
            || (seal.from == seal.through + 1 && kind != SealKind::Shutdown)
        {
            return Some(format!(
                "record {seq}: the seal covers no records ({}..={})",
                seal.from, seal.through
            ));
        }
        let named = match &seal.previous {
            Some(p) => format!("the seal at record {}", p.seq),
            None => "no seal".to_owned(),
        };
        match &self.last_seal {
            Some(last) => {
                if seal.previous.as_ref() != Some(&last.at) {
                    Some(format!(
                        "record {seq}: the seal names {named} before it, but the seal before it is at record {}: a seal was removed, or the chain rewritten, between them",
                        last.at.seq
                    ))
                } else if seal.from != last.at.seq + 1 {
                    Some(format!(
                        "record {seq}: the seal covers records from {}, but the seal before it is at record {}: records between were not sealed",
                        seal.from, last.at.seq
                    ))
                } else {
                    None
                }
            }
            // The log's first seal, read from its first record.
            None if self.whole && self.start.as_ref().is_some_and(|s| s.seq == 0) => {
                (seal.previous.is_some() || seal.from != 0).then(|| {
                    format!(
                        "record {seq}: the log's first seal names {named} before it and covers records from {}: the log's start was rewritten",
                        seal.from
                    )
                })
            }
            None => None,
        }
    }

    /// With a whole log read: whether it begins at the beginning, where
    /// retention said it pruned, or as a new log after an anchor.
    pub(crate) fn check_start(&mut self) {
        let Some(start) = &self.start else {
            return;
        };
        let anchored = if start.seq == 0 {
            start.prev == GENESIS
        } else {
            self.pruned
                .iter()
                .any(|(through, head)| *through + 1 == start.seq && *head == start.prev)
                || start
                    .after
                    .as_ref()
                    .is_some_and(|a| a.seq + 1 == start.seq && a.head == start.prev)
        };
        if !anchored {
            let seq = start.seq;
            self.report.problems.insert(
                0,
                Problem {
                    at: start.at.clone(),
                    message: if seq == 0 {
                        "record 0 does not start the chain".to_owned()
                    } else {
                        format!("records before {seq} are missing (removed), and no retention record says they were pruned")
                    },
                },
            );
        }
    }

    /// The log at rest must end with the gateway's shutdown seal.
    pub(crate) fn check_closed(&mut self) {
        let Some((last, _)) = self.last.clone() else {
            return;
        };
        let at = self.last_at.clone();
        const WHY: &str = "its end was cut off, or its gateway is still running or was killed (a restart seals what it left; check a running gateway's log against its anchor: --gateway-url or --expect-head)";
        let message = match &self.last_seal {
            None => format!("no record is sealed: the seals were removed, or {WHY}"),
            Some(s) if !self.ends_sealed => format!(
                "{} the last seal (record {}): the log does not end with the gateway's shutdown seal; {WHY}",
                if last == s.at.seq + 1 {
                    format!("record {last} follows")
                } else {
                    format!("records {}..={last} follow", s.at.seq + 1)
                },
                s.at.seq
            ),
            Some(s) if s.kind == Some(SealKind::Shutdown) => return,
            Some(s) => format!(
                "the log ends with {} seal (record {}), so it does not end with the gateway's shutdown seal; {WHY}",
                s.kind.map_or("a v1".to_owned(), |k| format!("an {}", k.as_str())),
                s.at.seq
            ),
        };
        self.problem(&at, message);
    }

    /// Whether the log reaches `anchor` with the same hash there.
    pub(crate) fn check_anchor(&mut self, anchor: &AuditAnchor) {
        let at = if self.last_at.is_empty() {
            "(log)".to_owned()
        } else {
            self.last_at.clone()
        };
        let message = match (&self.watched, &self.last, &self.start) {
            (Some(hash), _, _) if *hash == anchor.head => return,
            (Some(hash), _, _) => format!(
                "record {} is not the anchor: its hash is {hash}, the anchor's {}: the log was rewritten",
                anchor.seq, anchor.head
            ),
            (None, None, _) => format!(
                "the log is empty, but its anchor is record {}: the log was removed",
                anchor.seq
            ),
            (None, Some((last, _)), _) if *last < anchor.seq => format!(
                "the log ends at record {last}, before the anchor (record {}): records {}..={} were cut off",
                anchor.seq,
                last + 1,
                anchor.seq
            ),
            (None, Some(_), Some(start)) if anchor.seq < start.seq => {
                let pruned = self.pruned.iter().any(|(through, head)| {
                    *through > anchor.seq || (*through == anchor.seq && *head == anchor.head)
                });
                let new_log = start.after.as_ref() == Some(anchor);
                if pruned || new_log {
                    return;
                }
                format!(
                    "the anchor (record {}) is before the log's first record ({}), and nothing in the log says it was pruned: the log's start was cut",
                    anchor.seq, start.seq
                )
            }
            (None, Some(_), _) => format!(
                "the anchor (record {}) is not in the log: it was removed",
                anchor.seq
            ),
        };
        self.problem(&at, message);
    }

    /// Whether the last record read is a valid shutdown seal.
    pub(crate) fn closed(&self) -> bool {
        self.ends_sealed
            && self
                .last_seal
                .as_ref()
                .is_some_and(|s| s.kind == Some(SealKind::Shutdown))
    }
}
