//! Hot reload: SIGHUP and `dgw/reload` read the config file again and apply
//! what can change under traffic (tenants, the protocols' trusted issuers
//! and delegators, upstreams and their tool rules, admin tokens and
//! certificates, the listeners' TLS files, the log level). A file that does
//! not validate, or whose key or certificate files cannot be read, is
//! refused whole and the running configuration kept. Calls in flight finish
//! under the configuration they started with; what is held open (an MCP
//! session, a gRPC decision stream) ends when the credential it was opened
//! with no longer stands. Sections that only a restart can change are named
//! in the report and left as they run.

use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

use crate::caller::Admins;
use crate::config::{Config, ConfigError};
use crate::gatekeeper::Gatekeeper;
use crate::keyfile::KeyFileError;
use crate::mcp::{McpProxy, UpstreamChanges};
use crate::protocol::Registry;
use crate::state::AuditSink;
use crate::tls::{LiveTls, TlsError};
use dgw_protocol::{Running, SectionError, Staged};

/// Why a reload was refused; the running configuration is unchanged.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("the gateway was not started from a config file")]
    NoSource,
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    KeyFile(#[from] KeyFileError),
    #[error(transparent)]
    Issuing(#[from] crate::config::IssuingError),
    #[error("TLS: {0}")]
    Tls(#[from] TlsError),
    #[error("log.level: {0}")]
    LogLevel(#[from] crate::logs::LevelError),
    #[error("[{section}]: {error}")]
    Section {
        section: &'static str,
        error: SectionError,
    },
}

/// What a reload changed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReloadReport {
    /// The sections applied (each is applied whole, changed or not).
    pub applied: Vec<&'static str>,
    /// Sections that differ from the running ones but need a restart;
    /// they keep running as they were.
    pub restart_needed: Vec<&'static str>,
    pub upstreams: UpstreamChanges,
}

/// The listeners' live TLS configurations.
#[derive(Clone)]
pub struct ListenerTls {
    pub http: LiveTls,
    pub grpc: Option<LiveTls>,
}

/// The running parts that a reload changes.
pub struct Parts {
    pub gate: Arc<Gatekeeper>,
    pub admins: Admins,
    pub proxy: Arc<McpProxy>,
    pub protocols: Arc<Registry>,
    /// The tenants' issuing delegations (`dgw/tokens/issue`).
    pub issuing: Arc<dgw_core::issuing::Issuing>,
    /// Each protocol module as built, by section name: it stages its
    /// section of the new file.
    pub modules: Vec<(&'static str, Arc<dyn Running>)>,
    pub audit: Arc<dyn AuditSink>,
    pub tls: Option<ListenerTls>,
}

/// Reloads the running gateway's configuration, one reload at a time.
pub struct Reloader {
    source: Option<PathBuf>,
    /// What runs now: the last config applied, with its restart-only
    /// sections as the gateway started.
    running: tokio::sync::Mutex<Config>,
    parts: Parts,
}

impl Reloader {
    /// A reloader for a gateway started with `config`.
    pub fn new(config: Config, parts: Parts) -> Self {
        Self {
            source: config.source.clone(),
            running: tokio::sync::Mutex::new(config),
            parts,
        }
    }

    /// Reads the config file again and applies it; `by` names who asked
    /// (for the audit record).
    pub async fn reload(&self, by: &str) -> Result<ReloadReport, ReloadError> {
        let outcome = self.reload_inner().await;
        let record = match &outcome {
            Ok(report) => serde_json::json!({
                "event": "reload", "by": by, "at": crate::gatekeeper::now().1,
                "applied": report.applied, "restartNeeded": report.restart_needed,
                "upstreams": report.upstreams,
            }),
            Err(e) => serde_json::json!({
                "event": "reload_refused", "by": by, "at": crate::gatekeeper::now().1,
                "error": e.to_string(),
            }),
        };
        if let Err(e) = self.parts.audit.append(&record).await {
            tracing::error!(error = %e, "appending the reload to the audit log failed");
        }
        match &outcome {
            Ok(report) => {
                tracing::info!(
                    %by,
                    applied = %report.applied.join(", "),
                    restart_needed = %report.restart_needed.join(", "),
                    upstreams_kept = %report.upstreams.kept.join(", "),
                    upstreams_started = %report.upstreams.started.join(", "),
                    upstreams_retired = %report.upstreams.retired.join(", "),
                    "configuration reloaded"
                );
                for section in &report.restart_needed {
                    tracing::warn!(section, "changed in the file, but only a restart applies it; still running the old one");
                }
            }
            Err(e) => {
                tracing::error!(%by, error = %e, "reload refused; the running configuration is kept")
            }
        }
        outcome
    }

    async fn reload_inner(&self) -> Result<ReloadReport, ReloadError> {
        let source = self.source.as_deref().ok_or(ReloadError::NoSource)?;
        let mut running = self.running.lock().await;
        let next = Config::load_with(source, running.modules.clone())?;
        // Everything that can fail is read before anything changes.
        let tenants = next.tenant_roots()?;
        let issuing = next.issuing_delegations(&tenants, self.parts.issuing.gateway())?;
        crate::logs::parse_level(&next.log_level)?;
        let mut restart_needed = restart_only_changes(&running, &next);
        let mut staged = Vec::new();
        for (section, module) in &self.parts.modules {
            match module
                .stage(&next.document())
                .map_err(|error| ReloadError::Section { section, error })?
            {
                Staged::Apply(apply) => staged.push((*section, apply)),
                Staged::RestartNeeded => restart_needed.push(section),
                Staged::Unchanged => {}
            }
        }
        let tls = match (&self.parts.tls, &next.server.tls) {
            (Some(_), Some(files)) => Some((
                crate::tls::server_config(files, &[b"http/1.1"])?,
                crate::tls::server_config(files, &[b"h2"])?,
            )),
            _ => None,
        };

        let p = &self.parts;
        let mut applied = vec!["tenants", "admin"];
        p.gate.set_tenants(tenants);
        p.issuing.set(issuing);
        p.admins
            .replace(next.admin_tokens.clone(), next.admin_certs.clone());
        for (section, apply) in staged {
            apply();
            applied.push(section);
        }
        // Open MCP sessions check their credential again (gRPC decision
        // streams follow `admins` themselves).
        p.proxy.trust_changed();
        applied.push("upstreams");
        p.gate.set_budget_roots(
            p.protocols
                .all()
                .iter()
                .flat_map(|protocol| protocol.budget_roots())
                .collect(),
        );
        if let (Some(live), Some((http, grpc))) = (&p.tls, tls) {
            live.http.replace(http);
            if let Some(g) = &live.grpc {
                g.replace(grpc);
            }
            applied.push("server.tls");
        }
        if crate::logs::set_level(&next.log_level)? {
            applied.push("log");
        }
        let upstreams = p
            .proxy
            .replace_upstreams(next.upstreams.clone(), next.mcp.ready_timeout)
            .await;

        running.tenants = next.tenants;
        running.admin_tokens = next.admin_tokens;
        running.admin_certs = next.admin_certs;
        // Each module keeps what it applied (or still runs): its section
        // is read from the file again at the next reload.
        running.upstreams = next.upstreams;
        running.log_level = next.log_level;
        if applied.contains(&"server.tls") {
            running.server.tls = next.server.tls;
        }
        Ok(ReloadReport {
            applied,
            restart_needed,
            upstreams,
        })
    }
}

/// The sections of `next` that differ from `running` and that only a
/// restart applies: listeners and limits, where state lives, budgets,
/// MCP sessions, the audit log, traces (the exporter and its layer are set
/// up once). (A protocol module says itself whether its section applies
/// live: [`Staged::RestartNeeded`].)
fn restart_only_changes(running: &Config, next: &Config) -> Vec<&'static str> {
    let (mut a, mut b) = (running.server.clone(), next.server.clone());
    let tls_switched = a.tls.is_some() != b.tls.is_some();
    a.tls = None;
    b.tls = None;
    let differs = [
        ("server", a != b),
        ("server.tls", tls_switched),
        ("data_dir", running.data_dir != next.data_dir),
        ("key_file", running.key_file != next.key_file),
        ("budget", running.budget != next.budget),
        ("mcp", running.mcp != next.mcp),
        ("state", running.state != next.state),
        ("audit", running.audit != next.audit),
        ("telemetry", running.telemetry != next.telemetry),
    ];
    differs
        .iter()
        .filter(|(_, d)| *d)
        .map(|(name, _)| *name)
        .collect()
}
