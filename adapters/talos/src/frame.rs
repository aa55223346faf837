//! Secure-channel frames carrying MCP messages (`MCP_MESSAGE`,
//! `MCP_RESPONSE`), as the reference SDKs exchange them: the §3.2 signed
//! envelope fields, signed by the sending peer (`peer_id` is
//! `did:talos:<hex public key>`). A session caches the capabilities its
//! frames carried, so follow-up frames may name theirs by
//! `capability_hash` only; and it keeps the replay cache.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::authorize::{authorize, Context, TalosRequest};
use crate::canonical::jcs;
use crate::capability::Capability;
use crate::denial::{Denied, TalosDenial};
use crate::keys::{decode_signature, self_certifying};
use crate::replay::ReplayCache;

/// A verified frame.
#[derive(Debug, Clone)]
pub struct Frame {
    /// `MCP_MESSAGE` or `MCP_RESPONSE`.
    pub kind: String,
    /// The sending peer's DID.
    pub peer_id: String,
    /// The secure-channel session.
    pub session_id: String,
    /// Unique per session (replay protection).
    pub correlation_id: String,
    /// Unix seconds.
    pub issued_at: i64,
    /// The tool called.
    pub tool: String,
    /// The method called.
    pub method: String,
    /// The capability, when the frame carries one.
    pub capability: Option<Value>,
    /// The capability's hash: checked against the capability carried, or
    /// naming one an earlier frame of the session carried.
    pub capability_hash: Option<String>,
    /// SHA-256 of the request, when given.
    pub request_hash: Option<String>,
    /// SHA-256 of the response, when given.
    pub response_hash: Option<String>,
}

fn invalid(detail: impl Into<String>) -> Denied {
    Denied::new(TalosDenial::InvalidFrame, detail)
}

/// Parses a frame and checks its peer's signature.
pub fn verify(value: &Value) -> Result<Frame, Denied> {
    let Value::Object(raw) = value else {
        return Err(invalid("a frame must be an object"));
    };
    let s = |key: &str| -> Result<String, Denied> {
        raw.get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| invalid(format!("`{key}` must be a string")))
    };
    let opt = |key: &str| raw.get(key).and_then(Value::as_str).map(str::to_owned);
    let kind = s("type")?;
    if s("protocol_version")? != "1" {
        return Err(invalid("protocol_version must be \"1\""));
    }
    let frame = Frame {
        peer_id: s("peer_id")?,
        session_id: s("session_id")?,
        correlation_id: s("correlation_id")?,
        issued_at: raw
            .get("issued_at")
            .and_then(Value::as_i64)
            .ok_or_else(|| invalid("`issued_at` must be an integer"))?,
        tool: s("tool")?,
        method: s("method")?,
        capability: raw.get("capability").cloned(),
        capability_hash: opt("capability_hash"),
        request_hash: opt("request_hash"),
        response_hash: opt("response_hash"),
        kind,
    };
    match frame.kind.as_str() {
        "MCP_MESSAGE" if frame.request_hash.is_none() || frame.capability_hash.is_none() => {
            return Err(invalid(
                "an MCP_MESSAGE must bind its request_hash and capability_hash",
            ))
        }
        "MCP_RESPONSE" if frame.response_hash.is_none() => {
            return Err(invalid("an MCP_RESPONSE must bind its response_hash"))
        }
        "MCP_MESSAGE" | "MCP_RESPONSE" => {}
        other => return Err(invalid(format!("frame type {other:?}"))),
    }
    let key = self_certifying(&frame.peer_id).ok_or_else(|| {
        Denied::new(
            TalosDenial::SignatureInvalid,
            format!("no key in peer_id {}", frame.peer_id),
        )
    })?;
    let sig = raw
        .get("sig")
        .and_then(Value::as_str)
        .and_then(decode_signature)
        .ok_or_else(|| Denied::new(TalosDenial::SignatureInvalid, "missing or malformed sig"))?;
    let mut content: Map<String, Value> = raw.clone();
    content.remove("sig");
    key.verify_strict(&jcs(&Value::Object(content)), &sig)
        .map_err(|_| {
            Denied::new(
                TalosDenial::SignatureInvalid,
                "the peer did not sign this frame",
            )
        })?;
    Ok(frame)
}

/// One secure-channel session's state.
#[derive(Debug, Default)]
pub struct Session {
    capabilities: HashMap<String, Capability>,
    replay: ReplayCache,
}

impl Session {
    /// A session with nothing seen yet.
    pub fn new() -> Self {
        Self {
            capabilities: HashMap::new(),
            replay: ReplayCache::new(),
        }
    }

    /// Accepts an `MCP_MESSAGE` frame: its capability (carried, or cached
    /// by hash from an earlier frame) must authorize `tool/method` (the
    /// frame's `method` is `<tool>/<method>`), and its correlation ID must be new.
    pub fn accept(&mut self, value: &Value, ctx: &Context<'_>) -> Result<Frame, Denied> {
        let frame = verify(value)?;
        let hash = frame.capability_hash.clone().unwrap_or_default();
        let cap = match &frame.capability {
            Some(v) => {
                let cap = Capability::from_value(v)?;
                if !cap.has_hash(&hash) {
                    return Err(Denied::new(
                        TalosDenial::SignatureInvalid,
                        "capability_hash does not match the capability",
                    ));
                }
                cap
            }
            None => self.capabilities.get(&hash).cloned().ok_or_else(|| {
                Denied::new(
                    TalosDenial::NoCapability,
                    "no capability carried or cached for this hash",
                )
            })?,
        };
        let (tool, method) = frame
            .method
            .split_once('/')
            .ok_or_else(|| invalid("method must be <tool>/<method>"))?;
        let request = TalosRequest {
            tool: tool.to_owned(),
            method: method.to_owned(),
            resources: Vec::new(),
        };
        authorize(&cap, &request, ctx)?;
        if !self.replay.record(&frame.session_id, &frame.correlation_id) {
            return Err(Denied::new(
                TalosDenial::Replay,
                "correlation_id already seen",
            ));
        }
        self.capabilities.insert(hash, cap);
        Ok(frame)
    }
}
