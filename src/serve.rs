//! `dgw serve`: opens the state, starts the fronts and the sweeper, and
//! stops cleanly on SIGTERM or Ctrl-C (stop accepting, drain, flush, exit 0).

use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use delegateos::Keypair;
use tokio::net::TcpListener;

use crate::caller::{Admins, Authenticator};
use crate::config::Config;
use crate::connections::{connections_within, Limits};
use crate::gatekeeper::{now, Gatekeeper};
use crate::http::{self, HttpFront};
use crate::http_guard::HttpGuard;
use crate::jsonrpc::JsonRpc;
use crate::keyfile::{self, KeyFileError};
use crate::mcp::streamable::{SessionPolicy, Sessions, StreamableHttp};
use crate::mcp::{McpProxy, Upstream};
use crate::protocol::Registry;
use crate::reload::{ListenerTls, Parts, Reloader};
use crate::revocations::{Revocations, RevokeError};
use crate::state::{Backend, BudgetSettings, StorageError, Stores};
use crate::telemetry;
use crate::tls::LiveTls;
use dgw_protocol::{Running, Services};

/// Why the gateway could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("data_dir {path}: {source}")]
    DataDir {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    KeyFile(#[from] KeyFileError),
    #[error(transparent)]
    Issuing(#[from] crate::config::IssuingError),
    #[error("opening the database: {0}")]
    Storage(#[from] StorageError),
    #[error("loading revocations: {0}")]
    Revocations(#[from] RevokeError),
    #[error("registering protocols: {0}")]
    Protocol(String),
    #[error("TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
    #[error("the audit log: {0}")]
    Audit(#[from] crate::audit_log::OpenError),
    #[error(transparent)]
    Locked(#[from] crate::data_dir::LockError),
    #[error("the session DCT (--dct-file or DGW_DCT) is refused: {0}")]
    SessionDct(String),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
}

/// The gateway's opened state.
struct State {
    gate: Arc<Gatekeeper>,
    protocols: Arc<Registry>,
    audit: Arc<dyn crate::state::AuditSink>,
    stores: Stores,
    gateway_key: Arc<Keypair>,
    /// Each protocol module as built, by section: told where the HTTP
    /// listener is, and handed reloaded sections.
    modules: Vec<(&'static str, Arc<dyn Running>)>,
    /// Its tenants' issuing delegations change on reload.
    issuing: Arc<dgw_core::issuing::Issuing>,
    /// Sealed with the shutdown seal, synced and anchored at exit.
    audit_log: Option<crate::audit_log::Audited>,
    /// Holds the data directory for this process while it runs.
    _data_lock: Option<std::fs::File>,
}

/// Opens the data directory, the keys and every store (the embedded backend
/// in the data directory, or memory with `--ephemeral`); releases the reservations that
/// expired while the gateway was down.
async fn open_state(config: &Config) -> Result<State, ServeError> {
    let first_start = crate::data_dir::is_new(&config.data_dir);
    crate::data_dir::prepare(&config.data_dir).map_err(|source| ServeError::DataDir {
        path: config.data_dir.display().to_string(),
        source,
    })?;
    // Before the key file, the store or the journal is touched.
    let data_lock = match (&config.state, config.ephemeral) {
        (crate::config::StateConfig::Embedded, false) => {
            Some(crate::data_dir::lock(&config.data_dir)?)
        }
        _ => None,
    };
    let gateway_key = Arc::new(keyfile::read_or_create(
        &config.key_file,
        if first_start {
            keyfile::Create::IfMissing
        } else {
            keyfile::Create::Never {
                hint: crate::data_dir::GATEWAY_KEY_HINT,
            }
        },
        "key_file",
        &config.data_dir,
    )?);
    let tenants = config.tenant_roots()?;
    let issuing = Arc::new(dgw_core::issuing::Issuing::new(
        gateway_key.clone(),
        config.issuing_delegations(&tenants, gateway_key.principal_id())?,
    ));

    let budget = BudgetSettings {
        reservation_ttl: config.budget.reservation_ttl,
        lease: config.budget.lease,
        max_open: config.budget.max_open_reservations,
    };
    let backend = match (&config.state, config.ephemeral) {
        (_, true) => {
            tracing::warn!("--ephemeral: state is kept in memory and lost at exit");
            Backend::Ephemeral
        }
        (
            crate::config::StateConfig::Redis {
                url,
                prefix,
                timeout,
                ca_file,
            },
            false,
        ) => Backend::Redis {
            url,
            prefix,
            timeout: *timeout,
            ca_pem: match ca_file {
                Some(path) => Some(std::fs::read(path).map_err(|e| {
                    StorageError::Backend(format!("state.ca_file {}: {e}", path.display()))
                })?),
                None => None,
            },
        },
        (crate::config::StateConfig::Embedded, false) => Backend::Embedded(&config.data_dir),
    };
    let stores = crate::state::open(backend, budget)?;
    let swept = stores
        .budgets
        .sweep(now().1)
        .await
        .map_err(|e| StorageError::Backend(e.to_string()))?;
    let revocations = Arc::new(Revocations::load(stores.revocations.clone()).await?);
    tracing::info!(
        open_reservations = stores
            .budgets
            .open_reservations()
            .await
            .map_err(|e| StorageError::Backend(e.to_string()))?,
        expired_reservations_released = swept,
        revocations = revocations.len(),
        "state loaded"
    );
    let gate = Arc::new(Gatekeeper::new(
        tenants,
        stores.budgets.clone(),
        revocations.clone(),
        stores.delegations.clone(),
    ));
    // The tamper-evident log takes every decision, settlement, revocation
    // and audit event (not with --ephemeral, which writes no files); it is
    // checked against its anchor first.
    let audit_log = match (&config.audit, config.ephemeral) {
        (Some(settings), false) => Some(
            crate::audit_log::open(config, settings, stores.audit.clone(), gateway_key.clone())
                .await?,
        ),
        _ => None,
    };
    let audit: Arc<dyn crate::state::AuditSink> = match audit_log.as_ref().map(|a| &a.log) {
        Some(log) => {
            gate.set_trail(log.clone());
            revocations.set_trail(log.clone());
            Arc::new(dgw_audit_log::Trailed::new(
                stores.audit.clone(),
                log.clone(),
            ))
        }
        None => stores.audit.clone(),
    };
    // The protocols this gateway speaks: each module of the list, built.
    let services = Services {
        gate: gate.clone(),
        revocations: revocations.clone(),
        records: stores.records.clone(),
        replay: stores.replay.clone(),
        delegations: stores.delegations.clone(),
        audit: audit.clone(),
        key: gateway_key.clone(),
        issuing: issuing.clone(),
    };
    let mut protocols = Registry::default();
    let mut modules = Vec::new();
    for module in config.modules.iter() {
        let built = module
            .build(&config.document(), &services)
            .await
            .map_err(|e| ServeError::Protocol(format!("{}: {e}", module.section())))?;
        if let Some(p) = built.protocol() {
            protocols.register(p).map_err(ServeError::Protocol)?;
        }
        modules.push((module.section(), built));
    }
    for p in protocols.all() {
        for (root, tenant) in p.budget_roots() {
            gate.add_budget_root(root, tenant);
        }
    }
    // Once every protocol tracks its revocation kinds.
    revocations.follow();
    Ok(State {
        gate,
        protocols: Arc::new(protocols),
        audit,
        stores,
        gateway_key,
        modules,
        issuing,
        audit_log,
        _data_lock: data_lock,
    })
}

/// Starts the upstream MCP servers and waits (up to `mcp.ready_timeout`)
/// for each to initialize; one that does not keeps being retried.
async fn start_mcp(config: &Config, state: &State) -> Arc<McpProxy> {
    let upstreams: Vec<Arc<Upstream>> = config
        .upstreams
        .iter()
        .cloned()
        .map(Upstream::start)
        .collect();
    let waits = upstreams.iter().map(|u| {
        let u = u.clone();
        let limit = config.mcp.ready_timeout;
        async move {
            if !u.wait_ready(limit).await {
                tracing::error!(upstream = %u.name, limit = %crate::units::show_duration(limit), "upstream not ready in time; serving without it until it is");
            }
        }
    });
    for wait in waits.collect::<Vec<_>>() {
        wait.await;
    }
    let mut proxy = McpProxy::new(
        state.gate.clone(),
        state.protocols.clone(),
        upstreams,
        config.mcp.strict_tool_names,
    );
    // Replicas on one shared state take each other's input-required retries.
    if let (crate::config::StateConfig::Redis { .. }, false) = (&config.state, config.ephemeral) {
        proxy.share_request_states(state.stores.records.clone());
    }
    let proxy = Arc::new(proxy);
    proxy.rebuild_catalog();
    proxy
}

/// Releases expired reservations every `sweep_interval` and snapshots the
/// budgets every `snapshot_interval`.
fn spawn_sweeper(config: &Config, state: &State) -> tokio::task::JoinHandle<()> {
    let (gate, protocols) = (state.gate.clone(), state.protocols.clone());
    let every = config.budget.sweep_interval;
    let snapshot_every = config.budget.snapshot_interval;
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        let mut last_snapshot = std::time::Instant::now();
        loop {
            tick.tick().await;
            match gate.budgets().sweep(now().1).await {
                Ok(0) => {}
                Ok(n) => {
                    telemetry::record_reservations_expired(n);
                    gate.trail()
                        .event("expired", serde_json::json!({"released": n}));
                    tracing::info!(released = n, "released expired reservations");
                }
                Err(e) => tracing::error!(error = %e, "sweeping reservations failed"),
            }
            if last_snapshot.elapsed() >= snapshot_every {
                last_snapshot = std::time::Instant::now();
                let g = gate.clone();
                if let Ok(Err(e)) =
                    tokio::task::spawn_blocking(move || g.budgets().checkpoint()).await
                {
                    tracing::error!(error = %e, "budget snapshot failed");
                }
                for p in protocols.all() {
                    p.sweep().await;
                }
            }
        }
    })
}

/// Seals the audit log, snapshots the budgets and flushes the state: the
/// last step of every exit.
async fn close_state(state: &State) -> Result<(), ServeError> {
    if let Some(log) = &state.audit_log {
        log.close().await;
    }
    (state.stores.close)()?;
    tracing::info!("state flushed; bye");
    Ok(())
}

/// What a program embedding dgw asks of the configured gateway (its
/// protocols are the config's [`crate::config::Modules`]: the shipped list,
/// or the list plus its own, `Modules::with`).
#[derive(Default)]
pub struct Extensions {
    /// Told where the gateway listens once it accepts connections.
    pub listening: Option<tokio::sync::oneshot::Sender<Listening>>,
}

/// Where a started gateway listens.
#[derive(Debug, Clone, Copy)]
pub struct Listening {
    pub http: std::net::SocketAddr,
    pub grpc: Option<std::net::SocketAddr>,
}

/// Runs the gateway until SIGTERM or Ctrl-C.
pub async fn run(config: Config) -> Result<(), ServeError> {
    run_with(config, Extensions::default()).await
}

/// [`run`] with [`Extensions`].
pub async fn run_with(config: Config, extensions: Extensions) -> Result<(), ServeError> {
    // Before the state: recovery counts what it charges.
    let layers: Vec<&'static [telemetry::Metric]> = crate::state::METRICS
        .iter()
        .copied()
        .chain([dgw_oauth::metrics::METRICS])
        .collect();
    let metrics = telemetry::install_metrics(&layers);
    let descriptors = crate::connections::raise_descriptor_limit();
    let listeners = 1 + usize::from(config.server.grpc.is_some());
    let max_connections = connections_within(config.server.max_connections, listeners, descriptors);
    if max_connections < config.server.max_connections {
        let descriptors = descriptors.map_or_else(|| "unknown".to_owned(), |d| d.to_string());
        if config.server.max_connections_set {
            tracing::warn!(
                configured = config.server.max_connections,
                per_listener = max_connections,
                %descriptors,
                "server.max_connections lowered to fit the descriptor limit"
            );
        } else {
            tracing::info!(
                per_listener = max_connections,
                %descriptors,
                "connections per listener fitted to the descriptor limit"
            );
        }
    }
    let state = open_state(&config).await?;
    let upstreams: Vec<&str> = config.upstreams.iter().map(|u| u.name.as_str()).collect();
    crate::known_series::export(&state.protocols, config.server.grpc.is_some(), &upstreams);
    let gate = state.gate.clone();
    // Certificates are read before anything listens: a bad file stops the
    // start with its name.
    let (http_tls, grpc_tls) = match &config.server.tls {
        Some(files) => (
            Some(LiveTls::new(crate::tls::server_config(
                files,
                &[b"http/1.1"],
            )?)),
            Some(LiveTls::new(crate::tls::server_config(files, &[b"h2"])?)),
        ),
        None => (None, None),
    };
    // One list of administrators for both listeners, replaced on reload.
    let admins = Admins::new(config.admin_tokens.clone(), config.admin_certs.clone());
    let listener = TcpListener::bind(config.server.http)
        .await
        .map_err(|source| ServeError::Listen {
            addr: config.server.http,
            source,
        })?;
    let http_addr = listener.local_addr().map_err(|source| ServeError::Listen {
        addr: config.server.http,
        source,
    })?;
    for (_, module) in &state.modules {
        module.listening_at(http_addr, http_tls.is_some());
    }
    let proxy = start_mcp(&config, &state).await;
    let console_proxy = proxy.clone();
    let reloader = Arc::new(Reloader::new(
        config.clone(),
        Parts {
            gate: gate.clone(),
            admins: admins.clone(),
            proxy: proxy.clone(),
            protocols: state.protocols.clone(),
            issuing: state.issuing.clone(),
            modules: state.modules.clone(),
            audit: state.audit.clone(),
            tls: http_tls.clone().map(|http| ListenerTls {
                http,
                grpc: grpc_tls.clone(),
            }),
        },
    ));
    if let Some(o) = &config.oauth {
        dgw_oauth::metrics::export_at_zero();
        for idp in &o.identity_providers {
            dgw_oauth::metrics::export_idp_at_zero(&idp.name);
        }
        if let Some(login) = o.identity_providers.iter().find(|p| p.client_id.is_some()) {
            dgw_oauth::metrics::export_code_flow_at_zero(&login.name);
        }
    }
    let authorization_server = config.oauth.as_ref().map(|o| {
        let trusted: Vec<_> = o.identity_providers.iter().map(|p| p.trusted()).collect();
        Arc::new(
            dgw_oauth::server::AuthorizationServer::new(
                o.resource.clone(),
                o.access_token_ttl,
                o.clients.clone(),
                state.issuing.clone(),
                gate.clone(),
                state.stores.records.clone(),
            )
            .with_code_flow(o.code_flow(state.stores.records.clone(), &trusted))
            .with_identity_providers(trusted),
        )
    });
    let front = Arc::new(HttpFront {
        rpc: {
            let rpc = JsonRpc::new(
                gate.clone(),
                state.protocols.clone(),
                state.audit.clone(),
                config.server.max_body_bytes,
            );
            let rpc = match &state.audit_log {
                Some(a) => rpc.with_audit_log(a.name.clone()),
                None => rpc,
            };
            match &authorization_server {
                Some(server) => {
                    let server = server.clone();
                    rpc.with_subject_revoke(Arc::new(move |caller, tenant, subject| {
                        let server = server.clone();
                        Box::pin(
                            async move { server.revoke_subject(&caller, &tenant, &subject).await },
                        )
                    }))
                }
                None => rpc,
            }
        }
        .with_reload({
            let reloader = reloader.clone();
            Arc::new(move |by: String| {
                let reloader = reloader.clone();
                Box::pin(async move {
                    match reloader.reload(&by).await {
                        Ok(report) => Ok(serde_json::to_value(report).unwrap_or_default()),
                        Err(e) => Err(e.to_string()),
                    }
                })
            })
        }),
        mcp: StreamableHttp {
            proxy,
            sessions: {
                let policy = SessionPolicy {
                    ttl: config.mcp.session_ttl,
                    max: config.mcp.max_sessions,
                    anonymous: config.mcp.anonymous_sessions,
                    anonymous_ttl: config.mcp.anonymous_session_ttl,
                    per_credential: config.mcp.max_sessions_per_credential,
                };
                // Replicas on one shared state know each other's sessions.
                match (&config.state, config.ephemeral) {
                    (crate::config::StateConfig::Redis { .. }, false) => {
                        Sessions::shared(policy, state.stores.records.clone())
                    }
                    _ => Sessions::new(policy),
                }
            },
            max_body_bytes: config.server.max_body_bytes,
        },
        gate: gate.clone(),
        metrics,
        max_body_bytes: config.server.max_body_bytes,
        request_timeout: config.server.request_timeout,
        ready: AtomicBool::new(true),
        oauth: config.oauth.as_ref().map(|o| o.resource.clone()),
        authorization_server: authorization_server.clone(),
        auth: Authenticator::sharing(&admins, http_addr)
            .with_schemes(state.protocols.schemes())
            .with_bearer_prefixes(state.protocols.bearer_prefixes()),
        guard: HttpGuard::new(
            http_addr,
            config.server.allowed_origins.clone(),
            config.server.allowed_hosts.clone(),
        )
        .over_tls(http_tls.is_some()),
        protocols: state.protocols.clone(),
        ui: config.console.as_ref().map(|console| {
            let ui: Arc<dyn dgw_front_http::Ui> = dgw_console::Console::new(dgw_console::Parts {
                gate: gate.clone(),
                records: state.stores.records.clone(),
                delegations: state.stores.delegations.clone(),
                audit: state.stores.audit.clone(),
                auth: Authenticator::sharing(&admins, http_addr),
                admins: admins.clone(),
                proxy: console_proxy.clone(),
                modules: state.modules.clone(),
                audit_log: match (&state.audit_log, &config.audit) {
                    (Some(log), Some(settings)) => Some(dgw_console::AuditLogFiles {
                        dir: settings.dir.clone(),
                        name: log.name.clone(),
                        gateway: state.gateway_key.principal_id().clone(),
                    }),
                    _ => None,
                },
                session_ttl: console.session_ttl,
            });
            ui
        }),
    });
    let grpc_listener = match config.server.grpc {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .await
                .map_err(|source| ServeError::Listen { addr, source })?,
        ),
        None => None,
    };
    let grpc_addr = grpc_listener.as_ref().and_then(|l| l.local_addr().ok());
    let sweeper = spawn_sweeper(&config, &state);
    let hangups = spawn_reload_on_hangup(reloader);

    // One signal stops both fronts.
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let signalled = shutdown_signal();
    tokio::spawn(async move {
        signalled.await;
        stop.send_replace(true);
    });
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };

    tracing::info!(http = %http_addr, grpc = %grpc_addr.map_or_else(|| "off".to_owned(), |g| g.to_string()), gateway = %state.gateway_key.principal_id(), "dgw listening");
    // A machine-readable line for scripts and tests that start dgw on port 0.
    match grpc_addr {
        Some(g) => println!("dgw listening http={http_addr} grpc={g}"),
        None => println!("dgw listening http={http_addr}"),
    }
    let _ = std::io::stdout().flush();
    if let Some(tx) = extensions.listening {
        let _ = tx.send(Listening {
            http: http_addr,
            grpc: grpc_addr,
        });
    }

    let grpc = grpc_listener.map(|listener| {
        let (gate, stopped) = (gate.clone(), stopped(stopping.clone()));
        let protocols = state.protocols.clone();
        let (max, timeout) = (config.server.max_body_bytes, config.server.request_timeout);
        let auth = Authenticator::sharing(&admins, grpc_addr.unwrap_or(config.server.http))
            .with_schemes(state.protocols.schemes())
            .with_bearer_prefixes(state.protocols.bearer_prefixes());
        let tls = grpc_tls.clone();
        let oauth = config.oauth.as_ref().map(|o| o.resource.clone());
        let limits = Limits {
            // The preface, and each frame while no call is in flight.
            header_read_timeout: Some(config.server.header_read_timeout),
            http2: true,
            idle_timeout: config.server.idle_timeout,
            max_connections,
        };
        tokio::spawn(async move {
            if let Err(e) = crate::grpc::serve(
                listener,
                gate,
                crate::grpc::Settings {
                    max_message_bytes: max,
                    request_timeout: timeout,
                    auth,
                    protocols,
                    limits,
                    tls,
                    oauth,
                },
                stopped,
            )
            .await
            {
                tracing::error!(error = %e, "the gRPC front failed");
            }
        })
    });
    http::serve(
        listener,
        front,
        Limits {
            header_read_timeout: Some(config.server.header_read_timeout),
            http2: false,
            idle_timeout: config.server.idle_timeout,
            max_connections,
        },
        http_tls,
        stopped(stopping.clone()),
        config.server.shutdown_grace,
    )
    .await;
    if let Some(grpc) = grpc {
        if tokio::time::timeout(config.server.shutdown_grace, grpc)
            .await
            .is_err()
        {
            tracing::warn!("shutdown grace elapsed with gRPC calls still open");
        }
    }
    sweeper.abort();
    hangups.abort();
    close_state(&state).await
}

/// Reloads the configuration on every SIGHUP (`systemctl reload`). The
/// handler is installed before this returns, so a SIGHUP sent once the
/// gateway says it listens never takes the default action (exit).
fn spawn_reload_on_hangup(reloader: Arc<Reloader>) -> tokio::task::JoinHandle<()> {
    let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
    tokio::spawn(async move {
        let Ok(mut hangups) = hangups else {
            tracing::error!("cannot listen for SIGHUP; reload with dgw/reload");
            return;
        };
        while hangups.recv().await.is_some() {
            // The outcome is logged and audited by the reloader.
            let _ = reloader.reload("signal:SIGHUP").await;
        }
    })
}

/// `dgw mcp`: serves MCP on stdin/stdout until stdin closes (or SIGTERM).
/// Logs go to stderr; stdout carries only MCP messages.
/// `dct`: the DCT every call of the session runs under (`--dct-file`,
/// `DGW_DCT`), refused here when it could never authorize anything.
pub async fn run_stdio(config: Config, dct: Option<String>) -> Result<(), ServeError> {
    let state = open_state(&config).await?;
    let proxy = start_mcp(&config, &state).await;
    let pinned = match dct {
        None => None,
        Some(token) => {
            let found = proxy
                .protocols()
                .from_scheme(crate::caller::DCT_SCHEME, &token)
                .ok_or_else(|| ServeError::SessionDct("not a DCT".into()))?
                .map_err(|d| ServeError::SessionDct(d.message()))?;
            proxy
                .standing(&found)
                .await
                .map_err(|d| ServeError::SessionDct(d.message()))?;
            Some(found)
        }
    };
    let sweeper = spawn_sweeper(&config, &state);
    tracing::info!(gateway = %state.gateway_key.principal_id(), "dgw serving MCP on stdio");
    tokio::select! {
        served = crate::mcp::stdio_server::serve(proxy, config.server.max_body_bytes, pinned) => {
            if let Err(e) = served {
                tracing::error!(error = %e, "reading stdin failed");
            }
        }
        () = shutdown_signal() => {}
    }
    sweeper.abort();
    close_state(&state).await
}

/// Resolves on SIGTERM or Ctrl-C. The handlers are installed when this is
/// called, not when the future is first polled: a SIGTERM sent once the
/// gateway says it listens always stops it cleanly (its default action
/// would end the process with the audit log unsealed).
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let (term, interrupt) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    let received = |stream: std::io::Result<tokio::signal::unix::Signal>| async move {
        match stream {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    async move {
        tokio::select! {
            () = received(interrupt) => tracing::info!("interrupted; shutting down"),
            () = received(term) => tracing::info!("terminated; shutting down"),
        }
    }
}
