//! Heap allocations per enforced call, pinned (issue 36): an MCP
//! `tools/call` through `/mcp` to an HTTP upstream, a JSON-RPC
//! `delegateos/authorize`, a gRPC `Authorize`. The gateway runs in this
//! process under dhat's counting allocator (every thread: the request's,
//! the audit writer's, the budget journal's, sled's); the clients
//! (`dgw-load`) and the echo upstream are processes of their own, so
//! nothing of theirs is counted. A change that makes any of the three
//! allocate more than its budget below fails here.
//!
//! Calls are counted by the gateway's own metrics, read between the runs
//! (the scrape's own allocations fall outside the counted window). What a
//! run's connections, sessions and the writers' batches cost is shared out
//! over its calls, so the figures move by a few allocations between runs:
//! the budgets leave that room and no more.

mod support;

use std::path::Path;
use std::process::Command;

use delegate_gateway::serve::{Extensions, Listening};
use support::*;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Allocations per call allowed. Measured with this test (debug build) at
/// issue 36's end: MCP 203.6 and 211.6, JSON-RPC 151.7 and 155.3, gRPC
/// 144.4 and 121.9 in two runs on a loaded machine (fewer calls in a run
/// share out more of the background threads' work); before issue 36 the
/// release build made 255 per MCP call and 208 per JSON-RPC authorize
/// (callgrind, docs/performance.md).
const MCP_BUDGET: f64 = 235.0;
const JSONRPC_BUDGET: f64 = 180.0;
const GRPC_BUDGET: f64 = 175.0;

/// Starts the configured gateway in this process.
fn start(config: &Path) -> Listening {
    let config = delegate_gateway::config::Config::load(config).expect("the config loads");
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().expect("a runtime");
        let extensions = Extensions {
            listening: Some(tx),
        };
        if let Err(e) = rt.block_on(delegate_gateway::serve::run_with(config, extensions)) {
            panic!("the gateway stopped: {e}");
        }
    });
    rx.blocking_recv().expect("the gateway listens")
}

/// The gateway's count of `metric` (a Prometheus sample without labels).
fn count(metric: &str) -> u64 {
    let text = delegate_gateway::telemetry::install_metrics(&[])
        .expect("the gateway's recorder")
        .render();
    text.lines()
        .find_map(|l| l.strip_prefix(metric)?.strip_prefix(' '))
        .map_or(0, |v| {
            v.trim().parse::<f64>().expect("a count is a number") as u64
        })
}

/// Runs `dgw-load` against `addr` for `secs` with two clients; every
/// answer must be an allowed call.
fn drive(mode: &str, addr: &str, token: &str, secs: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_dgw-load"))
        .args(["--mode", mode, "--addr", addr, "--token", token])
        .args(["--concurrency", "2", "--duration", secs, "--warmup", "0s"])
        .args(["--resource", "/load/test"])
        .output()
        .expect("dgw-load runs");
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && summary.contains(", 0 of them denials or errors"),
        "{mode}: {summary}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Allocations per call of `mode`, counted by `metric`, over a measured
/// run after a warm-up run (connections, sessions, caches).
fn per_call(mode: &str, addr: &str, token: &str, metric: &str) -> (f64, u64) {
    drive(mode, addr, token, "1s");
    let calls_before = count(metric);
    let before = dhat::HeapStats::get().total_blocks;
    drive(mode, addr, token, "3s");
    let after = dhat::HeapStats::get().total_blocks;
    let calls = count(metric) - calls_before;
    assert!(calls > 50, "{mode}: only {calls} calls counted");
    ((after - before) as f64 / calls as f64, calls)
}

#[test]
fn allocations_per_enforced_call_stay_within_their_budgets() {
    let _profiler = dhat::Profiler::builder()
        .testing()
        .trim_backtraces(Some(1))
        .build();
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let upstream = LoadServer::start("--serve-upstream", "dgw-load upstream listening http=");
    let extra = format!(
        "grpc = \"127.0.0.1:0\"\n\
         [budget]\nmax_open_reservations = 1000000000\n\
         [mcp]\nmax_sessions_per_credential = 100000\n\
         [[upstreams]]\nname = \"echo\"\nurl = \"http://{}/mcp\"\n\
         [[upstreams.tools]]\nname = \"echo\"\ncapability = \"docs:read\"\nresource = \"/text\"\ncost_microcents = 1\n",
        upstream.addr
    );
    let config = gateway_config(dir.path(), &[("bench", root.principal_id())], &extra);
    let gw = start(&config);
    let token = root_token(&root, &seed(2), &["docs:read:/**"], 9_000_000_000_000, 3600).encode();
    let (http, grpc) = (gw.http.to_string(), gw.grpc.unwrap().to_string());

    let results = [
        (
            "MCP tools/call",
            per_call(
                "mcp",
                &http,
                &token,
                "dgw_mcp_gateway_duration_seconds_count",
            ),
            MCP_BUDGET,
        ),
        (
            "JSON-RPC authorize",
            per_call(
                "authorize",
                &http,
                &token,
                "dgw_authorize_duration_seconds_count",
            ),
            JSONRPC_BUDGET,
        ),
        (
            "gRPC Authorize",
            per_call(
                "grpc",
                &grpc,
                &token,
                "dgw_authorize_duration_seconds_count",
            ),
            GRPC_BUDGET,
        ),
    ];
    for (path, (per_call, calls), _) in &results {
        eprintln!("{path}: {per_call:.1} allocations per call over {calls} calls");
    }
    for (path, (per_call, _), budget) in results {
        assert!(
            per_call <= budget,
            "{path}: {per_call:.1} allocations per call, more than its budget of {budget}"
        );
    }
}
