//! What operators and callers read says what is so, in words (issue 37):
//! no Rust `Debug` in logs or errors, every config error names its key,
//! sizes and durations take units, and an authorization states the budget
//! that will be enforced.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::*;

const LISTENER: &str =
    "data_dir = \"data\"\nkey_file = \"data/gateway.key\"\n[server]\nhttp = \"127.0.0.1:0\"\n";

/// `dgw config check` on `toml` in a fresh directory: (exit code, stderr).
fn check(toml: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = config_check_in(dir.path(), toml);
    (out.status.code(), stderr(&out))
}

/// Rust's own renderings an operator should never read.
fn assert_no_debug(text: &str) {
    for rust in [
        "Some(",
        "None",
        "Os {",
        "kind: ",
        " { kept",
        "Invalid symbol",
        "expected usize",
        "expected u64",
    ] {
        assert!(!text.contains(rust), "{rust:?} in:\n{text}");
    }
}

#[test]
fn sizes_take_units_and_bare_integers_stay_bytes() {
    for (key, value) in [
        ("max_body_bytes", "\"1MB\""),
        ("max_body_bytes", "\"64KiB\""),
        ("max_body_bytes", "\"64 kib\""),
        ("max_body_bytes", "1048576"),
    ] {
        let (code, err) = check(&format!("{LISTENER}{key} = {value}\n"));
        assert_eq!(code, Some(0), "{key} = {value}: {err}");
    }
    let (code, err) = check(&format!(
        "{LISTENER}[audit]\nsegment_bytes = \"1MiB\"\nmax_bytes = \"2GB\"\n"
    ));
    assert_eq!(code, Some(0), "{err}");
    // Each refusal names its key, says what was written and what is taken.
    for (toml, key) in [
        (format!("{LISTENER}max_body_bytes = \"1.5MB\"\n"), "`server.max_body_bytes`"),
        (format!("{LISTENER}max_body_bytes = \"1 XB\"\n"), "`server.max_body_bytes`"),
        (format!("{LISTENER}max_body_bytes = -1\n"), "`server.max_body_bytes`"),
        (format!("{LISTENER}max_body_bytes = 1.5\n"), "`server.max_body_bytes`"),
        (format!("{LISTENER}max_body_bytes = \"1KB\"\n"), "`server.max_body_bytes`"),
        (format!("{LISTENER}[audit]\nsegment_bytes = \"lots\"\n"), "`audit.segment_bytes`"),
        (format!("{LISTENER}[audit]\nmax_bytes = \"99999999999TB\"\n"), "`audit.max_bytes`"),
        (
            format!("{LISTENER}[[tenants]]\nname = \"acme\"\nroot = \"{}\"\n[agenta]\ntenant = \"acme\"\nmax_input_bytes = \"4 parsecs\"\n", seed(1).principal_id()),
            "`agenta.max_input_bytes`",
        ),
    ] {
        let (code, err) = check(&toml);
        assert_eq!(code, Some(2), "{toml}: {err}");
        assert!(err.contains(key), "{key} not named: {err}");
        assert_no_debug(&err);
        if !toml.contains("\"1KB\"") {
            assert!(err.contains("\"64KiB\""), "the accepted forms: {err}");
        }
    }
    // "1KB" is 1000 bytes, under the least body limit.
    let (_, err) = check(&format!("{LISTENER}max_body_bytes = \"1KB\"\n"));
    assert!(err.contains("1000 bytes is below the least, 1024"), "{err}");
}

#[test]
fn durations_say_the_forms_they_take() {
    for (toml, key) in [
        (format!("{LISTENER}request_timeout = \"30\"\n"), "`server.request_timeout`"),
        (format!("{LISTENER}[budget]\nreservation_ttl = \"soon\"\n"), "`budget.reservation_ttl`"),
        (
            format!("{LISTENER}[[tenants]]\nname = \"acme\"\nroot = \"{}\"\n[agenta]\ntenant = \"acme\"\nretention = \"a week\"\n", seed(1).principal_id()),
            "`agenta.retention`",
        ),
    ] {
        let (code, err) = check(&toml);
        assert_eq!(code, Some(2), "{toml}: {err}");
        assert!(err.contains(key) && err.contains("\"30s\""), "{err}");
    }
    let (code, err) = check(&format!("{LISTENER}request_timeout = \"1m 30s\"\n"));
    assert_eq!(code, Some(0), "{err}");
}

/// A body limit written with a unit is the limit the listener enforces.
#[test]
fn a_body_limit_with_a_unit_is_enforced_in_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let config = gateway_config(
        dir.path(),
        &[("acme", seed(1).principal_id())],
        "max_body_bytes = \"2KiB\"\n",
    );
    let gw = Gateway::start(&config);
    let body = |n: usize| {
        let frame = |pad: &str| {
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"dgw/nope","params":{{"p":"{pad}"}}}}"#)
        };
        let b = frame(&"x".repeat(n - frame("").len()));
        assert_eq!(b.len(), n);
        b
    };
    assert_eq!(gw.http("POST", "/rpc", body(2048).as_bytes()).0, 200);
    assert_eq!(gw.http("POST", "/rpc", body(2049).as_bytes()).0, 413);
}

/// A TLS file that cannot be used is reported with the key that names it,
/// at `config check` and at `serve`, in words.
#[test]
fn a_tls_file_is_reported_with_its_config_key() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let cases = [
        (
            "/nonexistent/cert.pem".to_owned(),
            "/nonexistent/key.pem".to_owned(),
            "`server.tls.cert_file`",
        ),
        (
            garbage.display().to_string(),
            garbage.display().to_string(),
            "`server.tls.cert_file`",
        ),
    ];
    for (cert, key, said) in cases {
        let toml = format!("{LISTENER}[server.tls]\ncert_file = {cert:?}\nkey_file = {key:?}\n");
        let (code, err) = check(&toml);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(said), "{said} in: {err}");
        if cert.starts_with("/nonexistent") {
            // The file, and why, with the key.
            assert!(
                err.contains("/nonexistent/cert.pem") && err.contains("No such file"),
                "{err}"
            );
        }
        assert_no_debug(&err);
        let here = tempfile::tempdir().unwrap();
        std::fs::write(here.path().join("gateway.toml"), &toml).unwrap();
        let out = dgw()
            .current_dir(here.path())
            .args(["serve", "--config", "gateway.toml"])
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(stderr(&out).contains(said), "serve: {}", stderr(&out));
        assert_no_debug(&stderr(&out));
    }
    // A garbage certificate is told so, not as a list of bytes.
    let toml = format!(
        "{LISTENER}[server.tls]\ncert_file = {0:?}\nkey_file = {0:?}\n",
        garbage.display().to_string()
    );
    let (_, err) = check(&toml);
    assert!(err.contains("holds no PEM certificate"), "{err}");
}

/// Waits until the gateway's log holds `needle`, or fails after a deadline.
fn log_with(gw: &Gateway, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = std::fs::read_to_string(&gw.stderr_log).unwrap_or_default();
        if log.contains(needle) {
            return log;
        }
        assert!(Instant::now() < deadline, "no {needle:?} in:\n{log}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The log of a gateway whose upstream cannot start, that reloads, and
/// that refuses a malformed token reads as words: durations as a config
/// writes them, a command as a command line, the reload's upstreams as
/// lists, and the token's fault named by character.
#[test]
fn the_log_and_a_malformed_tokens_error_read_as_words() {
    let dir = tempfile::tempdir().unwrap();
    let extra = "[mcp]\nready_timeout = \"500ms\"\n[[upstreams]]\nname = \"gone\"\ncommand = [\"/nonexistent/upstream\", \"--flag\"]\n[[upstreams.tools]]\nname = \"t\"\ncapability = \"demo:t\"\nfixed_resource = \"/t\"\n";
    let config = gateway_config(dir.path(), &[("acme", seed(1).principal_id())], extra);
    let mut gw = Gateway::start_args(&config, &["--log-format", "json"]);
    let log = log_with(&gw, "restarting the upstream after a pause");
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let find = |message: &str| {
        lines
            .iter()
            .find(|l| l["message"] == message)
            .unwrap_or_else(|| panic!("no {message:?} in:\n{log}"))
    };
    let failed = find("cannot start the upstream process");
    assert_eq!(
        failed["command"], "/nonexistent/upstream --flag",
        "{failed}"
    );
    let waited = find("upstream not ready in time; serving without it until it is");
    assert_eq!(waited["limit"], "500ms", "{waited}");
    let restart = find("restarting the upstream after a pause");
    let wait = restart["wait"].as_str().unwrap();
    assert!(
        wait.ends_with("ms") || wait.ends_with('s'),
        "a duration as a config writes it: {restart}"
    );

    // A reload that keeps one upstream and starts another.
    let reloaded = std::fs::read_to_string(&config).unwrap()
        + "[[upstreams]]\nname = \"also-gone\"\ncommand = [\"/nonexistent/other\"]\n";
    std::fs::write(&config, reloaded).unwrap();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &gw.pid().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    let log = log_with(&gw, "configuration reloaded");
    let line: Value = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["message"] == "configuration reloaded")
        .unwrap();
    assert_eq!(line["upstreams_kept"], "gone", "{line}");
    assert_eq!(line["upstreams_started"], "also-gone", "{line}");

    // A token with a JWT's dot in it.
    let e = gw.err(
        "delegateos/authorize",
        json!({"dct": "eyJhbGciOi.eyJ4In0", "namespace": "docs", "action": "read", "resource": "/a"}),
    );
    let said = e.to_string();
    assert!(
        said.contains("'.' at character 11") && said.contains("is not a base64url character"),
        "{said}"
    );
    assert_no_debug(&said);
    assert!(gw.terminate().success());
    let log = std::fs::read_to_string(&gw.stderr_log).unwrap();
    assert_no_debug(&log);
}

/// Decision 27: a token re-issued for a delegation shares its node, whose
/// limit is the smallest any token gave it. The answer states that limit,
/// less what was spent, not the new token's larger budget; a smaller
/// budget on the new token is its own.
#[test]
fn a_reissued_token_is_told_the_budget_its_node_enforces() {
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let config = gateway_config(dir.path(), &[("acme", root.principal_id())], "");
    let gw = Gateway::start(&config);
    let caps = ["docs:read:/p/**"];
    let first = root_token(&root, &seed(2), &caps, 1000, 3600).encode();
    let ask = |token: &str, cost: u64| json!({"dct": token, "namespace": "docs", "action": "read", "resource": "/p/a", "costMicrocents": cost});
    let a = gw.ok("delegateos/authorize", ask(&first, 80));
    assert_eq!(a["scope"]["remainingBudgetMicrocents"], 1000);
    gw.ok(
        "delegateos/settle",
        json!({"reservationId": a["reservationId"], "actualMicrocents": 80, "dct": first}),
    );
    // The same delegation, re-issued with five times the budget.
    let larger = root_token(&root, &seed(2), &caps, 5000, 3600).encode();
    let b = gw.ok("delegateos/authorize", ask(&larger, 0));
    assert_eq!(b["scope"]["remainingBudgetMicrocents"], 920, "{b}");
    let (status, d) = gw.call_as(
        &format!("DCT {larger}"),
        "dgw/authorize",
        json!({"namespace": "docs", "action": "read", "resource": "/p/a", "costMicrocents": 0}),
    );
    assert_eq!(status, 200, "{d}");
    assert_eq!(
        d["result"]["scope"]["remainingBudgetMicrocents"], 920,
        "{d}"
    );
    // What it states is what is enforced: 921 does not fit, 920 does.
    let over = gw.err("delegateos/authorize", ask(&larger, 921));
    assert_eq!(over["data"]["type"], "budget_exceeded", "{over}");
    gw.ok("delegateos/authorize", ask(&larger, 920));
    // A re-issue with less than the node's limit states its own budget.
    let dir2 = tempfile::tempdir().unwrap();
    let config = gateway_config(dir2.path(), &[("acme", root.principal_id())], "");
    let gw = Gateway::start(&config);
    let a = gw.ok("delegateos/authorize", ask(&first, 80));
    gw.ok(
        "delegateos/settle",
        json!({"reservationId": a["reservationId"], "actualMicrocents": 80, "dct": first}),
    );
    let smaller = root_token(&root, &seed(2), &caps, 500, 3600).encode();
    let s = gw.ok("delegateos/authorize", ask(&smaller, 0));
    assert_eq!(s["scope"]["remainingBudgetMicrocents"], 420, "{s}");
}
