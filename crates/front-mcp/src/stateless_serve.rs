//! Serving a checked 2026-07-28 request ([`super::stateless`]): dgw's own
//! `server/discover`, the methods the revision removed, and everything
//! else through the session path's `McpProxy::handle`, its result given
//! what the revision requires.

use hyper::StatusCode;
use serde_json::{json, Map, Value};

use super::message::Message;
use super::proxy::{Caller, McpProxy};
use super::stateless::{
    check_params, complete_result, error_status, mirrored_params, server_info, Refused,
};
use super::upstream::SUPPORTED_VERSIONS;
use dgw_front_jsonrpc::{RpcError, METHOD_NOT_FOUND};

/// Every version dgw speaks downstream, newest first.
pub fn all_versions() -> Vec<&'static str> {
    super::stateless::STATELESS_VERSIONS
        .iter()
        .chain(SUPPORTED_VERSIONS)
        .copied()
        .collect()
}

/// Methods the session revisions had and this one removed (changelog,
/// major changes 1, 2, 4 and 5): answered `404` with -32601.
const NOT_SERVED: &[&str] = &[
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// Results the revision makes cacheable (`CacheableResult`).
const CACHEABLE: &[&str] = &[
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

impl McpProxy {
    /// Serves one stateless request (already [`check`]ed): `server/discover`
    /// is dgw's own answer; every other method takes the same path as on a
    /// session (the same enforcement, charging and audit), under the
    /// credential of the request's own `Authorization` header, with this
    /// hop's reserved `_meta` taken out before anything is forwarded.
    /// `None` for a notification.
    pub async fn handle_stateless(
        &self,
        caller: Caller<'_>,
        message: Message,
    ) -> Option<(StatusCode, Value)> {
        let Message::Request { id, method, params } = message else {
            // No client notification of this revision is served over HTTP
            // (cancellation is closing the stream).
            return None;
        };
        if NOT_SERVED.contains(&method.as_str()) {
            let e = RpcError::new(
                METHOD_NOT_FOUND,
                "method_not_found",
                format!("{method} is not served in protocol revision 2026-07-28"),
            );
            return Some((StatusCode::NOT_FOUND, e.response(id)));
        }
        let mut answer = if method == "server/discover" {
            json!({"jsonrpc": "2.0", "id": id, "result": self.discover()})
        } else if method == "subscriptions/listen" {
            match self.listen(caller, &id, params).await {
                Ok(reply) => Message::Response { id, reply }.to_value(),
                Err(e) => e.response(id),
            }
        } else {
            if method == "tools/call" {
                if let Err(refused) = self.check_mirrored(caller, params.as_ref()).await {
                    return Some((refused.status, refused.error.response(id)));
                }
            }
            // The reserved `_meta` stays for the link: it forwards the
            // caller's capabilities to an upstream that speaks this
            // revision, and strips them for one on a session.
            let cacheable = CACHEABLE.contains(&method.as_str());
            let mut answer = self
                .handle(caller, Message::Request { id, method, params })
                .await?;
            if let Some(Value::Object(r)) = answer.get_mut("result") {
                if cacheable {
                    // Filtered per credential, and a reload or revocation
                    // changes it: never for a shared cache, never reused.
                    r.insert("ttlMs".into(), json!(0));
                    r.insert("cacheScope".into(), json!("private"));
                }
            }
            answer
        };
        if let Some(result) = answer.get_mut("result") {
            complete_result(result);
        }
        let status = answer
            .get("error")
            .and_then(|e| e.get("code"))
            .and_then(Value::as_i64)
            .map_or(StatusCode::OK, error_status);
        Some((status, answer))
    }

    /// A `tools/call`'s `Mcp-Param-*` headers against the tool's schema.
    async fn check_mirrored(
        &self,
        caller: Caller<'_>,
        params: Option<&Map<String, Value>>,
    ) -> Result<(), Refused> {
        let (Some(headers), Some(name)) = (
            caller.headers,
            params.and_then(|p| p.get("name")).and_then(Value::as_str),
        ) else {
            return Ok(());
        };
        let Some(tool) = self.find_tool(name).await else {
            return Ok(());
        };
        let Some(schema) = tool.definition.get("inputSchema") else {
            return Ok(());
        };
        let arguments = params
            .and_then(|p| p.get("arguments"))
            .and_then(Value::as_object);
        check_params(headers, &mirrored_params(schema), arguments)
    }

    /// `server/discover`: the versions dgw speaks, what it delivers in
    /// this revision, who it is.
    fn discover(&self) -> Value {
        let (mut capabilities, instructions) = self.offered_capabilities();
        // Log messages travel on a request's response stream in this
        // revision, which dgw does not open: not offered.
        capabilities.remove("logging");
        let mut result = json!({
            "supportedVersions": all_versions(),
            "capabilities": capabilities,
            "serverInfo": server_info(),
            "ttlMs": 0,
            "cacheScope": "private",
        });
        if let Some(text) = instructions {
            result["instructions"] = json!(text);
        }
        result
    }
}
