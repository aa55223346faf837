//! Rewriting the audit log without the gateway key (issue 30, finding 3),
//! against the real `dgw`: a sealed record edited with every seal after it
//! removed and the chain recomputed, a log cut back to an earlier seal, a
//! cleanly stopped gateway's log with its end cut, a log with every seal
//! removed, a log that ends before the state store's anchor, and a gateway
//! started on a log cut while it was down. Each is named by `dgw audit
//! verify` (exit 1), and dgw does not seal over it; a gateway killed with
//! SIGKILL and restarted still verifies.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dgw_audit_log::Record;
use serde_json::{json, Value};
use support::redis::RedisServer;
use support::*;

const ADMIN: &str = "audit-tamper-admin-secret-0123";

fn admin_toml() -> String {
    use sha2::Digest;
    let digest: String = sha2::Sha256::digest(ADMIN.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("[[admin.tokens]]\nname = \"ops\"\nsha256 = \"{digest}\"\n")
}

/// A gateway's directory: its config (with `extra`), data and audit log.
struct Site {
    dir: tempfile::TempDir,
    config: PathBuf,
    root: delegateos::Keypair,
}

impl Site {
    fn new(extra: &str) -> Site {
        let dir = tempfile::tempdir().unwrap();
        let root = seed(1);
        let config = gateway_config(
            dir.path(),
            &[("acme", root.principal_id())],
            &format!("{}{extra}", admin_toml()),
        );
        Site { dir, config, root }
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("data/audit")
    }

    fn gateway(&self) -> String {
        gateway_principal(&self.dir.path().join("data"))
    }

    fn token(&self) -> String {
        root_token(
            &self.root,
            &seed(2),
            &["docs:read:/project/**"],
            1_000_000,
            3600,
        )
        .encode()
    }

    /// `dgw audit verify` on this site's log, with `args` added.
    fn verify(&self, args: &[&str]) -> Output {
        let log = self.log();
        let gateway = self.gateway();
        let mut all = vec![
            "audit",
            "verify",
            log.to_str().unwrap(),
            "--gateway",
            &gateway,
        ];
        all.extend_from_slice(args);
        dgw()
            .args(&all)
            .env("DGW_ADMIN_TOKEN", ADMIN)
            .output()
            .unwrap()
    }
}

fn authorize(token: &str, resource: &str) -> Value {
    json!({"dct": token, "namespace": "docs", "action": "read",
           "resource": resource, "costMicrocents": 10})
}

/// `n` authorizations and settlements.
fn traffic(gw: &Gateway, token: &str, n: usize) {
    for i in 0..n {
        let a = gw.ok(
            "delegateos/authorize",
            authorize(token, &format!("/project/{i}")),
        );
        gw.ok(
            "delegateos/settle",
            json!({"reservationId": a["reservationId"], "actualMicrocents": 7, "dct": token}),
        );
    }
}

/// `dgw/audit/head` as the admin: the anchor the state store holds.
fn head(gw: &Gateway) -> Value {
    let (status, answer) = gw.call_as(&format!("Bearer {ADMIN}"), "dgw/audit/head", json!({}));
    assert_eq!(status, 200, "{answer}");
    assert!(answer.get("error").is_none(), "{answer}");
    answer["result"].clone()
}

/// Waits (up to 10 s) until the anchor covers record `seq` or later.
fn anchored_past(gw: &Gateway, seq: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let h = head(gw);
        if h["anchor"]["seq"].as_u64().is_some_and(|s| s >= seq) {
            return h;
        }
        assert!(Instant::now() < deadline, "never anchored past {seq}: {h}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits (up to 10 s) until the log holds a seal at index `from` or
/// later; its index.
fn wait_for_seal(log: &Path, from: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(i) = records(log).iter().skip(from).position(is_seal) {
            return from + i;
        }
        assert!(Instant::now() < deadline, "no seal after record {from}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One record as read: parsed, and its event's bytes as written (the
/// writer's key order, which a re-serialized `Value` would not keep).
#[derive(Clone)]
struct Line {
    r: Record,
    event: String,
}

/// Every record of the log, oldest first.
fn records(log: &Path) -> Vec<Record> {
    lines(log).into_iter().map(|l| l.r).collect()
}

fn lines(log: &Path) -> Vec<Line> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(log)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    names
        .iter()
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| {
                    let start = l.find(",\"event\":").unwrap() + ",\"event\":".len();
                    // `,"hash":"<64 hex>"}` ends it.
                    let end = l.len() - (",\"hash\":\"".len() + 64 + 2);
                    Line {
                        r: serde_json::from_str(l).unwrap(),
                        event: l[start..end].to_owned(),
                    }
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

fn is_seal(r: &Record) -> bool {
    r.event["event"] == "seal"
}

/// Replaces the log by `kept` as one segment, renumbered from its first
/// record and chained anew (each line hashed as the writer does): what
/// someone without the key can do. A line whose `event` was edited is
/// written with the edited event.
fn rechain(log: &Path, kept: Vec<Line>) {
    let first = kept[0].r.seq;
    let mut prev = kept[0].r.prev.clone();
    let mut text = Vec::new();
    for (i, l) in kept.iter().enumerate() {
        let event = match serde_json::from_str::<Value>(&l.event) {
            Ok(original) if original == l.r.event => l.event.clone(),
            _ => l.r.event.to_string(),
        };
        let body = format!(
            "{{\"seq\":{},\"at\":{},\"prev\":{},\"event\":{event}",
            first + i as u64,
            json!(l.r.at),
            json!(prev)
        );
        let hash = hex(&delegateos::signing::blake2b256(body.as_bytes()));
        text.extend_from_slice(format!("{body},\"hash\":\"{hash}\"}}\n").as_bytes());
        prev = hash;
    }
    for e in std::fs::read_dir(log).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    std::fs::write(log.join(format!("{first:020}.jsonl")), text).unwrap();
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The log's files, byte for byte.
fn snapshot(log: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut all: Vec<_> = std::fs::read_dir(log)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    all.sort();
    all
}

/// Runs `dgw serve` and expects it to exit by itself within 30 s.
fn serve_exits(config: &Path, args: &[&str]) -> Output {
    let mut child = dgw()
        .arg("serve")
        .args(args)
        .args(["--config", config.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "dgw serve started on the tampered log and kept running: {}{}",
                stdout(&out),
                stderr(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn said(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

/// One JSON-RPC authorize on a fresh connection; `None` once the gateway
/// is gone (a load client must not panic when it stops).
fn try_authorize(addr: &str, token: &str, i: usize) -> Option<()> {
    use std::io::{Read, Write};
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "delegateos/authorize",
                      "params": authorize(token, &format!("/project/{i}"))})
    .to_string();
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let head = format!(
        "POST /rpc HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).ok()?;
    s.write_all(body.as_bytes()).ok()?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).ok()?;
    (!answer.is_empty()).then_some(())
}

/// (c) SIGTERM under load: every record written is sealed by the shutdown
/// seal; cutting the end off is then named.
#[test]
fn a_gateway_stopped_under_load_seals_its_last_records_and_a_cut_end_is_named() {
    let site = Site::new("");
    let mut gw = Gateway::start(&site.config);
    let token = site.token();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..6)
        .map(|c| {
            let (addr, token, stop) = (gw.addr.clone(), token.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = c * 1_000_000;
                while !stop.load(Ordering::Relaxed) && try_authorize(&addr, &token, i).is_some() {
                    i += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(gw.terminate().success());
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let all = lines(&site.log());
    assert!(all.len() > 50, "the load reached the log: {}", all.len());
    let verified = site.verify(&[]);
    assert_eq!(verified.status.code(), Some(0), "{}", said(&verified));
    assert!(
        !stdout(&verified).contains("not sealed"),
        "a clean stop leaves nothing unsealed: {}",
        said(&verified)
    );
    let last = &all.last().unwrap().r;
    assert!(is_seal(last), "the log ends with a seal: {:?}", last.event);
    assert_eq!(last.event["seal"]["kind"], "shutdown", "{:?}", last.event);

    // Its end cut off (the shutdown seal and the records before it).
    let cut = all.len() - 3;
    rechain(&site.log(), all[..cut].to_vec());
    let verified = site.verify(&[]);
    assert_eq!(verified.status.code(), Some(1), "{}", said(&verified));
    assert!(
        stdout(&verified).contains("does not end with the gateway's shutdown seal"),
        "{}",
        said(&verified)
    );
}

/// (a) A sealed record edited, every seal after it removed, the chain
/// recomputed: no key needed, and still named.
#[test]
fn a_sealed_record_rewritten_with_the_seals_after_it_removed_is_named() {
    let site = Site::new("");
    let mut gw = Gateway::start(&site.config);
    let token = site.token();
    traffic(&gw, &token, 2);
    let early = wait_for_seal(&site.log(), 4);
    traffic(&gw, &token, 3);
    // Sealed within a second, then more on top.
    let sealed = wait_for_seal(&site.log(), early + 1);
    traffic(&gw, &token, 1);
    assert!(gw.terminate().success());
    let all = lines(&site.log());
    let settle = early
        + all[early..]
            .iter()
            .position(|l| l.r.event["event"] == "settle")
            .unwrap();
    assert!(settle < sealed, "a seal covers it");
    let mut kept: Vec<Line> = all[..=settle].to_vec();
    kept[settle].r.event["chargedMicrocents"] = json!(1);
    kept.extend(all[settle + 1..].iter().filter(|l| !is_seal(&l.r)).cloned());
    let last = all.last().unwrap().r.clone();
    rechain(&site.log(), kept);

    let verified = site.verify(&[]);
    assert_eq!(verified.status.code(), Some(1), "{}", said(&verified));
    assert!(
        stdout(&verified).contains(&format!(
            "follow the last seal (record {early}): the log does not end with the gateway's shutdown seal"
        )),
        "{}",
        said(&verified)
    );
    // Against the anchor the store holds (the shutdown seal): the seals
    // removed, the log is shorter than it.
    let verified = site.verify(&["--expect-head", &format!("{}:{}", last.seq, last.hash)]);
    assert_eq!(verified.status.code(), Some(1), "{}", said(&verified));
    assert!(
        stdout(&verified).contains(&format!("before the anchor (record {})", last.seq)),
        "{}",
        said(&verified)
    );
}

/// (b) The log cut back to an earlier seal: sealed records dropped.
#[test]
fn a_log_cut_back_to_an_earlier_seal_is_named() {
    let site = Site::new("");
    let token = site.token();
    let mut gw = Gateway::start(&site.config);
    traffic(&gw, &token, 2);
    let to = wait_for_seal(&site.log(), 4);
    traffic(&gw, &token, 2);
    assert!(gw.terminate().success());
    let after_first_run = records(&site.log()).len();
    let mut gw = Gateway::start(&site.config);
    traffic(&gw, &token, 2);
    assert!(gw.terminate().success());
    let all = lines(&site.log());
    let last = all.last().unwrap().r.clone();
    let anchor = format!("{}:{}", last.seq, last.hash);

    // Back to a seal made while the gateway ran.
    assert!(is_seal(&all[to].r));
    rechain(&site.log(), all[..=to].to_vec());
    let verified = site.verify(&[]);
    assert_eq!(verified.status.code(), Some(1), "{}", said(&verified));
    assert!(
        stdout(&verified).contains("does not end with the gateway's shutdown seal"),
        "{}",
        said(&verified)
    );
    let verified = site.verify(&["--expect-head", &anchor]);
    assert_eq!(verified.status.code(), Some(1), "{}", said(&verified));
    assert!(
        stdout(&verified).contains("before the anchor"),
        "{}",
        said(&verified)
    );

    // Back to the first run's shutdown seal: a log at rest there looks
    // whole on its own; the anchor names the cut.
    rechain(&site.log(), all[..after_first_run].to_vec());
    let verified = site.verify(&["--expect-head", &anchor]);
    assert_eq!(verified.status.code(), Some(1), "{}", said(&verified));
    assert!(
        stdout(&verified).contains(&format!(
            "the log ends at record {}, before the anchor (record {})",
            after_first_run - 1,
            last.seq
        )),
        "{}",
        said(&verified)
    );
}

/// Every seal removed and the chain recomputed.
#[test]
fn a_log_with_every_seal_removed_is_named() {
    let site = Site::new("");
    let mut gw = Gateway::start(&site.config);
    traffic(&gw, &site.token(), 3);
    assert!(gw.terminate().success());
    let kept: Vec<Line> = lines(&site.log())
        .into_iter()
        .filter(|l| !is_seal(&l.r))
        .collect();
    rechain(&site.log(), kept);
    let verified = site.verify(&[]);
    assert_eq!(verified.status.code(), Some(1), "{}", said(&verified));
    assert!(
        stdout(&verified).contains("no record is sealed"),
        "{}",
        said(&verified)
    );
}

/// A running gateway's log cut before its anchor: `--gateway-url` asks
/// the gateway for the anchor (never opening its store) and names the cut;
/// the untouched log passes the same check.
#[test]
fn a_log_that_ends_before_the_anchor_is_named_from_the_running_gateway() {
    let site = Site::new("");
    let gw = Gateway::start(&site.config);
    traffic(&gw, &site.token(), 3);
    let h = anchored_past(&gw, 5);
    let seq = h["anchor"]["seq"].as_u64().unwrap();
    assert_eq!(h["sealedRecords"], seq + 1, "{h}");
    let all = lines(&site.log());
    assert_eq!(all[seq as usize].r.hash, h["anchor"]["head"], "{h}");
    assert!(is_seal(&all[seq as usize].r));
    assert!(
        gw.metrics()
            .contains(&format!("dgw_audit_sealed_records {}", seq + 1)),
        "{}",
        gw.metrics()
    );
    let url = format!("http://{}/rpc", gw.addr);
    let verified = site.verify(&["--gateway-url", &url]);
    assert_eq!(verified.status.code(), Some(0), "{}", said(&verified));

    rechain(&site.log(), all[..seq as usize - 2].to_vec());
    let verified = site.verify(&["--gateway-url", &url]);
    assert_eq!(verified.status.code(), Some(1), "{}", said(&verified));
    assert!(
        stdout(&verified).contains(&format!("before the anchor (record {seq})")),
        "{}",
        said(&verified)
    );
    // Without an admin secret, the gateway does not say.
    let anonymous = dgw()
        .args([
            "audit",
            "verify",
            site.log().to_str().unwrap(),
            "--gateway",
            &site.gateway(),
            "--gateway-url",
            &url,
        ])
        .env_remove("DGW_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert_eq!(anonymous.status.code(), Some(2), "{}", said(&anonymous));
    // An anchor that is not SEQ:HASH is a usage error, not a verdict.
    for bad in [
        "12",
        "x:y",
        &format!("12:{}", "A".repeat(64)),
        &format!("12:{}", "a".repeat(63)),
    ] {
        let refused = site.verify(&["--expect-head", bad]);
        assert_eq!(refused.status.code(), Some(2), "{bad}: {}", said(&refused));
        assert!(
            stderr(&refused).contains("is not SEQ:HASH"),
            "{}",
            said(&refused)
        );
    }
}

/// A principal ID may begin with `-` (base64url): `--gateway` takes it as
/// a value, and the log sealed by another key is named, not refused as a
/// usage error.
#[test]
fn a_gateway_id_beginning_with_a_dash_is_taken() {
    let site = Site::new("");
    let mut gw = Gateway::start(&site.config);
    traffic(&gw, &site.token(), 1);
    assert!(gw.terminate().success());
    let dashed = (0..=255u8)
        .map(|n| seed(n).principal_id().to_string())
        .find(|p| p.starts_with('-'))
        .expect("a seed whose principal begins with -");
    let log = site.log();
    let verified = run(&[
        "audit",
        "verify",
        log.to_str().unwrap(),
        "--gateway",
        &dashed,
    ]);
    assert_eq!(verified.status.code(), Some(1), "{}", said(&verified));
    assert!(
        stdout(&verified).contains("is not the gateway's signature"),
        "{}",
        said(&verified)
    );
}

/// SIGKILL leaves records unsealed; the restart seals them with a
/// recovery seal, and the log verifies while it runs and after it stops.
#[test]
fn a_gateway_killed_and_restarted_seals_the_tail_and_verifies() {
    let site = Site::new("[audit]\nseal_interval = \"1h\"\n");
    let token = site.token();
    let mut gw = Gateway::start(&site.config);
    traffic(&gw, &token, 3);
    gw.kill();
    let killed = records(&site.log());
    assert!(
        !killed.is_empty() && !is_seal(killed.last().unwrap()),
        "unsealed at the kill"
    );
    let gw = Gateway::start(&site.config);
    let all = records(&site.log());
    let recovery = &all[killed.len() + 1];
    assert_eq!(all[killed.len()].event["event"], "recovered");
    assert_eq!(recovery.event["seal"]["kind"], "recovery", "{all:#?}");
    assert_eq!(recovery.event["seal"]["from"], 0);
    traffic(&gw, &token, 1);
    let url = format!("http://{}/rpc", gw.addr);
    let verified = site.verify(&["--gateway-url", &url]);
    assert_eq!(verified.status.code(), Some(0), "{}", said(&verified));
    let mut gw = gw;
    assert!(gw.terminate().success());
    let verified = site.verify(&[]);
    assert_eq!(verified.status.code(), Some(0), "{}", said(&verified));
}

/// Cut or rewritten while dgw was down: it refuses to start, writes
/// nothing, and the log stays as found (evidence). Moved aside, a new log
/// starts with `--new-audit-log`, chained to the anchor.
fn refuses_a_log_tampered_while_down(site: &Site) {
    let token = site.token();
    let mut gw = Gateway::start(&site.config);
    traffic(&gw, &token, 3);
    let to = wait_for_seal(&site.log(), 6);
    traffic(&gw, &token, 2);
    assert!(gw.terminate().success());
    let all = lines(&site.log());
    let last = all.last().unwrap().r.clone();

    // Cut back to a seal made while it ran.
    rechain(&site.log(), all[..=to].to_vec());
    let before = snapshot(&site.log());
    let refused = serve_exits(&site.config, &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", said(&refused));
    assert!(
        stderr(&refused).contains(&format!(
            "the log ends at record {to}, before the anchor (record {})",
            last.seq
        )),
        "{}",
        said(&refused)
    );
    assert_eq!(snapshot(&site.log()), before, "nothing written");

    // Rewritten: the anchor's record is not what the store holds.
    let mut edited = all.clone();
    edited[1].r.event["edited"] = json!(true);
    rechain(&site.log(), edited);
    let refused = serve_exits(&site.config, &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", said(&refused));
    assert!(
        stderr(&refused).contains(&format!("record {} is not the anchor", last.seq)),
        "{}",
        said(&refused)
    );

    // The way out: the log moved aside, a new one after the anchor.
    let aside = site.dir.path().join("audit.tampered");
    std::fs::rename(site.log(), &aside).unwrap();
    let refused = serve_exits(&site.config, &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", said(&refused));
    assert!(
        stderr(&refused).contains("--new-audit-log"),
        "{}",
        said(&refused)
    );
    let mut gw = Gateway::start_args(&site.config, &["--new-audit-log"]);
    traffic(&gw, &token, 1);
    assert!(gw.terminate().success());
    let fresh = records(&site.log());
    assert_eq!(fresh[0].seq, last.seq + 1);
    assert_eq!(fresh[0].prev, last.hash);
    assert_eq!(fresh[0].event["event"], "new_log");
    let verified = site.verify(&["--expect-head", &format!("{}:{}", last.seq, last.hash)]);
    assert_eq!(verified.status.code(), Some(0), "{}", said(&verified));
    let verified = site.verify(&[]);
    assert_eq!(verified.status.code(), Some(0), "{}", said(&verified));
    // And a plain restart continues it.
    let mut gw = Gateway::start(&site.config);
    let stopped = gw.terminate();
    assert!(
        stopped.success(),
        "{stopped}: {}",
        std::fs::read_to_string(&gw.stderr_log).unwrap()
    );
}

#[test]
fn a_gateway_started_on_a_log_tampered_while_down_refuses_sled() {
    refuses_a_log_tampered_while_down(&Site::new(""));
}

#[test]
fn a_gateway_started_on_a_log_tampered_while_down_refuses_redis() {
    let redis = RedisServer::start();
    let site = Site::new(&format!(
        "[state]\nbackend = \"redis\"\nurl = \"{}\"\nprefix = \"dgw\"\n",
        redis.url()
    ));
    refuses_a_log_tampered_while_down(&site);
}
