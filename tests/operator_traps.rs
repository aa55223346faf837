//! Traps a new operator falls into (issue 30, findings 7–9): a typo in a key
//! path must not make a new identity, a closed pipe must not panic, and two
//! listeners on one port are named by `config check`.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::Read;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use support::*;

/// Runs `dgw serve --config CONFIG` in `dir`, expecting it to exit on its
/// own within a deadline (it is killed and the test fails otherwise).
fn serve_expecting_exit(dir: &Path, config: &str) -> (ExitStatus, String) {
    let mut child = dgw()
        .current_dir(dir)
        .args(["serve", "--config", config])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("dgw serve kept running; it should have refused to start");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status, err)
}

fn check_in(dir: &Path, toml: &str) -> (Option<i32>, String, String) {
    let out = config_check_in(dir, toml);
    (out.status.code(), stdout(&out), stderr(&out))
}

const LISTENER: &str = "[server]\nhttp = \"127.0.0.1:0\"\n";

/// A typo in `root_key_file` is an error naming the key and the path; no
/// new tenant root appears, at `serve` or at `config check`.
#[test]
fn a_missing_tenant_root_key_is_an_error_not_a_new_root() {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "data_dir = \"data\"\nkey_file = \"data/gateway.key\"\n{LISTENER}\
         [[tenants]]\nname = \"acme\"\nroot_key_file = \"data/acme-rot.key\"\n"
    );
    let (code, _, err) = check_in(dir.path(), &toml);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("tenants[0].root_key_file") && err.contains("data/acme-rot.key"),
        "{err}"
    );
    let (status, err) = serve_expecting_exit(dir.path(), "gateway.toml");
    assert!(!status.success());
    assert!(
        err.contains("tenants[0].root_key_file")
            && err.contains("data/acme-rot.key")
            && err.contains("create_if_missing"),
        "{err}"
    );
    assert!(!dir.path().join("data/acme-rot.key").exists());
}

/// A tenant's `issuing_delegation_file` that cannot be read is a finding
/// of `config check`, named by its key, not a surprise at start.
#[test]
fn an_unreadable_issuing_delegation_file_is_named_by_config_check() {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "data_dir = \"data\"\nkey_file = \"data/gateway.key\"\n{LISTENER}\
         [[tenants]]\nname = \"acme\"\nroot = \"{}\"\nissuing_delegation_file = \"issuing/acme.dct\"\n",
        seed(1).principal_id()
    );
    let (code, _, err) = check_in(dir.path(), &toml);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("`tenants[0].issuing_delegation_file`: cannot read")
            && err.contains("issuing/acme.dct"),
        "{err}"
    );
}

/// `create_if_missing = true` (the demo config's setting) makes the root
/// once and reads it afterwards; the key file is private.
#[test]
fn create_if_missing_makes_a_tenant_root_once() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // Absolute paths: the gateway runs in the test's directory.
    let data = dir.path().join("data");
    let toml = format!(
        "data_dir = {:?}\nkey_file = {:?}\n{LISTENER}\
         [[tenants]]\nname = \"demo\"\nroot_key_file = {:?}\ncreate_if_missing = true\n",
        data,
        data.join("gateway.key"),
        data.join("demo-root.key")
    );
    let (code, out, err) = check_in(dir.path(), &toml);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("valid"), "{out}");
    assert!(
        err.contains("tenants[0].root_key_file") && err.contains("creates it"),
        "{err}"
    );
    let mut gw = Gateway::start(&dir.path().join("gateway.toml"));
    let key = dir.path().join("data/demo-root.key");
    let first = std::fs::read(&key).unwrap();
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(gw.terminate().success());
    let mut gw = Gateway::start(&dir.path().join("gateway.toml"));
    assert_eq!(std::fs::read(&key).unwrap(), first, "the root was replaced");
    assert!(gw.terminate().success());
}

/// The gateway key is made on the data directory's first start only; a
/// `key_file` that names nothing later (a typo, a lost file) is an error
/// naming the key, at `serve` and at `config check`, and nothing is made.
#[test]
fn the_gateway_key_is_made_only_on_first_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = gateway_config(dir.path(), &[("acme", seed(1).principal_id())], "");
    let mut gw = Gateway::start(&config);
    assert!(gw.terminate().success());
    assert!(dir.path().join("data/gateway.key").exists());

    let toml = std::fs::read_to_string(&config)
        .unwrap()
        .replace("data/gateway.key", "data/gatway.key");
    let (code, _, err) = check_in(dir.path(), &toml);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("key_file") && err.contains("gatway.key"),
        "{err}"
    );
    let (status, err) = serve_expecting_exit(dir.path(), "gateway.toml");
    assert!(!status.success());
    assert!(
        err.contains("key_file") && err.contains("gatway.key") && err.contains("identity"),
        "{err}"
    );
    assert!(!dir.path().join("data/gatway.key").exists());
}

/// A missing parent directory is created only inside data_dir, never
/// anywhere a path points.
#[test]
fn no_directories_are_created_outside_the_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("nonexistent/dir");
    let toml = format!(
        "data_dir = \"data\"\nkey_file = \"data/keys/gateway.key\"\n{LISTENER}\
         [[tenants]]\nname = \"demo\"\nroot_key_file = {:?}\ncreate_if_missing = true\n",
        outside.join("root.key")
    );
    std::fs::write(dir.path().join("gateway.toml"), &toml).unwrap();
    let (status, err) = serve_expecting_exit(dir.path(), "gateway.toml");
    assert!(!status.success());
    assert!(
        err.contains("tenants[0].root_key_file") && err.contains("only inside data_dir"),
        "{err}"
    );
    assert!(!dir.path().join("nonexistent").exists());
    // Inside data_dir the directory is made (the gateway key's `keys/`).
    assert!(dir.path().join("data/keys/gateway.key").exists());
}

/// `dgw … | head`: a reader that stops reading ends the output quietly;
/// the command keeps its own exit code and never panics.
#[test]
fn a_closed_pipe_ends_output_quietly() {
    let token = root_token(&seed(1), &seed(2), &["docs:read:/project/**"], 1000, 3600).encode();
    for args in [
        vec!["token", "inspect", token.as_str()],
        vec!["admin-token", "new", "--name", "ops"],
        vec!["--help"],
    ] {
        let mut child = dgw()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before dgw writes anything.
        drop(child.stdout.take());
        let out = wait_with_deadline(child);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_ne!(out.status.code(), Some(101), "{args:?}: {err}");
        assert!(!err.contains("Broken pipe"), "{args:?}: {err}");
    }
    // The command's own outcome is kept: inspect succeeds.
    let mut child = dgw()
        .args(["token", "inspect", token.as_str()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    assert_eq!(wait_with_deadline(child).status.code(), Some(0));
}

fn wait_with_deadline(mut child: std::process::Child) -> std::process::Output {
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("dgw did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// `http` and `grpc` on one port: `config check` (and so `serve`) names both
/// keys instead of a bare "Address already in use".
#[test]
fn two_listeners_on_one_port_are_named_by_config_check() {
    let dir = tempfile::tempdir().unwrap();
    for (http, grpc) in [
        ("127.0.0.1:18080", "127.0.0.1:18080"),
        ("0.0.0.0:18080", "127.0.0.1:18080"),
        ("127.0.0.1:18080", "[::]:18080"),
    ] {
        let toml = format!(
            "data_dir = \"data\"\nkey_file = \"data/gateway.key\"\n[server]\nhttp = {http:?}\ngrpc = {grpc:?}\n"
        );
        let (code, _, err) = check_in(dir.path(), &toml);
        assert_eq!(code, Some(2), "{http} {grpc}: {err}");
        assert!(
            err.contains("server.grpc") && err.contains("server.http"),
            "{err}"
        );
        let (status, err) = serve_expecting_exit(dir.path(), "gateway.toml");
        assert!(!status.success());
        assert!(
            err.contains("server.grpc") && err.contains("server.http"),
            "{err}"
        );
    }
    // Different ports, or port 0 (a free one each), are fine.
    for (http, grpc) in [
        ("127.0.0.1:18080", "127.0.0.1:18081"),
        ("127.0.0.1:0", "127.0.0.1:0"),
    ] {
        let toml = format!(
            "data_dir = \"data\"\nkey_file = \"data/gateway.key\"\n[server]\nhttp = {http:?}\ngrpc = {grpc:?}\n"
        );
        let (code, _, err) = check_in(dir.path(), &toml);
        assert_eq!(code, Some(0), "{http} {grpc}: {err}");
    }
}

/// What operators read at start is words, not Rust: no `Some(…)` in the
/// log, and the descriptor limit lowering the *default* connection limit is
/// no warning; lowering the operator's own `max_connections` is.
#[test]
fn start_logs_read_as_words() {
    for (extra, warned) in [("", false), ("max_connections = 10000\n", true)] {
        let dir = tempfile::tempdir().unwrap();
        let config = gateway_config(
            dir.path(),
            &[("acme", seed(1).principal_id())],
            &format!("grpc = \"127.0.0.1:0\"\n{extra}"),
        );
        let mut gw = Gateway::start_with_descriptors(&config, 4096);
        assert!(gw.terminate().success());
        let log = std::fs::read_to_string(&gw.stderr_log).unwrap();
        assert!(log.contains("dgw listening"), "{log}");
        assert!(!log.contains("Some("), "{log}");
        assert_eq!(
            log.contains("WARN") && log.contains("max_connections lowered"),
            warned,
            "{extra:?}: {log}"
        );
        assert!(log.contains("descriptor limit"), "{log}");
    }
}
