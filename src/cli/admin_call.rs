//! One JSON-RPC call to a running gateway as an administrator, the secret
//! read from the environment (never an argument: it would show in `ps`).

use std::time::Duration;

use serde_json::{json, Value};

use super::CliError;

/// The environment variable an admin command reads its secret from.
pub const ADMIN_TOKEN_ENV: &str = "DGW_ADMIN_TOKEN";

/// Calls `method` at `gateway` (a `/rpc` URL) and returns the whole
/// JSON-RPC answer; an unreachable gateway is a usage error.
pub(crate) fn call(gateway: &str, method: &str, params: Value) -> Result<Value, CliError> {
    let secret = std::env::var(ADMIN_TOKEN_ENV)
        .ok()
        .filter(|s| !s.is_empty());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Usage(format!("cannot start the runtime: {e}")))?;
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let client = crate::outbound::JsonClient::new(Duration::from_secs(10));
    runtime
        .block_on(client.post(gateway, &request, secret.as_deref()))
        .map_err(|e| CliError::Usage(format!("the gateway at {gateway}: {e}")))
}

/// An error answer's message, for the operator.
pub(crate) fn message(error: &Value) -> &str {
    error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("(no message)")
}
