//! The servers of `dgw-load` that benchmarks measure against must answer
//! correctly, or a floor or a baseline would be one of errors:
//! `--serve-floor` (benches/floor.sh) both of the load generator's fronts;
//! `--serve-upstream`, `--serve-proxy` and `--serve-stdio`
//! (benches/compare/) MCP calls.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;

use support::LoadServer;

fn dgw_load() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dgw-load"))
}

/// Runs the load generator against `addr` and returns its summary line.
fn drive(addr: &str, args: &[&str]) -> String {
    let out = dgw_load()
        .args(["--addr", addr, "--token", "t", "--concurrency", "4"])
        .args(["--duration", "300ms", "--warmup", "0s"])
        .args(args)
        .output()
        .expect("dgw-load runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The number before " answers" in a summary line.
fn answers(summary: &str) -> u64 {
    let before = summary.split(" answers").next().unwrap();
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn the_floor_answers_json_rpc_and_grpc_without_errors() {
    let floor = LoadServer::start("--serve-floor", "dgw-load floor listening addr=");
    for args in [
        &["--mode", "authorize"][..],
        &["--mode", "grpc"],
        &["--mode", "grpc", "--connections", "1"],
        &["--mode", "authorize", "--rate", "200"],
    ] {
        let summary = drive(&floor.addr, args);
        assert!(answers(&summary) > 0, "{args:?}: {summary}");
        assert!(
            summary.contains(", 0 of them denials or errors"),
            "{args:?}: {summary}"
        );
    }
}

#[test]
fn the_floor_refuses_an_address_off_this_machine() {
    let out = dgw_load()
        .args(["--serve-floor", "192.0.2.1:0"])
        .output()
        .expect("dgw-load runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a loopback address"));
}

#[test]
fn the_proxy_floor_forwards_mcp_calls_to_the_echo_server() {
    let upstream = LoadServer::start("--serve-upstream", "dgw-load upstream listening http=");
    let proxy = LoadServer::start_with(
        "--serve-proxy",
        &["--addr", &upstream.addr],
        "dgw-load proxy listening addr=",
    );
    for addr in [&upstream.addr, &proxy.addr] {
        let summary = drive(addr, &["--mode", "direct"]);
        assert!(answers(&summary) > 0, "{addr}: {summary}");
        assert!(
            summary.contains(", 0 of them denials or errors"),
            "{addr}: {summary}"
        );
    }
}

#[test]
fn the_stdio_echo_server_answers_each_request_line_and_no_notification() {
    use std::io::{BufRead, Write};
    let mut child = dgw_load()
        .arg("--serve-stdio")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("dgw-load runs");
    let mut input = child.stdin.take().unwrap();
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
    ] {
        writeln!(input, "{line}").unwrap();
    }
    drop(input);
    let answers: Vec<serde_json::Value> = std::io::BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert!(child.wait().unwrap().success());
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(answers[0]["id"], 1);
    assert_eq!(answers[0]["result"]["serverInfo"]["name"], "dgw-load-echo");
    assert_eq!(answers[1]["id"], 2);
    assert_eq!(answers[1]["result"]["content"][0]["text"], "hi");
}

/// `--open` (benches/memory.sh) leaves what it says in a real gateway: MCP
/// sessions that a call can use, and reservations the gateway counts open.
#[test]
fn open_leaves_sessions_and_reservations_open_in_the_gateway() {
    let upstream = LoadServer::start("--serve-upstream", "dgw-load upstream listening http=");
    let dir = tempfile::tempdir().unwrap();
    let (root, holder) = (support::seed(1), support::seed(2));
    let config = support::gateway_config(
        dir.path(),
        &[("bench", root.principal_id())],
        &format!(
            "[mcp]\nmax_sessions_per_credential = 10\n\
             [[upstreams]]\nname = \"echo\"\nurl = \"http://{}/mcp\"\n\
             [[upstreams.tools]]\nname = \"echo\"\ncapability = \"docs:read\"\nresource = \"/text\"\n",
            upstream.addr
        ),
    );
    let gateway = support::Gateway::start(&config);
    let token = support::root_token(&root, &holder, &["docs:read:/**"], 1_000, 3600).encode();
    let open = |mode: &str, n: &str| {
        dgw_load()
            .args([
                "--addr",
                &gateway.addr,
                "--token",
                &token,
                "--concurrency",
                "3",
            ])
            .args(["--mode", mode, "--open", n])
            .output()
            .expect("dgw-load runs")
    };
    let sessions = open("mcp", "10");
    assert!(sessions.status.success(), "{sessions:?}");
    assert_eq!(
        String::from_utf8_lossy(&sessions.stdout),
        "opened 10 MCP sessions\n"
    );
    // Every session of this credential is taken: one more is refused.
    let more = open("mcp", "1");
    assert!(!more.status.success());
    assert!(String::from_utf8_lossy(&more.stderr).contains("too_many_sessions"));

    let held = open("authorize", "7");
    assert!(held.status.success(), "{held:?}");
    assert!(
        gateway
            .metrics()
            .lines()
            .any(|l| l == "dgw_reservations_open 7"),
        "{}",
        gateway.metrics()
    );
}
