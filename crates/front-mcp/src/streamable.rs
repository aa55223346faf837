//! MCP over Streamable HTTP at `/mcp`: `POST` carries one message (or a
//! batch) and is answered with one JSON body, or, for one request whose
//! caller accepts it, with an event stream carrying what the upstream
//! sends the caller meanwhile ([`sse`]); `DELETE` ends a session; there
//! is no server-initiated stream, so `GET` is 405. A session starts
//! at `initialize` and is named by the `Mcp-Session-Id` header after that.

use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use hyper::StatusCode;
use serde_json::Value;

use super::message::Message;
use super::proxy::{Caller, McpProxy};
use super::relay::Relay;
pub use super::sessions::SessionPolicy;
use super::sessions::SessionRefusal;
pub use super::sessions::Sessions;
use super::sse::{self, Answered, EventBody};
use super::stateless::{self, VERSION_HEADER};
use super::upstream::SUPPORTED_VERSIONS;
use dgw_core::caller::HolderDigest;
use dgw_front_jsonrpc::{denial_error, RpcError, INVALID_REQUEST, MAX_BATCH, PARSE_ERROR};

pub const SESSION_HEADER: &str = "mcp-session-id";

/// An HTTP answer: status, extra headers, JSON body (none for 202/204),
/// or an event stream in its place.
pub struct HttpAnswer {
    pub status: StatusCode,
    pub session_id: Option<String>,
    pub body: Option<Value>,
    pub events: Option<EventBody>,
}

impl HttpAnswer {
    /// An error before any request's id could be read.
    fn error(status: StatusCode, e: RpcError) -> Self {
        Self::error_for(status, e, Value::Null)
    }

    /// An error answering the request whose id is `id`.
    fn error_for(status: StatusCode, e: RpcError, id: Value) -> Self {
        Self {
            status,
            session_id: None,
            body: Some(e.response(id)),
            events: None,
        }
    }
}

/// A session refusal as the client gets it.
fn session_refused(refusal: SessionRefusal, id: &Value) -> HttpAnswer {
    let (status, kind, message) = refusal.parts();
    HttpAnswer::error_for(
        status,
        RpcError::new(INVALID_REQUEST, kind, message),
        id.clone(),
    )
}

/// A session whose credential no longer stands, ended: `404`, so the
/// client initializes again (and hears why it cannot, if it cannot).
fn session_ended(d: &dgw_core::protocol::Denial, id: &Value) -> HttpAnswer {
    HttpAnswer::error_for(
        StatusCode::NOT_FOUND,
        RpcError::new(
            INVALID_REQUEST,
            "session_ended",
            format!(
                "this session has ended: the credential it was opened with is refused now ({}: {})",
                d.kind.as_str(),
                d.detail
            ),
        ),
        id.clone(),
    )
}

/// The digest of the `Authorization` header last presented on one client
/// connection, which a session is bound to. A client sends the same header
/// with every request on its connection, and digesting it (BLAKE2b of about
/// 1.3 KB for a DCT) was 7.6 % of an MCP call's instructions; a different
/// header is digested anew. It lives as long as the connection, and only
/// that connection's requests consult it.
#[derive(Default)]
pub struct HeaderDigests(std::sync::Mutex<Option<(HeaderValue, HolderDigest)>>);

impl HeaderDigests {
    /// The digest of the request's `Authorization` header, if it has one.
    fn of(&self, headers: &HeaderMap) -> Option<HolderDigest> {
        let value = headers.get(hyper::header::AUTHORIZATION)?;
        let text = value.to_str().ok()?;
        let mut last = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((seen, digest)) = &*last {
            if seen == value {
                return Some(*digest);
            }
        }
        let digest = HolderDigest::of(text.trim());
        // A copy: the request's value may share hyper's read buffer.
        if let Ok(copy) = HeaderValue::from_bytes(value.as_bytes()) {
            *last = Some((copy, digest));
        }
        Some(digest)
    }
}

/// The `Authorization` header, for the registry to read a protocol's
/// credential from (`DCT …`, `Bearer <prefix>:…`); an administrator's
/// `Bearer` secret is no protocol's, and the registry finds nothing in it.
pub fn header_credential(headers: &HeaderMap) -> Option<&str> {
    headers.get(hyper::header::AUTHORIZATION)?.to_str().ok()
}

/// The `/mcp` endpoint.
pub struct StreamableHttp {
    pub proxy: Arc<McpProxy>,
    pub sessions: Sessions,
    pub max_body_bytes: usize,
}

impl StreamableHttp {
    /// `GET /mcp` with `Last-Event-ID`: the rest of one of the session's
    /// answer streams, after that event, for the credential that opened
    /// the session ([`super::resume`]). dgw opens no standalone stream.
    pub async fn get(&self, headers: &HeaderMap, digests: &HeaderDigests) -> HttpAnswer {
        let Some(last) = headers.get("last-event-id").and_then(|v| v.to_str().ok()) else {
            return HttpAnswer::error(
                StatusCode::METHOD_NOT_ALLOWED,
                RpcError::new(
                    INVALID_REQUEST,
                    "method_not_allowed",
                    "dgw opens no standalone stream: GET /mcp only resumes a stream (Last-Event-ID)",
                ),
            );
        };
        let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
            return HttpAnswer::error(
                StatusCode::BAD_REQUEST,
                RpcError::new(
                    INVALID_REQUEST,
                    "session_required",
                    "resuming a stream needs the Mcp-Session-Id of the session it belongs to",
                ),
            );
        };
        let session = match self.sessions.find(id, digests.of(headers)).await {
            Ok(s) => s,
            Err(refusal) => return session_refused(refusal, &Value::Null),
        };
        match session.to_caller.replay.resume(last) {
            Some(frames) => HttpAnswer {
                status: StatusCode::OK,
                session_id: None,
                body: None,
                events: Some(EventBody::from_channel(frames)),
            },
            None => HttpAnswer::error(
                StatusCode::NOT_FOUND,
                RpcError::new(
                    INVALID_REQUEST,
                    "unknown_event_id",
                    "Last-Event-ID names no stream of this session",
                ),
            ),
        }
    }

    /// `DELETE /mcp`: ends the session, when asked with the credential
    /// that opened it.
    pub async fn delete(&self, headers: &HeaderMap, digests: &HeaderDigests) -> StatusCode {
        let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
            return StatusCode::BAD_REQUEST;
        };
        match self.sessions.end(id, digests.of(headers)).await {
            Ok(()) => StatusCode::NO_CONTENT,
            Err(refusal) => session_refused(refusal, &Value::Null).status,
        }
    }

    /// `POST /mcp` with its body already read.
    pub async fn post(
        &self,
        headers: &HeaderMap,
        body: &Bytes,
        digests: &HeaderDigests,
    ) -> HttpAnswer {
        let value = match delegateos::canonical::parse_strict(body, self.max_body_bytes) {
            Ok(v) => v,
            Err(e) => {
                return HttpAnswer::error(
                    StatusCode::BAD_REQUEST,
                    RpcError::new(PARSE_ERROR, "parse_error", format!("parse error: {e}")),
                )
            }
        };
        if stateless::is_stateless(headers, &value) {
            return self.post_stateless(headers, value).await;
        }
        if let Some(v) = headers.get(VERSION_HEADER) {
            let known = v
                .to_str()
                .is_ok_and(|v| SUPPORTED_VERSIONS.contains(&v.trim()));
            if !known {
                // Answered under the request's id when it has one.
                let id = value.get("id").cloned().unwrap_or(Value::Null);
                let shown = String::from_utf8_lossy(v.as_bytes());
                let mut refused =
                    stateless::unsupported_version(&shown, &super::stateless_serve::all_versions());
                refused.error.data["type"] = serde_json::json!("unsupported_protocol_version");
                refused.error.code = INVALID_REQUEST;
                return HttpAnswer {
                    status: StatusCode::BAD_REQUEST,
                    session_id: None,
                    body: Some(refused.error.response(id)),
                    events: None,
                };
            }
        }
        let (items, batch) = match value {
            Value::Array(items) if items.is_empty() || items.len() > MAX_BATCH => {
                return HttpAnswer::error(
                    StatusCode::BAD_REQUEST,
                    RpcError::new(
                        INVALID_REQUEST,
                        "invalid_request",
                        format!("a batch holds 1 to {MAX_BATCH} messages"),
                    ),
                )
            }
            Value::Array(items) => (items, true),
            one => (vec![one], false),
        };
        let mut messages = Vec::with_capacity(items.len());
        let mut answers = Vec::new();
        let prefixes = self.proxy.protocols().envelope_prefixes();
        for item in items {
            match Message::parse(item, &prefixes) {
                Ok(m) => messages.push(m),
                Err((id, why)) => answers
                    .push(RpcError::new(INVALID_REQUEST, "invalid_request", why).response(id)),
            }
        }
        // Errors below answer the request when the POST carried one.
        let reply_id = match (batch, messages.first()) {
            (false, Some(Message::Request { id, .. })) => id.clone(),
            _ => Value::Null,
        };
        let mut new_session = None;
        // Read before the credential is: a reload meanwhile is seen at the
        // session's next request.
        let generation = self.proxy.trust_generation();
        let (session, existing) = if messages.iter().any(Message::is_initialize) {
            if batch {
                return HttpAnswer::error_for(
                    StatusCode::BAD_REQUEST,
                    RpcError::new(
                        INVALID_REQUEST,
                        "invalid_request",
                        "initialize must be sent on its own, not in a batch",
                    ),
                    reply_id.clone(),
                );
            }
            // Read from a copy: the proxy's `initialize` takes it again.
            let mut params = match messages.iter().find(|m| m.is_initialize()) {
                Some(Message::Request {
                    params: Some(p), ..
                }) => p.clone(),
                _ => serde_json::Map::new(),
            };
            let id = match &messages[0] {
                Message::Request { id, .. } => id.clone(),
                _ => Value::Null,
            };
            // A refused credential is answered as the proxy answers a
            // refused session credential: a JSON-RPC error, no session.
            let refused = |d: &dgw_core::protocol::Denial| HttpAnswer {
                status: StatusCode::OK,
                session_id: None,
                body: Some(denial_error(d).response(id.clone())),
                events: None,
            };
            let credential = match self
                .proxy
                .initialize_credential(header_credential(headers), Some(headers), &mut params)
                .await
            {
                Ok(c) => c,
                Err(d) => return refused(&d),
            };
            let owner = match credential {
                Some(found) => {
                    // Only a credential in good standing holds a slot.
                    if let Err(d) = self.proxy.standing(&found).await {
                        return refused(&d);
                    }
                    Some(found.credential.holder())
                }
                None if self.sessions.policy.anonymous => None,
                None => {
                    return HttpAnswer::error_for(
                        StatusCode::UNAUTHORIZED,
                        RpcError::new(
                            INVALID_REQUEST,
                            "credential_required",
                            "initialize needs a DCT (Authorization: DCT … or _delegateos); this gateway opens no anonymous sessions",
                        ),
                        reply_id.clone(),
                    )
                }
            };
            match self.sessions.create(owner, digests.of(headers)) {
                Ok((id, s)) => {
                    if let Err(refusal) = self.sessions.publish(&id).await {
                        let _ = self.sessions.remove(&id, digests.of(headers));
                        return session_refused(refusal, &reply_id);
                    }
                    new_session = Some(id);
                    s.stood_at(generation);
                    (s, None)
                }
                Err(refusal) => return session_refused(refusal, &reply_id),
            }
        } else {
            match headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) {
                None => {
                    return HttpAnswer::error_for(
                        StatusCode::BAD_REQUEST,
                        RpcError::new(
                            INVALID_REQUEST,
                            "session_required",
                            "send initialize first, then the Mcp-Session-Id it returns with every request",
                        ),
                        reply_id.clone(),
                    )
                }
                Some(id) => match self.sessions.find(id, digests.of(headers)).await {
                    Ok(s) => (s, Some(id)),
                    Err(refusal) => return session_refused(refusal, &reply_id),
                },
            }
        };
        let caller = Caller {
            session: &session,
            authorization: header_credential(headers),
            headers: Some(headers),
        };
        if let Some(id) = existing {
            if let Err(d) = self.proxy.session_stands(caller).await {
                let _ = self.sessions.end(id, digests.of(headers)).await;
                return session_ended(&d, &reply_id);
            }
        }
        let streams = !batch
            && new_session.is_none()
            && sse::accepts_events(headers)
            && matches!(messages.as_slice(), [Message::Request { .. }]);
        if streams {
            if let Some(message) = messages.pop() {
                return self.answer_or_stream(session, headers, message).await;
            }
        }
        let mut unknown_answer = false;
        for message in messages {
            if let Message::Response { id, reply } = message {
                // The caller's answer to a request dgw relayed to it: only
                // to one dgw sent this session, still outstanding.
                if !session.to_caller.asks.answer(&id, reply) {
                    dgw_core::telemetry::record_mcp_server_request("-", "-", "answer_refused");
                    unknown_answer = true;
                }
                continue;
            }
            if let Some(answer) = self.proxy.handle(caller, message).await {
                answers.push(answer);
            }
        }
        if unknown_answer && answers.is_empty() {
            return HttpAnswer::error(
                StatusCode::BAD_REQUEST,
                RpcError::new(
                    INVALID_REQUEST,
                    "unknown_server_request",
                    "this answers no request dgw sent this session (unknown, already answered, or another session's)",
                ),
            );
        }
        if let (Some(id), Some(first)) = (&new_session, answers.first()) {
            // An initialize that failed starts no session.
            if first.get("error").is_some() {
                let _ = self.sessions.end(id, digests.of(headers)).await;
                new_session = None;
            }
        }
        let body = match (answers.len(), batch) {
            (0, _) => None,
            (_, true) => Some(Value::Array(answers)),
            (_, false) => answers.pop(),
        };
        HttpAnswer {
            status: if body.is_some() {
                StatusCode::OK
            } else {
                StatusCode::ACCEPTED
            },
            session_id: new_session,
            body,
            events: None,
        }
    }

    /// One request of a session revision from a caller that accepts an
    /// event stream: handled with a relay, so what the upstream sends the
    /// caller meanwhile reaches it on this POST's stream.
    async fn answer_or_stream(
        &self,
        session: std::sync::Arc<super::proxy::Session>,
        headers: &HeaderMap,
        message: Message,
    ) -> HttpAnswer {
        let (relay, relayed) = Relay::channel(Some(&session.to_caller));
        let replay = session.to_caller.replay.clone();
        let (proxy, headers) = (self.proxy.clone(), headers.clone());
        let work = relay.scope(async move {
            let caller = Caller {
                session: &session,
                authorization: header_credential(&headers),
                headers: Some(&headers),
            };
            proxy.handle(caller, message).await
        });
        match sse::answer_or_stream(work, relayed, |a| a, Some(replay)).await {
            Answered::Now(body) => HttpAnswer {
                status: if body.is_some() {
                    StatusCode::OK
                } else {
                    StatusCode::ACCEPTED
                },
                session_id: None,
                body,
                events: None,
            },
            Answered::Streaming(events) => HttpAnswer {
                status: StatusCode::OK,
                session_id: None,
                body: None,
                events: Some(events),
            },
        }
    }
}

impl StreamableHttp {
    /// A `POST` of the stateless revision: one request, checked against
    /// its headers, served under the credential of its own
    /// `Authorization` header (no session: each request stands alone).
    async fn post_stateless(&self, headers: &HeaderMap, value: Value) -> HttpAnswer {
        let answer = |status, body| HttpAnswer {
            status,
            session_id: None,
            body: Some(body),
            events: None,
        };
        if value.is_array() {
            return HttpAnswer::error(
                StatusCode::BAD_REQUEST,
                RpcError::new(
                    INVALID_REQUEST,
                    "invalid_request",
                    "a POST of protocol revision 2026-07-28 carries one message, not a batch",
                ),
            );
        }
        let prefixes = self.proxy.protocols().envelope_prefixes();
        let message = match Message::parse(value, &prefixes) {
            Ok(m) => m,
            Err((id, why)) => {
                return answer(
                    StatusCode::BAD_REQUEST,
                    RpcError::new(INVALID_REQUEST, "invalid_request", why).response(id),
                )
            }
        };
        let id = match &message {
            Message::Request { id, .. } => id.clone(),
            _ => Value::Null,
        };
        if let Err(refused) =
            stateless::check(headers, &message, &super::stateless_serve::all_versions())
        {
            return answer(refused.status, refused.error.response(id));
        }
        let authorization = header_credential(headers);
        if !self.sessions.policy.anonymous
            && matches!(message, Message::Request { .. })
            && self
                .proxy
                .protocols()
                .from_header(authorization.unwrap_or_default())
                .is_none()
            && self.proxy.named_header_credential(Some(headers)).is_none()
        {
            return answer(
                StatusCode::UNAUTHORIZED,
                RpcError::new(
                    INVALID_REQUEST,
                    "credential_required",
                    "every request of protocol revision 2026-07-28 carries its credential (Authorization: DCT …); this gateway serves no anonymous callers",
                )
                .response(id),
            );
        }
        let handled = if sse::accepts_events(headers) {
            // Notifications only: servers of this revision ask with
            // input-required results, not requests on the stream.
            let (relay, relayed) = Relay::channel(None);
            let (proxy, headers) = (self.proxy.clone(), headers.clone());
            let work = relay.scope(async move {
                let session = super::proxy::Session::stateless();
                let caller = Caller {
                    session: &session,
                    authorization: header_credential(&headers),
                    headers: Some(&headers),
                };
                proxy.handle_stateless(caller, message).await
            });
            match sse::answer_or_stream(work, relayed, |a| a.map(|(_, body)| body), None).await {
                Answered::Now(handled) => handled,
                Answered::Streaming(events) => {
                    return HttpAnswer {
                        status: StatusCode::OK,
                        session_id: None,
                        body: None,
                        events: Some(events),
                    }
                }
            }
        } else {
            let session = super::proxy::Session::stateless();
            let caller = Caller {
                session: &session,
                authorization,
                headers: Some(headers),
            };
            self.proxy.handle_stateless(caller, message).await
        };
        match handled {
            Some((status, body)) => answer(status, body),
            None => HttpAnswer {
                status: StatusCode::ACCEPTED,
                session_id: None,
                body: None,
                events: None,
            },
        }
    }
}

/// Sets the headers of an MCP answer.
pub fn answer_headers(headers: &mut HeaderMap, answer: &HttpAnswer) {
    if answer.events.is_some() {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        headers.insert(
            hyper::header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache"),
        );
    } else if answer.body.is_some() {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    if let Some(id) = answer
        .session_id
        .as_deref()
        .and_then(|s| HeaderValue::from_str(s).ok())
    {
        headers.insert(SESSION_HEADER, id);
    }
}
