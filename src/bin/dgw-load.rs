//! `dgw-load`: a load generator for dgw's fronts. N concurrent clients, each
//! on its own keep-alive connection, send `delegateos/authorize` (and, with
//! `--settle`, a settle for every grant) for a fixed time, then print
//! throughput and latency percentiles. Loopback only: it refuses other hosts.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Drive dgw's JSON-RPC front with concurrent clients.
#[derive(Debug, Parser)]
#[command(name = "dgw-load")]
struct Args {
    /// The gateway's HTTP address (loopback only).
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// The serialized DCT to present (or @FILE).
    #[arg(long)]
    token: String,
    /// Concurrent clients.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// How long to run, such as 10s.
    #[arg(long, default_value = "10s")]
    duration: String,
    /// Warm-up before measuring.
    #[arg(long, default_value = "2s")]
    warmup: String,
    #[arg(long, default_value = "docs")]
    namespace: String,
    #[arg(long, default_value = "read")]
    action: String,
    #[arg(long, default_value = "/load/test")]
    resource: String,
    /// Cost reserved per request.
    #[arg(long, default_value_t = 1)]
    cost: u64,
    /// Settle every grant (a second request, not counted in the latency).
    #[arg(long)]
    settle: bool,
}

struct Stats {
    latencies_us: Vec<u32>,
    errors: u64,
}

fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

async fn post(
    sender: &mut http1::SendRequest<Full<Bytes>>,
    addr: &SocketAddr,
    body: &Value,
) -> Result<Value, String> {
    let req = Request::post("/rpc")
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    serde_json::from_slice(&bytes).map_err(|e| e.to_string())
}

async fn client(
    args: Arc<Args>,
    token: Arc<String>,
    warm_until: Instant,
    stop_at: Instant,
) -> Result<Stats, String> {
    let stream = tokio::net::TcpStream::connect(args.addr)
        .await
        .map_err(|e| e.to_string())?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let (mut sender, conn) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let mut stats = Stats {
        latencies_us: Vec::new(),
        errors: 0,
    };
    let authorize = json!({"jsonrpc": "2.0", "id": 1, "method": "delegateos/authorize", "params": {
        "dct": token.as_str(), "namespace": args.namespace, "action": args.action,
        "resource": args.resource, "costMicrocents": args.cost}});
    loop {
        let started = Instant::now();
        if started >= stop_at {
            break;
        }
        let reply = post(&mut sender, &args.addr, &authorize).await?;
        let elapsed = started.elapsed();
        let granted = reply["result"]["reservationId"].as_str().map(str::to_owned);
        if started >= warm_until {
            // Every answer counts for latency (a denial is an answer too).
            stats
                .latencies_us
                .push(elapsed.as_micros().min(u32::MAX as u128) as u32);
            if granted.is_none() {
                stats.errors += 1;
            }
        }
        if let (true, Some(id)) = (args.settle, granted) {
            let settle = json!({"jsonrpc": "2.0", "id": 2, "method": "delegateos/settle",
                                "params": {"reservationId": id, "actualMicrocents": args.cost}});
            post(&mut sender, &args.addr, &settle).await?;
        }
    }
    Ok(stats)
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let args = Args::parse();
    if !args.addr.ip().is_loopback() {
        return Err(format!(
            "{} is not a loopback address; dgw-load only targets this machine",
            args.addr
        ));
    }
    let token = match args.token.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("{path}: {e}"))?
            .trim()
            .to_owned(),
        None => args.token.clone(),
    };
    let duration =
        humantime::parse_duration(&args.duration).map_err(|e| format!("--duration: {e}"))?;
    let warmup = humantime::parse_duration(&args.warmup).map_err(|e| format!("--warmup: {e}"))?;
    let start = Instant::now();
    let warm_until = start + warmup;
    let stop_at = warm_until + duration;
    let args = Arc::new(args);
    let token = Arc::new(token);
    let tasks: Vec<_> = (0..args.concurrency)
        .map(|_| tokio::spawn(client(args.clone(), token.clone(), warm_until, stop_at)))
        .collect();
    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let stats = t.await.map_err(|e| e.to_string())??;
        all.extend(stats.latencies_us);
        errors += stats.errors;
    }
    all.sort_unstable();
    let secs = duration.as_secs_f64();
    println!(
        "{} clients, {:?}: {} answers ({:.0}/s), {} of them denials or errors; latency p50 {} µs, p99 {} µs, p99.9 {} µs, max {} µs{}",
        args.concurrency,
        Duration::from_secs_f64(secs),
        all.len(),
        all.len() as f64 / secs,
        errors,
        percentile(&all, 0.50),
        percentile(&all, 0.99),
        percentile(&all, 0.999),
        all.last().copied().unwrap_or(0),
        if args.settle { " (each grant also settled)" } else { "" }
    );
    Ok(())
}
