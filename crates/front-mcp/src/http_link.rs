//! An upstream MCP server at a Streamable HTTP endpoint: every message is a
//! POST; answers come back as one JSON body or as a server-sent event
//! stream; the session the upstream assigns at `initialize` rides along in
//! `Mcp-Session-Id`.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use hyper::{Request, StatusCode, Uri};
use serde_json::{Map, Value};

use super::auth::HttpCredentials;
use super::conns::{Conns, Lease, SendError};
use super::event_stream::EventStream;
use super::link::{Backoff, Host, Pending, UpstreamError, MAX_MESSAGE_BYTES};
use super::message::{Message, Reply};
use super::relay;
use super::server_requests::Refusal;
use super::upstream_era::{self, Era};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

/// The Streamable HTTP transport of one upstream.
pub struct HttpLink {
    url: Uri,
    /// `Err` when the HTTPS configuration could not be built (an
    /// unreadable `ca_file`): every request then fails with why. Fetches
    /// OAuth tokens.
    client: Result<dgw_net::tls::HttpClient, String>,
    /// The connections the upstream's messages go on (`Err` as `client`).
    conns: Result<Conns, String>,
    session: RwLock<Option<HeaderValue>>,
    protocol_version: RwLock<Option<HeaderValue>>,
    /// Never holds anything: answers on HTTP come back on their own POST.
    unsolicited: Pending,
    /// What the upstream speaks ([`Era`]), or [`NOT_PROBED`].
    era: AtomicU8,
}

const NOT_PROBED: u8 = 0;
const LEGACY: u8 = 1;
const DUAL_ERA: u8 = 2;
const MODERN_ONLY: u8 = 3;

/// What came back for one POST, before it is read.
enum Answer {
    Json(Bytes),
    Events(hyper::body::Incoming),
}

impl HttpLink {
    /// `url` was validated by the config; an `https://` one is verified
    /// against `ca_file`, else the system's roots.
    pub fn new(url: String, ca_file: Option<&std::path::Path>) -> Self {
        let client = dgw_net::tls::http_client(ca_file, None);
        let url: Uri = url.parse().unwrap_or_default();
        Self {
            conns: Conns::new(url.clone(), ca_file),
            url,
            client,
            session: RwLock::new(None),
            protocol_version: RwLock::new(None),
            unsolicited: Pending::default(),
            era: AtomicU8::new(NOT_PROBED),
        }
    }

    pub fn set_protocol_version(&self, version: &str) {
        *self
            .protocol_version
            .write()
            .unwrap_or_else(|p| p.into_inner()) = HeaderValue::from_str(version).ok();
    }

    /// Initializes until the upstream answers, then leaves the rest to
    /// `Upstream::request` (which renews an expired session).
    pub async fn supervise(up: &dyn Host) {
        let mut backoff = Backoff::new();
        loop {
            let started = Instant::now();
            match up.handshake().await {
                Ok(()) => {
                    up.set_ready(true);
                    tracing::info!(upstream = %up.name(), tools = up.tool_count(), "upstream ready");
                    return;
                }
                Err(e) => {
                    let wait = backoff.after(started.elapsed());
                    tracing::warn!(upstream = %up.name(), error = %e, wait = %dgw_core::units::show_duration(wait), "upstream initialization failed; trying again after a pause");
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// One POST presenting `presented`; with OAuth, also the token it
    /// carried (to forget on a 401); and its connection, to hand back once
    /// the answer is read.
    async fn post(
        &self,
        up: &dyn Host,
        message: &Message,
        presented: &HttpCredentials,
        stateless: Option<&hyper::HeaderMap>,
    ) -> Result<
        (
            StatusCode,
            hyper::HeaderMap,
            hyper::body::Incoming,
            Option<std::sync::Arc<str>>,
            Lease<'_>,
        ),
        UpstreamError,
    > {
        let is_initialize = message.is_initialize();
        let client = self
            .client
            .as_ref()
            .map_err(|e| UpstreamError::Unavailable {
                upstream: up.name().to_owned(),
                detail: e.clone(),
            })?;
        let conns = self
            .conns
            .as_ref()
            .map_err(|e| UpstreamError::Unavailable {
                upstream: up.name().to_owned(),
                detail: e.clone(),
            })?;
        let mut req = Request::post(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .body(Full::new(Bytes::from(message.to_json_string())))
            .map_err(|e| UpstreamError::Unavailable {
                upstream: up.name().to_owned(),
                detail: e.to_string(),
            })?;
        // dgw's own credential for this upstream; nothing of the caller's.
        presented.apply(req.headers_mut());
        let mut used = None;
        if let Some(oauth) = &presented.oauth {
            let token = oauth
                .token(client)
                .await
                .map_err(|e| UpstreamError::Unavailable {
                    upstream: up.name().to_owned(),
                    detail: e.to_string(),
                })?;
            let mut v = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                UpstreamError::Unavailable {
                    upstream: up.name().to_owned(),
                    detail: "the token is not a header value".into(),
                }
            })?;
            v.set_sensitive(true);
            req.headers_mut().insert(hyper::header::AUTHORIZATION, v);
            used = Some(token);
        }
        // The request this call serves, for the upstream's own logs, and
        // its trace (when traces are on).
        if let Some(id) = dgw_core::request_id::current() {
            if let Ok(value) = hyper::header::HeaderValue::from_str(&id) {
                req.headers_mut().insert("x-request-id", value);
            }
        }
        dgw_net::trace_context::inject_headers(req.headers_mut());
        if let Some(mirrored) = stateless {
            // No session: the request's own headers say what it is.
            for (name, value) in mirrored {
                req.headers_mut().insert(name, value.clone());
            }
        } else if !is_initialize {
            let headers = req.headers_mut();
            if let Some(s) = self
                .session
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
            {
                headers.insert(SESSION_HEADER, s);
            }
            if let Some(v) = self
                .protocol_version
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
            {
                headers.insert(VERSION_HEADER, v);
            }
        }
        let (resp, lease) = conns.send(req).await.map_err(|e| match e {
            SendError::Connect(detail) => UpstreamError::Unavailable {
                upstream: up.name().to_owned(),
                detail,
            },
            SendError::Send(detail) => UpstreamError::NoAnswer {
                upstream: up.name().to_owned(),
                detail,
            },
        })?;
        let (parts, body) = resp.into_parts();
        Ok((parts.status, parts.headers, body, used, lease))
    }

    async fn answer(
        &self,
        up: &dyn Host,
        message: &Message,
        presented: &HttpCredentials,
        stateless: Option<&hyper::HeaderMap>,
    ) -> Result<Answer, UpstreamError> {
        let is_initialize = message.is_initialize();
        let had_session = self
            .session
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        let (mut status, mut headers, mut body, used, mut lease) =
            self.post(up, message, presented, stateless).await?;
        // A refused OAuth token: fetch a new one and try this call once more.
        if status == StatusCode::UNAUTHORIZED {
            if let (Some(used), Some(oauth)) = (used, &presented.oauth) {
                let _ = read_limited(body).await;
                oauth.refused(&used).await;
                (status, headers, body, _, lease) =
                    self.post(up, message, presented, stateless).await?;
            }
        }
        let no_answer = |detail: String| UpstreamError::NoAnswer {
            upstream: up.name().to_owned(),
            detail,
        };
        if stateless.is_some() && status.is_client_error() {
            // The revision's errors come as JSON-RPC bodies with 4xx
            // (-32021 for a capability the caller did not declare).
            let text = read_limited(body).await.unwrap_or_default();
            let is_rpc_error = serde_json::from_slice::<Value>(&text)
                .is_ok_and(|v| v.get("error").is_some_and(Value::is_object));
            if is_rpc_error {
                return Ok(Answer::Json(text));
            }
            if self.era() == Some(Era::ModernOnly) {
                // Not the revision's error: the upstream no longer speaks
                // it (replaced, or it lied); probe again.
                return Err(UpstreamError::EraChanged {
                    upstream: up.name().to_owned(),
                });
            }
            let shown = String::from_utf8_lossy(&text[..text.len().min(300)]).into_owned();
            return Err(no_answer(format!("HTTP {status}: {shown}")));
        }
        if status == StatusCode::NOT_FOUND && had_session && !is_initialize && stateless.is_none() {
            return Err(UpstreamError::SessionExpired {
                upstream: up.name().to_owned(),
            });
        }
        if !status.is_success() {
            let text = read_limited(body).await.unwrap_or_default();
            let shown = String::from_utf8_lossy(&text[..text.len().min(300)]).into_owned();
            return Err(no_answer(format!("HTTP {status}: {shown}")));
        }
        if is_initialize {
            *self.session.write().unwrap_or_else(|p| p.into_inner()) =
                headers.get(SESSION_HEADER).cloned();
        }
        let is_events = headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if is_events {
            // Its connection closes once the stream ends.
            Ok(Answer::Events(body))
        } else {
            let bytes = read_limited(body)
                .await
                .map_err(|e| no_answer(format!("reading the answer: {e}")))?;
            lease.done();
            Ok(Answer::Json(bytes))
        }
    }

    /// Sends request `id` presenting `presented` and waits up to `timeout`
    /// for its answer: statelessly when the upstream speaks 2026-07-28 and
    /// the caller does, or when it speaks nothing else; else on the
    /// session ([`upstream_era`]).
    pub async fn request(
        &self,
        up: &dyn Host,
        id: u64,
        message: &Message,
        timeout: Duration,
        presented: &HttpCredentials,
    ) -> Result<Reply, UpstreamError> {
        let from_stateless = upstream_era::from_stateless_caller(message);
        let stateless = match self.era() {
            Some(Era::ModernOnly) => true,
            Some(Era::DualEra) => from_stateless,
            Some(Era::Legacy) | None => false,
        };
        if stateless {
            let schema = match message {
                Message::Request {
                    method,
                    params: Some(p),
                    ..
                } if method == "tools/call" => p
                    .get("name")
                    .and_then(Value::as_str)
                    .and_then(|n| up.tool_schema(n)),
                _ => None,
            };
            let (message, headers) = upstream_era::stateless_form(message, schema.as_ref());
            let reply = self
                .exchange(up, id, &message, timeout, presented, Some(&headers))
                .await?;
            return Ok(if from_stateless {
                reply
            } else {
                upstream_era::for_session_caller(up.name(), reply)
            });
        }
        let message = upstream_era::session_form(message);
        self.exchange(up, id, &message, timeout, presented, None)
            .await
    }

    /// What the upstream speaks, once probed.
    pub fn era(&self) -> Option<Era> {
        match self.era.load(Ordering::Acquire) {
            LEGACY => Some(Era::Legacy),
            DUAL_ERA => Some(Era::DualEra),
            MODERN_ONLY => Some(Era::ModernOnly),
            _ => None,
        }
    }

    /// Asks the upstream `server/discover`, the revision's own request,
    /// with its envelope and headers (Versioning, "Backward Compatibility":
    /// on HTTP a client "attempt[s] a modern request and inspect[s] the
    /// body" of the error before falling back): its `DiscoverResult` when
    /// it lists 2026-07-28; `None` for an error, a 4xx without one, an
    /// answer that answers nothing or silence (the revision's stdio rule:
    /// "fall back on any error that is not a recognized modern error").
    /// An upstream that cannot be reached decides nothing (the handshake
    /// fails and is tried again). Until [`Self::set_era`], requests go
    /// as on a session.
    pub async fn probe(
        &self,
        up: &dyn Host,
        timeout: Duration,
    ) -> Result<Option<Map<String, Value>>, UpstreamError> {
        self.era.store(NOT_PROBED, Ordering::Release);
        let (probe, headers) = upstream_era::discover_probe(0);
        let presented = up.credentials();
        match self
            .exchange(up, 0, &probe, timeout, &presented, Some(&headers))
            .await
        {
            Ok(Reply::Result(Value::Object(r))) => {
                Ok(upstream_era::lists_stateless(&Value::Object(r.clone())).then_some(r))
            }
            Ok(_) | Err(UpstreamError::NoAnswer { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// What the handshake found the upstream speaks.
    pub fn set_era(&self, up: &dyn Host, era: Era) {
        tracing::info!(upstream = %up.name(), era = ?era, "what the upstream speaks, by server/discover and initialize");
        let code = match era {
            Era::Legacy => LEGACY,
            Era::DualEra => DUAL_ERA,
            Era::ModernOnly => MODERN_ONLY,
        };
        self.era.store(code, Ordering::Release);
    }

    async fn exchange(
        &self,
        up: &dyn Host,
        id: u64,
        message: &Message,
        timeout: Duration,
        presented: &HttpCredentials,
        stateless: Option<&hyper::HeaderMap>,
    ) -> Result<Reply, UpstreamError> {
        let no_answer = |detail: String| UpstreamError::NoAnswer {
            upstream: up.name().to_owned(),
            detail,
        };
        let exchange = async {
            match self.answer(up, message, presented, stateless).await? {
                Answer::Json(bytes) => {
                    let value: Value = serde_json::from_slice(&bytes)
                        .map_err(|e| no_answer(format!("the answer is not JSON: {e}")))?;
                    let items = match value {
                        Value::Array(items) => items,
                        one => vec![one],
                    };
                    for item in items {
                        if let Some(reply) = self.take_answer(up, id, item).await {
                            return Ok(reply);
                        }
                    }
                    Err(no_answer("the answer does not answer the request".into()))
                }
                Answer::Events(body) => {
                    let mut events = EventStream::new(body);
                    while let Some(data) = events.next().await.map_err(&no_answer)? {
                        match serde_json::from_str::<Value>(&data) {
                            Ok(item) => {
                                if let Some(reply) = self.take_answer(up, id, item).await {
                                    return Ok(reply);
                                }
                            }
                            Err(e) => {
                                tracing::warn!(upstream = %up.name(), error = %e, "an event that is not JSON")
                            }
                        }
                    }
                    Err(no_answer("the event stream ended without an answer".into()))
                }
            }
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(no_answer(format!(
                "no answer within {}",
                dgw_core::units::show_duration(timeout)
            ))),
        }
    }

    /// `subscriptions/listen` (`message`, a 2026-07-28 caller's) on this
    /// 2026-07-28 upstream: each notification on its stream goes to
    /// `each` until the stream ends, with the upstream's answer (`None`
    /// when it closed the stream without one). Only the opening of the
    /// stream is bounded by `timeout`: a listen lasts as long as its
    /// caller (the proxy bounds it).
    pub async fn listen(
        &self,
        up: &dyn Host,
        id: u64,
        message: &Message,
        presented: &HttpCredentials,
        timeout: Duration,
        each: &mut (dyn FnMut(Value) + Send),
    ) -> Result<Option<Reply>, UpstreamError> {
        let no_answer = |detail: String| UpstreamError::NoAnswer {
            upstream: up.name().to_owned(),
            detail,
        };
        let (message, headers) = upstream_era::stateless_form(message, None);
        let opened = tokio::time::timeout(
            timeout,
            self.answer(up, &message, presented, Some(&headers)),
        )
        .await
        .map_err(|_| no_answer("no answer to subscriptions/listen in time".into()))??;
        let answers = |item: &Value| {
            item.get("id").and_then(Value::as_u64) == Some(id) && item.get("method").is_none()
        };
        let reply_of = |item: Value| match Message::parse(item, &[]) {
            Ok(Message::Response { reply, .. }) => Some(reply),
            _ => None,
        };
        match opened {
            Answer::Json(bytes) => {
                let item: Value = serde_json::from_slice(&bytes)
                    .map_err(|e| no_answer(format!("the answer is not JSON: {e}")))?;
                Ok(answers(&item).then(|| reply_of(item)).flatten())
            }
            Answer::Events(body) => {
                let mut events = EventStream::new(body);
                while let Some(data) = events.next().await.map_err(&no_answer)? {
                    let Ok(item) = serde_json::from_str::<Value>(&data) else {
                        continue;
                    };
                    if answers(&item) {
                        return Ok(reply_of(item));
                    }
                    // Notifications only: a request on a listen stream is
                    // not in the revision, and goes nowhere.
                    if item.get("method").is_some() && item.get("id").is_none() {
                        each(item);
                    }
                }
                Ok(None)
            }
        }
    }

    /// The reply when `item` answers request `id`; anything else the
    /// upstream sent along is for the request's caller ([`relay`]) or, if
    /// not about it, handled as unsolicited.
    async fn take_answer(&self, up: &dyn Host, id: u64, item: Value) -> Option<Reply> {
        let answers_it =
            item.get("id").and_then(Value::as_u64) == Some(id) && item.get("method").is_none();
        if answers_it {
            if let Ok(Message::Response { reply, .. }) = Message::parse(item, &[]) {
                return Some(reply);
            }
            return None;
        }
        if self.era() == Some(Era::ModernOnly) && item.get("id").is_some() {
            // The revision's servers ask with input-required results;
            // a request on the stream has nowhere to be answered.
            let method = item.get("method").and_then(Value::as_str).unwrap_or("");
            let _ = relay::refused_outright(up.name(), method, Refusal::Revision);
            return None;
        }
        // On this request's own stream: about the caller who sent it.
        let item = match relay::route(up.name(), up.server_requests(), item).await {
            relay::Routed::Done => return None,
            relay::Routed::Answer(answer) => {
                if let Err(e) = self.send(up, &answer).await {
                    tracing::warn!(upstream = %up.name(), error = %e, "could not answer the upstream's request");
                }
                return None;
            }
            relay::Routed::NotMine(item) => item,
        };
        if let Some(refusal) = up.on_message(&self.unsolicited, item) {
            let _ = self.send(up, &refusal).await;
        }
        None
    }

    pub async fn send(&self, up: &dyn Host, message: &Message) -> Result<(), UpstreamError> {
        if self.era() == Some(Era::ModernOnly) {
            // No session to carry it: in 2026-07-28 a request is cancelled
            // by closing its stream (dropping the exchange does), and
            // servers send no requests to answer.
            return Ok(());
        }
        let (status, _, body, _, lease) = self.post(up, message, &up.credentials(), None).await?;
        if read_limited(body).await.is_ok() {
            lease.done();
        }
        if status.is_success() {
            Ok(())
        } else {
            Err(UpstreamError::Unavailable {
                upstream: up.name().to_owned(),
                detail: format!("HTTP {status}"),
            })
        }
    }
}

async fn read_limited(body: hyper::body::Incoming) -> Result<Bytes, String> {
    Limited::new(body, MAX_MESSAGE_BYTES)
        .collect()
        .await
        .map(|b| b.to_bytes())
        .map_err(|e| e.to_string())
}
