//! The HTTP listener: JSON-RPC at `POST /rpc`, `GET /metrics`, `GET /healthz`,
//! `GET /readyz`, the OAuth protected resource metadata under `[oauth]`,
//! the paths protocols serve themselves (`Hosts::http_paths`), and the
//! operator console under `/ui` when one is mounted ([`Ui`]); body size
//! and time limits; graceful shutdown.

mod ui;

pub use ui::{Ui, UiAnswer, UiRequest, UI_PREFIX};

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, HOST, ORIGIN, WWW_AUTHENTICATE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::Value;
use tokio::net::TcpListener;

use dgw_core::caller::Authenticator;
use dgw_core::caller::Caller;
use dgw_core::gatekeeper::Gatekeeper;
use dgw_core::protocol::{Hosted, HttpRequest, Registry};
use dgw_core::telemetry::Outcome;
use dgw_front_jsonrpc::{auth_error, JsonRpc, RpcError, INTERNAL_ERROR, INVALID_REQUEST};
use dgw_front_mcp::sse::EventBody;
use dgw_front_mcp::streamable::{answer_headers, HeaderDigests, StreamableHttp};
use dgw_net::connections::{ConnState, Limits, Tracker};
use dgw_net::http_guard::HttpGuard;
use dgw_oauth::resource::METADATA_PATH;
use dgw_oauth::server::AuthorizationServer;
use dgw_oauth::{Challenge, ProtectedResource};

/// What the HTTP front needs.
pub struct HttpFront {
    pub rpc: JsonRpc,
    /// MCP over Streamable HTTP at `/mcp`.
    pub mcp: StreamableHttp,
    pub gate: Arc<Gatekeeper>,
    pub metrics: Option<PrometheusHandle>,
    pub max_body_bytes: usize,
    pub request_timeout: Duration,
    pub ready: AtomicBool,
    /// Who is calling, from the `Authorization` header.
    pub auth: Authenticator,
    /// Which `Host` and `Origin` headers are answered.
    pub guard: HttpGuard,
    /// The protocols, for the paths they serve.
    pub protocols: Arc<Registry>,
    /// `[oauth]`: the protected resource metadata is served, and refusals
    /// on `/rpc` and `/mcp` that call for a challenge carry it (401/403 with
    /// `WWW-Authenticate`); none: answered as without OAuth.
    pub oauth: Option<ProtectedResource>,
    /// `[oauth]`'s authorization server: its metadata and token endpoint.
    pub authorization_server: Option<Arc<AuthorizationServer>>,
    /// The operator console at `/ui` (`[console] enabled`).
    pub ui: Option<Arc<dyn Ui>>,
}

/// One body, or an MCP answer's event stream.
type Body = Either<Full<Bytes>, EventBody>;

fn full(bytes: Bytes) -> Body {
    Either::Left(Full::new(bytes))
}

fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    let mut r = Response::new(full(json_bytes(value)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// A JSON value's bytes, serialized straight into a buffer (`to_string`
/// passes every piece through `fmt`).
fn json_bytes(value: &Value) -> Bytes {
    // A `Value` has only string keys: serializing it cannot fail.
    Bytes::from(serde_json::to_vec(value).unwrap_or_default())
}

fn text_response(status: StatusCode, text: String, content_type: &'static str) -> Response<Body> {
    let mut r = Response::new(full(Bytes::from(text)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

impl HttpFront {
    async fn route(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        if let Some(ui) = self.ui.clone().filter(|_| ui::is_ui_path(req.uri().path())) {
            return Box::pin(self.serve_ui(ui, req)).await;
        }
        let headers = req.headers();
        let host = headers
            .get(HOST)
            .map(|v| v.as_bytes())
            .or_else(|| req.uri().authority().map(|a| a.as_str().as_bytes()));
        if let Err(e) = self
            .guard
            .check(host, headers.get(ORIGIN).map(|v| v.as_bytes()))
        {
            return json_response(
                StatusCode::FORBIDDEN,
                &RpcError::new(INVALID_REQUEST, e.kind(), e.to_string()).response(Value::Null),
            );
        }
        match (req.method(), req.uri().path()) {
            // Each boxed: a request's future holds only the route it runs,
            // not the largest of them, so the connection does not copy tens
            // of kilobytes per request (docs/performance.md).
            (&Method::POST, "/rpc") => Box::pin(self.rpc(req)).await,
            (&Method::POST, "/mcp") => Box::pin(self.mcp_post(req)).await,
            (&Method::DELETE, "/mcp") => {
                let digests = connection_digests(req.extensions());
                let status = Box::pin(self.mcp.delete(req.headers(), &digests)).await;
                let mut r = Response::new(full(Bytes::new()));
                *r.status_mut() = status;
                r
            }
            (&Method::GET, "/metrics") => {
                Box::pin(self.gate.refresh_gauges()).await;
                for up in self.mcp.proxy.upstreams().iter() {
                    dgw_core::telemetry::set_upstream_up(&up.name, up.is_ready());
                }
                let text = self
                    .metrics
                    .as_ref()
                    .map(|m| m.render())
                    .unwrap_or_default();
                text_response(StatusCode::OK, text, "text/plain; version=0.0.4")
            }
            (&Method::GET, "/healthz") => {
                text_response(StatusCode::OK, "ok\n".into(), "text/plain")
            }
            (&Method::GET, "/readyz") => {
                if let Err(e) = Box::pin(self.gate.state_ready()).await {
                    text_response(
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!("not ready: {e}\n"),
                        "text/plain",
                    )
                } else if self.ready.load(Ordering::Relaxed) {
                    text_response(StatusCode::OK, "ready\n".into(), "text/plain")
                } else {
                    text_response(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "not ready\n".into(),
                        "text/plain",
                    )
                }
            }
            (&Method::GET, "/mcp") if headers_have_last_event_id(req.headers()) => {
                Box::pin(self.mcp_get(req)).await
            }
            (_, "/rpc" | "/mcp" | "/metrics" | "/healthz" | "/readyz") => text_response(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed\n".into(),
                "text/plain",
            ),
            (&Method::GET, dgw_oauth::server::METADATA_PATH)
                if self.authorization_server.is_some() =>
            {
                let metadata = self
                    .authorization_server
                    .as_ref()
                    .map(|a| a.metadata())
                    .unwrap_or_default();
                let mut r = json_response(StatusCode::OK, &metadata);
                r.headers_mut().insert(
                    hyper::header::ACCESS_CONTROL_ALLOW_ORIGIN,
                    HeaderValue::from_static("*"),
                );
                r
            }
            (&Method::POST, dgw_oauth::server::TOKEN_PATH)
                if self.authorization_server.is_some() =>
            {
                Box::pin(self.oauth_token(req)).await
            }
            (&Method::GET, path) if path.starts_with(METADATA_PATH) && self.oauth.is_some() => {
                match self.oauth.as_ref().and_then(|o| o.metadata_at(path)) {
                    Some(metadata) => {
                        let mut r = json_response(StatusCode::OK, &metadata);
                        // Public by design: browser-based clients read it too.
                        r.headers_mut().insert(
                            hyper::header::ACCESS_CONTROL_ALLOW_ORIGIN,
                            HeaderValue::from_static("*"),
                        );
                        r
                    }
                    None => {
                        text_response(StatusCode::NOT_FOUND, "not found\n".into(), "text/plain")
                    }
                }
            }
            (_, path) if self.protocols.serving_path(path).is_some() => {
                let protocol = self.protocols.serving_path(path).cloned();
                match protocol {
                    Some(p) => Box::pin(self.protocol_endpoint(p, req)).await,
                    None => {
                        text_response(StatusCode::NOT_FOUND, "not found\n".into(), "text/plain")
                    }
                }
            }
            _ => text_response(StatusCode::NOT_FOUND, "not found\n".into(), "text/plain"),
        }
    }

    /// Reads a request body within the size limit, or the error response.
    /// Counted frame by frame, as `Limited` did: a body over the limit is
    /// refused at the first frame past it, and the two failures stay apart
    /// by construction (no type test on a boxed error).
    async fn read_body(&self, mut body: Incoming) -> Result<Bytes, Response<Body>> {
        let limit = self.max_body_bytes;
        let refuse = |status, kind, msg: String| {
            json_response(
                status,
                &RpcError::new(INVALID_REQUEST, kind, msg).response(Value::Null),
            )
        };
        let too_large = || {
            refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                format!("request body exceeds {limit} bytes"),
            )
        };
        let mut read = bytes::BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                refuse(
                    StatusCode::BAD_REQUEST,
                    "body_unreadable",
                    format!("cannot read the request body: {e}"),
                )
            })?;
            if let Ok(data) = frame.into_data() {
                if data.len() > limit.saturating_sub(read.len()) {
                    return Err(too_large());
                }
                read.extend_from_slice(&data);
            }
        }
        Ok(read.freeze())
    }

    /// Runs `work` within the request time limit.
    async fn limited(&self, work: impl Future<Output = Response<Body>>) -> Response<Body> {
        match tokio::time::timeout(self.request_timeout, work).await {
            Ok(r) => r,
            Err(_) => json_response(
                StatusCode::OK,
                &RpcError::new(
                    INTERNAL_ERROR,
                    "timeout",
                    format!("request took longer than {:?}", self.request_timeout),
                )
                .response(Value::Null),
            ),
        }
    }

    async fn rpc(&self, req: Request<Incoming>) -> Response<Body> {
        self.limited(async {
            let (parts, body) = req.into_parts();
            let authorization = parts.headers.get(AUTHORIZATION).map(|v| v.as_bytes());
            let subject = parts
                .extensions
                .get::<PeerSubject>()
                .and_then(|s| s.0.as_deref());
            let caller = match self.auth.caller(authorization, subject) {
                Ok(c) => c,
                Err(e) => {
                    let mut r = json_response(
                        StatusCode::UNAUTHORIZED,
                        &auth_error(&e).response(Value::Null),
                    );
                    let challenge = match &self.oauth {
                        Some(o) => o
                            .www_authenticate("/rpc", &Challenge::InvalidToken)
                            .parse()
                            .unwrap_or(HeaderValue::from_static("Bearer")),
                        None => HeaderValue::from_static("Bearer"),
                    };
                    r.headers_mut().insert(WWW_AUTHENTICATE, challenge);
                    return r;
                }
            };
            let body = match self.read_body(body).await {
                Ok(b) => b,
                Err(r) => return r,
            };
            match self.rpc.handle(&caller, &body).await {
                Some(v) => {
                    let mut r = json_response(StatusCode::OK, &v);
                    self.challenge("/rpc", &v, &mut r);
                    r
                }
                None => {
                    let mut r = Response::new(full(Bytes::new()));
                    *r.status_mut() = StatusCode::NO_CONTENT;
                    r
                }
            }
        })
        .await
    }

    /// A path a protocol serves itself: the body read within the limits,
    /// the caller's admin standing established (a header that is not an
    /// administrator's leaves it anonymous: the protocol may take it as its
    /// own credential), then the protocol's answer.
    async fn protocol_endpoint(&self, protocol: Hosted, req: Request<Incoming>) -> Response<Body> {
        self.limited(async {
            let (parts, body) = req.into_parts();
            let authorization = parts.headers.get(AUTHORIZATION);
            let subject = parts
                .extensions
                .get::<PeerSubject>()
                .and_then(|s| s.0.as_deref());
            let caller = self
                .auth
                .caller(authorization.map(|v| v.as_bytes()), subject)
                .unwrap_or_else(|_| Caller::anonymous());
            let body = match self.read_body(body).await {
                Ok(b) => b,
                Err(r) => return r,
            };
            // Run to its end: a request that outlives the time limit (or a
            // client that goes away) never stops a protocol halfway through
            // a change of state.
            let (method, path) = (parts.method.to_string(), parts.uri.path().to_owned());
            let query = parts.uri.query().map(str::to_owned);
            let authorization = authorization
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let name = protocol.id.name;
            let task = dgw_core::run_to_end::run_to_end(async move {
                protocol
                    .serve_http(HttpRequest {
                        method: &method,
                        path: &path,
                        query: query.as_deref(),
                        authorization: authorization.as_deref(),
                        caller: &caller,
                        body: &body,
                    })
                    .await
            });
            let record = dgw_core::telemetry::RequestRecord::start("http", name);
            let Ok(answer) = task.await else {
                record.end(Outcome::Error);
                return text_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal error\n".into(),
                    "text/plain",
                );
            };
            record.end(match answer.status {
                200..=399 => Outcome::Ok,
                401..=403 | 409 | 422 => Outcome::Denied,
                _ => Outcome::Error,
            });
            json_response(
                StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                &answer.body,
            )
        })
        .await
    }

    /// `GET /mcp` resuming an answer's stream (`Last-Event-ID`).
    async fn mcp_get(&self, req: Request<Incoming>) -> Response<Body> {
        let digests = connection_digests(req.extensions());
        let mut answer = self.mcp.get(req.headers(), &digests).await;
        mcp_response(&mut answer)
    }

    async fn mcp_post(&self, req: Request<Incoming>) -> Response<Body> {
        self.limited(async {
            let (parts, body) = req.into_parts();
            let body = match self.read_body(body).await {
                Ok(b) => b,
                Err(r) => return r,
            };
            let digests = connection_digests(&parts.extensions);
            let mut answer = self.mcp.post(&parts.headers, &body, &digests).await;
            let mut r = mcp_response(&mut answer);
            if let Some(body) = &answer.body {
                self.challenge("/mcp", body, &mut r);
            }
            r
        })
        .await
    }

    /// `POST /oauth/token` (RFC 6749 §3.2): the body within its own limit,
    /// the answer never cached (§5.1).
    async fn oauth_token(&self, req: Request<Incoming>) -> Response<Body> {
        let Some(server) = self.authorization_server.clone() else {
            return text_response(StatusCode::NOT_FOUND, "not found\n".into(), "text/plain");
        };
        self.limited(async {
            let (parts, body) = req.into_parts();
            let header = |name| parts.headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok());
            let body = match http_body_util::Limited::new(body, dgw_oauth::server::MAX_REQUEST_BYTES)
                .collect()
                .await
            {
                Ok(b) => b.to_bytes(),
                Err(_) => {
                    return json_response(
                        StatusCode::BAD_REQUEST,
                        &serde_json::json!({"error": "invalid_request", "error_description": "the request body is too large or unreadable"}),
                    )
                }
            };
            let source = parts.extensions.get::<PeerAddr>().map(|p| p.0.ip());
            let answer = server
                .answer(source, header(CONTENT_TYPE), header(AUTHORIZATION), &body)
                .await;
            let mut r = json_response(
                StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_REQUEST),
                &answer.body,
            );
            let h = r.headers_mut();
            h.insert(hyper::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            h.insert(
                hyper::header::ACCESS_CONTROL_ALLOW_ORIGIN,
                HeaderValue::from_static("*"),
            );
            if answer.status == 429 {
                h.insert(hyper::header::RETRY_AFTER, HeaderValue::from_static("60"));
            }
            if let Some(w) = answer.www_authenticate {
                h.insert(WWW_AUTHENTICATE, HeaderValue::from_static(w));
            }
            r
        })
        .await
    }

    /// Under `[oauth]`, a JSON-RPC answer on `path` refusing for want of a
    /// (good, or wide enough) credential: 401 or 403 with the challenge
    /// naming the metadata (RFC 9728 §5.1, RFC 6750 §3); the body stays the
    /// JSON-RPC error it was.
    fn challenge(&self, path: &str, answer: &Value, response: &mut Response<Body>) {
        let (Some(oauth), Some(challenge)) = (&self.oauth, Challenge::for_rpc_answer(answer))
        else {
            return;
        };
        let Ok(value) = HeaderValue::from_str(&oauth.www_authenticate(path, &challenge)) else {
            return;
        };
        *response.status_mut() =
            StatusCode::from_u16(challenge.status()).unwrap_or(StatusCode::UNAUTHORIZED);
        response.headers_mut().insert(WWW_AUTHENTICATE, value);
    }
}

/// An MCP answer as an HTTP response: its JSON body, or its event stream.
fn mcp_response(answer: &mut dgw_front_mcp::streamable::HttpAnswer) -> Response<Body> {
    let mut headers = hyper::HeaderMap::new();
    answer_headers(&mut headers, answer);
    let body = match answer.events.take() {
        Some(events) => Either::Right(events),
        None => full(answer.body.as_ref().map(json_bytes).unwrap_or_default()),
    };
    let mut r = Response::new(body);
    *r.status_mut() = answer.status;
    *r.headers_mut() = headers;
    r
}

/// Whether a request names the last event it saw (resuming a stream).
fn headers_have_last_event_id(headers: &hyper::HeaderMap) -> bool {
    headers.contains_key("last-event-id")
}

/// The request's connection's memo of `Authorization` digests, or a new
/// one for a request that came without (none does from [`serve`]).
fn connection_digests(extensions: &hyper::http::Extensions) -> Arc<HeaderDigests> {
    extensions
        .get::<Arc<HeaderDigests>>()
        .cloned()
        .unwrap_or_default()
}

/// The subject of the client certificate of the request's connection
/// (mTLS), in the request's extensions.
#[derive(Debug, Clone)]
pub struct PeerSubject(pub Option<String>);

/// The address of the request's connection's peer (the token endpoint's
/// per-source limit), in the request's extensions.
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr(pub SocketAddr);

/// Serves connections until `shutdown` resolves, then stops accepting and
/// waits up to `grace` for in-flight requests. Connections are held to
/// `limits` ([`dgw_net::connections`]); with `tls`, each completes its
/// handshake (within `header_read_timeout`) in its own task, so a slow one
/// never holds up the accept loop.
pub async fn serve(
    listener: TcpListener,
    front: Arc<HttpFront>,
    limits: Limits,
    tls: Option<dgw_net::tls::LiveTls>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    let graceful = GracefulShutdown::new();
    let tracker = Tracker::new(limits);
    let handshake_limit = limits
        .header_read_timeout
        .unwrap_or(Duration::from_secs(10));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            (stream, peer) = tracker.accept(&listener) => {
                let peer: SocketAddr = peer;
                let _ = stream.set_nodelay(true);
                let Some(io) = tracker.track(stream) else {
                    continue;
                };
                let (front, tracker, watcher, tls) =
                    (front.clone(), tracker.clone(), graceful.watcher(), tls.as_ref().map(|t| t.acceptor()));
                tokio::spawn(async move {
                    let state = io.state();
                    let served = match tls {
                        None => serve_connection(TokioIo::new(io), front, tracker, state, (peer, None), watcher).await,
                        Some(acceptor) => {
                            let stream = match tokio::time::timeout(handshake_limit, acceptor.accept(io)).await {
                                Ok(Ok(s)) => s,
                                Ok(Err(e)) => {
                                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                                    return;
                                }
                                Err(_) => {
                                    tracing::debug!(%peer, "TLS handshake timed out");
                                    return;
                                }
                            };
                            let subject = dgw_net::tls::peer_subject(stream.get_ref().1);
                            serve_connection(TokioIo::new(stream), front, tracker, state, (peer, subject), watcher).await
                        }
                    };
                    if let Err(e) = served {
                        tracing::debug!(%peer, error = %e, "connection ended");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    front.ready.store(false, Ordering::Relaxed);
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => tracing::info!("all connections drained"),
        () = tokio::time::sleep(grace) => tracing::warn!(grace = %dgw_core::units::show_duration(grace), "shutdown grace elapsed with connections still open"),
    }
}

/// The front a path belongs to, as traces name it.
fn front_of(path: &str) -> &'static str {
    match path {
        "/rpc" => "jsonrpc",
        "/mcp" => "mcp",
        _ => "http",
    }
}

/// Serves HTTP/1.1 on one accepted (and, with TLS, handshaken) connection.
async fn serve_connection<IO>(
    io: TokioIo<IO>,
    front: Arc<HttpFront>,
    tracker: Tracker,
    state: Arc<ConnState>,
    (peer, subject): (SocketAddr, Option<String>),
    watcher: hyper_util::server::graceful::Watcher,
) -> hyper::Result<()>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let subject = PeerSubject(subject);
    let digests = Arc::new(HeaderDigests::default());
    let service = service_fn(move |mut req: Request<Incoming>| {
        let front = front.clone();
        let busy = tracker.busy(&state);
        req.extensions_mut().insert(subject.clone());
        req.extensions_mut().insert(PeerAddr(peer));
        req.extensions_mut().insert(digests.clone());
        async move {
            let id = dgw_core::request_id::from_header(
                req.headers().get("x-request-id").map(|v| v.as_bytes()),
            );
            // At debug (`[log] level = "info,dgw::request=debug"`): a span per
            // request costs too much to keep on at info.
            let span = tracing::debug_span!(target: "dgw::request", "request", request_id = %id);
            // Exported when traces are on, parented to the caller's trace.
            let front_name = front_of(req.uri().path());
            let traced = dgw_net::trace_context::request_span(
                front_name,
                req.headers().get("traceparent").map(|v| v.as_bytes()),
                req.headers().get("tracestate").map(|v| v.as_bytes()),
            );
            traced.record("request_id", &*id);
            let routed = tracing::Instrument::instrument(front.route(req), traced);
            let mut response = dgw_core::request_id::scope(
                id.clone(),
                front_name,
                tracing::Instrument::instrument(routed, span),
            )
            .await;
            if let Ok(value) = hyper::header::HeaderValue::from_str(&id) {
                response.headers_mut().insert("x-request-id", value);
            }
            drop(busy);
            Ok::<_, Infallible>(response)
        }
    });
    let conn = http1::Builder::new()
        .keep_alive(true)
        .serve_connection(io, service);
    watcher.watch(conn).await
}
