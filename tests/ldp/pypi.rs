//! The PyPI `ldp-protocol` 0.2.0 package as a peer: its delegate server
//! (`tests/ldp/pypi_delegate.py`) and its router (`tests/ldp/pypi_router.py`)
//! run by `tests/.venv`'s Python, each with a deadline and killed when
//! dropped.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The Python of `tests/.venv` (made by `tests/setup.sh`), which has
/// `ldp-protocol==0.2.0` (tests/requirements.txt).
fn python() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/.venv/bin/python");
    assert!(
        p.exists(),
        "tests/.venv is missing: run tests/setup.sh (the README's test command does)"
    );
    p
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/ldp")
        .join(name)
}

/// A child process killed (and reaped) when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The package's `LdpDelegate`, served by its own `run()`.
pub struct PypiDelegate {
    _child: Killed,
    /// Its base URL.
    pub url: String,
    log: PathBuf,
}

impl PypiDelegate {
    /// Starts it as `delegate_id` with `secret` in `trust_domain`, logging
    /// what it receives to a file in `dir`; waits (at most 30 s) until it
    /// listens. With `session_id`, it accepts every session under that ID.
    pub fn start(
        dir: &Path,
        delegate_id: &str,
        secret: &str,
        trust_domain: &str,
        session_id: Option<&str>,
    ) -> Self {
        let log = dir.join("pypi-delegate.jsonl");
        let stderr = dir.join("pypi-delegate.stderr.log");
        let mut child = Killed(
            Command::new(python())
                .arg(script("pypi_delegate.py"))
                .args([delegate_id, secret, trust_domain, log.to_str().unwrap()])
                .envs(session_id.map(|s| ("PYPI_DELEGATE_SESSION_ID", s)))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(std::fs::File::create(&stderr).unwrap())
                .spawn()
                .expect("python runs"),
        );
        let stdout = child.0.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        let port = serde_json::from_str::<Value>(&line)
            .ok()
            .and_then(|v| v["port"].as_u64())
            .unwrap_or_else(|| {
                panic!(
                    "the PyPI delegate did not start ({line:?}): {}",
                    std::fs::read_to_string(&stderr).unwrap_or_default()
                )
            });
        PypiDelegate {
            _child: child,
            url: format!("http://127.0.0.1:{port}"),
            log,
        }
    }

    /// Every message it received: `{envelope, verified}` (its own
    /// `verify_envelope` on the envelope as it parsed it).
    pub fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// Runs the package's router through `scenario` with `input` (see
/// `pypi_router.py`), at most 120 s: what it printed.
pub fn router(scenario: &str, input: &Value) -> Value {
    let mut child = Killed(
        Command::new(python())
            .arg(script("pypi_router.py"))
            .arg(scenario)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python runs"),
    );
    child
        .0
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read(Box::new(child.0.stdout.take().unwrap()));
    let err = read(Box::new(child.0.stderr.take().unwrap()));
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(child);
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    match status {
        None => panic!("the PyPI router's {scenario} took over 120 s: {err}"),
        Some(s) if !s.success() => panic!("the PyPI router's {scenario} failed: {err}"),
        Some(_) => serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("the PyPI router printed no JSON ({e}): {out}\n{err}")),
    }
}
