//! Opening a log: before anything is written, its tail is read back and
//! checked against the anchor the state store keeps, so a log cut or
//! rewritten while the gateway was down is never sealed over.

use std::path::{Path, PathBuf};

use delegateos::PrincipalId;
use dgw_core::state::AuditAnchor;

use crate::record::{SealKind, GENESIS};
use crate::scan::Scan;
use crate::segments;
use crate::AuditError;

/// How the writer opens its log.
#[derive(Debug, Clone, Default)]
pub struct Start {
    /// The anchor the state store keeps for this log (`None`: none yet).
    pub anchor: Option<AuditAnchor>,
    /// Begin a new log chained to the anchor (`dgw serve
    /// --new-audit-log`), after the operator moved a broken one aside:
    /// only into an empty directory.
    pub new_log: bool,
}

/// Where the writer goes on from.
#[derive(Debug)]
pub(crate) struct Tail {
    /// The segment to append to.
    pub(crate) path: PathBuf,
    pub(crate) next_seq: u64,
    pub(crate) head: String,
    /// The last seal's record.
    pub(crate) last_seal: Option<AuditAnchor>,
    pub(crate) last_kind: Option<SealKind>,
    /// The first record no seal covers.
    pub(crate) unsealed_from: u64,
    /// Whether the gateway before stopped cleanly (or there is no log).
    pub(crate) at_rest: bool,
    /// Bytes of a last line a crash left unfinished (to cut off).
    pub(crate) cut: u64,
    /// A new log begins after this anchor.
    pub(crate) new_log_after: Option<AuditAnchor>,
}

const WAY_OUT: &str = "dgw will not seal over it: keep the directory as evidence, move it aside, and start dgw with --new-audit-log (a new log chained to the anchor)";

/// Reads the end of the log in `dir` (from the segment that holds the
/// anchor, or the last two) and checks it: the chain and seals there,
/// and that it reaches the anchor with the anchor's hash.
pub(crate) fn read_tail(
    dir: &Path,
    gateway: &PrincipalId,
    start: &Start,
) -> Result<Tail, AuditError> {
    let all = segments::list(dir)?;
    let Some((last_first, last_path)) = all.last().cloned() else {
        return empty(dir, start);
    };
    if start.new_log {
        return Err(AuditError::Tampered(format!(
            "--new-audit-log begins a new log only in an empty directory, and {} holds one: move it aside first (it is evidence)",
            dir.display()
        )));
    }
    let last_two = all.len().saturating_sub(2);
    let from = match &start.anchor {
        Some(a) => all
            .iter()
            .rposition(|(first, _)| *first <= a.seq)
            .unwrap_or(0)
            .min(last_two),
        None => last_two,
    };
    let mut scan = read(gateway, &all, from, start.anchor.as_ref())?;
    if scan.0.last.is_none() && from > 0 {
        scan = read(gateway, &all, 0, start.anchor.as_ref())?;
    }
    let (mut scan, cut) = scan;
    if let Some(anchor) = &start.anchor {
        scan.check_anchor(anchor);
    }
    if !scan.report.problems.is_empty() {
        let problems: Vec<String> = scan
            .report
            .problems
            .iter()
            .map(|p| format!("{}: {}", p.at, p.message))
            .collect();
        let against = match &start.anchor {
            Some(a) => format!("its anchor in the state store (record {})", a.seq),
            None => "its own chain".to_owned(),
        };
        return Err(AuditError::Tampered(format!(
            "the audit log in {} does not match {against}: {}. {WAY_OUT}",
            dir.display(),
            problems.join("; ")
        )));
    }
    let at_rest = scan.closed();
    let Some((last, head)) = scan.last.clone() else {
        // Segment files without a record: go on in the last one.
        return Ok(Tail {
            path: last_path,
            next_seq: last_first,
            head: GENESIS.to_owned(),
            last_seal: None,
            last_kind: None,
            unsealed_from: last_first,
            at_rest: true,
            cut,
            new_log_after: None,
        });
    };
    let last_seal = scan.last_seal.clone();
    Ok(Tail {
        path: last_path,
        next_seq: last + 1,
        head,
        unsealed_from: last_seal
            .as_ref()
            .map_or(scan.report.first.unwrap_or(last), |s| s.at.seq + 1),
        last_kind: last_seal.as_ref().and_then(|s| s.kind),
        last_seal: last_seal.map(|s| s.at),
        at_rest,
        cut,
        new_log_after: None,
    })
}

/// Reads the segments `all[from..]`; the last one's unfinished last line
/// is left out and its length returned.
fn read<'a>(
    gateway: &'a PrincipalId,
    all: &[(u64, PathBuf)],
    from: usize,
    anchor: Option<&AuditAnchor>,
) -> Result<(Scan<'a>, u64), AuditError> {
    let mut scan = Scan::new(gateway, from == 0, anchor.map(|a| a.seq));
    let mut cut = 0;
    for (i, (_, path)) in all.iter().enumerate().skip(from) {
        cut = scan.segment(path, i + 1 == all.len())?;
    }
    if from == 0 {
        scan.check_start();
    }
    Ok((scan, cut))
}

/// No segment at all: a first start, or a log removed.
fn empty(dir: &Path, start: &Start) -> Result<Tail, AuditError> {
    let fresh = |seq: u64, head: &str, after: Option<AuditAnchor>| Tail {
        path: dir.join(segments::name(seq)),
        next_seq: seq,
        head: head.to_owned(),
        last_seal: after.clone(),
        last_kind: None,
        unsealed_from: seq,
        at_rest: true,
        cut: 0,
        new_log_after: after,
    };
    match (&start.anchor, start.new_log) {
        (None, _) => Ok(fresh(0, GENESIS, None)),
        (Some(a), true) => Ok(fresh(a.seq + 1, &a.head, Some(a.clone()))),
        (Some(a), false) => Err(AuditError::Tampered(format!(
            "the audit log in {} is empty, but its anchor in the state store is record {}: the log was removed while dgw was down. {WAY_OUT}",
            dir.display(),
            a.seq
        ))),
    }
}
