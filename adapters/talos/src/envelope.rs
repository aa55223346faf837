//! §3: the MCP envelope. A JSON-RPC request carries `_talos_capability`,
//! `_talos_correlation_id`, `_talos_timestamp`, `_talos_session_id` and
//! `_talos_version` beside `method` and `params` (or, for clients whose SDK
//! cannot add top-level members, inside `params`). The fields are taken out
//! before anything else reads the request, and never forwarded; the
//! `request_hash` is the SHA-256 of the request's JCS bytes without them.

use serde_json::{Map, Value};

use crate::canonical::sha256_hex;
use crate::denial::{Denied, TalosDenial};

/// The field prefix.
pub const PREFIX: &str = "_talos_";

/// A request's Talos fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// `_talos_capability`: the capability, as sent.
    pub capability: Option<Value>,
    /// `_talos_correlation_id`: unique per session (replay protection, §6).
    pub correlation_id: String,
    /// `_talos_timestamp`, when sent.
    pub timestamp: Option<String>,
    /// `_talos_session_id`, when the client names its session.
    pub session_id: Option<String>,
}

fn frame(detail: impl Into<String>) -> Denied {
    Denied::new(TalosDenial::InvalidFrame, detail)
}

/// Takes every `_talos_*` member out of `members`.
fn take_fields(members: &mut Map<String, Value>, into: &mut Map<String, Value>) {
    let keys: Vec<String> = members
        .keys()
        .filter(|k| k.starts_with(PREFIX))
        .cloned()
        .collect();
    for k in keys {
        if let Some(v) = members.remove(&k) {
            into.insert(k, v);
        }
    }
}

/// Takes the envelope out of a JSON-RPC request object (top level and
/// `params`). `Ok(None)` when it has no `_talos_*` field; `INVALID_FRAME`
/// when the fields are malformed, duplicated in both places, of an unknown
/// kind, or of a version other than 1.
pub fn take(request: &mut Map<String, Value>) -> Result<Option<Envelope>, Denied> {
    let mut fields = Map::new();
    take_fields(request, &mut fields);
    if let Some(Value::Object(params)) = request.get_mut("params") {
        let mut inner = Map::new();
        take_fields(params, &mut inner);
        for (k, v) in inner {
            if fields.insert(k.clone(), v).is_some() {
                return Err(frame(format!("{k} is given twice")));
            }
        }
    }
    if fields.is_empty() {
        return Ok(None);
    }
    let text = |fields: &mut Map<String, Value>, key: &str| -> Result<Option<String>, Denied> {
        match fields.remove(key) {
            None => Ok(None),
            Some(Value::String(s)) if !s.is_empty() && s.len() <= 256 => Ok(Some(s)),
            Some(_) => Err(frame(format!("{key} must be a string of 1-256 bytes"))),
        }
    };
    match fields.remove("_talos_version") {
        None => {}
        Some(v) if v == 1 || v == "1" => {}
        Some(v) => return Err(frame(format!("_talos_version {v} is not 1"))),
    }
    let correlation_id = text(&mut fields, "_talos_correlation_id")?
        .ok_or_else(|| frame("_talos_correlation_id is required"))?;
    let timestamp = text(&mut fields, "_talos_timestamp")?;
    let session_id = text(&mut fields, "_talos_session_id")?;
    let capability = fields.remove("_talos_capability");
    if let Some(extra) = fields.keys().next() {
        return Err(frame(format!("unknown field {extra}")));
    }
    Ok(Some(Envelope {
        capability,
        correlation_id,
        timestamp,
        session_id,
    }))
}

/// `request_hash`: SHA-256 (hex) of the request's JCS bytes, Talos fields
/// already taken out.
pub fn request_hash(request: &Map<String, Value>) -> String {
    sha256_hex(&Value::Object(request.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_are_taken_from_either_place_and_checked() {
        let mut r = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "x", "_talos_session_id": "s"},
            "_talos_correlation_id": "c", "_talos_version": 1, "_talos_capability": {"v": "1"}});
        let e = take(r.as_object_mut().unwrap()).unwrap().unwrap();
        assert_eq!(e.correlation_id, "c");
        assert_eq!(e.session_id.as_deref(), Some("s"));
        assert_eq!(
            r,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}})
        );
        for bad in [
            json!({"_talos_version": 2, "_talos_correlation_id": "c"}),
            json!({"_talos_capability": {}}),
            json!({"_talos_correlation_id": 5}),
            json!({"_talos_correlation_id": "c", "_talos_extra": 1}),
            json!({"_talos_correlation_id": "c", "params": {"_talos_correlation_id": "d"}}),
        ] {
            let mut b = bad.clone();
            let e = take(b.as_object_mut().unwrap()).unwrap_err();
            assert_eq!(e.reason, TalosDenial::InvalidFrame, "{bad}");
        }
        let mut plain = json!({"method": "tools/call", "params": {"name": "x"}});
        assert_eq!(take(plain.as_object_mut().unwrap()).unwrap(), None);
    }
}
