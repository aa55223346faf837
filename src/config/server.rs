//! `[server]`: listeners, request limits, TLS.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use dgw_core::units::Size;
use serde::Deserialize;

use super::{Check, ConfigError};
use crate::tls::TlsFiles;

/// Listeners and request limits.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// JSON-RPC at `POST /rpc`, `GET /metrics`, `/healthz`, `/readyz`.
    pub http: SocketAddr,
    /// The gRPC front (`delegate_gateway.v1`, health, reflection); none
    /// when absent.
    pub grpc: Option<SocketAddr>,
    pub max_body_bytes: usize,
    pub request_timeout: Duration,
    /// How long shutdown waits for in-flight requests.
    pub shutdown_grace: Duration,
    /// Runtime worker threads; `None`: one per core (or `TOKIO_WORKER_THREADS`).
    pub workers: Option<usize>,
    /// `Origin` values the HTTP listener accepts (absent `Origin`: always).
    pub allowed_origins: Vec<String>,
    /// `Host` values the HTTP listener accepts; empty: the default of
    /// [`crate::http_guard::HttpGuard::new`].
    pub allowed_hosts: Vec<String>,
    /// How long a client may take to send a request's headers.
    pub header_read_timeout: Duration,
    /// How long a connection may sit idle between requests.
    pub idle_timeout: Duration,
    /// Most connections open at once, per listener.
    pub max_connections: usize,
    /// Whether the operator set `max_connections` (lowering the default to
    /// fit the descriptor limit is no news; lowering their number is).
    pub max_connections_set: bool,
    /// TLS on every listener (`[server.tls]`); none: plain text.
    pub tls: Option<TlsFiles>,
    /// Let the process dump core (off: a core would hold every upstream
    /// secret and key in memory).
    pub core_dumps: bool,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    pub(super) http: String,
    #[serde(default)]
    pub(super) grpc: Option<String>,
    #[serde(default = "default_max_body")]
    pub(super) max_body_bytes: Size,
    #[serde(default = "default_request_timeout")]
    pub(super) request_timeout: String,
    #[serde(default = "default_shutdown_grace")]
    pub(super) shutdown_grace: String,
    #[serde(default)]
    pub(super) workers: Option<usize>,
    #[serde(default)]
    pub(super) allowed_origins: Vec<String>,
    #[serde(default)]
    pub(super) allowed_hosts: Vec<String>,
    #[serde(default = "default_header_read_timeout")]
    pub(super) header_read_timeout: String,
    #[serde(default = "default_idle_timeout")]
    pub(super) idle_timeout: String,
    #[serde(default)]
    pub(super) max_connections: Option<usize>,
    #[serde(default)]
    pub(super) tls: Option<RawTls>,
    #[serde(default)]
    pub(super) core_dumps: bool,
}

impl RawServer {
    /// `[server.tls]`'s files, for `dgw config check`.
    pub(super) fn named_files(&self, out: &mut Vec<super::files::Named>) {
        let Some(tls) = &self.tls else { return };
        let files = [
            ("cert_file", Some(&tls.cert_file)),
            ("key_file", Some(&tls.key_file)),
            ("client_ca_file", tls.client_ca_file.as_ref()),
        ];
        for (name, path) in files {
            if let Some(path) = path {
                out.push(super::files::Named {
                    key: format!("server.tls.{name}"),
                    path: path.clone(),
                    what: super::files::Use::Readable,
                });
            }
        }
    }
}

/// `[server.tls]`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTls {
    pub(super) cert_file: PathBuf,
    pub(super) key_file: PathBuf,
    #[serde(default)]
    pub(super) client_ca_file: Option<PathBuf>,
}

fn default_max_body() -> Size {
    Size::of(1 << 20)
}

fn default_request_timeout() -> String {
    "10s".into()
}

fn default_shutdown_grace() -> String {
    "10s".into()
}

fn default_header_read_timeout() -> String {
    "10s".into()
}

fn default_idle_timeout() -> String {
    "60s".into()
}

fn default_max_connections() -> usize {
    10_000
}

impl RawServer {
    /// The validated section.
    pub(super) fn validate(self, check: &Check<'_>) -> Result<ServerConfig, ConfigError> {
        let raw = self;
        let http = raw.http.parse().map_err(|e| {
            check.invalid(
                "server.http",
                format!("{:?} is not an address:port ({e})", raw.http),
            )
        })?;
        let grpc = match &raw.grpc {
            None => None,
            Some(text) => Some(text.parse().map_err(|e| {
                check.invalid(
                    "server.grpc",
                    format!("{text:?} is not an address:port ({e})"),
                )
            })?),
        };
        if let Some(grpc) = grpc {
            if listeners_collide(http, grpc) {
                return Err(check.invalid(
                    "server.grpc",
                    format!(
                        "{grpc} takes the same port as server.http ({http}): give each listener its own port"
                    ),
                ));
            }
        }
        let max_body_bytes = check.size("server.max_body_bytes", &raw.max_body_bytes, 1024)?;
        let max_body_bytes = usize::try_from(max_body_bytes).map_err(|_| {
            check.invalid(
                "server.max_body_bytes",
                format!("{max_body_bytes} bytes is more than this machine can address"),
            )
        })?;
        Ok(ServerConfig {
            http,
            grpc,
            max_body_bytes,
            workers: match raw.workers {
                Some(0) => {
                    return Err(check.invalid(
                        "server.workers",
                        "must be at least 1 (leave it out for one per core)".into(),
                    ))
                }
                w => w,
            },
            request_timeout: check.duration("server.request_timeout", &raw.request_timeout)?,
            shutdown_grace: check.duration("server.shutdown_grace", &raw.shutdown_grace)?,
            allowed_origins: raw.allowed_origins,
            allowed_hosts: raw.allowed_hosts,
            header_read_timeout: check
                .duration("server.header_read_timeout", &raw.header_read_timeout)?,
            idle_timeout: check.duration("server.idle_timeout", &raw.idle_timeout)?,
            tls: raw.tls.map(|t| TlsFiles {
                cert_file: check.file(t.cert_file),
                key_file: check.file(t.key_file),
                client_ca_file: t.client_ca_file.map(|f| check.file(f)),
            }),
            max_connections: match raw.max_connections {
                Some(0) => {
                    return Err(check.invalid("server.max_connections", "must be at least 1".into()))
                }
                Some(n) => n,
                None => default_max_connections(),
            },
            max_connections_set: raw.max_connections.is_some(),
            core_dumps: raw.core_dumps,
        })
    }
}

/// Whether two listeners would ask for the same socket: one port (not 0,
/// which picks a free one) on the same address or on a wildcard address.
fn listeners_collide(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() != 0
        && a.port() == b.port()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}
