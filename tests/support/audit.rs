//! Helpers for the audit-log tests against the real `dgw`: a gateway's
//! site, traffic, the log's records read back, and rewriting it as
//! someone without the gateway key can (`tests/audit_tamper.rs`,
//! `tests/audit_anchor.rs`).

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use dgw_audit_log::Record;
use serde_json::{json, Value};

use super::*;

pub const ADMIN: &str = "audit-tamper-admin-secret-0123";

pub fn admin_toml() -> String {
    use sha2::Digest;
    let digest: String = sha2::Sha256::digest(ADMIN.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("[[admin.tokens]]\nname = \"ops\"\nsha256 = \"{digest}\"\n")
}

/// A gateway's directory: its config (with `extra`), data and audit log.
pub struct Site {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub root: delegateos::Keypair,
}

impl Site {
    pub fn new(extra: &str) -> Site {
        let dir = tempfile::tempdir().unwrap();
        let root = seed(1);
        let config = gateway_config(
            dir.path(),
            &[("acme", root.principal_id())],
            &format!("{}{extra}", admin_toml()),
        );
        Site { dir, config, root }
    }

    pub fn log(&self) -> PathBuf {
        self.dir.path().join("data/audit")
    }

    pub fn gateway(&self) -> String {
        gateway_principal(&self.dir.path().join("data"))
    }

    pub fn token(&self) -> String {
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
    pub fn verify(&self, args: &[&str]) -> Output {
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

pub fn authorize(token: &str, resource: &str) -> Value {
    json!({"dct": token, "namespace": "docs", "action": "read",
           "resource": resource, "costMicrocents": 10})
}

/// `n` authorizations and settlements.
pub fn traffic(gw: &Gateway, token: &str, n: usize) {
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
pub fn head(gw: &Gateway) -> Value {
    let (status, answer) = gw.call_as(&format!("Bearer {ADMIN}"), "dgw/audit/head", json!({}));
    assert_eq!(status, 200, "{answer}");
    assert!(answer.get("error").is_none(), "{answer}");
    answer["result"].clone()
}

/// Waits (up to 10 s) until the anchor covers record `seq` or later.
pub fn anchored_past(gw: &Gateway, seq: u64) -> Value {
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
pub fn wait_for_seal(log: &Path, from: usize) -> usize {
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
pub struct Line {
    pub r: Record,
    pub event: String,
}

/// Every record of the log, oldest first.
pub fn records(log: &Path) -> Vec<Record> {
    lines(log).into_iter().map(|l| l.r).collect()
}

pub fn lines(log: &Path) -> Vec<Line> {
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

pub fn is_seal(r: &Record) -> bool {
    r.event["event"] == "seal"
}

/// Replaces the log by `kept` as one segment, renumbered from its first
/// record and chained anew (each line hashed as the writer does): what
/// someone without the key can do. A line whose `event` was edited is
/// written with the edited event.
pub fn rechain(log: &Path, kept: Vec<Line>) {
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

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The log's files, byte for byte.
pub fn snapshot(log: &Path) -> Vec<(PathBuf, Vec<u8>)> {
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
pub fn serve_exits(config: &Path, args: &[&str]) -> Output {
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

pub fn said(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

/// One JSON-RPC authorize on a fresh connection; `None` once the gateway
/// is gone (a load client must not panic when it stops).
pub fn try_authorize(addr: &str, token: &str, i: usize) -> Option<()> {
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
