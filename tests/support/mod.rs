//! Helpers for the end-to-end tests: the real `dgw` binary, key files in
//! temp dirs, and the Node DelegateOS peer.
#![allow(dead_code)]

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use delegateos::{base64url, KeyFile, Keypair};
use serde_json::Value;

/// The `dgw` binary cargo built for these tests.
pub fn dgw() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dgw"))
}

/// Runs `dgw` with `args` and returns its output.
pub fn run(args: &[&str]) -> Output {
    dgw().args(args).output().expect("dgw runs")
}

/// Runs `dgw` with `stdin` fed in.
pub fn run_with_stdin(args: &[&str], stdin: &str) -> Output {
    let mut child = dgw()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dgw runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

pub fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            stdout(o),
            stderr(o)
        )
    })
}

/// Writes a key file for a fixed seed, mode 0600, and returns its path.
pub fn key_file(dir: &Path, name: &str, seed: u8) -> (PathBuf, Keypair) {
    let key = Keypair::from_seed([seed; 32]);
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, KeyFile::new(&key).to_json()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    (path, key)
}

pub fn seed_b64(seed: u8) -> String {
    base64url::encode(&[seed; 32])
}

/// Runs the Node DelegateOS peer (`tests/interop/delegateos-peer.mjs`).
/// The tests need `npm ci --prefix tests` first, as the README says.
pub fn node_peer(command: &str, input: &Value) -> Value {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    assert!(
        dir.join("node_modules/@noble/ed25519").exists(),
        "the Node peer's packages are missing: run `npm ci --prefix tests` (the README's test command does)"
    );
    let mut child = Command::new("node")
        .arg(dir.join("interop/delegateos-peer.mjs"))
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "node peer failed: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}
