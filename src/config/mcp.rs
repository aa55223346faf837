//! `[mcp]` and `[[upstreams]]`: the MCP proxy's sessions, and the upstream
//! servers with the rules that map their tools to capabilities.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{Check, ConfigError};
use crate::mcp::auth::{HeaderCredential, HttpCredentials};
use crate::mcp::proxy::DATA_METHODS;
use crate::mcp::secret::{names_a_credential, Secret};
use crate::mcp::tools::{
    split_capability, NamePattern, ResourceSource, ToolPolicy, ToolRule, ToolRules,
};
use crate::mcp::{TransportSpec, UpstreamSpec};

/// The MCP proxy's downstream side.
#[derive(Debug, Clone, PartialEq)]
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

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcp {
    #[serde(default = "default_session_ttl")]
    pub(super) session_ttl: String,
    #[serde(default = "default_max_sessions")]
    pub(super) max_sessions: usize,
    #[serde(default)]
    pub(super) unchecked_methods: Vec<String>,
    #[serde(default = "default_ready_timeout")]
    pub(super) ready_timeout: String,
    #[serde(default)]
    pub(super) anonymous_sessions: bool,
    #[serde(default = "default_anonymous_session_ttl")]
    pub(super) anonymous_session_ttl: String,
    #[serde(default = "default_max_sessions_per_credential")]
    pub(super) max_sessions_per_credential: usize,
    #[serde(default = "default_true")]
    pub(super) strict_tool_names: bool,
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

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUpstream {
    pub(super) name: String,
    #[serde(default)]
    pub(super) command: Option<Vec<String>>,
    #[serde(default)]
    pub(super) url: Option<String>,
    #[serde(default = "default_upstream_timeout")]
    pub(super) timeout: String,
    #[serde(default)]
    pub(super) ca_file: Option<PathBuf>,
    #[serde(default)]
    pub(super) tools: Vec<RawTool>,
    /// Headers dgw sends an HTTP upstream.
    #[serde(default)]
    pub(super) headers: Vec<RawNamedValue>,
    /// A bearer token dgw sends an HTTP upstream.
    #[serde(default)]
    pub(super) bearer: Option<RawValue>,
    /// OAuth 2.0 client credentials: dgw fetches its bearer token.
    #[serde(default)]
    pub(super) oauth: Option<RawOAuth>,
    /// Variables set for a stdio upstream.
    #[serde(default)]
    pub(super) env: Vec<RawNamedValue>,
    /// Where a stdio upstream runs.
    #[serde(default)]
    pub(super) cwd: Option<PathBuf>,
}

impl RawUpstream {
    /// The files and program `upstreams[i]` names, for `dgw config check`.
    pub(super) fn named_files(&self, i: usize, out: &mut Vec<super::files::Named>) {
        use super::files::{Named, Use};
        let key = |field: &str| format!("upstreams[{i}].{field}");
        if let Some(program) = self.command.as_ref().and_then(|c| c.first()) {
            out.push(Named {
                key: key("command"),
                path: program.into(),
                what: Use::Command {
                    cwd: self.cwd.clone(),
                },
            });
        }
        if let Some(path) = &self.ca_file {
            out.push(Named {
                key: key("ca_file"),
                path: path.clone(),
                what: Use::Readable,
            });
        }
        let values = self
            .headers
            .iter()
            .enumerate()
            .map(|(j, h)| (format!("headers[{j}]"), &h.value))
            .chain(self.bearer.iter().map(|b| ("bearer".to_owned(), b)))
            .chain(
                self.env
                    .iter()
                    .enumerate()
                    .map(|(j, e)| (format!("env[{j}]"), &e.value)),
            );
        for (field, value) in values {
            if let Some(path) = &value.value_file {
                out.push(Named {
                    key: key(&format!("{field}.value_file")),
                    path: path.clone(),
                    what: Use::Secret,
                });
            }
        }
        if let Some(o) = &self.oauth {
            out.push(Named {
                key: key("oauth.client_secret_file"),
                path: o.client_secret_file.clone(),
                what: Use::Secret,
            });
        }
    }
}

/// `oauth = { token_url, client_id, client_secret_file, scope?, audience? }`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOAuth {
    token_url: String,
    client_id: String,
    /// The client secret, from a file only (checked like `value_file`).
    client_secret_file: PathBuf,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    audience: Option<String>,
}

/// A value given inline, from a file or from dgw's environment.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawValue {
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    value_file: Option<PathBuf>,
    #[serde(default)]
    value_env: Option<String>,
}

/// A named [`RawValue`] (a header, an environment variable).
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNamedValue {
    name: String,
    #[serde(flatten)]
    value: RawValue,
}

/// One JSON Pointer or several.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub(super) enum Pointers {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTool {
    pub(super) name: String,
    #[serde(default)]
    pub(super) capability: Option<String>,
    #[serde(default)]
    pub(super) resource: Option<Pointers>,
    #[serde(default)]
    pub(super) fixed_resource: Option<String>,
    #[serde(default)]
    pub(super) cost_microcents: Option<u64>,
    #[serde(default)]
    pub(super) open: bool,
    #[serde(default)]
    pub(super) resolve_path: bool,
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

fn default_anonymous_session_ttl() -> String {
    "60s".into()
}

fn default_max_sessions_per_credential() -> usize {
    64
}

fn default_true() -> bool {
    true
}

fn default_upstream_timeout() -> String {
    "30s".into()
}

impl RawMcp {
    /// The validated section.
    pub(super) fn validate(self, check: &Check<'_>) -> Result<McpConfig, ConfigError> {
        let raw = self;
        for m in &raw.unchecked_methods {
            if !DATA_METHODS.contains(&m.as_str()) {
                return Err(check.invalid(
                    "mcp.unchecked_methods",
                    format!(
                        "{m:?} is not one of {DATA_METHODS:?} (other methods pass through already)"
                    ),
                ));
            }
        }
        if raw.max_sessions == 0 {
            return Err(check.invalid("mcp.max_sessions", "must be at least 1".into()));
        }
        Ok(McpConfig {
            session_ttl: check.duration("mcp.session_ttl", &raw.session_ttl)?,
            max_sessions: raw.max_sessions,
            unchecked_methods: raw.unchecked_methods,
            ready_timeout: check.duration("mcp.ready_timeout", &raw.ready_timeout)?,
            anonymous_sessions: raw.anonymous_sessions,
            anonymous_session_ttl: check
                .duration("mcp.anonymous_session_ttl", &raw.anonymous_session_ttl)?,
            max_sessions_per_credential: match raw.max_sessions_per_credential {
                0 => {
                    return Err(check.invalid(
                        "mcp.max_sessions_per_credential",
                        "must be at least 1".into(),
                    ))
                }
                n => n,
            },
            strict_tool_names: raw.strict_tool_names,
        })
    }
}

/// The validated `[[upstreams]]`; each upstream's timeout must be shorter
/// than `reservation_ttl`.
pub(super) fn parse_upstreams(
    raw: Vec<RawUpstream>,
    reservation_ttl: Duration,
    check: &Check<'_>,
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
            return Err(check.invalid(
                &key("name"),
                format!("{:?} must be 1-32 of A-Z a-z 0-9 - _", u.name),
            ));
        }
        if out.iter().any(|x| x.name == u.name) {
            return Err(check.invalid(&key("name"), format!("{:?} is used twice", u.name)));
        }
        if u.ca_file.is_some() && !u.url.as_deref().is_some_and(|x| x.starts_with("https://")) {
            return Err(check.invalid(
                &key("ca_file"),
                "verifies an https:// upstream; this upstream has none".into(),
            ));
        }
        let is_http = u.url.is_some();
        if !is_http && (!u.headers.is_empty() || u.bearer.is_some() || u.oauth.is_some()) {
            return Err(check.invalid(
                &key(if u.bearer.is_some() {
                    "bearer"
                } else if u.oauth.is_some() {
                    "oauth"
                } else {
                    "headers"
                }),
                "are sent to an HTTP upstream; this upstream runs a `command` (give it `env`)"
                    .into(),
            ));
        }
        if is_http && (!u.env.is_empty() || u.cwd.is_some()) {
            return Err(check.invalid(
                &key(if u.cwd.is_some() { "cwd" } else { "env" }),
                "is for a stdio upstream (`command`); this one has a `url`".into(),
            ));
        }
        let mut credentials = http_credentials(u.headers, u.bearer, &key, check)?;
        if let Some(o) = u.oauth {
            let timeout = check.duration(&key("timeout"), &u.timeout)?;
            credentials.oauth = Some(oauth(o, &credentials, timeout, &key, check)?);
        }
        let transport = match (u.command, u.url) {
            (Some(command), None) => {
                if command.first().is_none_or(|p| p.is_empty()) {
                    return Err(check.invalid(&key("command"), "must name a program to run".into()));
                }
                let mut env = Vec::new();
                for (j, v) in u.env.into_iter().enumerate() {
                    let k = key(&format!("env[{j}]"));
                    let ok = !v.name.is_empty()
                        && !v.name.starts_with(|c: char| c.is_ascii_digit())
                        && v.name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_');
                    if !ok {
                        return Err(check.invalid(
                            &format!("{k}.name"),
                            format!(
                                "{:?} is not an environment variable name (A-Z a-z 0-9 _)",
                                v.name
                            ),
                        ));
                    }
                    if env.iter().any(|(n, _)| *n == v.name) {
                        return Err(check
                            .invalid(&format!("{k}.name"), format!("{:?} is set twice", v.name)));
                    }
                    let secret = read_value(v.value, &v.name, &k, check)?;
                    env.push((v.name, secret));
                }
                if let Some(cwd) = &u.cwd {
                    if !cwd.is_dir() {
                        return Err(check.invalid(
                            &key("cwd"),
                            format!("{} is not a directory", cwd.display()),
                        ));
                    }
                }
                TransportSpec::Stdio {
                    command,
                    env,
                    cwd: u.cwd,
                }
            }
            (None, Some(url)) => {
                let uri: hyper::Uri = url.parse().map_err(|e| {
                    check.invalid(&key("url"), format!("{url:?} is not a URL: {e}"))
                })?;
                if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.authority().is_none()
                {
                    return Err(check.invalid(
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
                return Err(check.invalid(
                    &key("command"),
                    "give exactly one of `command` (stdio) or `url` (Streamable HTTP)".into(),
                ))
            }
        };
        let timeout = check.duration(&key("timeout"), &u.timeout)?;
        if timeout >= reservation_ttl {
            return Err(check.invalid(
                &key("timeout"),
                format!("must be shorter than budget.reservation_ttl ({reservation_ttl:?}), or a reservation could expire while its call runs"),
            ));
        }
        let mut rules = Vec::new();
        for (j, t) in u.tools.into_iter().enumerate() {
            let key = |field: &str| format!("upstreams[{i}].tools[{j}].{field}");
            if t.name.is_empty() {
                return Err(check.invalid(&key("name"), "must name a tool or a pattern".into()));
            }
            let policy = if t.open {
                if t.capability.is_some()
                    || t.resource.is_some()
                    || t.fixed_resource.is_some()
                    || t.cost_microcents.is_some()
                    || t.resolve_path
                {
                    return Err(check.invalid(
                        &key("open"),
                        "an open tool takes no capability, resource or cost".into(),
                    ));
                }
                ToolPolicy::Open
            } else {
                let capability = t.capability.ok_or_else(|| {
                    check.invalid(
                        &key("capability"),
                        "is required unless the tool is `open = true`".into(),
                    )
                })?;
                let (namespace, action) = split_capability(&capability).ok_or_else(|| {
                    check.invalid(
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
                            return Err(check.invalid(
                                &key("resource"),
                                "must be JSON Pointers into the arguments, each starting with `/` (use fixed_resource for a constant)".into(),
                            ));
                        }
                        ResourceSource::Pointers(pointers)
                    }
                    (None, Some(fixed)) if !fixed.is_empty() => ResourceSource::Fixed(fixed),
                    _ => {
                        return Err(check.invalid(
                            &key("resource"),
                            "give exactly one of `resource` (JSON Pointers into the arguments) or `fixed_resource`".into(),
                        ))
                    }
                };
                if t.resolve_path && !matches!(resource, ResourceSource::Pointers(_)) {
                    return Err(check.invalid(
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
            credentials,
        });
    }
    Ok(out)
}

/// Headers that carry the protocol itself: dgw sets them, a config may not.
const RESERVED_HEADERS: [&str; 10] = [
    "host",
    "content-type",
    "content-length",
    "accept",
    "connection",
    "transfer-encoding",
    "mcp-session-id",
    "mcp-protocol-version",
    "x-request-id",
    "te",
];

/// An upstream's `headers` and `bearer`, each value read now.
fn http_credentials(
    headers: Vec<RawNamedValue>,
    bearer: Option<RawValue>,
    key: &dyn Fn(&str) -> String,
    check: &Check<'_>,
) -> Result<HttpCredentials, ConfigError> {
    let mut out = HttpCredentials::default();
    for (j, h) in headers.into_iter().enumerate() {
        let k = key(&format!("headers[{j}]"));
        let name = hyper::header::HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| {
            check.invalid(
                &format!("{k}.name"),
                format!("{:?} is not a header name", h.name),
            )
        })?;
        if RESERVED_HEADERS.contains(&name.as_str()) {
            return Err(check.invalid(&format!("{k}.name"), format!("{name} is set by dgw itself")));
        }
        if out.headers.iter().any(|x| x.name == name) {
            return Err(check.invalid(&format!("{k}.name"), format!("{name} is set twice")));
        }
        let secret = read_value(h.value, &h.name, &k, check)?;
        out.headers.push(HeaderCredential {
            name,
            scheme: None,
            secret,
        });
    }
    if let Some(b) = bearer {
        let k = key("bearer");
        if out
            .headers
            .iter()
            .any(|x| x.name == hyper::header::AUTHORIZATION)
        {
            return Err(check.invalid(&k, "sets Authorization, which `headers` sets too".into()));
        }
        let secret = read_value(b, "Authorization", &k, check)?;
        out.headers.push(HeaderCredential {
            name: hyper::header::AUTHORIZATION,
            scheme: Some("Bearer "),
            secret,
        });
    }
    Ok(out)
}

/// An upstream's `oauth`: a token URL dgw can reach, a client id, the
/// secret read from its file now; never beside another Authorization.
fn oauth(
    o: RawOAuth,
    credentials: &HttpCredentials,
    timeout: Duration,
    key: &dyn Fn(&str) -> String,
    check: &Check<'_>,
) -> Result<crate::mcp::oauth::OAuth, ConfigError> {
    let k = key("oauth");
    if credentials
        .headers
        .iter()
        .any(|x| x.name == hyper::header::AUTHORIZATION)
    {
        return Err(check.invalid(
            &k,
            "sets Authorization, which `bearer` or `headers` sets too: give one".into(),
        ));
    }
    let token_url: hyper::Uri = o
        .token_url
        .parse()
        .ok()
        .filter(|u: &hyper::Uri| {
            matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some()
        })
        .ok_or_else(|| {
            check.invalid(
                &format!("{k}.token_url"),
                format!("{:?} is not an http:// or https:// URL", o.token_url),
            )
        })?;
    let printable =
        |v: &str| !v.is_empty() && v.len() <= 1024 && v.chars().all(|c| !c.is_control());
    if !printable(&o.client_id) {
        return Err(check.invalid(
            &format!("{k}.client_id"),
            "must be 1-1024 printable characters".into(),
        ));
    }
    for (name, v) in [("scope", &o.scope), ("audience", &o.audience)] {
        if v.as_deref().is_some_and(|v| !printable(v)) {
            return Err(check.invalid(
                &format!("{k}.{name}"),
                "must be 1-1024 printable characters".into(),
            ));
        }
    }
    let client_secret = crate::mcp::secret::Secret::from_file(&o.client_secret_file)
        .map_err(|e| check.invalid(&format!("{k}.client_secret_file"), e.to_string()))?;
    Ok(crate::mcp::oauth::OAuth::new(
        crate::mcp::oauth::OAuthConfig {
            token_url,
            client_id: o.client_id,
            client_secret,
            scope: o.scope,
            audience: o.audience,
            timeout,
        },
    ))
}

/// Reads one value: exactly one of `value` (refused for a credential's
/// `name`), `value_file` or `value_env`. Errors name the file or variable,
/// never what it holds.
fn read_value(
    raw: RawValue,
    name: &str,
    key: &str,
    check: &Check<'_>,
) -> Result<Secret, ConfigError> {
    let read = match (raw.value, raw.value_file, raw.value_env) {
        (Some(v), None, None) => {
            if names_a_credential(name) {
                return Err(check.invalid(
                    &format!("{key}.value"),
                    format!("{name} carries a credential: give it with value_file or value_env, never in the config"),
                ));
            }
            Secret::inline(&v)
        }
        (None, Some(f), None) => Secret::from_file(&f),
        (None, None, Some(e)) => Secret::from_env(&e),
        _ => {
            return Err(check.invalid(
                key,
                "give exactly one of value, value_file or value_env".into(),
            ))
        }
    };
    read.map_err(|e| check.invalid(key, e.to_string()))
}
