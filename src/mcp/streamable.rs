//! MCP over Streamable HTTP at `/mcp`: `POST` carries one message (or a
//! batch) and is answered with one JSON body; `DELETE` ends a session;
//! there is no server-initiated stream, so `GET` is 405. A session starts
//! at `initialize` and is named by the `Mcp-Session-Id` header after that.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use hyper::StatusCode;
use serde_json::Value;

use super::message::Message;
use super::proxy::{Caller, McpProxy, Session};
use super::upstream::SUPPORTED_VERSIONS;
use crate::jsonrpc::{RpcError, INVALID_REQUEST, MAX_BATCH, PARSE_ERROR};

pub const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

/// Open sessions, ended after `ttl` idle.
pub struct Sessions {
    map: Mutex<HashMap<String, (Arc<Session>, Instant)>>,
    ttl: Duration,
    max: usize,
}

impl Sessions {
    pub fn new(ttl: Duration, max: usize) -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            ttl,
            max,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Arc<Session>, Instant)>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new session; `None` when the table is full of live sessions.
    fn create(&self) -> Option<(String, Arc<Session>)> {
        let id = crate::random::session_id().ok()?;
        let mut map = self.lock();
        if map.len() >= self.max {
            let ttl = self.ttl;
            map.retain(|_, (_, used)| used.elapsed() < ttl);
        }
        if map.len() >= self.max {
            return None;
        }
        let session = Arc::new(Session::default());
        map.insert(id.clone(), (session.clone(), Instant::now()));
        Some((id, session))
    }

    fn get(&self, id: &str) -> Option<Arc<Session>> {
        let mut map = self.lock();
        let ttl = self.ttl;
        match map.get_mut(id) {
            Some((s, used)) if used.elapsed() < ttl => {
                *used = Instant::now();
                Some(s.clone())
            }
            Some(_) => {
                map.remove(id);
                None
            }
            None => None,
        }
    }

    /// Ends a session (see [`Session::end`]); false when there is none.
    fn remove(&self, id: &str) -> bool {
        let Some((session, _)) = self.lock().remove(id) else {
            return false;
        };
        session.end();
        true
    }
}

/// An HTTP answer: status, extra headers, JSON body (none for 202/204).
pub struct HttpAnswer {
    pub status: StatusCode,
    pub session_id: Option<String>,
    pub body: Option<Value>,
}

impl HttpAnswer {
    fn error(status: StatusCode, e: RpcError) -> Self {
        Self {
            status,
            session_id: None,
            body: Some(e.response(Value::Null)),
        }
    }
}

/// The DCT in `Authorization: DCT <token>`, if that is the scheme used.
pub fn header_dct(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(hyper::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("DCT").then(|| token.trim())
}

/// The `/mcp` endpoint.
pub struct StreamableHttp {
    pub proxy: Arc<McpProxy>,
    pub sessions: Sessions,
    pub max_body_bytes: usize,
}

impl StreamableHttp {
    /// `DELETE /mcp`: ends the session.
    pub fn delete(&self, headers: &HeaderMap) -> StatusCode {
        match headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) {
            Some(id) if self.sessions.remove(id) => StatusCode::NO_CONTENT,
            Some(_) => StatusCode::NOT_FOUND,
            None => StatusCode::BAD_REQUEST,
        }
    }

    /// `POST /mcp` with its body already read.
    pub async fn post(&self, headers: &HeaderMap, body: &Bytes) -> HttpAnswer {
        if let Some(v) = headers.get(VERSION_HEADER) {
            let known = v.to_str().is_ok_and(|v| SUPPORTED_VERSIONS.contains(&v));
            if !known {
                return HttpAnswer::error(
                    StatusCode::BAD_REQUEST,
                    RpcError::new(
                        INVALID_REQUEST,
                        "unsupported_protocol_version",
                        format!("MCP-Protocol-Version {v:?} is not one of {SUPPORTED_VERSIONS:?}"),
                    ),
                );
            }
        }
        let value = match delegateos::canonical::parse_strict(body, self.max_body_bytes) {
            Ok(v) => v,
            Err(e) => {
                return HttpAnswer::error(
                    StatusCode::BAD_REQUEST,
                    RpcError::new(PARSE_ERROR, "parse_error", format!("parse error: {e}")),
                )
            }
        };
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
        for item in items {
            match Message::parse(item) {
                Ok(m) => messages.push(m),
                Err((id, why)) => answers
                    .push(RpcError::new(INVALID_REQUEST, "invalid_request", why).response(id)),
            }
        }
        let mut new_session = None;
        let session = if messages.iter().any(Message::is_initialize) {
            if batch {
                return HttpAnswer::error(
                    StatusCode::BAD_REQUEST,
                    RpcError::new(
                        INVALID_REQUEST,
                        "invalid_request",
                        "initialize must be sent on its own, not in a batch",
                    ),
                );
            }
            match self.sessions.create() {
                Some((id, s)) => {
                    new_session = Some(id);
                    s
                }
                None => {
                    return HttpAnswer::error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        RpcError::new(
                            INVALID_REQUEST,
                            "too_many_sessions",
                            "every MCP session slot is in use; try again later",
                        ),
                    )
                }
            }
        } else {
            match headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) {
                None => {
                    return HttpAnswer::error(
                        StatusCode::BAD_REQUEST,
                        RpcError::new(
                            INVALID_REQUEST,
                            "session_required",
                            "send initialize first, then the Mcp-Session-Id it returns with every request",
                        ),
                    )
                }
                Some(id) => match self.sessions.get(id) {
                    Some(s) => s,
                    None => {
                        return HttpAnswer::error(
                            StatusCode::NOT_FOUND,
                            RpcError::new(
                                INVALID_REQUEST,
                                "session_not_found",
                                "no such session (it ended or expired); initialize again",
                            ),
                        )
                    }
                },
            }
        };
        let caller = Caller {
            session: &session,
            header_dct: header_dct(headers),
        };
        for message in messages {
            if let Some(answer) = self.proxy.handle(caller, message).await {
                answers.push(answer);
            }
        }
        if let (Some(id), Some(first)) = (&new_session, answers.first()) {
            // An initialize that failed starts no session.
            if first.get("error").is_some() {
                self.sessions.remove(id);
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
        }
    }
}

/// Sets the headers of an MCP answer.
pub fn answer_headers(headers: &mut HeaderMap, answer: &HttpAnswer) {
    if answer.body.is_some() {
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
