//! `dgw-load --serve-floor`: the no-work server that benches/floor.sh measures
//! each front's floor with must answer both of the load generator's fronts
//! correctly, or the floor would be a floor of errors.

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
