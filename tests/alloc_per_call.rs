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
//!
//! The trace code a call runs with traces off (issue 37: "no allocation
//! per call") is pinned apart, exactly: none at all.

mod support;

use std::future::Future;
use std::path::Path;
use std::process::Command;
use std::task::{Context, Waker};

use delegate_gateway::logs::{init_logs, LogFormat};
use delegate_gateway::serve::{Extensions, Listening};
use dgw_core::stages;
use dgw_net::trace_context;
use hyper::header::{HeaderMap, HeaderValue};
use support::*;
use tracing::Instrument;

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
    // The subscriber `dgw serve` installs without `[telemetry]`.
    init_logs(LogFormat::Json, None);
    let dir = tempfile::tempdir().unwrap();
    let root = seed(1);
    let upstream = LoadServer::start("--serve-upstream", "dgw-load upstream listening http=");
    let extra = format!(
        "grpc = \"127.0.0.1:0\"\n\
         [budget]\nmax_open_reservations = 1000000000\nsnapshot_interval = \"1h\"\n\
         [mcp]\nmax_sessions_per_credential = 100000\n\
         [[upstreams]]\nname = \"echo\"\nurl = \"http://{}/mcp\"\n\
         [[upstreams.tools]]\nname = \"echo\"\ncapability = \"docs:read\"\nresource = \"/text\"\ncost_microcents = 1\n",
        upstream.addr
    );
    // No budget snapshot in the measured runs: one serializes every open
    // reservation (the authorize runs leave theirs open), a cost of the
    // interval, not of a call, that landed in a run or not by timing.
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

/// What one enforced call runs of the trace code, in its order: the
/// request's span (a caller's `traceparent` present), both request spans
/// around the work, each stage's span with what is recorded on it, a
/// stage around an awaited step, the context for an upstream's headers.
fn one_call_of_trace_code(headers: &HeaderMap) {
    let traced = trace_context::request_span(|| "mcp", headers, "req-1");
    let log = tracing::debug_span!(target: "dgw::request", "request", request_id = "req-1");
    let work = async {
        for stage in [
            dgw_core::stage_span!("credential_verify"),
            dgw_core::stage_span!("capability_match"),
            dgw_core::stage_span!("reserve"),
            dgw_core::stage_span!("upstream_call"),
            dgw_core::stage_span!("settle"),
            dgw_core::stage_span!("audit"),
        ] {
            stages::record_grant(&stage, "delegateos", "bench", Some("del_000000000001"));
            stage.in_scope(|| stages::allowed(&stage));
            std::future::ready(()).instrument(stage.clone()).await;
            stages::denied(&stage, "delegateos", "budget_exceeded");
            stages::decided(&stage, "charged");
            let mut upstream = HeaderMap::new();
            trace_context::inject_headers(&mut upstream);
            assert!(upstream.is_empty() || trace_context::enabled());
        }
    };
    let mut call = std::pin::pin!(trace_context::in_request(work, log, traced));
    assert!(call
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_ready());
}

/// Heap blocks allocated by 1,000 calls' worth of trace code.
fn trace_code_allocations(headers: &HeaderMap) -> u64 {
    let before = dhat::HeapStats::get().total_blocks;
    for _ in 0..1000 {
        one_call_of_trace_code(headers);
    }
    dhat::HeapStats::get().total_blocks - before
}

#[test]
fn trace_code_allocates_nothing_while_traces_are_off() {
    let _profiler = dhat::Profiler::builder().testing().build();
    init_logs(LogFormat::Json, None);
    let mut headers = HeaderMap::new();
    headers.insert(
        "traceparent",
        HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    );
    headers.insert("tracestate", HeaderValue::from_static("vendor=x"));
    assert!(!trace_context::enabled());
    // Once first: the subscriber registers each call site on first use.
    one_call_of_trace_code(&headers);
    let off = trace_code_allocations(&headers);
    assert_eq!(
        off, 0,
        "the trace code allocated {off} blocks in 1,000 calls with traces off"
    );
    // Turned on (the caller's context is parsed), the same code allocates:
    // this count sees the trace code.
    trace_context::enable();
    let on = trace_code_allocations(&headers);
    assert!(on >= 1000, "traces on: only {on} blocks in 1,000 calls");
    eprintln!(
        "trace code per call: 0 allocations off, {:.1} on",
        on as f64 / 1000.0
    );
}
