//! One JSON-RPC call to a running gateway as an administrator. Every admin
//! command takes its secret the same way: `--admin-token-file FILE` (0600,
//! 0400 or 0440), else the `DGW_ADMIN_TOKEN` environment variable; never
//! an argument, which would show in `ps`. Without either the call goes
//! without a secret (a loopback listener with no admin tokens configured
//! may still answer the methods that read). The binary's commands and
//! every module's share it.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::{json, Value};

use super::{print_json, CommandError, Exit};

/// The environment variable an admin command reads its secret from.
pub const ADMIN_TOKEN_ENV: &str = "DGW_ADMIN_TOKEN";

/// Where an admin command finds its secret.
#[derive(Debug, Args)]
pub struct AdminAuth {
    /// A file holding the admin secret (0600, 0400 or 0440); default: the
    /// DGW_ADMIN_TOKEN environment variable.
    #[arg(long = "admin-token-file", value_name = "FILE")]
    admin_token_file: Option<PathBuf>,
}

impl AdminAuth {
    /// The secret, from the file or the environment.
    fn secret(&self) -> Result<Option<String>, CommandError> {
        if let Some(path) = &self.admin_token_file {
            let secret = dgw_net::secret::Secret::from_file(path)
                .map_err(|e| CommandError(format!("--admin-token-file: {e}")))?;
            let text = secret.expose().trim().to_owned();
            if text.is_empty() {
                return Err(CommandError(format!(
                    "--admin-token-file: {} is empty",
                    path.display()
                )));
            }
            return Ok(Some(text));
        }
        Ok(std::env::var(ADMIN_TOKEN_ENV)
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty()))
    }
}

/// Calls `method` at `gateway` (a `/rpc` URL) and returns the whole
/// JSON-RPC answer; an unreachable gateway is a usage error.
pub fn call(
    auth: &AdminAuth,
    gateway: &str,
    method: &str,
    params: Value,
) -> Result<Value, CommandError> {
    let secret = auth.secret()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CommandError(format!("cannot start the runtime: {e}")))?;
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let client = dgw_net::outbound::JsonClient::new(Duration::from_secs(10));
    runtime
        .block_on(client.post(gateway, &request, secret.as_deref()))
        .map_err(|e| match e {
            dgw_net::outbound::OutboundError::Status(401) => CommandError(format!(
                "the gateway at {gateway} refused the admin secret (401): its [[admin.tokens]] does not list it; `dgw admin-token new` prints a secret and its entry for the config, which a reload applies"
            )),
            e => CommandError(format!("the gateway at {gateway}: {e}")),
        })
}

/// An error answer's message, for the operator: its message, and its
/// `data.type` and `data.detail` when it has them.
pub fn message(error: &Value) -> String {
    let text = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("(no message)");
    let data = error.get("data");
    let kind = data.and_then(|d| d.get("type")).and_then(Value::as_str);
    let detail = data.and_then(|d| d.get("detail")).and_then(Value::as_str);
    let said = match (kind, detail) {
        (Some(k), Some(d)) if d != text => format!("{text} ({k}: {d})"),
        (Some(k), _) => format!("{text} ({k})"),
        _ => text.to_owned(),
    };
    match kind {
        Some("admin_required") => {
            format!("{said}; give an admin secret with --admin-token-file or {ADMIN_TOKEN_ENV}")
        }
        _ => said,
    }
}

/// One admin call whose result is printed (exit 0), or whose error is
/// printed on stdout and said on stderr (exit 1; unreachable: 2).
pub fn run(
    auth: &AdminAuth,
    gateway: &str,
    method: &str,
    params: Value,
) -> Result<Exit, CommandError> {
    let answer = call(auth, gateway, method, params)?;
    match (answer.get("result"), answer.get("error")) {
        (Some(result), _) => {
            print_json(result);
            Ok(Exit::Success)
        }
        (None, Some(error)) => {
            eprintln!("dgw: {method} refused: {}", message(error));
            print_json(error);
            Ok(Exit::Negative)
        }
        _ => Err(CommandError(format!(
            "the gateway at {gateway} answered no JSON-RPC result"
        ))),
    }
}
