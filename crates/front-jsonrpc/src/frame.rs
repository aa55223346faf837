//! JSON-RPC 2.0 framing: a body is one request or a batch; notifications
//! get no answer; a request too malformed to have a method is answered
//! (and counted) before any method runs.

use serde_json::{json, Value};

use dgw_core::caller::Caller;
use dgw_core::telemetry::RequestRecord;

use super::error::{RpcError, INVALID_REQUEST, PARSE_ERROR};
use super::methods::METHODS;
use super::JsonRpc;
use dgw_core::telemetry::Outcome;

/// Most requests in one batch.
pub const MAX_BATCH: usize = 1000;

impl JsonRpc {
    /// Handles one HTTP body from `caller`: a request or a batch. `None`
    /// when nothing is to be sent back (only notifications).
    pub async fn handle(&self, caller: &Caller, body: &[u8]) -> Option<Value> {
        let value = match delegateos::canonical::parse_strict(body, self.max_body_bytes) {
            Ok(v) => v,
            Err(e) => {
                return malformed(
                    RpcError::new(PARSE_ERROR, "parse_error", format!("parse error: {e}")),
                    Value::Null,
                )
            }
        };
        match value {
            Value::Array(items) if items.is_empty() => malformed(
                RpcError::new(INVALID_REQUEST, "invalid_request", "empty batch"),
                Value::Null,
            ),
            Value::Array(items) if items.len() > MAX_BATCH => malformed(
                RpcError::new(
                    INVALID_REQUEST,
                    "batch_too_large",
                    format!(
                        "a batch of {} requests is more than {MAX_BATCH}",
                        items.len()
                    ),
                ),
                Value::Null,
            ),
            Value::Array(items) => {
                let mut out = Vec::new();
                for item in items {
                    if let Some(r) = self.call(caller, item).await {
                        out.push(r);
                    }
                }
                (!out.is_empty()).then_some(Value::Array(out))
            }
            other => self.call(caller, other).await,
        }
    }

    /// One request object.
    async fn call(&self, caller: &Caller, request: Value) -> Option<Value> {
        let Value::Object(mut obj) = request else {
            return malformed(
                RpcError::new(
                    INVALID_REQUEST,
                    "invalid_request",
                    "a request must be an object",
                ),
                Value::Null,
            );
        };
        let id = obj.remove("id");
        let id_ok = matches!(
            id,
            None | Some(Value::Null | Value::String(_) | Value::Number(_))
        );
        let reply_id = if id_ok {
            id.clone().unwrap_or(Value::Null)
        } else {
            Value::Null
        };
        let invalid = |m: &str| {
            malformed(
                RpcError::new(INVALID_REQUEST, "invalid_request", m),
                reply_id.clone(),
            )
        };
        if !id_ok {
            return invalid("id must be a string, a number or null");
        }
        if obj.get("jsonrpc") != Some(&json!("2.0")) {
            return invalid("jsonrpc must be \"2.0\"");
        }
        let method = match obj.remove("method") {
            Some(Value::String(m)) => m,
            _ => return invalid("method must be a string"),
        };
        let params = obj.remove("params");
        if matches!(params, Some(ref p) if !p.is_object() && !p.is_array()) {
            return invalid("params must be an object or an array");
        }
        obj.remove("jsonrpc");
        if let Some(extra) = obj.keys().next() {
            return invalid(&format!("unknown member {extra:?}"));
        }
        // A protocol's name for a method of the gateway's runs that method,
        // counted under the name called.
        let target = match self.protocols.alias_of(&method) {
            Some(gateway) if !METHODS.contains(&method.as_str()) && METHODS.contains(&gateway) => {
                gateway
            }
            _ => method.as_str(),
        };
        let known = METHODS.contains(&target) || self.protocols.serving(target).is_some();
        let record =
            RequestRecord::start("jsonrpc", if known { method.as_str() } else { "unknown" });
        let (result, outcome) = self.dispatch(caller, target, params).await;
        record.end(outcome);
        let id = id?; // a notification gets no response
        Some(match result {
            Ok(value) => json!({"jsonrpc": "2.0", "id": id, "result": value}),
            Err(e) => e.response(id),
        })
    }
}

/// The answer to a request too malformed to have a method, counted (and
/// logged) as method `-` with outcome `error`.
fn malformed(error: RpcError, id: Value) -> Option<Value> {
    RequestRecord::start("jsonrpc", "-").end(Outcome::Error);
    Some(error.response(id))
}
