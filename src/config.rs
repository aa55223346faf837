//! The gateway's TOML configuration, validated at start with errors that
//! name the key and the problem.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use delegateos::PrincipalId;
use serde::Deserialize;

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("config {path}: `{key}`: {problem}")]
    Invalid {
        path: PathBuf,
        key: String,
        problem: String,
    },
}

/// A validated configuration. Relative paths are relative to the directory
/// the gateway runs in.
#[derive(Debug, Clone)]
pub struct Config {
    pub server: ServerConfig,
    pub data_dir: PathBuf,
    pub key_file: PathBuf,
    pub budget: BudgetConfig,
    pub tenants: Vec<Tenant>,
}

/// Listeners and request limits.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// JSON-RPC at `POST /rpc`, `GET /metrics`, `/healthz`, `/readyz`.
    pub http: SocketAddr,
    pub max_body_bytes: usize,
    pub request_timeout: Duration,
    /// How long shutdown waits for in-flight requests.
    pub shutdown_grace: Duration,
}

/// Budget reservations.
#[derive(Debug, Clone)]
pub struct BudgetConfig {
    /// How long a reservation holds budget before the sweeper releases it.
    pub reservation_ttl: Duration,
    /// How often the sweeper runs.
    pub sweep_interval: Duration,
    /// How often the budget state is snapshotted into sled (the journal
    /// covers what happened since).
    pub snapshot_interval: Duration,
}

/// A tenant: a name and the root key its tokens must be issued by.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub name: String,
    pub root: TenantRoot,
}

/// Where a tenant's root principal comes from.
#[derive(Debug, Clone)]
pub enum TenantRoot {
    /// A principal ID given in the config.
    Principal(PrincipalId),
    /// A key file; created on first start when missing, so a fresh checkout
    /// has a tenant whose tokens it can issue (`dgw token issue --key FILE`).
    KeyFile(PathBuf),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    server: RawServer,
    data_dir: PathBuf,
    key_file: PathBuf,
    #[serde(default)]
    budget: RawBudget,
    #[serde(default)]
    tenants: Vec<RawTenant>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    http: String,
    #[serde(default = "default_max_body")]
    max_body_bytes: usize,
    #[serde(default = "default_request_timeout")]
    request_timeout: String,
    #[serde(default = "default_shutdown_grace")]
    shutdown_grace: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBudget {
    #[serde(default = "default_reservation_ttl")]
    reservation_ttl: String,
    #[serde(default = "default_sweep_interval")]
    sweep_interval: String,
    #[serde(default = "default_snapshot_interval")]
    snapshot_interval: String,
}

impl Default for RawBudget {
    fn default() -> Self {
        Self {
            reservation_ttl: default_reservation_ttl(),
            sweep_interval: default_sweep_interval(),
            snapshot_interval: default_snapshot_interval(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTenant {
    name: String,
    #[serde(default)]
    root: Option<String>,
    #[serde(default)]
    root_key_file: Option<PathBuf>,
}

fn default_max_body() -> usize {
    1 << 20
}
fn default_request_timeout() -> String {
    "10s".into()
}
fn default_shutdown_grace() -> String {
    "10s".into()
}
fn default_reservation_ttl() -> String {
    "60s".into()
}
fn default_sweep_interval() -> String {
    "1s".into()
}
fn default_snapshot_interval() -> String {
    "10s".into()
}

impl Config {
    /// Reads and validates a config file. Relative paths in it are relative
    /// to the directory the gateway runs in, like the config path itself.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Validates config text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        let invalid = |key: &str, problem: String| ConfigError::Invalid {
            path: path.to_owned(),
            key: key.to_owned(),
            problem,
        };
        let duration = |key: &str, text: &str| -> Result<Duration, ConfigError> {
            let d = humantime::parse_duration(text)
                .map_err(|e| invalid(key, format!("{text:?} is not a duration: {e}")))?;
            if d.is_zero() {
                return Err(invalid(key, "must be longer than zero".into()));
            }
            Ok(d)
        };
        let http = raw.server.http.parse().map_err(|e| {
            invalid(
                "server.http",
                format!("{:?} is not an address:port ({e})", raw.server.http),
            )
        })?;
        if raw.server.max_body_bytes < 1024 {
            return Err(invalid(
                "server.max_body_bytes",
                "must be at least 1024".into(),
            ));
        }
        let mut tenants = Vec::new();
        for (i, t) in raw.tenants.into_iter().enumerate() {
            let key = |field: &str| format!("tenants[{i}].{field}");
            if t.name.is_empty()
                || t.name.len() > 64
                || !t
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return Err(invalid(
                    &key("name"),
                    format!("{:?} must be 1-64 of A-Z a-z 0-9 - _ .", t.name),
                ));
            }
            if tenants.iter().any(|x: &Tenant| x.name == t.name) {
                return Err(invalid(&key("name"), format!("{:?} is used twice", t.name)));
            }
            let root = match (t.root, t.root_key_file) {
                (Some(id), None) => TenantRoot::Principal(
                    PrincipalId::parse(&id).map_err(|e| invalid(&key("root"), e.to_string()))?,
                ),
                (None, Some(file)) => TenantRoot::KeyFile(file),
                _ => {
                    return Err(invalid(
                        &key("root"),
                        "give exactly one of `root` (a principal ID) or `root_key_file`".into(),
                    ))
                }
            };
            tenants.push(Tenant { name: t.name, root });
        }
        Ok(Config {
            server: ServerConfig {
                http,
                max_body_bytes: raw.server.max_body_bytes,
                request_timeout: duration("server.request_timeout", &raw.server.request_timeout)?,
                shutdown_grace: duration("server.shutdown_grace", &raw.server.shutdown_grace)?,
            },
            data_dir: raw.data_dir,
            key_file: raw.key_file,
            budget: BudgetConfig {
                reservation_ttl: duration("budget.reservation_ttl", &raw.budget.reservation_ttl)?,
                sweep_interval: duration("budget.sweep_interval", &raw.budget.sweep_interval)?,
                snapshot_interval: duration(
                    "budget.snapshot_interval",
                    &raw.budget.snapshot_interval,
                )?,
            },
            tenants,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
data_dir = "data"
key_file = "data/gateway.key"
[server]
http = "127.0.0.1:0"
[[tenants]]
name = "acme"
root = "ghR9Wg8uFBXmxKpz5nngCFDkRt9ZLBGUyQqvJZ4p6uw"
[[tenants]]
name = "demo"
root_key_file = "data/demo-root.key"
"#;

    fn err(text: &str) -> String {
        Config::parse(text, Path::new("t.toml"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn good_config_and_defaults() {
        let c = Config::parse(GOOD, Path::new("t.toml")).unwrap();
        assert_eq!(c.server.max_body_bytes, 1 << 20);
        assert_eq!(c.budget.reservation_ttl, Duration::from_secs(60));
        assert_eq!(c.tenants.len(), 2);
    }

    #[test]
    fn errors_name_the_key() {
        assert!(err(&GOOD.replace("127.0.0.1:0", "localhost")).contains("`server.http`"));
        assert!(
            err(&GOOD.replace("name = \"demo\"", "name = \"acme\"")).contains("`tenants[1].name`")
        );
        assert!(
            err(&GOOD.replace("ghR9Wg8uFBXmxKpz5nngCFDkRt9ZLBGUyQqvJZ4p6uw", "nope"))
                .contains("`tenants[0].root`")
        );
        assert!(
            err(&format!("{GOOD}\n[budget]\nreservation_ttl = \"soon\""))
                .contains("`budget.reservation_ttl`")
        );
        assert!(err(&GOOD.replace("[server]", "[server]\nhtp = 1")).contains("htp"));
        assert!(err("data_dir = 1").contains("data_dir"));
    }
}
