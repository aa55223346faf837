//! MCP 2026-07-28, the stateless revision, on `/mcp` beside the session
//! revisions: every request carries its protocol version, client info and
//! capabilities in `params._meta`, mirrored into the `MCP-Protocol-Version`,
//! `Mcp-Method` and `Mcp-Name` headers; no `initialize`, no session. This
//! module decides which revision a POST speaks and checks a stateless
//! request's headers against its body ("Server Validation" of the
//! revision's Streamable HTTP transport): a gateway routing on headers
//! must never act on a body that says otherwise.

use base64::Engine;
use hyper::header::HeaderMap;
use hyper::StatusCode;
use serde_json::{json, Map, Value};

use super::message::Message;
use dgw_front_jsonrpc::{RpcError, INVALID_PARAMS};

/// The stateless revisions dgw serves on `/mcp`.
pub const STATELESS_VERSIONS: &[&str] = &["2026-07-28"];

/// `HeaderMismatch`: a mirrored header missing, malformed or disagreeing
/// with the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// `UnsupportedProtocolVersion`.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

pub const VERSION_HEADER: &str = "mcp-protocol-version";
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";

pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// The prefix of the `_meta` keys the revision reserves for this hop.
pub const RESERVED_META_PREFIX: &str = "io.modelcontextprotocol/";

/// Longest mirrored header value read (a tool name is at most 128 bytes, a
/// URI a few KiB; base64 adds a third).
const MAX_HEADER_VALUE: usize = 8 * 1024;

/// A stateless request refused before it is served: the HTTP status and
/// the JSON-RPC error (answered under the request's id).
#[derive(Debug)]
pub struct Refused {
    pub status: StatusCode,
    pub error: RpcError,
}

fn mismatch(message: impl Into<String>) -> Refused {
    Refused {
        status: StatusCode::BAD_REQUEST,
        error: RpcError::new(HEADER_MISMATCH, "header_mismatch", message),
    }
}

/// The `UnsupportedProtocolVersionError`, listing what dgw speaks
/// (`supported`, newest first).
pub fn unsupported_version(requested: &str, supported: &[&str]) -> Refused {
    let mut error = RpcError::new(
        UNSUPPORTED_PROTOCOL_VERSION,
        "unsupported_protocol_version",
        format!(
            "protocol version {:?} is not one dgw speaks",
            requested.chars().take(64).collect::<String>()
        ),
    );
    error.data["supported"] = json!(supported);
    error.data["requested"] = json!(requested.chars().take(64).collect::<String>());
    Refused {
        status: StatusCode::BAD_REQUEST,
        error,
    }
}

/// The protocol version a request's `_meta` claims, if it claims one.
fn claimed_version(params: Option<&Map<String, Value>>) -> Option<&Value> {
    params?
        .get("_meta")?
        .as_object()?
        .get(META_PROTOCOL_VERSION)
}

/// Whether a POST is served statelessly: its `MCP-Protocol-Version` header
/// names a stateless revision, or its body claims a version in `_meta`
/// (versioning, "Backward Compatibility": a request carrying the
/// per-request `_meta` is served statelessly; `initialize` opens a session).
pub fn is_stateless(headers: &HeaderMap, body: &Value) -> bool {
    let header = headers
        .get(VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    if header.is_some_and(|v| STATELESS_VERSIONS.contains(&v)) {
        return true;
    }
    body.get("params")
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(META_PROTOCOL_VERSION))
        .is_some()
}

/// One header's value, trimmed (HTTP allows whitespace around it); more
/// than one of it, or a value that is not visible ASCII, is malformed.
fn header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, Refused> {
    let mut all = headers.get_all(name).iter();
    let Some(first) = all.next() else {
        return Ok(None);
    };
    if all.next().is_some() {
        return Err(mismatch(format!("{name} is given more than once")));
    }
    if first.len() > MAX_HEADER_VALUE {
        return Err(mismatch(format!("{name} is over {MAX_HEADER_VALUE} bytes")));
    }
    let text = first
        .to_str()
        .map_err(|_| mismatch(format!("{name} holds characters outside visible ASCII")))?;
    Ok(Some(text.trim_matches([' ', '\t'])))
}

/// A mirrored value as the client meant it: `=?base64?…?=` decoded (the
/// revision's "Value Encoding"), anything else literal.
fn decoded(name: &str, value: &str) -> Result<String, Refused> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        None => Ok(value.to_owned()),
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| mismatch(format!("{name} is not valid base64 of UTF-8 text"))),
    }
}

/// Checks a stateless message against its headers: the version in the
/// header and in `_meta` (present, equal, spoken by dgw), `Mcp-Method`
/// equal to `method`, and `Mcp-Name` equal to `params.name` (`tools/call`,
/// `prompts/get`) or `params.uri` (`resources/read`).
/// `supported`: every version dgw speaks, for the error listing them.
pub fn check(headers: &HeaderMap, message: &Message, supported: &[&str]) -> Result<(), Refused> {
    let (method, params) = match message {
        Message::Request { method, params, .. } => (method, params.as_ref()),
        // A notification's headers are not defined by the revision.
        Message::Notification { .. } => return Ok(()),
        Message::Response { .. } => {
            return Err(Refused {
                status: StatusCode::BAD_REQUEST,
                error: RpcError::new(
                    dgw_front_jsonrpc::INVALID_REQUEST,
                    "invalid_request",
                    "a client sends no responses in this revision",
                ),
            })
        }
    };
    let in_header = header(headers, VERSION_HEADER)?
        .ok_or_else(|| mismatch("MCP-Protocol-Version is required on every request"))?;
    let in_body = match claimed_version(params) {
        Some(Value::String(v)) => v.as_str(),
        Some(_) => {
            return Err(Refused {
                status: StatusCode::BAD_REQUEST,
                error: RpcError::new(
                    INVALID_PARAMS,
                    "invalid_params",
                    format!("_meta[{META_PROTOCOL_VERSION:?}] must be a string"),
                ),
            })
        }
        None => {
            return Err(Refused {
                status: StatusCode::BAD_REQUEST,
                error: RpcError::new(
                    INVALID_PARAMS,
                    "invalid_params",
                    format!("a request of this revision carries its protocol version in params._meta[{META_PROTOCOL_VERSION:?}]"),
                ),
            })
        }
    };
    let meta = params
        .and_then(|p| p.get("_meta"))
        .and_then(Value::as_object);
    if !meta
        .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
        .is_some_and(Value::is_object)
    {
        return Err(Refused {
            status: StatusCode::BAD_REQUEST,
            error: RpcError::new(
                INVALID_PARAMS,
                "invalid_params",
                format!("a request of this revision declares its capabilities in params._meta[{META_CLIENT_CAPABILITIES:?}] (an object)"),
            ),
        });
    }
    if meta
        .and_then(|m| m.get(META_CLIENT_INFO))
        .is_some_and(|i| !i.is_object())
    {
        return Err(Refused {
            status: StatusCode::BAD_REQUEST,
            error: RpcError::new(
                INVALID_PARAMS,
                "invalid_params",
                format!("params._meta[{META_CLIENT_INFO:?}] must be an object"),
            ),
        });
    }
    if in_header != in_body {
        return Err(mismatch(format!(
            "MCP-Protocol-Version {:?} does not match _meta's {:?}",
            in_header.chars().take(64).collect::<String>(),
            in_body.chars().take(64).collect::<String>()
        )));
    }
    if !STATELESS_VERSIONS.contains(&in_body) {
        return Err(unsupported_version(in_body, supported));
    }
    match header(headers, METHOD_HEADER)? {
        None => return Err(mismatch("Mcp-Method is required on every request")),
        Some(m) if m != method => {
            return Err(mismatch(format!(
                "Mcp-Method {:?} does not match the body's method {:?}",
                m.chars().take(128).collect::<String>(),
                method.chars().take(128).collect::<String>()
            )))
        }
        Some(_) => {}
    }
    let named = match method.as_str() {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    let in_header = header(headers, NAME_HEADER)?;
    if let Some(field) = named {
        let in_body = params.and_then(|p| p.get(field)).and_then(Value::as_str);
        let Some(in_header) = in_header else {
            return Err(mismatch(format!("Mcp-Name is required on {method}")));
        };
        if Some(decoded("Mcp-Name", in_header)?.as_str()) != in_body {
            return Err(mismatch(format!(
                "Mcp-Name does not match the body's params.{field}"
            )));
        }
    }
    Ok(())
}

/// The arguments a tool's input schema mirrors into headers: each
/// property annotated `x-mcp-header`, as (header name lowercased, the
/// chain of `properties` keys leading to it). Nested objects are walked
/// to a bounded depth.
pub fn mirrored_params(input_schema: &Value) -> Vec<(String, Vec<String>)> {
    fn walk(schema: &Value, path: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            return;
        };
        if path.len() >= 8 {
            return;
        }
        for (key, prop) in props {
            path.push(key.clone());
            if let Some(name) = prop.get("x-mcp-header").and_then(Value::as_str) {
                out.push((
                    format!("mcp-param-{}", name.to_ascii_lowercase()),
                    path.clone(),
                ));
            }
            walk(prop, path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(input_schema, &mut Vec::new(), &mut out);
    out
}

/// Checks the `Mcp-Param-*` headers of a `tools/call` against the
/// arguments they mirror ("Custom Headers from Tool Parameters"): a value
/// present in the arguments needs its header, equal after decoding
/// (numbers compared as numbers); a header that is malformed is refused.
pub fn check_params(
    headers: &HeaderMap,
    mirrored: &[(String, Vec<String>)],
    arguments: Option<&Map<String, Value>>,
) -> Result<(), Refused> {
    for (name, path) in mirrored {
        let mut value = arguments.map(|a| Value::Object(a.clone()));
        for key in path {
            value = value.and_then(|v| v.get(key).cloned());
        }
        let in_header = header(headers, name)?
            .map(|h| decoded(name, h))
            .transpose()?;
        let value = match value {
            None | Some(Value::Null) => continue,
            Some(v) => v,
        };
        let Some(in_header) = in_header else {
            return Err(mismatch(format!(
                "{name} is required: the tool mirrors that argument into it"
            )));
        };
        let equal = match &value {
            Value::String(s) => *s == in_header,
            Value::Bool(b) => in_header == if *b { "true" } else { "false" },
            Value::Number(n) => in_header
                .trim()
                .parse::<f64>()
                .ok()
                .zip(n.as_f64())
                .is_some_and(|(h, b)| h == b),
            _ => false,
        };
        if !equal {
            return Err(mismatch(format!(
                "{name} does not match the argument it mirrors"
            )));
        }
    }
    Ok(())
}

/// The reserved `_meta` keys of this hop (version, client info,
/// capabilities, log level) taken out of forwarded params: dgw is the
/// upstream's client and declares its own.
pub fn strip_reserved_meta(params: &mut Map<String, Value>) {
    if let Some(Value::Object(meta)) = params.get_mut("_meta") {
        meta.retain(|k, _| !k.starts_with(RESERVED_META_PREFIX));
        if meta.is_empty() {
            params.remove("_meta");
        }
    }
}

/// Gives a result what the revision requires of it: `resultType`
/// (`complete` unless the result says otherwise) and dgw's identity in
/// `_meta`.
pub fn complete_result(result: &mut Value) {
    let Value::Object(r) = result else {
        return;
    };
    r.entry("resultType").or_insert_with(|| json!("complete"));
    let meta = r.entry("_meta").or_insert_with(|| json!({}));
    if let Value::Object(meta) = meta {
        meta.insert(META_SERVER_INFO.into(), server_info());
    }
}

/// dgw as it names itself.
pub fn server_info() -> Value {
    json!({"name": "dgw", "title": "delegate-gateway", "version": env!("CARGO_PKG_VERSION")})
}

/// The HTTP status of an error answer to a stateless request: 404 for a
/// method dgw does not serve in this revision, 400 for the revision's own
/// request errors, 200 otherwise (the error is the JSON-RPC answer).
pub fn error_status(code: i64) -> StatusCode {
    match code {
        dgw_front_jsonrpc::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        HEADER_MISMATCH | UNSUPPORTED_PROTOCOL_VERSION | -32021 => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn request(method: &str, params: Value) -> Message {
        Message::parse(
            json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}),
            &[],
        )
        .unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    const ALL: &[&str] = &["2026-07-28", "2025-11-25"];

    fn meta() -> Value {
        json!({META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}})
    }

    fn code(r: Result<(), Refused>) -> i64 {
        r.unwrap_err().error.code
    }

    #[test]
    fn a_call_whose_headers_mirror_its_body_passes() {
        let m = request("tools/call", json!({"name": "echo", "_meta": meta()}));
        let h = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", " tools/call "),
            ("mcp-name", "echo"),
        ]);
        check(&h, &m, ALL).unwrap();
        // Base64 of a name outside the header-safe set.
        let m = request("tools/call", json!({"name": "héllo", "_meta": meta()}));
        let h = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?aMOpbGxv?="),
        ]);
        check(&h, &m, ALL).unwrap();
    }

    #[test]
    fn headers_disagreeing_with_the_body_are_header_mismatch() {
        let m = request("tools/call", json!({"name": "echo", "_meta": meta()}));
        let base = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
        ];
        for bad in [
            vec![("mcp-name", "other")],
            vec![("mcp-name", "ECHO")],
            vec![],
            vec![("mcp-name", "=?base64?!!!?=")],
            vec![("mcp-name", "echo"), ("mcp-name", "echo")],
        ] {
            let mut pairs = base.to_vec();
            pairs.extend(bad.iter().copied());
            assert_eq!(
                code(check(&headers(&pairs), &m, ALL)),
                HEADER_MISMATCH,
                "{bad:?}"
            );
        }
        for method in ["tools/list", "Tools/Call", ""] {
            let h = headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", method),
                ("mcp-name", "echo"),
            ]);
            assert_eq!(code(check(&h, &m, ALL)), HEADER_MISMATCH, "{method}");
        }
        // The version in the header and in _meta must agree.
        let h = headers(&[
            ("mcp-protocol-version", "2025-11-25"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
        ]);
        assert_eq!(code(check(&h, &m, ALL)), HEADER_MISMATCH);
    }

    #[test]
    fn a_request_without_meta_or_with_an_unknown_version_is_refused() {
        let h = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
        ]);
        let r = check(&h, &request("tools/list", json!({})), ALL).unwrap_err();
        assert_eq!(
            (r.status, r.error.code),
            (StatusCode::BAD_REQUEST, INVALID_PARAMS)
        );
        // _meta without the client's capabilities, or with a non-object
        // client info.
        for meta in [
            json!({META_PROTOCOL_VERSION: "2026-07-28"}),
            json!({META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: []}),
            json!({META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}, META_CLIENT_INFO: "x"}),
        ] {
            let r = check(&h, &request("tools/list", json!({"_meta": meta})), ALL).unwrap_err();
            assert_eq!(
                (r.status, r.error.code),
                (StatusCode::BAD_REQUEST, INVALID_PARAMS),
                "{meta}"
            );
        }
        let m = request(
            "tools/list",
            json!({"_meta": {META_PROTOCOL_VERSION: "1900-01-01", META_CLIENT_CAPABILITIES: {}}}),
        );
        let h = headers(&[
            ("mcp-protocol-version", "1900-01-01"),
            ("mcp-method", "tools/list"),
        ]);
        let r = check(&h, &m, ALL).unwrap_err();
        assert_eq!(r.error.code, UNSUPPORTED_PROTOCOL_VERSION);
        let body = r.error.response(json!(7));
        assert_eq!(body["id"], 7);
        assert_eq!(body["error"]["data"]["requested"], "1900-01-01");
        assert_eq!(body["error"]["data"]["supported"][0], "2026-07-28");
    }

    #[test]
    fn mirrored_arguments_need_their_headers_equal_to_them() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"},
            "opts": {"type": "object", "properties": {"flag": {"type": "boolean", "x-mcp-header": "Flag"}}},
        }});
        let m = mirrored_params(&schema);
        assert_eq!(m.len(), 3, "{m:?}");
        let args = |v: Value| v.as_object().unwrap().clone();
        let a = args(json!({"region": "us-west1", "n": 42, "opts": {"flag": true}}));
        let ok = headers(&[
            ("mcp-param-region", "us-west1"),
            ("mcp-param-n", "42.0"),
            ("mcp-param-flag", "true"),
        ]);
        check_params(&ok, &m, Some(&a)).unwrap();
        // Absent or null arguments need no header.
        check_params(&headers(&[]), &m, Some(&args(json!({"region": null})))).unwrap();
        for bad in [
            vec![("mcp-param-n", "42"), ("mcp-param-flag", "true")],
            vec![
                ("mcp-param-region", "eu"),
                ("mcp-param-n", "42"),
                ("mcp-param-flag", "true"),
            ],
            vec![
                ("mcp-param-region", "us-west1"),
                ("mcp-param-n", "43"),
                ("mcp-param-flag", "true"),
            ],
            vec![
                ("mcp-param-region", "us-west1"),
                ("mcp-param-n", "42"),
                ("mcp-param-flag", "True"),
            ],
            vec![
                ("mcp-param-region", "=?base64?!!?="),
                ("mcp-param-n", "42"),
                ("mcp-param-flag", "true"),
            ],
        ] {
            let r = check_params(&headers(&bad), &m, Some(&a));
            assert_eq!(code(r), HEADER_MISMATCH, "{bad:?}");
        }
        // The base64 form is decoded before comparing.
        let a = args(json!({"region": "Hello"}));
        check_params(
            &headers(&[("mcp-param-region", "=?base64?SGVsbG8=?=")]),
            &m,
            Some(&a),
        )
        .unwrap();
    }

    #[test]
    fn reserved_meta_is_not_forwarded_but_a_progress_token_is() {
        let mut p = json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28", "progressToken": 3}})
            .as_object()
            .unwrap()
            .clone();
        strip_reserved_meta(&mut p);
        assert_eq!(Value::Object(p), json!({"_meta": {"progressToken": 3}}));
    }
}
