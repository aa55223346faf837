//! The one mapping of decisions and failures to JSON-RPC error objects.

use serde_json::{json, Value};

use dgw_core::caller::AuthError;
use dgw_core::gatekeeper::GateError;
use dgw_core::protocol::{Denial, DenialKind};
use dgw_core::state::StorageError;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const DENIED: i64 = -32001;
pub const REJECTED: i64 = -32003;
pub const NOT_FOUND: i64 = -32004;
pub const CONFLICT: i64 = -32005;
/// The shared state cannot be reached: try again (`state_unavailable`).
pub const UNAVAILABLE: i64 = -32006;

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Value,
}

impl RpcError {
    pub fn new(code: i64, kind: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: json!({ "type": kind }),
        }
    }

    fn to_json(&self) -> Value {
        json!({"code": self.code, "message": self.message, "data": self.data})
    }

    /// A full response object carrying this error.
    pub fn response(&self, id: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "error": self.to_json()})
    }
}

/// §11.2: a denial as `-32001` (`-32602` for a malformed credential) with
/// `data.type`, `detail`, `protocol`, `requested` and `granted`.
pub fn denial_error(d: &Denial) -> RpcError {
    let mut data = json!({
        "type": d.kind.as_str(),
        "detail": d.detail,
        "protocol": d.protocol.name,
    });
    if let Some(requested) = &d.requested {
        data["requested"] = json!(requested);
    }
    if let Some(granted) = &d.granted {
        data["granted"] = json!(granted);
    }
    let code = match d.kind {
        DenialKind::Malformed(_) => INVALID_PARAMS,
        _ => DENIED,
    };
    RpcError {
        code,
        message: d.message(),
        data,
    }
}

/// The one mapping of gatekeeper failures to JSON-RPC errors.
pub fn gate_error(e: &GateError) -> RpcError {
    match e {
        GateError::InvalidParams(m) => RpcError::new(INVALID_PARAMS, "invalid_params", m.clone()),
        GateError::NotFound { kind, id } => {
            let mut err = RpcError::new(NOT_FOUND, "not_found", e.to_string());
            err.data["what"] = json!(kind.as_str());
            err.data["id"] = json!(id);
            err
        }
        GateError::Conflict { kind, detail } => {
            RpcError::new(CONFLICT, kind.as_str(), detail.clone())
        }
        GateError::Rejected { kind, detail } => RpcError::new(REJECTED, kind, detail.clone()),
        GateError::Forbidden { kind, detail } => {
            RpcError::new(DENIED, kind.as_str(), detail.clone())
        }
        GateError::Storage(s @ StorageError::Unavailable(_)) => {
            RpcError::new(UNAVAILABLE, "state_unavailable", s.to_string())
        }
        GateError::Storage(s) => RpcError::new(INTERNAL_ERROR, "storage_error", s.to_string()),
    }
}

/// A caller that could not be established, as a JSON-RPC error.
pub fn auth_error(e: &AuthError) -> RpcError {
    RpcError::new(DENIED, e.kind(), e.to_string())
}
