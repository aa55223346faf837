//! `[mcp]` and `[[upstreams]]`: the MCP proxy's sessions, and the upstream
//! servers with the rules that map their tools to capabilities.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::upstream_credentials::{read_value, RawCredentials, RawNamedValue, RawOAuth, RawValue};
use super::{Check, ConfigError};
use crate::mcp::data_rules::{DataPolicy, DataRule, DataRules};
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
    /// Rules for its resources, by URI pattern.
    #[serde(default)]
    pub(super) resources: Vec<RawDataRule>,
    /// Rules for its prompts, by name.
    #[serde(default)]
    pub(super) prompts: Vec<RawDataRule>,
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
    /// What the upstream may ask of the callers whose calls it serves
    /// (default: refuse sampling, allow elicitation and roots).
    #[serde(default)]
    pub(super) server_requests: RawServerRequests,
}

/// `[[upstreams]] server_requests = { sampling = …, elicitation = …, roots = … }`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServerRequests {
    /// `sampling/createMessage`: refused by default (it spends the caller's model).
    #[serde(default)]
    pub(super) sampling: bool,
    /// `elicitation/create`.
    #[serde(default = "allowed")]
    pub(super) elicitation: bool,
    /// `roots/list`.
    #[serde(default = "allowed")]
    pub(super) roots: bool,
}

fn allowed() -> bool {
    true
}

impl Default for RawServerRequests {
    fn default() -> Self {
        let d = crate::mcp::upstream::ServerRequestPolicy::default();
        Self {
            sampling: d.sampling,
            elicitation: d.elicitation,
            roots: d.roots,
        }
    }
}

impl RawServerRequests {
    fn policy(&self) -> crate::mcp::upstream::ServerRequestPolicy {
        crate::mcp::upstream::ServerRequestPolicy {
            sampling: self.sampling,
            elicitation: self.elicitation,
            roots: self.roots,
        }
    }
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
        secret_files(
            &key(""),
            &self.headers,
            self.bearer.as_ref(),
            self.oauth.as_ref(),
            out,
        );
        for (j, t) in self.tools.iter().enumerate() {
            let at = key(&format!("tools[{j}]."));
            secret_files(&at, &t.headers, t.bearer.as_ref(), t.oauth.as_ref(), out);
        }
        for (j, e) in self.env.iter().enumerate() {
            if let Some(path) = e.value_file() {
                out.push(Named {
                    key: key(&format!("env[{j}].value_file")),
                    path: path.clone(),
                    what: Use::Secret,
                });
            }
        }
    }
}

/// The secret files of one entry's `headers`, `bearer` and `oauth`, keyed
/// under `at` (`upstreams[0].`, `upstreams[0].tools[1].`).
fn secret_files(
    at: &str,
    headers: &[RawNamedValue],
    bearer: Option<&RawValue>,
    oauth: Option<&RawOAuth>,
    out: &mut Vec<super::files::Named>,
) {
    use super::files::{Named, Use};
    let files = headers
        .iter()
        .enumerate()
        .filter_map(|(k, h)| Some((format!("{at}headers[{k}].value_file"), h.value_file()?)))
        .chain(bearer.and_then(|b| Some((format!("{at}bearer.value_file"), b.value_file()?))))
        .chain(oauth.map(|o| {
            (
                format!("{at}oauth.client_secret_file"),
                o.client_secret_file(),
            )
        }));
    for (key, path) in files {
        out.push(Named {
            key,
            path: path.clone(),
            what: Use::Secret,
        });
    }
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
    /// Presented for this rule's tools instead of the upstream's own.
    #[serde(default)]
    pub(super) headers: Vec<RawNamedValue>,
    #[serde(default)]
    pub(super) bearer: Option<RawValue>,
    #[serde(default)]
    pub(super) oauth: Option<RawOAuth>,
}

/// A resource rule (`uri`) or a prompt rule (`name`).
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDataRule {
    /// A resource URI pattern, `*` matching any run of characters.
    #[serde(default)]
    pub(super) uri: Option<String>,
    /// A prompt name pattern, `*` matching any run of characters.
    #[serde(default)]
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) capability: Option<String>,
    #[serde(default)]
    pub(super) cost_microcents: Option<u64>,
    #[serde(default)]
    pub(super) open: bool,
}

/// `upstreams[i].resources` or `.prompts` (`table`), keyed by `pattern`
/// (`uri` or `name`).
fn data_rules(
    raw: Vec<RawDataRule>,
    at: &str,
    pattern_key: &str,
    check: &Check<'_>,
) -> Result<Vec<DataRule>, ConfigError> {
    let mut out = Vec::with_capacity(raw.len());
    for (j, r) in raw.into_iter().enumerate() {
        let key = |field: &str| format!("{at}[{j}].{field}");
        let (pattern, other) = match pattern_key {
            "uri" => (r.uri, r.name.map(|_| "name")),
            _ => (r.name, r.uri.map(|_| "uri")),
        };
        if let Some(other) = other {
            return Err(check.invalid(
                &key(other),
                format!("this rule is matched by `{pattern_key}`"),
            ));
        }
        let pattern = match pattern {
            Some(p) if !p.is_empty() => p,
            _ => return Err(check.invalid(&key(pattern_key), "is required".into())),
        };
        if pattern_key == "uri" {
            // A pattern is matched against normalized URIs: one that is not
            // normalized itself could never match what it seems to name.
            let probe = pattern.replace('*', "x");
            match crate::mcp::data_rules::normalize_uri(&probe) {
                Ok(n) if n == probe => {}
                Ok(n) => {
                    return Err(check.invalid(
                        &key("uri"),
                        format!(
                            "{pattern:?} is not normalized: write it as dgw matches it ({n:?})"
                        ),
                    ))
                }
                Err(e) => return Err(check.invalid(&key("uri"), format!("{pattern:?} {e}"))),
            }
        }
        let policy = if r.open {
            if r.capability.is_some() || r.cost_microcents.is_some() {
                return Err(check.invalid(
                    &key("open"),
                    "an open rule takes no capability or cost".into(),
                ));
            }
            DataPolicy::Open
        } else {
            let (namespace, action) =
                required_capability(check, &key("capability"), r.capability, "rule")?;
            DataPolicy::Enforced {
                namespace,
                action,
                cost_microcents: r.cost_microcents.unwrap_or(0),
            }
        };
        out.push(DataRule {
            pattern: NamePattern::new(&pattern),
            policy,
        });
    }
    Ok(out)
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
        if let Some(m) = raw.unchecked_methods.first() {
            // Gone: resources and prompts have rules of their own now, and
            // nothing passes unchecked that a config did not name.
            return Err(check.invalid(
                "mcp.unchecked_methods",
                format!(
                    "is no longer read ({m:?} listed): resources and prompts are enforced by rules; give the upstream [[upstreams.resources]] (uri) or [[upstreams.prompts]] (name) rules, `open = true` for what was unchecked"
                ),
            ));
        }
        if raw.max_sessions == 0 {
            return Err(check.invalid("mcp.max_sessions", "must be at least 1".into()));
        }
        Ok(McpConfig {
            session_ttl: check.duration("mcp.session_ttl", &raw.session_ttl)?,
            max_sessions: raw.max_sessions,
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
        let given = RawCredentials {
            headers: u.headers,
            bearer: u.bearer,
            oauth: u.oauth,
        };
        if let (false, Some(field)) = (is_http, given.first_key()) {
            return Err(check.invalid(
                &key(field),
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
        let timeout = check.duration(&key("timeout"), &u.timeout)?;
        let credentials = given.read(timeout, &key, check)?;
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
                let cwd = u.cwd.map(|c| check.file(c));
                if let Some(cwd) = &cwd {
                    if !cwd.is_dir() {
                        return Err(check.invalid(
                            &key("cwd"),
                            format!("{} is not a directory", cwd.display()),
                        ));
                    }
                }
                TransportSpec::Stdio { command, env, cwd }
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
                    ca_file: u.ca_file.map(|f| check.file(f)),
                }
            }
            _ => {
                return Err(check.invalid(
                    &key("command"),
                    "give exactly one of `command` (stdio) or `url` (Streamable HTTP)".into(),
                ))
            }
        };
        if timeout >= reservation_ttl {
            return Err(check.invalid(
                &key("timeout"),
                format!("must be shorter than budget.reservation_ttl ({}), or a reservation could expire while its call runs", crate::units::show_duration(reservation_ttl)),
            ));
        }
        let data = DataRules {
            resources: data_rules(u.resources, &key("resources"), "uri", check)?,
            prompts: data_rules(u.prompts, &key("prompts"), "name", check)?,
        };
        let mut rules = Vec::new();
        for (j, t) in u.tools.into_iter().enumerate() {
            let key = |field: &str| format!("upstreams[{i}].tools[{j}].{field}");
            if t.name.is_empty() {
                return Err(check.invalid(&key("name"), "must name a tool or a pattern".into()));
            }
            let own = RawCredentials {
                headers: t.headers,
                bearer: t.bearer,
                oauth: t.oauth,
            };
            if let Some(field) = own.first_key() {
                if !is_http {
                    return Err(check.invalid(
                        &key(field),
                        "are sent to an HTTP upstream; this upstream runs a `command`".into(),
                    ));
                }
                if t.open {
                    return Err(check.invalid(
                        &key(field),
                        "a rule's own credentials are for tools a DCT must grant; this rule is `open = true`".into(),
                    ));
                }
            }
            let credentials = own.read_some(timeout, &key, check)?;
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
                let (namespace, action) =
                    required_capability(check, &key("capability"), t.capability, "tool")?;
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
                    namespace,
                    action,
                    resource,
                    cost_microcents: t.cost_microcents.unwrap_or(0),
                    resolve_path: t.resolve_path,
                }
            };
            rules.push(ToolRule {
                name: NamePattern::new(&t.name),
                policy,
                credentials,
            });
        }
        out.push(UpstreamSpec {
            server_requests: u.server_requests.policy(),
            name: u.name,
            transport,
            timeout,
            rules: ToolRules(rules),
            data,
            credentials,
        });
    }
    Ok(out)
}

/// An enforced `what`'s (a tool's, a data rule's) `capability` at `key`:
/// required unless it is open, and a concrete `NAMESPACE:ACTION`.
fn required_capability(
    check: &Check<'_>,
    key: &str,
    capability: Option<String>,
    what: &str,
) -> Result<(String, String), ConfigError> {
    let capability = capability.ok_or_else(|| {
        check.invalid(
            key,
            format!("is required unless the {what} is `open = true`"),
        )
    })?;
    let (namespace, action) = split_capability(&capability).ok_or_else(|| {
        check.invalid(
            key,
            format!("{capability:?} must be NAMESPACE:ACTION, both concrete"),
        )
    })?;
    Ok((namespace.to_owned(), action.to_owned()))
}
