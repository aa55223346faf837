//! The audit log against real files: what verify finds when a record is
//! changed, removed or reordered, a seal forged or a segment deleted; and
//! that rotation, retention, reopening and a cut-off line keep it whole.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use delegateos::Keypair;
use dgw_audit_log::{export, verify, AuditAnchor, AuditLog, Expect, Settings, Start};
use dgw_core::trail::{Trail, TrailEntry};
use serde_json::json;

fn key(seed: u8) -> Arc<Keypair> {
    Arc::new(Keypair::from_seed([seed; 32]))
}

fn settings(dir: &Path) -> Settings {
    Settings {
        dir: dir.to_owned(),
        seal_interval: Duration::from_secs(3600),
        segment_bytes: 1 << 30,
        segment_age: Duration::from_secs(86_400),
        max_bytes: 1 << 40,
        max_age: Duration::from_secs(86_400 * 365),
    }
}

fn write(log: &AuditLog, n: usize) {
    for i in 0..n {
        log.record(TrailEntry::Event(json!({"event": "test", "n": i})));
    }
    log.flush();
}

fn segment(dir: &Path) -> std::path::PathBuf {
    dir.join(format!("{:020}.jsonl", 0))
}

fn messages(report: &dgw_audit_log::Report) -> Vec<String> {
    report
        .problems
        .iter()
        .map(|p| format!("{}: {}", p.at, p.message))
        .collect()
}

#[test]
fn an_untouched_log_verifies_and_is_sealed_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let k = key(1);
    let log = AuditLog::open(settings(dir.path()), k.clone()).unwrap();
    write(&log, 10);
    let report = verify(dir.path(), k.principal_id(), &Expect::Chain).unwrap();
    assert!(report.problems.is_empty(), "{:?}", messages(&report));
    // Ten events and the seal after them.
    assert_eq!(
        (report.records, report.first, report.last),
        (11, Some(0), Some(10))
    );
    assert_eq!(report.sealed_through, Some(10));
    assert_eq!(report.unsealed(), 0);
    let mode = std::fs::metadata(segment(dir.path())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(mode.permissions().mode() & 0o777, 0o600);
}

#[test]
fn a_flipped_byte_and_a_removed_record_are_both_named() {
    let dir = tempfile::tempdir().unwrap();
    let k = key(1);
    write(
        &AuditLog::open(settings(dir.path()), k.clone()).unwrap(),
        10,
    );
    let path = segment(dir.path());
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    // Record 3's event: "n":3 becomes "n":7 (one byte).
    lines[3] = lines[3].replacen("\"n\":3", "\"n\":7", 1);
    assert_ne!(lines[3], text.lines().nth(3).unwrap());
    // Record 6 removed.
    lines.remove(6);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let report = verify(dir.path(), k.principal_id(), &Expect::Chain).unwrap();
    let found = messages(&report);
    assert!(
        found.iter().any(|m| m.contains(":4: record 3 was changed")),
        "{found:#?}"
    );
    assert!(
        found
            .iter()
            .any(|m| m.contains("record 6 is missing (removed) before record 7")),
        "{found:#?}"
    );
    assert_eq!(found.len(), 2, "{found:#?}");
}

#[test]
fn a_record_whose_hash_was_recomputed_still_breaks_the_chain_and_the_seal() {
    let dir = tempfile::tempdir().unwrap();
    let k = key(1);
    write(&AuditLog::open(settings(dir.path()), k.clone()).unwrap(), 5);
    let path = segment(dir.path());
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut r: dgw_audit_log::Record = serde_json::from_str(&lines[2]).unwrap();
    r.event = json!({"event": "test", "n": 99});
    let (line, _) = r.to_line().unwrap();
    lines[2] = String::from_utf8(line).unwrap().trim_end().to_owned();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let found = messages(&verify(dir.path(), k.principal_id(), &Expect::Chain).unwrap());
    assert!(
        found
            .iter()
            .any(|m| m.contains("record 3 does not follow record 2")),
        "{found:#?}"
    );
}

#[test]
fn reordered_records_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let k = key(1);
    write(&AuditLog::open(settings(dir.path()), k.clone()).unwrap(), 6);
    let path = segment(dir.path());
    let mut lines: Vec<String> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    lines.swap(2, 3);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let found = messages(&verify(dir.path(), k.principal_id(), &Expect::Chain).unwrap());
    assert!(
        found
            .iter()
            .any(|m| m.contains("record 2 is out of order: it comes after record 3")),
        "{found:#?}"
    );
}

#[test]
fn a_chain_rewritten_and_sealed_with_another_key_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (gateway, forger) = (key(1), key(2));
    write(&AuditLog::open(settings(dir.path()), forger).unwrap(), 3);
    let found = messages(&verify(dir.path(), gateway.principal_id(), &Expect::Chain).unwrap());
    assert!(
        found
            .iter()
            .any(|m| m.contains("is not the gateway's signature")),
        "{found:#?}"
    );
}

#[test]
fn the_chain_runs_on_across_reopening_rotation_and_retention() {
    let dir = tempfile::tempdir().unwrap();
    let k = key(1);
    let small = Settings {
        segment_bytes: 2_000,
        max_bytes: 8_000,
        ..settings(dir.path())
    };
    for _ in 0..3 {
        let log = AuditLog::open(small.clone(), k.clone()).unwrap();
        for _ in 0..10 {
            write(&log, 5);
        }
    }
    let segments: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(segments.len() > 2, "rotated: {}", segments.len());
    let report = verify(dir.path(), k.principal_id(), &Expect::Chain).unwrap();
    assert!(report.problems.is_empty(), "{:?}", messages(&report));
    assert!(
        report.first.unwrap() > 0,
        "retention removed the oldest segments"
    );
    let total: u64 = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(total <= 8_000 + 2_000 + 1_000, "{total} bytes kept");

    // Removing the oldest remaining segment by hand is not retention.
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    std::fs::remove_file(&names[0]).unwrap();
    let found = messages(&verify(dir.path(), k.principal_id(), &Expect::Chain).unwrap());
    assert!(
        found
            .iter()
            .any(|m| m
                .contains("are missing (removed), and no retention record says they were pruned")),
        "{found:#?}"
    );
}

#[test]
fn a_line_cut_short_by_a_crash_is_cut_off_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let k = key(1);
    write(&AuditLog::open(settings(dir.path()), k.clone()).unwrap(), 3);
    let path = segment(dir.path());
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    use std::io::Write;
    f.write_all(b"{\"seq\":4,\"at\":\"20").unwrap();
    drop(f);
    write(&AuditLog::open(settings(dir.path()), k.clone()).unwrap(), 1);
    let report = verify(dir.path(), k.principal_id(), &Expect::Chain).unwrap();
    assert!(report.problems.is_empty(), "{:?}", messages(&report));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"recovered\""), "{text}");
}

#[test]
fn export_selects_by_time() {
    let dir = tempfile::tempdir().unwrap();
    let k = key(1);
    write(&AuditLog::open(settings(dir.path()), k.clone()).unwrap(), 4);
    let mut all = Vec::new();
    assert_eq!(export(dir.path(), None, None, &mut all).unwrap(), 5);
    let first: serde_json::Value =
        serde_json::from_slice(all.split(|&b| b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["event"], json!({"event": "test", "n": 0}));
    let mut none = Vec::new();
    assert_eq!(
        export(dir.path(), Some(i128::MAX - 1), None, &mut none).unwrap(),
        0
    );
    let mut early = Vec::new();
    assert_eq!(export(dir.path(), None, Some(0), &mut early).unwrap(), 0);
}

#[test]
fn segments_older_than_max_age_are_pruned_and_the_log_still_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let k = key(1);
    let aging = Settings {
        segment_bytes: 2_000,
        max_age: Duration::from_secs(86_400),
        ..settings(dir.path())
    };
    let log = AuditLog::open(aging.clone(), k.clone()).unwrap();
    for _ in 0..4 {
        write(&log, 10);
    }
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    assert!(names.len() >= 3, "{names:?}");
    // The two oldest segments are a hundred days old now.
    for old in &names[..2] {
        let touched = std::process::Command::new("touch")
            .args(["-m", "-d", "100 days ago"])
            .arg(old)
            .status()
            .unwrap();
        assert!(touched.success());
    }
    // The next rotation applies retention.
    for _ in 0..4 {
        write(&log, 10);
    }
    assert!(
        !names[0].exists() && !names[1].exists(),
        "the old ones are gone"
    );
    assert!(names[2].exists(), "a young one stays");
    let report = verify(dir.path(), k.principal_id(), &Expect::Chain).unwrap();
    assert!(report.problems.is_empty(), "{:?}", messages(&report));
}

/// A closed log ends with the shutdown seal, even when entries arrive
/// after the close (a request still running as the gateway stops): each
/// such batch gets a shutdown seal of its own.
#[test]
fn a_closed_log_ends_with_a_shutdown_seal_even_after_late_entries() {
    let dir = tempfile::tempdir().unwrap();
    let k = key(1);
    let log = AuditLog::open(settings(dir.path()), k.clone()).unwrap();
    write(&log, 3);
    let anchor = log.close().expect("a shutdown seal");
    // Three records and an interval seal, then the shutdown seal over none.
    assert_eq!(anchor.seq, 4);
    let closed = verify(dir.path(), k.principal_id(), &Expect::Closed).unwrap();
    assert!(closed.problems.is_empty(), "{:?}", messages(&closed));
    assert!(closed.closed);
    assert_eq!(
        log.close(),
        Some(anchor.clone()),
        "nothing new: no new seal"
    );
    log.record(TrailEntry::Event(json!({"event": "late"})));
    drop(log);
    let report = verify(dir.path(), k.principal_id(), &Expect::Closed).unwrap();
    assert!(report.problems.is_empty(), "{:?}", messages(&report));
    assert_eq!((report.last, report.sealed_through), (Some(6), Some(6)));
    let past = verify(dir.path(), k.principal_id(), &Expect::Anchor(anchor)).unwrap();
    assert!(past.problems.is_empty(), "{:?}", messages(&past));
}

/// Each seal names the seal before it: a seal taken out is named as such,
/// besides the gap in the sequence.
#[test]
fn a_removed_seal_is_named_by_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let k = key(1);
    let log = AuditLog::open(settings(dir.path()), k.clone()).unwrap();
    for _ in 0..3 {
        write(&log, 2);
    }
    drop(log);
    let path = segment(dir.path());
    let mut lines: Vec<String> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    // Seals at 2, 5 and 8: the middle one goes.
    assert!(lines[5].contains("\"event\":\"seal\""));
    lines.remove(5);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let found = messages(&verify(dir.path(), k.principal_id(), &Expect::Chain).unwrap());
    assert!(
        found.iter().any(|m| m.contains(
            "record 8: the seal names the seal at record 5 before it, but the seal before it is at record 2: a seal was removed"
        )),
        "{found:#?}"
    );
}

/// The writer checks its log against the anchor before writing anything:
/// a log cut before it, or rewritten, is refused as found.
#[test]
fn the_writer_refuses_a_log_that_does_not_reach_its_anchor() {
    let dir = tempfile::tempdir().unwrap();
    let k = key(1);
    let log = AuditLog::open(settings(dir.path()), k.clone()).unwrap();
    write(&log, 4);
    let anchor = log.close().unwrap();
    drop(log);
    let path = segment(dir.path());
    let text = std::fs::read_to_string(&path).unwrap();
    let cut: String = text.lines().take(3).map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, &cut).unwrap();
    let start = Start {
        anchor: Some(anchor.clone()),
        new_log: false,
    };
    let refused = AuditLog::open_with(settings(dir.path()), k.clone(), &start, None)
        .err()
        .expect("refused");
    assert!(
        refused
            .to_string()
            .contains("the log ends at record 2, before the anchor (record 5)"),
        "{refused}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        cut,
        "nothing written"
    );

    // The whole log back: it opens, and a clean stop before needs no
    // recovery.
    std::fs::write(&path, &text).unwrap();
    let seals = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let told = seals.clone();
    let log = AuditLog::open_with(
        settings(dir.path()),
        k.clone(),
        &start,
        Some(Box::new(move |a: &AuditAnchor| {
            told.lock().unwrap().push(a.clone())
        })),
    )
    .unwrap();
    write(&log, 1);
    let closed = log.close().unwrap();
    drop(log);
    assert_eq!(*seals.lock().unwrap().last().unwrap(), closed);
    assert!(!std::fs::read_to_string(&path)
        .unwrap()
        .contains("recovered"));
    let report = verify(dir.path(), k.principal_id(), &Expect::Closed).unwrap();
    assert!(report.problems.is_empty(), "{:?}", messages(&report));
}

/// Killed without a close: the next start seals what was left with a
/// recovery seal after a `recovered` record, and the log verifies closed
/// once that run closes.
#[test]
fn an_unclosed_log_is_sealed_with_a_recovery_seal_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let k = key(1);
    let log = AuditLog::open(settings(dir.path()), k.clone()).unwrap();
    write(&log, 2);
    drop(log);
    // Records the killed writer left after its last seal.
    let path = segment(dir.path());
    let records: Vec<dgw_audit_log::Record> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = records.last().unwrap();
    let (line, _) = dgw_audit_log::Record {
        seq: last.seq + 1,
        at: last.at.clone(),
        prev: last.hash.clone(),
        event: json!({"event": "test", "n": 9}),
        hash: String::new(),
    }
    .to_line()
    .unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    use std::io::Write;
    f.write_all(&line).unwrap();
    drop(f);
    let unclosed = verify(dir.path(), k.principal_id(), &Expect::Closed).unwrap();
    assert!(
        messages(&unclosed)
            .iter()
            .any(|m| m.contains("record 3 follows the last seal (record 2)")),
        "{:?}",
        messages(&unclosed)
    );
    let log = AuditLog::open(settings(dir.path()), k.clone()).unwrap();
    log.close();
    drop(log);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("{\"cutBytes\":0,\"event\":\"recovered\",\"unsealed\":1}"),
        "{text}"
    );
    assert!(text.contains("\"kind\":\"recovery\""), "{text}");
    let report = verify(dir.path(), k.principal_id(), &Expect::Closed).unwrap();
    assert!(report.problems.is_empty(), "{:?}", messages(&report));
}

/// A decision as the core records it, with or without the protocol, front
/// and tool that decisions carry since issue 38.
fn decision(tagged: bool) -> TrailEntry {
    use dgw_core::gatekeeper::{DecisionEvent, DecisionKind};
    TrailEntry::Decision(Arc::new(DecisionEvent {
        at: time::OffsetDateTime::now_utc(),
        kind: DecisionKind::Authorize,
        allowed: true,
        tenant: Some("acme".into()),
        chain: Vec::new(),
        request: None,
        cost_microcents: 10,
        reservation_id: None,
        denial_type: None,
        detail: None,
        request_id: None,
        protocol: tagged.then_some("delegateos"),
        front: tagged.then_some("mcp"),
        tool: tagged.then(|| "echo".to_owned()),
    }))
}

/// A log holding decisions written before they carried a protocol, front
/// and tool, then after, reads and verifies as one chain, each record as
/// written; and reopened, the chain runs on from the old records.
#[test]
fn decisions_before_and_after_their_protocol_front_and_tool_verify_as_one_chain() {
    let dir = tempfile::tempdir().unwrap();
    let k = key(1);
    let log = AuditLog::open(settings(dir.path()), k.clone()).unwrap();
    log.record(decision(false));
    log.flush();
    drop(log);
    let log = AuditLog::open(settings(dir.path()), k.clone()).unwrap();
    log.record(decision(true));
    log.flush();
    let report = verify(dir.path(), k.principal_id(), &Expect::Chain).unwrap();
    assert!(report.problems.is_empty(), "{:?}", messages(&report));
    let mut all = Vec::new();
    export(dir.path(), None, None, &mut all).unwrap();
    let decisions: Vec<serde_json::Value> = all
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice::<serde_json::Value>(l).unwrap()["event"].clone())
        .filter(|e| e["event"] == "decision")
        .collect();
    assert_eq!(decisions.len(), 2, "{decisions:?}");
    assert!(decisions[0].get("protocol").is_none() && decisions[0].get("tool").is_none());
    assert_eq!(
        (
            &decisions[1]["protocol"],
            &decisions[1]["front"],
            &decisions[1]["tool"]
        ),
        (&json!("delegateos"), &json!("mcp"), &json!("echo"))
    );
    // Changing the new fields breaks the chain where it happened.
    let path = segment(dir.path());
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replacen("\"front\":\"mcp\"", "\"front\":\"grpc\"", 1),
    )
    .unwrap();
    let report = verify(dir.path(), k.principal_id(), &Expect::Chain).unwrap();
    assert!(!report.problems.is_empty());
}
