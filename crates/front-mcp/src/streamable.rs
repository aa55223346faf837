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
use dgw_core::caller::HolderDigest;
use dgw_front_jsonrpc::{denial_error, RpcError, INVALID_REQUEST, MAX_BATCH, PARSE_ERROR};

pub const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

/// How sessions are opened and kept (`[mcp]`).
#[derive(Debug, Clone)]
pub struct SessionPolicy {
    /// Idle sessions end after this long.
    pub ttl: Duration,
    /// Most sessions open at once.
    pub max: usize,
    /// Whether `initialize` may open a session without a credential.
    pub anonymous: bool,
    /// Idle anonymous sessions end after this long.
    pub anonymous_ttl: Duration,
    /// Most sessions one credential may hold.
    pub per_credential: usize,
}

impl SessionPolicy {
    /// Anonymous sessions may take at most a tenth of the slots, so a flood
    /// of them never locks out clients that present a credential.
    fn anonymous_max(&self) -> usize {
        (self.max / 10).max(1)
    }
}

/// One open session and what it is bound to.
struct Entry {
    session: Arc<Session>,
    used: Instant,
    /// The digest of the credential that opened it (`None`: anonymous).
    owner: Option<HolderDigest>,
    /// The digest of the `Authorization` header it was opened with: every
    /// later request on it must carry the same one.
    header: Option<HolderDigest>,
}

/// Why a session could not be opened or used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SessionRefusal {
    Full,
    AnonymousFull,
    CredentialFull,
    NotFound,
    CredentialMismatch,
}

impl SessionRefusal {
    fn answer(self) -> HttpAnswer {
        let (status, kind, message) = match self {
            SessionRefusal::Full => (
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_sessions",
                "every MCP session slot is in use; try again later",
            ),
            SessionRefusal::AnonymousFull => (
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_sessions",
                "every slot for sessions without a credential is in use; present a DCT",
            ),
            SessionRefusal::CredentialFull => (
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_sessions",
                "this credential holds mcp.max_sessions_per_credential sessions already",
            ),
            SessionRefusal::NotFound => (
                StatusCode::NOT_FOUND,
                "session_not_found",
                "no such session (it ended or expired); initialize again",
            ),
            SessionRefusal::CredentialMismatch => (
                StatusCode::FORBIDDEN,
                "session_credential_mismatch",
                "this session was opened with another Authorization header",
            ),
        };
        HttpAnswer::error(status, RpcError::new(INVALID_REQUEST, kind, message))
    }
}

/// Open sessions, ended after their TTL idle.
pub struct Sessions {
    map: Mutex<HashMap<String, Entry>>,
    policy: SessionPolicy,
}

impl Sessions {
    pub fn new(policy: SessionPolicy) -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            policy,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn ttl(&self, e: &Entry) -> Duration {
        if e.owner.is_some() {
            self.policy.ttl
        } else {
            self.policy.anonymous_ttl
        }
    }

    /// A new session for `owner`, opened with `header`.
    fn create(
        &self,
        owner: Option<HolderDigest>,
        header: Option<HolderDigest>,
    ) -> Result<(String, Arc<Session>), SessionRefusal> {
        let id = dgw_core::random::session_id().map_err(|_| SessionRefusal::Full)?;
        let mut map = self.lock();
        let full = |map: &HashMap<String, Entry>| {
            let anonymous = map.values().filter(|e| e.owner.is_none()).count();
            let same = map
                .values()
                .filter(|e| owner.is_some() && e.owner == owner)
                .count();
            if map.len() >= self.policy.max {
                Some(SessionRefusal::Full)
            } else if owner.is_none() && anonymous >= self.policy.anonymous_max() {
                Some(SessionRefusal::AnonymousFull)
            } else if owner.is_some() && same >= self.policy.per_credential {
                Some(SessionRefusal::CredentialFull)
            } else {
                None
            }
        };
        if full(&map).is_some() {
            map.retain(|_, e| e.used.elapsed() < self.ttl(e));
        }
        if let Some(refusal) = full(&map) {
            return Err(refusal);
        }
        let session = Arc::new(Session::default());
        map.insert(
            id.clone(),
            Entry {
                session: session.clone(),
                used: Instant::now(),
                owner,
                header,
            },
        );
        Ok((id, session))
    }

    /// The live session `id`, if `header` is what it was opened with.
    fn get(&self, id: &str, header: Option<HolderDigest>) -> Result<Arc<Session>, SessionRefusal> {
        let mut map = self.lock();
        let Some(e) = map.get_mut(id) else {
            return Err(SessionRefusal::NotFound);
        };
        if e.used.elapsed() >= self.ttl(e) {
            map.remove(id);
            return Err(SessionRefusal::NotFound);
        }
        check_header(e, header)?;
        e.used = Instant::now();
        Ok(e.session.clone())
    }

    /// Ends a session (see [`Session::end`]) if `header` may.
    fn remove(&self, id: &str, header: Option<HolderDigest>) -> Result<(), SessionRefusal> {
        let entry = {
            let mut map = self.lock();
            check_header(map.get(id).ok_or(SessionRefusal::NotFound)?, header)?;
            map.remove(id).ok_or(SessionRefusal::NotFound)?
        };
        entry.session.end();
        Ok(())
    }
}

fn check_header(e: &Entry, header: Option<HolderDigest>) -> Result<(), SessionRefusal> {
    match (&e.header, header) {
        (None, _) => Ok(()),
        (Some(bound), Some(h)) if bound.matches(&h) => Ok(()),
        _ => Err(SessionRefusal::CredentialMismatch),
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

/// The digest of the request's `Authorization` header, if it has one.
fn header_digest(headers: &HeaderMap) -> Option<HolderDigest> {
    headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(|v| HolderDigest::of(v.trim()))
}

/// The `Authorization` header, for the registry to read a protocol's
/// credential from (`DCT …`, `Bearer motebit:…`); an administrator's
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
    /// `DELETE /mcp`: ends the session, when asked with the credential
    /// that opened it.
    pub fn delete(&self, headers: &HeaderMap) -> StatusCode {
        let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
            return StatusCode::BAD_REQUEST;
        };
        match self.sessions.remove(id, header_digest(headers)) {
            Ok(()) => StatusCode::NO_CONTENT,
            Err(refusal) => refusal.answer().status,
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
        let prefixes = self.proxy.protocols().envelope_prefixes();
        for item in items {
            match Message::parse(item, &prefixes) {
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
                    return HttpAnswer::error(
                        StatusCode::UNAUTHORIZED,
                        RpcError::new(
                            INVALID_REQUEST,
                            "credential_required",
                            "initialize needs a DCT (Authorization: DCT … or _delegateos); this gateway opens no anonymous sessions",
                        ),
                    )
                }
            };
            match self.sessions.create(owner, header_digest(headers)) {
                Ok((id, s)) => {
                    new_session = Some(id);
                    s
                }
                Err(refusal) => return refusal.answer(),
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
                Some(id) => match self.sessions.get(id, header_digest(headers)) {
                    Ok(s) => s,
                    Err(refusal) => return refusal.answer(),
                },
            }
        };
        let caller = Caller {
            session: &session,
            authorization: header_credential(headers),
            headers: Some(headers),
        };
        for message in messages {
            if let Some(answer) = self.proxy.handle(caller, message).await {
                answers.push(answer);
            }
        }
        if let (Some(id), Some(first)) = (&new_session, answers.first()) {
            // An initialize that failed starts no session.
            if first.get("error").is_some() {
                let _ = self.sessions.remove(id, header_digest(headers));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sessions(max: usize, per_credential: usize) -> Sessions {
        Sessions::new(SessionPolicy {
            ttl: Duration::from_secs(60),
            max,
            anonymous: true,
            anonymous_ttl: Duration::from_secs(60),
            per_credential,
        })
    }

    fn kind(r: Result<(String, Arc<Session>), SessionRefusal>) -> (u16, String) {
        let a = r.expect_err("refused").answer();
        let body = a.body.expect("an error body");
        (
            a.status.as_u16(),
            body["error"]["data"]["type"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    }

    /// Each of the three limits refuses with `too_many_sessions`, and
    /// only what it limits.
    #[test]
    fn every_session_limit_refuses_with_too_many_sessions() {
        let (a, b) = (HolderDigest::of("a"), HolderDigest::of("b"));
        // A credential's own share.
        let s = sessions(20, 2);
        s.create(Some(a), None).unwrap();
        s.create(Some(a), None).unwrap();
        assert_eq!(
            kind(s.create(Some(a), None)),
            (429, "too_many_sessions".into())
        );
        s.create(Some(b), None).unwrap();
        // The anonymous tenth (2 of 20).
        s.create(None, None).unwrap();
        s.create(None, None).unwrap();
        assert_eq!(
            kind(s.create(None, None)),
            (503, "too_many_sessions".into())
        );
        // Every slot.
        let s = sessions(2, 5);
        s.create(Some(a), None).unwrap();
        s.create(Some(b), None).unwrap();
        assert_eq!(
            kind(s.create(Some(HolderDigest::of("c")), None)),
            (503, "too_many_sessions".into())
        );
    }
}
