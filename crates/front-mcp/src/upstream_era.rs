//! Which revision dgw speaks to an upstream for one request. Before it
//! initializes an HTTP upstream, dgw asks it `server/discover` (a
//! 2026-07-28 request, the revision's own way to tell the eras apart):
//! an upstream listing 2026-07-28 and a session revision is dual-era, one
//! listing only 2026-07-28 speaks nothing else, anything else speaks only
//! the session revisions ([`Era`]). A session is opened with every upstream
//! but a 2026-07-28-only one, for callers on the session revisions; a
//! 2026-07-28 caller's request goes statelessly to an upstream that speaks
//! that revision, carrying the caller's declared capabilities, so an
//! upstream may answer it with an input-required result the caller
//! fulfils; to a 2026-07-28-only upstream every request goes statelessly,
//! a session caller's declaring no capabilities (it cannot fulfil an
//! input-required result). Otherwise the request goes on the session,
//! without this hop's reserved `_meta`.

use std::borrow::Cow;

use base64::Engine;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Map, Value};

use super::message::{Message, Reply};
use super::stateless::{
    mirrored_params, strip_reserved_meta, META_CLIENT_CAPABILITIES, META_CLIENT_INFO,
    META_PROTOCOL_VERSION, STATELESS_VERSIONS,
};

/// The revision dgw speaks statelessly to upstreams.
pub const UPSTREAM_STATELESS_VERSION: &str = "2026-07-28";

/// Whether a forwarded request came from a caller of the stateless
/// revision (its `_meta` still claims a version: the stateless front
/// leaves the reserved keys for the link to judge).
pub fn from_stateless_caller(message: &Message) -> bool {
    let Message::Request {
        params: Some(p), ..
    } = message
    else {
        return false;
    };
    p.get("_meta")
        .and_then(|m| m.get(META_PROTOCOL_VERSION))
        .and_then(Value::as_str)
        .is_some_and(|v| STATELESS_VERSIONS.contains(&v))
}

/// The message as a session upstream gets it: no reserved `_meta`.
pub fn session_form(message: &Message) -> Cow<'_, Message> {
    match message {
        Message::Request {
            id,
            method,
            params: Some(p),
        } if p.get("_meta").is_some() => {
            let mut params = p.clone();
            strip_reserved_meta(&mut params);
            Cow::Owned(Message::Request {
                id: id.clone(),
                method: method.clone(),
                params: Some(params),
            })
        }
        other => Cow::Borrowed(other),
    }
}

/// `server/discover` as dgw asks it, and its headers.
pub fn discover_probe(id: u64) -> (Message, HeaderMap) {
    let message = Message::Request {
        id: json!(id),
        method: "server/discover".into(),
        params: Some(envelope(Map::new(), json!({}))),
    };
    let headers = headers_for(&message, None);
    (message, headers)
}

/// What an upstream speaks: its answer to `server/discover`, then to
/// `initialize` (a dual-era server may list only 2026-07-28 in its
/// `DiscoverResult`, the SDK's strict modern handler behind a router
/// does: only `initialize` tells it from a 2026-07-28-only one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// Only the session revisions: initialized, spoken to on the session.
    Legacy,
    /// Both: a session for session callers, 2026-07-28 for 2026-07-28
    /// callers.
    DualEra,
    /// Only 2026-07-28 (it refused `initialize`): no session; every
    /// request goes statelessly.
    ModernOnly,
}

/// Whether a `server/discover` result lists 2026-07-28 (as a string in
/// `supportedVersions`; nothing else counts).
pub fn lists_stateless(result: &Value) -> bool {
    result
        .get("supportedVersions")
        .and_then(Value::as_array)
        .is_some_and(|v| v.iter().any(|v| v == UPSTREAM_STATELESS_VERSION))
}

/// A 2026-07-28-only upstream's answer as a session caller may get it: an
/// input-required result (which a session revision has no way to carry,
/// and which the upstream should not give, dgw having declared no
/// capabilities for the caller) becomes a typed error.
pub fn for_session_caller(upstream: &str, reply: Reply) -> Reply {
    let input_required = matches!(&reply, Reply::Result(r)
        if r.get("resultType").and_then(Value::as_str) == Some("input_required"));
    if !input_required {
        return reply;
    }
    tracing::info!(%upstream, "a 2026-07-28 upstream asked a session caller for input; refused");
    Reply::Error(json!({
        "code": -32603,
        "message": format!("upstream {upstream:?} answered with an input-required result, which the caller's protocol revision cannot carry (it speaks only 2026-07-28; dgw declared no client capabilities for this caller)"),
        "data": {"type": "input_required_not_in_revision", "upstream": upstream},
    }))
}

/// `params` with dgw's envelope: the version, dgw as the client, and the
/// capabilities the caller declared (its own `_meta` otherwise kept).
fn envelope(mut params: Map<String, Value>, capabilities: Value) -> Map<String, Value> {
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    if let Value::Object(meta) = meta {
        meta.insert(
            META_PROTOCOL_VERSION.into(),
            json!(UPSTREAM_STATELESS_VERSION),
        );
        meta.insert(
            META_CLIENT_INFO.into(),
            json!({"name": "dgw", "version": env!("CARGO_PKG_VERSION")}),
        );
        meta.insert(META_CLIENT_CAPABILITIES.into(), capabilities);
    }
    params
}

/// A stateless caller's request as a stateless upstream gets it, with the
/// headers that mirror it (`input_schema`: the tool's, for `Mcp-Param-*`).
pub fn stateless_form(message: &Message, input_schema: Option<&Value>) -> (Message, HeaderMap) {
    let Message::Request { id, method, params } = message else {
        return (message.clone(), HeaderMap::new());
    };
    let mut params = params.clone().unwrap_or_default();
    let capabilities = params
        .get("_meta")
        .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
        .filter(|c| c.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    strip_reserved_meta(&mut params);
    let message = Message::Request {
        id: id.clone(),
        method: method.clone(),
        params: Some(envelope(params, capabilities)),
    };
    let headers = headers_for(&message, input_schema);
    (message, headers)
}

/// A value as a header carries it: as it is when it is plain visible
/// ASCII, else in the `=?base64?…?=` form.
fn header_value(text: &str) -> Option<HeaderValue> {
    let sentinel = text.starts_with("=?base64?") && text.ends_with("?=");
    let padded = text.starts_with([' ', '\t']) || text.ends_with([' ', '\t']);
    let visible = text.bytes().all(|b| (0x20..0x7f).contains(&b));
    let plain = !text.is_empty() && visible && !padded && !sentinel;
    if plain {
        HeaderValue::from_str(text).ok()
    } else {
        let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
        HeaderValue::from_str(&format!("=?base64?{encoded}?=")).ok()
    }
}

/// The revision's request headers for `message`.
fn headers_for(message: &Message, input_schema: Option<&Value>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let Message::Request { method, params, .. } = message else {
        return headers;
    };
    headers.insert(
        "mcp-protocol-version",
        HeaderValue::from_static(UPSTREAM_STATELESS_VERSION),
    );
    if let Some(v) = header_value(method) {
        headers.insert("mcp-method", v);
    }
    let field = match method.as_str() {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    if let Some(v) = field
        .and_then(|f| params.as_ref()?.get(f)?.as_str())
        .and_then(header_value)
    {
        headers.insert("mcp-name", v);
    }
    if let (Some(schema), "tools/call") = (input_schema, method.as_str()) {
        let arguments = params.as_ref().and_then(|p| p.get("arguments"));
        for (name, path) in mirrored_params(schema) {
            let mut value = arguments;
            for key in &path {
                value = value.and_then(|v| v.get(key));
            }
            let text = match value {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                _ => continue,
            };
            if let (Ok(name), Some(v)) =
                (HeaderName::from_bytes(name.as_bytes()), header_value(&text))
            {
                headers.insert(name, v);
            }
        }
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(meta: Value) -> Message {
        Message::parse(
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "héllo", "arguments": {"region": "us-west1", "n": 4}, "_meta": meta}}),
            &[],
        )
        .unwrap()
    }

    #[test]
    fn a_stateless_callers_call_goes_with_dgws_envelope_and_the_callers_capabilities() {
        let m = call(json!({META_PROTOCOL_VERSION: "2026-07-28",
            META_CLIENT_INFO: {"name": "caller", "version": "9"},
            META_CLIENT_CAPABILITIES: {"elicitation": {}}, "progressToken": 5}));
        assert!(from_stateless_caller(&m));
        let schema =
            json!({"properties": {"region": {"type": "string", "x-mcp-header": "Region"}}});
        let (out, headers) = stateless_form(&m, Some(&schema));
        let Message::Request {
            params: Some(p), ..
        } = out
        else {
            panic!()
        };
        assert_eq!(p["_meta"][META_CLIENT_INFO]["name"], "dgw");
        assert_eq!(
            p["_meta"][META_CLIENT_CAPABILITIES],
            json!({"elicitation": {}})
        );
        assert_eq!(p["_meta"]["progressToken"], 5);
        assert_eq!(headers["mcp-method"], "tools/call");
        assert_eq!(headers["mcp-name"], "=?base64?aMOpbGxv?=");
        assert_eq!(headers["mcp-param-region"], "us-west1");
        assert_eq!(headers["mcp-protocol-version"], "2026-07-28");
    }

    /// Only a result listing 2026-07-28 as a string makes an upstream a
    /// 2026-07-28 one (whose requests must then work, or it never becomes
    /// ready).
    #[test]
    fn only_a_discover_result_listing_the_revision_counts() {
        assert!(lists_stateless(
            &json!({"supportedVersions": ["2026-07-28"]})
        ));
        assert!(lists_stateless(
            &json!({"supportedVersions": ["2025-11-25", "2026-07-28"]})
        ));
        for liar in [
            json!({"supportedVersions": "2026-07-28"}),
            json!({"supportedVersions": [["2026-07-28"]]}),
            json!({"supportedVersions": ["2026-07-29", "2025-11-25"]}),
            json!({"versions": ["2026-07-28"]}),
            json!(["2026-07-28"]),
            json!(null),
        ] {
            assert!(!lists_stateless(&liar), "{liar}");
        }
    }

    #[test]
    fn an_input_required_result_never_reaches_a_session_caller() {
        let asked = Reply::Result(json!({"resultType": "input_required", "inputRequests": {}}));
        let Reply::Error(e) = for_session_caller("up", asked) else {
            panic!()
        };
        assert_eq!(e["data"]["type"], "input_required_not_in_revision");
        let done = Reply::Result(json!({"resultType": "complete", "content": []}));
        assert!(matches!(for_session_caller("up", done), Reply::Result(_)));
    }

    #[test]
    fn a_session_upstream_gets_no_reserved_meta() {
        let m = call(json!({META_PROTOCOL_VERSION: "2026-07-28", "progressToken": 5}));
        let Message::Request {
            params: Some(p), ..
        } = session_form(&m).into_owned()
        else {
            panic!()
        };
        assert_eq!(p["_meta"], json!({"progressToken": 5}));
        assert!(!from_stateless_caller(&call(json!({"progressToken": 5}))));
    }
}
