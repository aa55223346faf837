//! `dgw-load`: a load generator for dgw's fronts. N concurrent clients, each
//! on its own keep-alive connection, send requests for a fixed time, then
//! print throughput and latency percentiles. Loopback only: it refuses other
//! hosts.
//!
//! Modes: `authorize` sends `delegateos/authorize` to `/rpc` (and, with
//! `--settle`, a settle for every grant); `mcp` sends MCP `tools/call` of
//! the `echo` tool to dgw's `/mcp` with the DCT in `Authorization: DCT`
//! on a session (2025-06-18), `mcp2026` the same call as MCP 2026-07-28
//! sends it (no session: the revision's `_meta` and headers on each);
//! `direct` sends the same call straight to an MCP server (the baseline that
//! `mcp` is compared with); `grpc` sends `Authorize` to the gRPC front (and,
//! with `--settle`, `Settle`). `--serve-upstream ADDR` runs instead a minimal,
//! fast Streamable HTTP MCP server offering `echo`, for those two modes
//! (`--serve-stdio` the same on standard input and output);
//! `--serve-floor ADDR` a server that does no work, answering `authorize`
//! and `grpc` modes from memory (benches/floor.sh); `--serve-proxy ADDR`
//! a proxy that does nothing but forward to `--addr` (benches/compare/).
//!
//! By default each client sends its next request as soon as the last is
//! answered (closed loop); `--rate R` instead sends R requests per second in
//! total on a fixed schedule (open loop). `--connections N` lets gRPC clients
//! share N HTTP/2 connections.

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

mod hold;
mod proxy;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What the clients send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    /// `delegateos/authorize` to `/rpc`.
    Authorize,
    /// MCP `tools/call` (`echo`) through dgw's `/mcp`, on a session.
    Mcp,
    /// MCP `tools/call` (`echo`) through dgw's `/mcp` as 2026-07-28
    /// sends it: no session, the revision's `_meta` and headers on each.
    Mcp2026,
    /// MCP `tools/call` (`echo`) straight to the MCP server at `--addr`.
    Direct,
    /// gRPC `Authorize` to the gRPC listener at `--addr`.
    Grpc,
}

/// Drive dgw's fronts with concurrent clients.
#[derive(Debug, Parser)]
#[command(name = "dgw-load")]
struct Args {
    /// The gateway's (or, in `direct` mode, the MCP server's) HTTP address (loopback only).
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    #[arg(long, value_enum, default_value = "authorize")]
    mode: Mode,
    /// Run a fast MCP echo server on this address instead of generating load.
    #[arg(long)]
    serve_upstream: Option<SocketAddr>,
    /// Run a server that does no work on this address instead of generating
    /// load: it answers every HTTP/1.1 POST with a fixed `authorize` result
    /// and every HTTP/2 (gRPC) call with a fixed `AuthorizeResponse`. What
    /// `authorize` and `grpc` modes measure against it is the floor that
    /// the transport, the client and this machine set for each front.
    #[arg(long)]
    serve_floor: Option<SocketAddr>,
    /// Run the echo server on standard input and output instead (a stdio
    /// upstream for dgw, benches/compare/).
    #[arg(long)]
    serve_stdio: bool,
    /// Run the least an HTTP/1.1 proxy can do on this address instead of
    /// generating load: every request sent on to `--addr` and its answer
    /// back, nothing parsed (the floor of a proxy hop, benches/compare/).
    #[arg(long)]
    serve_proxy: Option<SocketAddr>,
    /// The serialized DCT to present (or @FILE).
    #[arg(long, default_value = "")]
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
    /// gRPC only: HTTP/2 connections the clients share (default: one per
    /// client). gRPC clients multiplex calls over a channel's connection;
    /// HTTP/1 cannot, so the other modes always use one per client.
    #[arg(long)]
    connections: Option<usize>,
    /// Instead of measuring, leave N MCP sessions (`--mode mcp`) or N
    /// unsettled reservations (`--mode authorize`) open in the gateway, then
    /// exit (benches/memory.sh).
    #[arg(long)]
    open: Option<u64>,
    /// Open loop: send this many requests per second in total, each client
    /// on a fixed schedule, instead of each client sending its next request
    /// as soon as the last is answered (the default, closed loop).
    #[arg(long)]
    rate: Option<f64>,
}

/// When one client's requests are due.
struct Pace {
    /// Open loop: the next due instant and the interval between requests.
    schedule: Option<(Instant, Duration)>,
    /// Requests that fell due while the client still waited for the
    /// previous answer.
    late: u64,
}

impl Pace {
    /// Client `index` of `clients` at `rate` requests per second in total
    /// (spread evenly over the first interval), or closed loop.
    fn new(rate: Option<f64>, index: usize, clients: usize, start: Instant) -> Self {
        let schedule = rate.map(|r| {
            let every = Duration::from_secs_f64(clients as f64 / r);
            (start + every.mul_f64(index as f64 / clients as f64), every)
        });
        Self { schedule, late: 0 }
    }

    /// Waits until the next request is due and returns the instant its
    /// latency counts from: the moment it is sent or, when it fell due
    /// while the previous answer was still awaited, the moment it was due,
    /// so a slow answer also counts against the requests it held up (no
    /// coordinated omission). The timer's own lateness (tokio's wheel ticks
    /// in milliseconds) is the load generator's, and does not count.
    async fn due(&mut self) -> Instant {
        let Some((next, every)) = &mut self.schedule else {
            return Instant::now();
        };
        let due = *next;
        *next += *every;
        if Instant::now() > due {
            self.late += 1;
            return due;
        }
        tokio::time::sleep_until(due.into()).await;
        Instant::now()
    }
}

struct Stats {
    latencies_us: Vec<u32>,
    errors: u64,
    /// Open loop: requests sent late (see [`Pace::due`]).
    late: u64,
}

fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// Where and how a client posts.
struct Target {
    addr: SocketAddr,
    /// `addr` as the Host header.
    host: String,
    path: &'static str,
    headers: Vec<(&'static str, String)>,
}

/// Posts a JSON message and parses the answer.
async fn post(
    sender: &mut http1::SendRequest<Full<Bytes>>,
    target: &Target,
    body: &Value,
) -> Result<(Option<String>, Value), String> {
    let (session, bytes) = post_bytes(sender, target, Bytes::from(body.to_string())).await?;
    if bytes.is_empty() {
        return Ok((session, Value::Null));
    }
    // A server may answer as a server-sent event stream (agentgateway
    // does): the message is then the first event's `data:`.
    let json = match bytes
        .split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"data:"))
    {
        Some(data) => data.trim_ascii(),
        None => &bytes[..],
    };
    serde_json::from_slice(json)
        .map(|v| (session, v))
        .map_err(|e| e.to_string())
}

/// Whether an answer's text is a JSON-RPC result (not an error), without
/// parsing it: the load generator should spend as little of the shared
/// CPU as it can.
fn is_result(answer: &[u8]) -> bool {
    answer.windows(9).any(|w| w == b"\"result\":")
}

/// Posts bytes already serialized (the hot loop sends the same body every
/// time) and returns the answer's session header and bytes.
async fn post_bytes(
    sender: &mut http1::SendRequest<Full<Bytes>>,
    target: &Target,
    body: Bytes,
) -> Result<(Option<String>, Bytes), String> {
    let mut req = Request::post(target.path)
        .header("host", target.host.as_str())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (k, v) in &target.headers {
        req = req.header(*k, v);
    }
    let req = req.body(Full::new(body)).map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let session = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((session, bytes))
}

/// Opens an MCP session on `target` and returns its ID.
async fn mcp_session(
    sender: &mut http1::SendRequest<Full<Bytes>>,
    target: &Target,
) -> Result<String, String> {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "dgw-load", "version": "1"}}});
    let (session, reply) = post(sender, target, &init).await?;
    let session = session.ok_or_else(|| format!("initialize returned no session: {reply}"))?;
    let with_session = Target {
        addr: target.addr,
        host: target.host.clone(),
        path: target.path,
        headers: vec![("mcp-session-id", session.clone())],
    };
    post(
        sender,
        &with_session,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await?;
    Ok(session)
}

/// A gRPC connection: the `h2` crate's client, shared by the clients on it.
/// Unary calls are written by hand (a length-prefixed protobuf message,
/// `grpc-status` in the trailers) straight onto HTTP/2 streams, without a
/// gRPC stack or hyper's client (which spawns a task per request to send
/// its body), so the load generator spends on each call about what its
/// HTTP/1 clients spend (benches/floor.sh shows both), not a heavier
/// client's share of the cores the gateway also runs on.
type GrpcConnection = h2::client::SendRequest<Bytes>;

async fn grpc_connect(addr: SocketAddr) -> Result<GrpcConnection, String> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("{addr}: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let (sender, conn) = h2::client::handshake(stream)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    Ok(sender)
}

/// A unary call's request: the method's path and the framed message, built
/// once (the hot loop sends the same `Authorize` every time).
struct GrpcRequest {
    uri: hyper::Uri,
    frame: Bytes,
    /// The `authorization` metadata, when the call needs a credential.
    authorization: Option<String>,
}

impl GrpcRequest {
    fn new(addr: SocketAddr, method: &str, message: &impl prost::Message) -> Self {
        let uri = format!("http://{addr}/delegate_gateway.v1.DelegationGateway/{method}")
            .parse()
            .expect("a socket address and a method name make a URI");
        Self {
            uri,
            frame: grpc_frame(message),
            authorization: None,
        }
    }

    /// The call made as the holder of `token` (a settle needs it).
    fn held_by(mut self, token: &str) -> Self {
        self.authorization = Some(format!("DCT {token}"));
        self
    }
}

/// A gRPC message on the wire: uncompressed, length-prefixed.
fn grpc_frame(message: &impl prost::Message) -> Bytes {
    let encoded = message.encode_to_vec();
    let mut frame = Vec::with_capacity(5 + encoded.len());
    frame.push(0); // not compressed
    frame.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
    frame.extend_from_slice(&encoded);
    Bytes::from(frame)
}

/// Binds a server's loopback listener and announces it on stdout as
/// `dgw-load {what}={address}`, the line scripts and tests wait for.
async fn listen(addr: SocketAddr, what: &str) -> Result<tokio::net::TcpListener, String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("{addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    println!("dgw-load {what}={local}");
    Ok(listener)
}

/// One unary call: the answer's message bytes, or the `grpc-status` of a
/// failed call.
async fn grpc_call(sender: &mut GrpcConnection, call: &GrpcRequest) -> Result<Bytes, String> {
    let mut req = Request::post(call.uri.clone())
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(a) = &call.authorization {
        req = req.header("authorization", a.as_str());
    }
    let req = req.body(()).map_err(|e| e.to_string())?;
    std::future::poll_fn(|cx| sender.poll_ready(cx))
        .await
        .map_err(|e| e.to_string())?;
    let (response, mut body) = sender.send_request(req, false).map_err(|e| e.to_string())?;
    body.send_data(call.frame.clone(), true)
        .map_err(|e| e.to_string())?;
    let resp = response.await.map_err(|e| e.to_string())?;
    // A failed call may come as headers alone ("trailers-only").
    let status_in_headers = resp.headers().get("grpc-status").cloned();
    let mut answer = resp.into_body();
    let mut message = bytes::BytesMut::new();
    while let Some(chunk) = answer.data().await {
        let chunk = chunk.map_err(|e| e.to_string())?;
        let _ = answer.flow_control().release_capacity(chunk.len());
        message.extend_from_slice(&chunk);
    }
    let trailers = answer.trailers().await.map_err(|e| e.to_string())?;
    let status = status_in_headers.or_else(|| trailers.and_then(|t| t.get("grpc-status").cloned()));
    match status.as_ref().map(|s| s.as_bytes()) {
        Some(b"0") if message.len() >= 5 => Ok(message.freeze().slice(5..)),
        other => Err(format!("grpc-status {other:?}")),
    }
}

/// A gRPC client sending `Authorize` on a connection it may share.
async fn grpc_client(
    args: Arc<Args>,
    token: Arc<String>,
    mut connection: GrpcConnection,
    mut pace: Pace,
    warm_until: Instant,
    stop_at: Instant,
) -> Result<Stats, String> {
    use delegate_gateway::grpc::pb;
    use prost::Message;
    let authorize = GrpcRequest::new(
        args.addr,
        "Authorize",
        &pb::AuthorizeRequest {
            credential_json: String::new(),
            dct: token.to_string(),
            request: Some(pb::CapabilityRequest {
                namespace: args.namespace.clone(),
                action: args.action.clone(),
                resource: args.resource.clone(),
            }),
            cost_microcents: args.cost,
        },
    );
    let mut stats = Stats {
        latencies_us: Vec::new(),
        errors: 0,
        late: 0,
    };
    loop {
        let started = pace.due().await;
        if started >= stop_at {
            break;
        }
        let reply = grpc_call(&mut connection, &authorize).await;
        let elapsed = started.elapsed();
        if started >= warm_until {
            stats
                .latencies_us
                .push(elapsed.as_micros().min(u32::MAX as u128) as u32);
            if reply.is_err() {
                stats.errors += 1;
            }
        }
        if let (true, Ok(bytes)) = (args.settle, reply) {
            let granted = pb::AuthorizeResponse::decode(bytes).map_err(|e| e.to_string())?;
            let settle = pb::SettleRequest {
                reservation_id: granted.reservation_id,
                actual_microcents: args.cost,
            };
            grpc_call(
                &mut connection,
                &GrpcRequest::new(args.addr, "Settle", &settle).held_by(&token),
            )
            .await?;
        }
    }
    stats.late = pace.late;
    Ok(stats)
}

/// A keep-alive HTTP/1.1 connection to `addr`, its I/O driven by a task.
async fn http_connect(addr: SocketAddr) -> Result<http1::SendRequest<Full<Bytes>>, String> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let (sender, conn) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    Ok(sender)
}

/// Where an HTTP client of `args.mode` posts, with the credential header
/// `mcp` mode presents (`direct` calls the MCP server without one).
fn http_target(args: &Args, token: &str) -> Target {
    let (path, headers) = match args.mode {
        Mode::Authorize => ("/rpc", vec![]),
        Mode::Mcp => ("/mcp", vec![("authorization", format!("DCT {token}"))]),
        Mode::Mcp2026 => (
            "/mcp",
            vec![
                ("authorization", format!("DCT {token}")),
                ("mcp-protocol-version", "2026-07-28".to_owned()),
                ("mcp-method", "tools/call".to_owned()),
                ("mcp-name", "echo".to_owned()),
            ],
        ),
        _ => ("/mcp", vec![]),
    };
    Target {
        addr: args.addr,
        host: args.addr.to_string(),
        path,
        headers,
    }
}

/// The `delegateos/authorize` call `authorize` mode sends, serialized.
fn authorize_call(args: &Args, token: &str) -> Bytes {
    Bytes::from(
        json!({"jsonrpc": "2.0", "id": 1, "method": "delegateos/authorize", "params": {
            "dct": token, "namespace": args.namespace, "action": args.action,
            "resource": args.resource, "costMicrocents": args.cost}})
        .to_string(),
    )
}

/// An HTTP client on its own keep-alive connection (`authorize`, `mcp`, `direct`).
async fn http_client(
    args: Arc<Args>,
    token: Arc<String>,
    mut pace: Pace,
    warm_until: Instant,
    stop_at: Instant,
) -> Result<Stats, String> {
    let mut sender = http_connect(args.addr).await?;
    let mut stats = Stats {
        latencies_us: Vec::new(),
        errors: 0,
        late: 0,
    };
    let mut target = http_target(&args, &token);
    let body = match args.mode {
        Mode::Authorize => authorize_call(&args, &token),
        Mode::Mcp2026 => Bytes::from(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "echo", "arguments": {"text": args.resource},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": {"name": "dgw-load", "version": "1"},
                    "io.modelcontextprotocol/clientCapabilities": {}}}})
            .to_string(),
        ),
        // MCP on a session, directly or through dgw (gRPC never gets here).
        _ => {
            let session = mcp_session(&mut sender, &target).await?;
            target.headers.push(("mcp-session-id", session));
            Bytes::from(
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                    "name": "echo", "arguments": {"text": args.resource}}})
                .to_string(),
            )
        }
    };
    loop {
        let started = pace.due().await;
        if started >= stop_at {
            break;
        }
        let (_, answer) = post_bytes(&mut sender, &target, body.clone()).await?;
        let elapsed = started.elapsed();
        // Parsed only when the reservation is needed (to settle it).
        let granted = match (args.mode, args.settle) {
            (Mode::Authorize, true) => serde_json::from_slice::<Value>(&answer)
                .ok()
                .and_then(|v| v["result"]["reservationId"].as_str().map(str::to_owned)),
            _ => is_result(&answer).then(String::new),
        };
        if started >= warm_until {
            // Every answer counts for latency (a denial is an answer too).
            stats
                .latencies_us
                .push(elapsed.as_micros().min(u32::MAX as u128) as u32);
            if granted.is_none() {
                stats.errors += 1;
            }
        }
        if let (true, Mode::Authorize, Some(id)) = (args.settle, args.mode, granted) {
            let settle = json!({"jsonrpc": "2.0", "id": 2, "method": "delegateos/settle",
                                "params": {"reservationId": id, "actualMicrocents": args.cost,
                                           "dct": token.as_str()}});
            post(&mut sender, &target, &settle).await?;
        }
    }
    stats.late = pace.late;
    Ok(stats)
}

/// The echo server's answer to one message (none to a notification):
/// `initialize`, `tools/list` and `tools/call` of `echo`, from memory.
fn echo_answer(message: &Value) -> Option<Value> {
    let id = message.get("id")?.clone();
    let result = match message["method"].as_str() {
        Some("initialize") => json!({"protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "dgw-load-echo", "version": "1"}}),
        Some("tools/list") => json!({"tools": [{"name": "echo",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}),
        Some("tools/call") => json!({"content": [{"type": "text",
            "text": message["params"]["arguments"]["text"]}]}),
        _ => json!({}),
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// The echo server over stdio (`--serve-stdio`): a JSON-RPC message per
/// line in, an answer per line out, for dgw's stdio upstreams.
async fn serve_stdio() -> Result<(), String> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::stdout();
    while let Some(line) = lines.next_line().await.map_err(|e| e.to_string())? {
        let message: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if let Some(answer) = echo_answer(&message) {
            let mut text = answer.to_string();
            text.push('\n');
            out.write_all(text.as_bytes())
                .await
                .map_err(|e| e.to_string())?;
            out.flush().await.map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// The fast MCP echo server: answers `initialize`, `tools/list` and
/// `tools/call` of `echo` from memory, over one JSON body per POST.
async fn serve_upstream(addr: SocketAddr) -> Result<(), String> {
    use hyper::service::service_fn;
    let listener = listen(addr, "upstream listening http").await?;
    loop {
        let (stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = service_fn(|req: Request<hyper::body::Incoming>| async move {
                let body = req.into_body().collect().await?.to_bytes();
                let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let mut resp = hyper::Response::new(Full::new(match echo_answer(&message) {
                    Some(answer) => Bytes::from(answer.to_string()),
                    None => Bytes::new(),
                }));
                let h = resp.headers_mut();
                h.insert(
                    "content-type",
                    hyper::header::HeaderValue::from_static("application/json"),
                );
                h.insert(
                    "mcp-session-id",
                    hyper::header::HeaderValue::from_static("load"),
                );
                if message.get("id").is_none() {
                    *resp.status_mut() = hyper::StatusCode::ACCEPTED;
                }
                Ok::<_, hyper::Error>(resp)
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The no-work server of `--serve-floor`: answers from memory, over HTTP/1.1
/// (a JSON-RPC `authorize` result) or HTTP/2 (a gRPC `AuthorizeResponse` and
/// `grpc-status: 0` trailers), each the size of the gateway's real answer.
async fn serve_floor(addr: SocketAddr) -> Result<(), String> {
    use delegate_gateway::grpc::pb;
    use http_body_util::{Either, StreamBody};
    use hyper::body::Frame;
    use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
    use hyper::service::service_fn;
    use hyper_util::server::conn::auto;

    let json = Bytes::from(
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "allowed": true, "amountMicrocents": 1, "deadlineMs": 1_795_335_886_479u64,
            "reservationId": "res_41c3250f8745384a00000000", "tenant": "bench",
            "scope": {"capabilities": [{"action": "read", "namespace": "docs", "resource": "/**"}],
                      "chainDepth": 0, "contractId": "ct_000000000001",
                      "delegationId": "del_000000000001", "maxChainDepth": 1,
                      "remainingBudgetMicrocents": 9_000_000_000_000_000u64}}})
        .to_string(),
    );
    let message = pb::AuthorizeResponse {
        reservation_id: "res_41c3250f8745384a00000000".into(),
        amount_microcents: 1,
        deadline_time: Some(prost_types::Timestamp {
            seconds: 1_795_335_886,
            nanos: 479_000_000,
        }),
        scope: Some(pb::AuthorizedScope {
            delegation_id: "del_000000000001".into(),
            contract_id: "ct_000000000001".into(),
            capabilities: vec![pb::Capability {
                namespace: "docs".into(),
                action: "read".into(),
                resource: "/**".into(),
            }],
            remaining_budget_microcents: 9_000_000_000_000_000,
            chain_depth: 0,
            max_chain_depth: 1,
        }),
        tenant: "bench".into(),
    };
    let grpc = grpc_frame(&message);
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));

    let listener = listen(addr, "floor listening addr").await?;
    loop {
        let (stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        let (json, grpc, trailers) = (json.clone(), grpc.clone(), trailers.clone());
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let (json, grpc, trailers) = (json.clone(), grpc.clone(), trailers.clone());
                async move {
                    let is_grpc = req.version() == hyper::Version::HTTP_2;
                    req.into_body().collect().await?;
                    let (body, content_type) = if is_grpc {
                        let frames = [Frame::data(grpc), Frame::trailers(trailers)];
                        let body = StreamBody::new(tokio_stream::iter(
                            frames.map(Ok::<_, std::convert::Infallible>),
                        ));
                        (Either::Left(body), "application/grpc")
                    } else {
                        (Either::Right(Full::new(json)), "application/json")
                    };
                    let mut resp = hyper::Response::new(body);
                    resp.headers_mut()
                        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
                    Ok::<_, hyper::Error>(resp)
                }
            });
            let _ = auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let args = Args::parse();
    for addr in [args.serve_upstream, args.serve_floor, args.serve_proxy]
        .into_iter()
        .flatten()
    {
        if !addr.ip().is_loopback() {
            return Err(format!("{addr} is not a loopback address"));
        }
    }
    if let Some(addr) = args.serve_upstream {
        return serve_upstream(addr).await;
    }
    if args.serve_stdio {
        return serve_stdio().await;
    }
    if let Some(addr) = args.serve_floor {
        return serve_floor(addr).await;
    }
    if let Some(addr) = args.serve_proxy {
        if !args.addr.ip().is_loopback() {
            return Err(format!("{} is not a loopback address", args.addr));
        }
        return proxy::serve(addr, args.addr).await;
    }
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
    let connections = args.connections.unwrap_or(args.concurrency);
    if connections == 0 || connections > args.concurrency {
        return Err("--connections must be between 1 and --concurrency".into());
    }
    if args.mode != Mode::Grpc && connections != args.concurrency {
        return Err("--connections applies to --mode grpc only (HTTP/1 cannot multiplex)".into());
    }
    let mut grpc_connections = Vec::new();
    if args.mode == Mode::Grpc {
        for _ in 0..connections {
            grpc_connections.push(grpc_connect(args.addr).await?);
        }
    }
    if args.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        return Err("--rate must be a positive number of requests per second".into());
    }
    if let Some(n) = args.open {
        return hold::open(Arc::new(args), Arc::new(token), n).await;
    }
    let start = Instant::now();
    let warm_until = start + warmup;
    let stop_at = warm_until + duration;
    let args = Arc::new(args);
    let token = Arc::new(token);
    let tasks: Vec<_> = (0..args.concurrency)
        .map(|i| {
            let (args, token) = (args.clone(), token.clone());
            let grpc = grpc_connections.get(i % connections).cloned();
            let pace = Pace::new(args.rate, i, args.concurrency, start);
            tokio::spawn(async move {
                match grpc {
                    Some(c) => grpc_client(args, token, c, pace, warm_until, stop_at).await,
                    None => http_client(args, token, pace, warm_until, stop_at).await,
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    let (mut errors, mut late) = (0, 0);
    for t in tasks {
        let stats = t.await.map_err(|e| e.to_string())??;
        all.extend(stats.latencies_us);
        errors += stats.errors;
        late += stats.late;
    }
    all.sort_unstable();
    let secs = duration.as_secs_f64();
    println!(
        "{:?}: {} clients on {} connections, {:?}: {} answers ({:.0}/s), {} of them denials or errors; latency p50 {} µs, p99 {} µs, p99.9 {} µs, max {} µs{}",
        args.mode,
        args.concurrency,
        connections,
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
    if let Some(rate) = args.rate {
        println!(
            "open loop at {rate:.0}/s offered: {late} requests fell due before the previous answer came (their latency counts from when they were due)"
        );
    }
    Ok(())
}
