//! The gateway's TOML configuration, validated at start with errors that
//! name the key and the problem: one typed section per module, each with
//! the defaults and the checks of its keys.

mod admin;
mod audit;
mod budget;
mod mcp;
mod server;
mod state;
mod tenants;
mod upstream_credentials;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::caller::AdminToken;
use crate::mcp::UpstreamSpec;
use crate::protocols::agenta::{AgentaConfig, RawAgenta};
use crate::protocols::ldp::{LdpConfig, RawLdp};
use crate::protocols::motebit::{MotebitConfig, RawMotebit};
use crate::protocols::talos::{TalosIssuer, TalosSection};

pub use budget::BudgetConfig;
pub use mcp::McpConfig;
pub use server::ServerConfig;
pub use state::StateConfig;
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
    /// Trusted Talos capability issuers.
    pub talos: Vec<TalosIssuer>,
    /// Agenta, when `[agenta]` is present.
    pub agenta: Option<AgentaConfig>,
    /// Motebit's trusted delegators and audience (`[motebit]`).
    pub motebit: MotebitConfig,
    /// LDP, when `[ldp]` is present.
    pub ldp: Option<LdpConfig>,
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
}

/// `[log]`.
#[derive(Deserialize)]
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
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
    talos: TalosSection,
    agenta: Option<RawAgenta>,
    #[serde(default)]
    motebit: RawMotebit,
    ldp: Option<RawLdp>,
    #[serde(default)]
    admin: admin::RawAdmin,
    #[serde(default)]
    state: state::RawState,
    #[serde(default)]
    log: RawLog,
    #[serde(default)]
    audit: audit::RawAudit,
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

    /// A duration longer than zero, written as `humantime` reads it (`30s`).
    fn duration(&self, key: &str, text: &str) -> Result<Duration, ConfigError> {
        let d = humantime::parse_duration(text)
            .map_err(|e| self.invalid(key, format!("{text:?} is not a duration: {e}")))?;
        if d.is_zero() {
            return Err(self.invalid(key, "must be longer than zero".into()));
        }
        Ok(d)
    }
}

impl Config {
    /// Reads and validates a config file. Relative paths in it are relative
    /// to the file's directory; a `data_dir` that the former rule (relative
    /// to the current directory) put elsewhere, where data is, while the new
    /// place has none, is refused naming both (decision 194).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut config = Self::parse(&text, path)?;
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

    /// Validates config text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        let base = path.parent().unwrap_or(Path::new(""));
        let check = Check { path, base };
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
        let talos = raw
            .talos
            .issuers()
            .map_err(|(key, problem)| check.invalid(&key, problem))?;
        let agenta = raw
            .agenta
            .map(|a| a.validate(base))
            .transpose()
            .map_err(|(key, problem)| check.invalid(&key, problem))?;
        if let Some(a) = &agenta {
            if !tenants.iter().any(|t| t.name == a.tenant) {
                return Err(check.invalid(
                    "agenta.tenant",
                    format!("{:?} is not a configured tenant", a.tenant),
                ));
            }
        }
        let motebit = raw
            .motebit
            .validate()
            .map_err(|(key, problem)| check.invalid(&key, problem))?;
        for (i, d) in motebit.delegators.iter().enumerate() {
            if !tenants.iter().any(|t| t.name == d.tenant) {
                return Err(check.invalid(
                    &format!("motebit.delegators[{i}].tenant"),
                    format!("{:?} is not a configured tenant", d.tenant),
                ));
            }
        }
        let ldp = raw
            .ldp
            .map(|l| l.validate(base))
            .transpose()
            .map_err(|(key, problem)| check.invalid(&key, problem))?;
        for (i, d) in ldp.iter().flat_map(|l| l.domains.iter()).enumerate() {
            if !tenants.iter().any(|t| t.name == d.tenant) {
                return Err(check.invalid(
                    &format!("ldp.domains[{i}].tenant"),
                    format!("{:?} is not a configured tenant", d.tenant),
                ));
            }
        }
        for (i, d) in ldp.iter().flat_map(|l| l.delegates.iter()).enumerate() {
            if !tenants.iter().any(|t| t.name == d.tenant) {
                return Err(check.invalid(
                    &format!("ldp.delegates[{i}].tenant"),
                    format!("{:?} is not a configured tenant", d.tenant),
                ));
            }
        }
        let (admin_tokens, admin_certs) = raw.admin.validate(client_ca, &check)?;
        let state = raw.state.validate(&check)?;
        let data_dir_as_written = raw.data_dir.clone();
        let data_dir = check.file(raw.data_dir);
        let audit = raw.audit.validate(&data_dir, &check)?;
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
            talos,
            agenta,
            motebit,
            ldp,
            admin_tokens,
            admin_certs,
            state,
            ephemeral: false,
            new_audit_log: false,
            log_level: raw.log.level,
            source: None,
            audit,
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
    fn the_ldp_section_is_checked_key_by_key() {
        let ldp = "[ldp]\n[[ldp.delegates]]\nname = \"qwen\"\nurl = \"http://127.0.0.1:9\"\n\
                   secret = \"0123456789abcdef0123\"\ntrust_domain = \"r\"\ntenant = \"acme\"\n\
                   cost_microcents = 7\n[ldp.delegates.skill_costs]\nreasoning = 9\n";
        let c = Config::parse(&format!("{GOOD}{ldp}"), Path::new("t.toml")).unwrap();
        let d = &c.ldp.as_ref().unwrap().delegates[0];
        assert_eq!((d.cost("reasoning"), d.cost("other")), (9, 7));
        assert!(
            !format!("{d:?}").contains("0123456789"),
            "the secret is never printed"
        );
        assert!(Config::parse(GOOD, Path::new("t.toml"))
            .unwrap()
            .ldp
            .is_none());
        let paying = "[[ldp.domains]]\nname = \"r\"\ntenant = \"nobody\"\nbudget_microcents = 5\n";
        assert!(err(&format!("{GOOD}{ldp}{paying}")).contains("`ldp.domains[0].tenant`"));
        let ok = paying.replace("nobody", "acme");
        let c = Config::parse(&format!("{GOOD}{ldp}{ok}"), Path::new("t.toml")).unwrap();
        assert_eq!(c.ldp.unwrap().domains[0].budget_microcents, 5);
        for (from, to, at) in [
            ("\"qwen\"", "\"Qwen/x\"", "`ldp.delegates[0].name`"),
            (
                "\"http://127.0.0.1:9\"",
                "\"ftp://x\"",
                "`ldp.delegates[0].url`",
            ),
            (
                "\"0123456789abcdef0123\"",
                "\"short\"",
                "`ldp.delegates[0].secret`",
            ),
            ("\"acme\"", "\"nobody\"", "`ldp.delegates[0].tenant`"),
        ] {
            assert!(
                err(&format!("{GOOD}{}", ldp.replace(from, to))).contains(at),
                "{at}"
            );
        }
    }

    #[test]
    fn the_motebit_section_is_checked_key_by_key() {
        let key = "8a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c";
        let motebit = format!(
            "[motebit]\naudience = \"custom:dgw\"\n[[motebit.delegators]]\nmotebit_id = \"d-1\"\n\
             public_key = \"{key}\"\ntenant = \"acme\"\nbudget_microcents = 500\n"
        );
        let c = Config::parse(&format!("{GOOD}{motebit}"), Path::new("t.toml")).unwrap();
        assert_eq!(c.motebit.audience, "custom:dgw");
        assert_eq!(c.motebit.delegators[0].budget_microcents, 500);
        let default = Config::parse(GOOD, Path::new("t.toml")).unwrap();
        assert_eq!(default.motebit.audience, "task:submit");
        assert!(default.motebit.delegators.is_empty());
        for (from, to, at) in [
            ("\"acme\"", "\"nobody\"", "`motebit.delegators[0].tenant`"),
            (
                key,
                &key.to_uppercase(),
                "`motebit.delegators[0].public_key`",
            ),
            ("\"d-1\"", "\"\"", "`motebit.delegators[0].motebit_id`"),
            ("\"custom:dgw\"", "\"\"", "`motebit.audience`"),
        ] {
            assert!(
                err(&format!("{GOOD}{}", motebit.replace(from, to))).contains(at),
                "{at}"
            );
        }
        assert!(err(&format!("{GOOD}{motebit}extra = 1\n")).contains("extra"));
    }

    #[test]
    fn the_agenta_section_is_checked_key_by_key() {
        let agenta = "[agenta]\ntenant = \"acme\"\nbuyer_callback_hosts = [\"Agents.Example\"]\n\
                      [agenta.currencies]\nUSD = 1000000\n[[agenta.offers]]\nfile = \"o.json\"\n";
        let c = Config::parse(&format!("{GOOD}{agenta}"), Path::new("t.toml")).unwrap();
        let a = c.agenta.unwrap();
        assert_eq!(a.currencies["USD"], 1_000_000);
        assert_eq!(
            a.buyer_callback_origins
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["https://agents.example:443"],
            "a bare host is https on 443"
        );
        assert_eq!(a.seller_timeout, Duration::from_secs(10));
        assert_eq!(a.limits, agenta::Limits::default());
        assert_eq!(a.max_stored_requests, 10_000);
        assert_eq!(a.retention, Duration::from_secs(7 * 86_400));
        assert!(Config::parse(GOOD, Path::new("t.toml"))
            .unwrap()
            .agenta
            .is_none());
        assert!(err(&format!(
            "{GOOD}{}",
            agenta.replace("\"acme\"", "\"nobody\"")
        ))
        .contains("`agenta.tenant`"));
        assert!(err(&format!("{GOOD}{}", agenta.replace("USD", "usd")))
            .contains("`agenta.currencies.usd`"));
        assert!(err(&format!("{GOOD}{}", agenta.replace("1000000", "0")))
            .contains("`agenta.currencies.USD`"));
        assert!(err(&format!(
            "{GOOD}{}",
            agenta.replace(
                "[agenta.currencies]",
                "public_url = \"ftp://x\"\n[agenta.currencies]"
            )
        ))
        .contains("`agenta.public_url`"));
        // The bounds on what is kept, each by its name.
        let with = |key: &str| {
            agenta.replace(
                "[agenta.currencies]",
                &format!("{key}\n[agenta.currencies]"),
            )
        };
        for (line, key) in [
            ("max_input_bytes = 1", "agenta.max_input_bytes"),
            ("max_result_bytes = 0", "agenta.max_result_bytes"),
            ("max_metadata_bytes = 1", "agenta.max_metadata_bytes"),
            ("max_string_bytes = 63", "agenta.max_string_bytes"),
            ("max_stored_requests = 0", "agenta.max_stored_requests"),
            ("retention = \"0s\"", "agenta.retention"),
            ("retention = \"a week\"", "agenta.retention"),
            ("max_input_bytes = -1", "max_input_bytes"),
        ] {
            let e = err(&format!("{GOOD}{}", with(line)));
            assert!(e.contains(key), "{line}: {e}");
        }
        for (entry, i) in [
            ("\"h.example:8443\"", 0),
            ("\"https://a.example\", \"ftp://b.example\"", 1),
            ("\"https://a.example/path\"", 0),
        ] {
            let e = err(&format!(
                "{GOOD}{}",
                agenta.replace("\"Agents.Example\"", entry)
            ));
            assert!(
                e.contains(&format!("`agenta.buyer_callback_hosts[{i}]`")),
                "{entry}: {e}"
            );
        }
        let c = Config::parse(
            &format!(
                "{GOOD}{}",
                with("max_input_bytes = 100\nmax_string_bytes = 64\nmax_stored_requests = 3\nretention = \"2s\"")
            ),
            Path::new("t.toml"),
        )
        .unwrap()
        .agenta
        .unwrap();
        assert_eq!((c.limits.input_bytes, c.limits.string_bytes), (100, 64));
        assert_eq!(c.max_stored_requests, 3);
        assert_eq!(c.retention, Duration::from_secs(2));
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
