//! The gateway's TOML configuration, validated at start with errors that
//! name the key and the problem.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use delegateos::PrincipalId;
use serde::Deserialize;

use crate::protocols::talos::{TalosIssuer, TalosSection};

use crate::budget::LeasePolicy;
use crate::caller::AdminToken;
use crate::mcp::proxy::DATA_METHODS;
use crate::mcp::tools::{
    split_capability, NamePattern, ResourceSource, ToolPolicy, ToolRule, ToolRules,
};
use crate::mcp::{TransportSpec, UpstreamSpec};
use crate::tls::TlsFiles;

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
    pub mcp: McpConfig,
    /// Upstream MCP servers, in config order.
    pub upstreams: Vec<UpstreamSpec>,
    /// Trusted Talos capability issuers.
    pub talos: Vec<TalosIssuer>,
    /// Administrators' tokens (`[[admin.tokens]]`); none: callers on a
    /// loopback listener may use the admin methods that read.
    pub admin_tokens: Vec<AdminToken>,
    /// Client certificate subjects that are admins (`[[admin.certs]]`).
    pub admin_certs: Vec<String>,
    /// Keep the state in memory instead of `data_dir` (`dgw serve
    /// --ephemeral`; never from the file).
    pub ephemeral: bool,
}

/// The MCP proxy's downstream side.
#[derive(Debug, Clone)]
pub struct McpConfig {
    /// Idle `/mcp` sessions end after this long.
    pub session_ttl: Duration,
    /// Most `/mcp` sessions open at once.
    pub max_sessions: usize,
    /// Data-reading methods passed through without a DCT check (see
    /// [`DATA_METHODS`]); none by default.
    pub unchecked_methods: Vec<String>,
    /// How long start-up waits for each upstream's first initialization.
    pub ready_timeout: Duration,
    /// Whether `initialize` may open a session without a credential.
    pub anonymous_sessions: bool,
    /// Idle anonymous sessions end after this long.
    pub anonymous_session_ttl: Duration,
    /// Most sessions one credential may hold open.
    pub max_sessions_per_credential: usize,
    /// Drop upstream tools whose names are not printable ASCII or hold the
    /// `__` separator (default on).
    pub strict_tool_names: bool,
}

/// Listeners and request limits.
#[derive(Debug, Clone)]
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
    /// TLS on every listener (`[server.tls]`); none: plain text.
    pub tls: Option<TlsFiles>,
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
    /// How far ahead MCP tool calls lease budget (`budget.lease_fraction`).
    pub lease: LeasePolicy,
    /// Most reservations open at once under one delegation.
    pub max_open_reservations: usize,
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
    #[serde(default)]
    mcp: RawMcp,
    #[serde(default)]
    upstreams: Vec<RawUpstream>,
    #[serde(default)]
    talos: TalosSection,
    #[serde(default)]
    admin: RawAdmin,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawAdmin {
    #[serde(default)]
    tokens: Vec<RawAdminToken>,
    #[serde(default)]
    certs: Vec<RawAdminCert>,
}

/// `[[admin.certs]]`: a client certificate subject that is an admin.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAdminCert {
    subject: String,
}

/// `[[admin.tokens]]`: `dgw admin-token new --name NAME` prints one.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAdminToken {
    name: String,
    sha256: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMcp {
    #[serde(default = "default_session_ttl")]
    session_ttl: String,
    #[serde(default = "default_max_sessions")]
    max_sessions: usize,
    #[serde(default)]
    unchecked_methods: Vec<String>,
    #[serde(default = "default_ready_timeout")]
    ready_timeout: String,
    #[serde(default)]
    anonymous_sessions: bool,
    #[serde(default = "default_anonymous_session_ttl")]
    anonymous_session_ttl: String,
    #[serde(default = "default_max_sessions_per_credential")]
    max_sessions_per_credential: usize,
    #[serde(default = "default_true")]
    strict_tool_names: bool,
}

impl Default for RawMcp {
    fn default() -> Self {
        Self {
            session_ttl: default_session_ttl(),
            max_sessions: default_max_sessions(),
            unchecked_methods: Vec::new(),
            ready_timeout: default_ready_timeout(),
            anonymous_sessions: false,
            anonymous_session_ttl: default_anonymous_session_ttl(),
            max_sessions_per_credential: default_max_sessions_per_credential(),
            strict_tool_names: true,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUpstream {
    name: String,
    #[serde(default)]
    command: Option<Vec<String>>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default = "default_upstream_timeout")]
    timeout: String,
    #[serde(default)]
    ca_file: Option<PathBuf>,
    #[serde(default)]
    tools: Vec<RawTool>,
}

/// One JSON Pointer or several.
#[derive(Deserialize)]
#[serde(untagged)]
enum Pointers {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    name: String,
    #[serde(default)]
    capability: Option<String>,
    #[serde(default)]
    resource: Option<Pointers>,
    #[serde(default)]
    fixed_resource: Option<String>,
    #[serde(default)]
    cost_microcents: Option<u64>,
    #[serde(default)]
    open: bool,
    #[serde(default)]
    resolve_path: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    http: String,
    #[serde(default)]
    grpc: Option<String>,
    #[serde(default = "default_max_body")]
    max_body_bytes: usize,
    #[serde(default = "default_request_timeout")]
    request_timeout: String,
    #[serde(default = "default_shutdown_grace")]
    shutdown_grace: String,
    #[serde(default)]
    workers: Option<usize>,
    #[serde(default)]
    allowed_origins: Vec<String>,
    #[serde(default)]
    allowed_hosts: Vec<String>,
    #[serde(default = "default_header_read_timeout")]
    header_read_timeout: String,
    #[serde(default = "default_idle_timeout")]
    idle_timeout: String,
    #[serde(default = "default_max_connections")]
    max_connections: usize,
    #[serde(default)]
    tls: Option<RawTls>,
}

/// `[server.tls]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    cert_file: PathBuf,
    key_file: PathBuf,
    #[serde(default)]
    client_ca_file: Option<PathBuf>,
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
    #[serde(default = "default_lease_fraction")]
    lease_fraction: f64,
    #[serde(default = "default_max_open_reservations")]
    max_open_reservations: usize,
}

impl Default for RawBudget {
    fn default() -> Self {
        Self {
            reservation_ttl: default_reservation_ttl(),
            sweep_interval: default_sweep_interval(),
            snapshot_interval: default_snapshot_interval(),
            lease_fraction: default_lease_fraction(),
            max_open_reservations: default_max_open_reservations(),
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
/// A crash may cost a budget level up to 1 % of its free room; a
/// budget worth 10,000 calls then needs about one sync per 100 calls.
fn default_lease_fraction() -> f64 {
    0.01
}
fn default_true() -> bool {
    true
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
fn default_anonymous_session_ttl() -> String {
    "60s".into()
}
fn default_max_sessions_per_credential() -> usize {
    64
}
fn default_max_open_reservations() -> usize {
    10_000
}
fn default_session_ttl() -> String {
    "1h".into()
}
fn default_max_sessions() -> usize {
    10_000
}
fn default_ready_timeout() -> String {
    "15s".into()
}
fn default_upstream_timeout() -> String {
    "30s".into()
}

/// `[[upstreams]]`: names, transports and tool rules.
fn parse_upstreams(
    raw: Vec<RawUpstream>,
    reservation_ttl: Duration,
    invalid: &dyn Fn(&str, String) -> ConfigError,
    duration: &dyn Fn(&str, &str) -> Result<Duration, ConfigError>,
) -> Result<Vec<UpstreamSpec>, ConfigError> {
    let mut out: Vec<UpstreamSpec> = Vec::new();
    for (i, u) in raw.into_iter().enumerate() {
        let key = |field: &str| format!("upstreams[{i}].{field}");
        let name_ok = !u.name.is_empty()
            && u.name.len() <= 32
            && u.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c));
        if !name_ok {
            return Err(invalid(
                &key("name"),
                format!("{:?} must be 1-32 of A-Z a-z 0-9 - _", u.name),
            ));
        }
        if out.iter().any(|x| x.name == u.name) {
            return Err(invalid(&key("name"), format!("{:?} is used twice", u.name)));
        }
        if u.ca_file.is_some() && !u.url.as_deref().is_some_and(|x| x.starts_with("https://")) {
            return Err(invalid(
                &key("ca_file"),
                "verifies an https:// upstream; this upstream has none".into(),
            ));
        }
        let transport = match (u.command, u.url) {
            (Some(command), None) => {
                if command.first().is_none_or(|p| p.is_empty()) {
                    return Err(invalid(
                        &key("command"),
                        "must name a program to run".into(),
                    ));
                }
                TransportSpec::Stdio { command }
            }
            (None, Some(url)) => {
                let uri: hyper::Uri = url
                    .parse()
                    .map_err(|e| invalid(&key("url"), format!("{url:?} is not a URL: {e}")))?;
                if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.authority().is_none()
                {
                    return Err(invalid(
                        &key("url"),
                        format!("{url:?} must be an http:// or https:// URL"),
                    ));
                }
                TransportSpec::Http {
                    url,
                    ca_file: u.ca_file,
                }
            }
            _ => {
                return Err(invalid(
                    &key("command"),
                    "give exactly one of `command` (stdio) or `url` (Streamable HTTP)".into(),
                ))
            }
        };
        let timeout = duration(&key("timeout"), &u.timeout)?;
        if timeout >= reservation_ttl {
            return Err(invalid(
                &key("timeout"),
                format!("must be shorter than budget.reservation_ttl ({reservation_ttl:?}), or a reservation could expire while its call runs"),
            ));
        }
        let mut rules = Vec::new();
        for (j, t) in u.tools.into_iter().enumerate() {
            let key = |field: &str| format!("upstreams[{i}].tools[{j}].{field}");
            if t.name.is_empty() {
                return Err(invalid(
                    &key("name"),
                    "must name a tool or a pattern".into(),
                ));
            }
            let policy = if t.open {
                if t.capability.is_some()
                    || t.resource.is_some()
                    || t.fixed_resource.is_some()
                    || t.cost_microcents.is_some()
                    || t.resolve_path
                {
                    return Err(invalid(
                        &key("open"),
                        "an open tool takes no capability, resource or cost".into(),
                    ));
                }
                ToolPolicy::Open
            } else {
                let capability = t.capability.ok_or_else(|| {
                    invalid(
                        &key("capability"),
                        "is required unless the tool is `open = true`".into(),
                    )
                })?;
                let (namespace, action) = split_capability(&capability).ok_or_else(|| {
                    invalid(
                        &key("capability"),
                        format!("{capability:?} must be NAMESPACE:ACTION, both concrete"),
                    )
                })?;
                let resource = match (t.resource, t.fixed_resource) {
                    (Some(p), None) => {
                        let pointers = match p {
                            Pointers::One(p) => vec![p],
                            Pointers::Many(ps) => ps,
                        };
                        if pointers.is_empty() || pointers.iter().any(|p| !p.starts_with('/')) {
                            return Err(invalid(
                                &key("resource"),
                                "must be JSON Pointers into the arguments, each starting with `/` (use fixed_resource for a constant)".into(),
                            ));
                        }
                        ResourceSource::Pointers(pointers)
                    }
                    (None, Some(fixed)) if !fixed.is_empty() => ResourceSource::Fixed(fixed),
                    _ => {
                        return Err(invalid(
                            &key("resource"),
                            "give exactly one of `resource` (JSON Pointers into the arguments) or `fixed_resource`".into(),
                        ))
                    }
                };
                if t.resolve_path && !matches!(resource, ResourceSource::Pointers(_)) {
                    return Err(invalid(
                        &key("resolve_path"),
                        "resolves path arguments, so it needs `resource` (JSON Pointers)".into(),
                    ));
                }
                ToolPolicy::Enforced {
                    namespace: namespace.to_owned(),
                    action: action.to_owned(),
                    resource,
                    cost_microcents: t.cost_microcents.unwrap_or(0),
                    resolve_path: t.resolve_path,
                }
            };
            rules.push(ToolRule {
                name: NamePattern::new(&t.name),
                policy,
            });
        }
        out.push(UpstreamSpec {
            name: u.name,
            transport,
            timeout,
            rules: ToolRules(rules),
        });
    }
    Ok(out)
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
        let grpc = match &raw.server.grpc {
            None => None,
            Some(text) => Some(text.parse().map_err(|e| {
                invalid(
                    "server.grpc",
                    format!("{text:?} is not an address:port ({e})"),
                )
            })?),
        };
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
        let reservation_ttl = duration("budget.reservation_ttl", &raw.budget.reservation_ttl)?;
        let upstreams = parse_upstreams(raw.upstreams, reservation_ttl, &invalid, &duration)?;
        for m in &raw.mcp.unchecked_methods {
            if !DATA_METHODS.contains(&m.as_str()) {
                return Err(invalid(
                    "mcp.unchecked_methods",
                    format!(
                        "{m:?} is not one of {DATA_METHODS:?} (other methods pass through already)"
                    ),
                ));
            }
        }
        if raw.mcp.max_sessions == 0 {
            return Err(invalid("mcp.max_sessions", "must be at least 1".into()));
        }
        let talos = raw
            .talos
            .issuers()
            .map_err(|(key, problem)| invalid(&key, problem))?;
        let mut admin_tokens: Vec<AdminToken> = Vec::new();
        for (i, t) in raw.admin.tokens.into_iter().enumerate() {
            let key = |field: &str| format!("admin.tokens[{i}].{field}");
            if t.name.is_empty() || admin_tokens.iter().any(|x| x.name == t.name) {
                return Err(invalid(
                    &key("name"),
                    format!("{:?} must be a name used once", t.name),
                ));
            }
            let sha256 = hex32(&t.sha256).ok_or_else(|| {
                invalid(
                    &key("sha256"),
                    "must be the 64 hex digits of the secret's SHA-256 (`dgw admin-token new` prints it)"
                        .into(),
                )
            })?;
            admin_tokens.push(AdminToken {
                name: t.name,
                sha256,
            });
        }
        let admin_certs: Vec<String> = raw.admin.certs.into_iter().map(|c| c.subject).collect();
        if !admin_certs.is_empty()
            && raw
                .server
                .tls
                .as_ref()
                .is_none_or(|t| t.client_ca_file.is_none())
        {
            return Err(invalid(
                "admin.certs",
                "client certificates need [server.tls] with client_ca_file".into(),
            ));
        }
        if admin_certs.iter().any(|c| c.trim().is_empty()) {
            return Err(invalid("admin.certs", "a subject is empty".into()));
        }
        if raw.budget.max_open_reservations == 0 {
            return Err(invalid(
                "budget.max_open_reservations",
                "must be at least 1".into(),
            ));
        }
        let mcp = McpConfig {
            session_ttl: duration("mcp.session_ttl", &raw.mcp.session_ttl)?,
            max_sessions: raw.mcp.max_sessions,
            unchecked_methods: raw.mcp.unchecked_methods,
            ready_timeout: duration("mcp.ready_timeout", &raw.mcp.ready_timeout)?,
            anonymous_sessions: raw.mcp.anonymous_sessions,
            anonymous_session_ttl: duration(
                "mcp.anonymous_session_ttl",
                &raw.mcp.anonymous_session_ttl,
            )?,
            max_sessions_per_credential: match raw.mcp.max_sessions_per_credential {
                0 => {
                    return Err(invalid(
                        "mcp.max_sessions_per_credential",
                        "must be at least 1".into(),
                    ))
                }
                n => n,
            },
            strict_tool_names: raw.mcp.strict_tool_names,
        };
        Ok(Config {
            server: ServerConfig {
                http,
                grpc,
                max_body_bytes: raw.server.max_body_bytes,
                workers: match raw.server.workers {
                    Some(0) => {
                        return Err(invalid(
                            "server.workers",
                            "must be at least 1 (leave it out for one per core)".into(),
                        ))
                    }
                    w => w,
                },
                request_timeout: duration("server.request_timeout", &raw.server.request_timeout)?,
                shutdown_grace: duration("server.shutdown_grace", &raw.server.shutdown_grace)?,
                allowed_origins: raw.server.allowed_origins,
                allowed_hosts: raw.server.allowed_hosts,
                header_read_timeout: duration(
                    "server.header_read_timeout",
                    &raw.server.header_read_timeout,
                )?,
                idle_timeout: duration("server.idle_timeout", &raw.server.idle_timeout)?,
                tls: raw.server.tls.map(|t| TlsFiles {
                    cert_file: t.cert_file,
                    key_file: t.key_file,
                    client_ca_file: t.client_ca_file,
                }),
                max_connections: match raw.server.max_connections {
                    0 => {
                        return Err(invalid(
                            "server.max_connections",
                            "must be at least 1".into(),
                        ))
                    }
                    n => n,
                },
            },
            data_dir: raw.data_dir,
            key_file: raw.key_file,
            budget: BudgetConfig {
                reservation_ttl,
                sweep_interval: duration("budget.sweep_interval", &raw.budget.sweep_interval)?,
                snapshot_interval: duration(
                    "budget.snapshot_interval",
                    &raw.budget.snapshot_interval,
                )?,
                lease: LeasePolicy::new(raw.budget.lease_fraction).ok_or_else(|| {
                    invalid(
                        "budget.lease_fraction",
                        format!(
                            "must be a number from 0 (no leasing) to 1, not {}",
                            raw.budget.lease_fraction
                        ),
                    )
                })?,
                max_open_reservations: raw.budget.max_open_reservations,
            },
            tenants,
            mcp,
            upstreams,
            talos,
            admin_tokens,
            admin_certs,
            ephemeral: false,
        })
    }
}

/// 32 bytes from 64 hex digits.
fn hex32(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
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
        assert_eq!(c.budget.lease, LeasePolicy::new(0.01).unwrap());
        assert_eq!(c.tenants.len(), 2);
    }

    #[test]
    fn errors_name_the_key() {
        assert!(err(&GOOD.replace("127.0.0.1:0", "localhost")).contains("`server.http`"));
        assert!(
            err(&GOOD.replace("[server]", "[server]\ngrpc = \"nope\"")).contains("`server.grpc`")
        );
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
        assert!(
            err(&GOOD.replace("[server]", "[server]\nworkers = 0")).contains("`server.workers`")
        );
        for bad in ["1.5", "-0.1", "nan"] {
            assert!(
                err(&format!("{GOOD}\n[budget]\nlease_fraction = {bad}"))
                    .contains("`budget.lease_fraction`"),
                "{bad}"
            );
        }
        assert!(err(&GOOD.replace("[server]", "[server]\nhtp = 1")).contains("htp"));
        assert!(err("data_dir = 1").contains("data_dir"));
    }

    #[test]
    fn the_shipped_configs_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        for file in ["gateway.toml", "examples/mcp-filesystem.toml"] {
            Config::load(&dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        }
    }

    #[test]
    fn upstreams_and_tool_rules() {
        let text = format!(
            r#"{GOOD}
[[upstreams]]
name = "files"
command = ["node", "server.js", "/srv"]
[[upstreams.tools]]
name = "read_*"
capability = "docs:read"
resource = "/path"
cost_microcents = 100
[[upstreams.tools]]
name = "move_file"
capability = "acme:docs:write"
resource = ["/source", "/destination"]
[[upstreams.tools]]
name = "list_allowed_directories"
open = true
[[upstreams]]
name = "search"
url = "http://127.0.0.1:9000/mcp"
[[upstreams.tools]]
name = "web_search"
capability = "web:search"
fixed_resource = "*"
"#
        );
        let c = Config::parse(&text, Path::new("t.toml")).unwrap();
        assert_eq!(c.upstreams.len(), 2);
        let files = &c.upstreams[0];
        assert_eq!(
            files.rules.policy_for("read_text_file"),
            Some(&ToolPolicy::Enforced {
                namespace: "docs".into(),
                action: "read".into(),
                resource: ResourceSource::Pointers(vec!["/path".into()]),
                cost_microcents: 100,
                resolve_path: false,
            })
        );
        assert!(matches!(
            files.rules.policy_for("move_file"),
            Some(ToolPolicy::Enforced { namespace, resource: ResourceSource::Pointers(p), .. })
                if namespace == "acme:docs" && p.len() == 2
        ));
        assert_eq!(
            files.rules.policy_for("list_allowed_directories"),
            Some(&ToolPolicy::Open)
        );
        assert_eq!(files.rules.policy_for("write_file"), None);
        assert_eq!(
            c.upstreams[1].transport,
            TransportSpec::Http {
                url: "http://127.0.0.1:9000/mcp".into(),
                ca_file: None,
            }
        );
        assert_eq!(c.mcp.max_sessions, 10_000);
    }

    #[test]
    fn upstream_errors_name_the_key() {
        let with = |upstream: &str| err(&format!("{GOOD}\n[[upstreams]]\n{upstream}"));
        assert!(with(
            r#"name = "a b"
command = ["x"]"#
        )
        .contains("`upstreams[0].name`"));
        assert!(with(r#"name = "a""#).contains("`upstreams[0].command`"));
        assert!(with(
            r#"name = "a"
command = []"#
        )
        .contains("`upstreams[0].command`"));
        assert!(with(
            r#"name = "a"
url = "ftp://x/mcp""#
        )
        .contains("`upstreams[0].url`"));
        assert!(with(
            r#"name = "a"
command = ["x"]
ca_file = "ca.pem""#
        )
        .contains("`upstreams[0].ca_file`"));
        assert!(with(
            r#"name = "a"
command = ["x"]
timeout = "2m""#
        )
        .contains("`upstreams[0].timeout`"));
        let tool = |t: &str| {
            with(&format!(
                "name = \"a\"\ncommand = [\"x\"]\n[[upstreams.tools]]\n{t}"
            ))
        };
        let key = |field: &str| format!("`upstreams[0].tools[0].{field}`");
        assert!(tool(
            r#"name = "t"
resource = "/p""#
        )
        .contains(&key("capability")));
        assert!(tool(
            r#"name = "t"
capability = "docs"
resource = "/p""#
        )
        .contains(&key("capability")));
        assert!(tool(
            r#"name = "t"
capability = "docs:read""#
        )
        .contains(&key("resource")));
        assert!(tool(
            r#"name = "t"
capability = "docs:read"
resource = "path""#
        )
        .contains(&key("resource")));
        assert!(tool(
            r#"name = "t"
open = true
cost_microcents = 5"#
        )
        .contains(&key("open")));
        assert!(err(&format!(
            "{GOOD}\n[mcp]\nunchecked_methods = [\"tools/call\"]"
        ))
        .contains("`mcp.unchecked_methods`"));
    }
}
