//! The gateway's TOML configuration, validated at start with errors that
//! name the key and the problem: one typed section per module, each with
//! the defaults and the checks of its keys.

mod admin;
mod audit;
mod budget;
mod console;
pub mod files;
mod issuing;
mod mcp;
mod oauth;
pub mod schema;
mod server;
mod state;
mod telemetry;
mod tenants;
mod upstream_credentials;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dgw_core::units::Size;
use serde::Deserialize;

use dgw_protocol::{Document, Module, SectionError};

use crate::caller::AdminToken;
use crate::mcp::UpstreamSpec;

pub use budget::BudgetConfig;
pub use console::ConsoleConfig;
pub use issuing::IssuingError;
pub use mcp::McpConfig;
pub use oauth::{GrantRule, IdentityProvider, OAuthConfig};
pub use server::ServerConfig;
pub use state::StateConfig;
pub use telemetry::TelemetryConfig;
pub use tenants::{Tenant, TenantRoot};

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

/// A validated configuration. Relative paths in the file are relative to
/// the file's directory (decision 194).
#[derive(Debug, Clone)]
pub struct Config {
    pub server: ServerConfig,
    pub data_dir: PathBuf,
    /// `data_dir` as the file wrote it (before 0.2 it was relative to the
    /// current directory: [`Config::load`] refuses a move that strands data).
    data_dir_as_written: PathBuf,
    pub key_file: PathBuf,
    pub budget: BudgetConfig,
    pub tenants: Vec<Tenant>,
    pub mcp: McpConfig,
    /// Upstream MCP servers, in config order.
    pub upstreams: Vec<UpstreamSpec>,
    /// The protocols it was read with: each checked its own section.
    pub modules: Modules,
    /// The file's text, from which each protocol reads its section when
    /// it is built or reloaded ([`Config::document`]).
    pub document: Arc<str>,
    /// The file's directory, which relative paths in a protocol's section
    /// are relative to.
    pub dir: PathBuf,
    /// Administrators' tokens (`[[admin.tokens]]`); none: callers on a
    /// loopback listener may use the admin methods that read.
    pub admin_tokens: Vec<AdminToken>,
    /// Client certificate subjects that are admins (`[[admin.certs]]`).
    pub admin_certs: Vec<String>,
    /// Where the state lives (`[state]`).
    pub state: StateConfig,
    /// Keep the state in memory instead of `data_dir` (`dgw serve
    /// --ephemeral`; never from the file).
    pub ephemeral: bool,
    /// Begin a new audit log chained to the state store's anchor, in an
    /// empty `[audit] dir` (`dgw serve --new-audit-log`; never from the
    /// file).
    pub new_audit_log: bool,
    /// The log filter (`[log] level`, `RUST_LOG` syntax); `RUST_LOG` wins.
    pub log_level: String,
    /// The file it was read from: what reload reads again.
    pub source: Option<PathBuf>,
    /// The tamper-evident audit log (`[audit]`; `None`: disabled).
    pub audit: Option<dgw_audit_log::Settings>,
    /// OpenTelemetry traces (`[telemetry]`; `None`: off). Read at start.
    pub telemetry: Option<TelemetryConfig>,
    /// OAuth (`[oauth]`; `None`: off, and the fronts answer as before).
    /// Read at start.
    pub oauth: Option<OAuthConfig>,
    /// The operator console at `/ui` (`[console]`; `None`: off). Read at start.
    pub console: Option<ConsoleConfig>,
}

/// The protocol modules a configuration is read with and a gateway built
/// from: [`crate::protocols::MODULES`], or those plus a program's own.
#[derive(Clone)]
pub struct Modules(pub Vec<&'static dyn Module>);

impl Modules {
    /// The protocols the gateway ships.
    pub fn shipped() -> Self {
        Self(crate::protocols::MODULES.to_vec())
    }

    /// The shipped protocols and `more`, registered after them.
    pub fn with(more: &[&'static dyn Module]) -> Self {
        let mut all = Self::shipped();
        all.0.extend_from_slice(more);
        all
    }

    /// Each module, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &'static dyn Module> + '_ {
        self.0.iter().copied()
    }
}

impl std::fmt::Debug for Modules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|m| m.section()))
            .finish()
    }
}

/// The top-level keys the gateway itself reads (each field of
/// [`RawConfig`]); any other must be a protocol's section.
const OWN_KEYS: &[&str] = &[
    "server",
    "data_dir",
    "key_file",
    "budget",
    "tenants",
    "mcp",
    "upstreams",
    "admin",
    "state",
    "log",
    "audit",
    "telemetry",
    "oauth",
    "console",
];

/// `[log]`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawLog {
    #[serde(default = "default_log_level")]
    level: String,
}

impl Default for RawLog {
    fn default() -> Self {
        Self {
            level: default_log_level(),
        }
    }
}

fn default_log_level() -> String {
    "info".into()
}

/// The gateway's own keys; unknown top-level keys are refused by
/// [`Config::parse_with`] (a protocol's section is read by its module, and
/// its schema comes from it: [`schema::text`]). Relative paths are relative
/// to the config file's directory.
#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(title = "dgw configuration")]
struct RawConfig {
    server: server::RawServer,
    data_dir: PathBuf,
    key_file: PathBuf,
    #[serde(default)]
    budget: budget::RawBudget,
    #[serde(default)]
    tenants: Vec<tenants::RawTenant>,
    #[serde(default)]
    mcp: mcp::RawMcp,
    #[serde(default)]
    upstreams: Vec<mcp::RawUpstream>,
    #[serde(default)]
    admin: admin::RawAdmin,
    #[serde(default)]
    state: state::RawState,
    #[serde(default)]
    log: RawLog,
    #[serde(default)]
    audit: audit::RawAudit,
    #[serde(default)]
    telemetry: telemetry::RawTelemetry,
    #[serde(default)]
    oauth: oauth::RawOAuth,
    #[serde(default)]
    console: console::RawConsole,
}

/// Names the file in every error a section's checks return.
pub(crate) struct Check<'a> {
    path: &'a Path,
    /// The config file's directory: relative paths in it are relative to
    /// this (decision 194).
    base: &'a Path,
}

/// `path` as a config file in `base` means it: relative paths are relative
/// to the config file's directory (decision 194).
pub(crate) fn relative_to(base: &Path, path: PathBuf) -> PathBuf {
    if path.is_absolute() {
        path
    } else {
        base.join(path)
    }
}

impl Check<'_> {
    /// A file or directory the config names, resolved against its directory.
    fn file(&self, path: PathBuf) -> PathBuf {
        relative_to(self.base, path)
    }

    /// `key` is refused, for `problem`.
    fn invalid(&self, key: &str, problem: String) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.to_owned(),
            key: key.to_owned(),
            problem,
        }
    }

    /// A duration longer than zero (`30s`; `dgw_core::units`).
    fn duration(&self, key: &str, text: &str) -> Result<Duration, ConfigError> {
        dgw_core::units::duration(text).map_err(|problem| self.invalid(key, problem))
    }

    /// A size in bytes, at least `least` (`"1MB"`, `"64KiB"`, `1048576`;
    /// `dgw_core::units`).
    fn size(&self, key: &str, size: &Size, least: u64) -> Result<u64, ConfigError> {
        let n = size.bytes().map_err(|problem| self.invalid(key, problem))?;
        if n < least {
            return Err(self.invalid(key, format!("{n} bytes is below the least, {least}")));
        }
        Ok(n)
    }
}

impl Config {
    /// Reads and validates a config file. Relative paths in it are relative
    /// to the file's directory; a `data_dir` that the former rule (relative
    /// to the current directory) put elsewhere, where data is, while the new
    /// place has none, is refused naming both (decision 194).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::load_with(path, Modules::shipped())
    }

    /// [`Config::load`] with these protocol modules.
    pub fn load_with(path: &Path, modules: Modules) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut config = Self::parse_with(&text, path, modules)?;
        config.source = Some(path.to_owned());
        if let Some(before) = config.stranded_data_dir() {
            return Err(ConfigError::Invalid {
                path: path.to_owned(),
                key: "data_dir".into(),
                problem: format!(
                    "{:?} is read relative to the config file's directory since this release: {} holds no gateway state, but {} (relative to the current directory, as before) does. Move that directory to {}, or write data_dir as an absolute path",
                    config.data_dir_as_written,
                    config.data_dir.display(),
                    before.display(),
                    config.data_dir.display(),
                ),
            });
        }
        Ok(config)
    }

    /// Where the former rule put a relative `data_dir`, when that differs
    /// from where it is now, holds gateway state, and the new place holds
    /// none.
    fn stranded_data_dir(&self) -> Option<PathBuf> {
        if self.data_dir_as_written.is_absolute() {
            return None;
        }
        let before = std::env::current_dir()
            .ok()?
            .join(&self.data_dir_as_written);
        if crate::data_dir::is_new(&before) || !crate::data_dir::is_new(&self.data_dir) {
            return None;
        }
        let same = match (before.canonicalize(), self.data_dir.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        (!same).then_some(before)
    }

    /// The file as protocol modules read their sections from it.
    pub fn document(&self) -> Document<'_> {
        Document {
            text: &self.document,
            dir: &self.dir,
        }
    }

    /// Validates config text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        Self::parse_with(text, path, Modules::shipped())
    }

    /// [`Config::parse`] with these protocol modules: each checks its own
    /// section; a top-level key neither the gateway's nor a module's is
    /// refused by name.
    pub fn parse_with(text: &str, path: &Path, modules: Modules) -> Result<Self, ConfigError> {
        let parse_error = |e: toml::de::Error| ConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        };
        let keys: toml::Table = toml::from_str(text).map_err(parse_error)?;
        let base = path.parent().unwrap_or(Path::new(""));
        let check = Check { path, base };
        if let Some(unknown) = keys.keys().find(|k| {
            !OWN_KEYS.contains(&k.as_str()) && !modules.iter().any(|m| m.section() == k.as_str())
        }) {
            return Err(check.invalid(
                unknown,
                "is not a section dgw or any of its protocols reads".into(),
            ));
        }
        let raw: RawConfig = toml::from_str(text).map_err(parse_error)?;
        let client_ca = raw
            .server
            .tls
            .as_ref()
            .is_some_and(|t| t.client_ca_file.is_some());
        let server = raw.server.validate(&check)?;
        let tenants = tenants::validate(raw.tenants, &check)?;
        let budget = raw.budget.validate(&check)?;
        let upstreams = mcp::parse_upstreams(raw.upstreams, budget.reservation_ttl, &check)?;
        let mcp = raw.mcp.validate(&check)?;
        let names: Vec<&str> = tenants.iter().map(|t| t.name.as_str()).collect();
        for module in modules.iter() {
            module
                .check(&Document { text, dir: base }, &names)
                .map_err(|e| match e {
                    SectionError::Parse(message) => ConfigError::Parse {
                        path: path.to_owned(),
                        message,
                    },
                    SectionError::Invalid { key, problem } => check.invalid(&key, problem),
                })?;
        }
        let (admin_tokens, admin_certs) = raw.admin.validate(client_ca, &check)?;
        let state = raw.state.validate(&check)?;
        let data_dir_as_written = raw.data_dir.clone();
        let data_dir = check.file(raw.data_dir);
        let audit = raw.audit.validate(&data_dir, &check)?;
        let telemetry = raw.telemetry.validate(&check)?;
        let oauth = raw.oauth.validate(&tenants, &check)?;
        let console = raw
            .console
            .validate(admin_tokens.len() + admin_certs.len(), &check)?;
        crate::logs::parse_level(&raw.log.level)
            .map_err(|e| check.invalid("log.level", e.to_string()))?;
        Ok(Config {
            server,
            data_dir_as_written,
            data_dir,
            key_file: check.file(raw.key_file),
            budget,
            tenants,
            mcp,
            upstreams,
            modules,
            document: text.into(),
            dir: base.to_owned(),
            admin_tokens,
            admin_certs,
            state,
            ephemeral: false,
            new_audit_log: false,
            log_level: raw.log.level,
            source: None,
            audit,
            telemetry,
            oauth,
            console,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::LeasePolicy;
    use crate::mcp::tools::{ResourceSource, ToolPolicy};
    use crate::mcp::TransportSpec;

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
create_if_missing = true
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
    fn the_state_section_is_checked_key_by_key() {
        let c = Config::parse(GOOD, Path::new("t.toml")).unwrap();
        assert!(matches!(c.state, StateConfig::Embedded));
        let redis = "[state]\nbackend = \"redis\"\nurl = \"redis://:pw@10.0.0.9:6379/0\"\n";
        let c = Config::parse(&format!("{GOOD}{redis}"), Path::new("t.toml")).unwrap();
        let StateConfig::Redis {
            prefix, timeout, ..
        } = &c.state
        else {
            panic!("{:?}", c.state)
        };
        assert_eq!((prefix.as_str(), *timeout), ("dgw", Duration::from_secs(2)));
        let cluster = "[state]\nbackend = \"redis\"\nurl = \"redis+cluster://a:1,b:2\"\n";
        assert!(Config::parse(&format!("{GOOD}{cluster}"), Path::new("t.toml")).is_ok());
        for (section, at) in [
            ("[state]\nbackend = \"mongo\"\n", "`state.backend`"),
            ("[state]\nbackend = \"redis\"\n", "`state.url`"),
            (
                "[state]\nbackend = \"redis\"\nurl = \"http://h:1\"\n",
                "`state.url`",
            ),
            ("[state]\nurl = \"redis://h:1\"\n", "`state.url`"),
            (
                "[state]\nbackend = \"redis\"\nurl = \"redis://h\"\nprefix = \"{x}\"\n",
                "`state.prefix`",
            ),
            (
                "[state]\nbackend = \"redis\"\nurl = \"redis://h\"\ntimeout = \"0s\"\n",
                "`state.timeout`",
            ),
            (
                "[state]\nbackend = \"redis\"\nurl = \"redis://h\"\nca_file = \"ca.pem\"\n",
                "`state.ca_file`",
            ),
        ] {
            assert!(err(&format!("{GOOD}{section}")).contains(at), "{at}");
        }
    }

    #[test]
    fn the_telemetry_section_is_checked_key_by_key() {
        assert!(Config::parse(GOOD, Path::new("t.toml"))
            .unwrap()
            .telemetry
            .is_none());
        let on = "[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318\"\n";
        let t = Config::parse(&format!("{GOOD}{on}"), Path::new("t.toml"))
            .unwrap()
            .telemetry
            .unwrap();
        assert_eq!(t.endpoint, "http://127.0.0.1:4318/v1/traces");
        assert_eq!((t.service_name.as_str(), t.sampling_ratio), ("dgw", 1.0));
        assert_eq!(
            (t.export_timeout, t.max_queue),
            (Duration::from_secs(10), 2048)
        );
        for endpoint in ["collector:4318", "http://u:pw@c:4318", "ftp://c/"] {
            let e = err(&format!(
                "{GOOD}[telemetry]\notlp_endpoint = \"{endpoint}\"\n"
            ));
            assert!(e.contains("telemetry.otlp_endpoint"), "{endpoint}: {e}");
        }
        for (line, key) in [
            ("sampling_ratio = 1.5", "telemetry.sampling_ratio"),
            ("sampling_ratio = -0.1", "telemetry.sampling_ratio"),
            ("export_timeout = \"0s\"", "telemetry.export_timeout"),
            ("export_timeout = \"soon\"", "telemetry.export_timeout"),
            ("max_queue = 0", "telemetry.max_queue"),
            ("service_name = \"\"", "telemetry.service_name"),
        ] {
            let e = err(&format!("{GOOD}{on}{line}\n"));
            assert!(e.contains(key), "{line}: {e}");
        }
        // Settings without an endpoint would read as traces on.
        let e = err(&format!("{GOOD}[telemetry]\nsampling_ratio = 0.5\n"));
        assert!(e.contains("telemetry.sampling_ratio"), "{e}");
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
        // A top-level key neither the gateway's nor a listed protocol's.
        assert!(err(&format!("{GOOD}[issuers]\nx = 1\n")).contains("`issuers`"));
        assert!(err(&format!("{GOOD}[delegateos]\nx = 1\n")).contains("`x`"));
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
    fn resource_and_prompt_rules_are_read_and_checked_by_key() {
        use crate::mcp::data_rules::{DataKind, DataPolicy};
        let with = |rules: &str| {
            format!("{GOOD}\n[[upstreams]]\nname = \"a\"\ncommand = [\"x\"]\n{rules}")
        };
        let c = Config::parse(
            &with(
                "[[upstreams.resources]]\nuri = \"file:///srv/docs/*\"\ncapability = \"docs:read\"\ncost_microcents = 4\n[[upstreams.prompts]]\nname = \"open_*\"\nopen = true",
            ),
            Path::new("t.toml"),
        )
        .unwrap();
        let data = &c.upstreams[0].data;
        assert_eq!(
            data.policy_for(DataKind::Resource, "file:///srv/docs/a")
                .map(DataPolicy::cost_microcents),
            Some(4)
        );
        assert_eq!(
            data.policy_for(DataKind::Prompt, "open_x"),
            Some(&DataPolicy::Open)
        );
        assert_eq!(data.policy_for(DataKind::Resource, "file:///etc/x"), None);
        let key = |table: &str, field: &str| format!("`upstreams[0].{table}[0].{field}`");
        for (rule, table, field) in [
            // Not written as dgw matches: it could never match what it names.
            (
                "[[upstreams.resources]]\nuri = \"FILE:///srv/*\"\ncapability = \"d:r\"",
                "resources",
                "uri",
            ),
            (
                "[[upstreams.resources]]\nuri = \"file:///srv/../*\"\ncapability = \"d:r\"",
                "resources",
                "uri",
            ),
            (
                "[[upstreams.resources]]\nuri = \"file:///srv/%2e*\"\ncapability = \"d:r\"",
                "resources",
                "uri",
            ),
            (
                "[[upstreams.resources]]\ncapability = \"d:r\"",
                "resources",
                "uri",
            ),
            (
                "[[upstreams.resources]]\nuri = \"t://*\"\nname = \"x\"\ncapability = \"d:r\"",
                "resources",
                "name",
            ),
            (
                "[[upstreams.resources]]\nuri = \"t://*\"",
                "resources",
                "capability",
            ),
            (
                "[[upstreams.prompts]]\nname = \"p\"\ncapability = \"nocolon\"",
                "prompts",
                "capability",
            ),
            (
                "[[upstreams.prompts]]\nname = \"p\"\nopen = true\ncost_microcents = 1",
                "prompts",
                "open",
            ),
        ] {
            let e = err(&with(rule));
            assert!(e.contains(&key(table, field)), "{rule}: {e}");
        }
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
