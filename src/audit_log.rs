//! The tamper-evident audit log in a running gateway: opened against the
//! anchor the state store keeps for it, each seal anchored there as it is
//! synced, the shutdown seal anchored at exit (docs/operations.md, "Audit
//! log"; decisions 147-151).

use std::sync::Arc;
use std::time::Duration;

use delegateos::Keypair;
use dgw_audit_log::{AuditAnchor, AuditError, AuditLog, Settings, Start};
use tokio::sync::watch;

use crate::config::{Config, StateConfig};
use crate::state::{AuditSink, StorageError};
use crate::telemetry;

/// How often the gauge is set again without a new seal (an idle gateway
/// seals nothing, and gauges unset for five minutes are dropped).
const GAUGE_REFRESH: Duration = Duration::from_secs(60);

/// Why the log was not opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("reading its anchor: {0}")]
    Anchor(#[from] StorageError),
    #[error(transparent)]
    Log(#[from] AuditError),
}

/// The open log, and what keeps its anchor.
pub(crate) struct Audited {
    pub(crate) log: Arc<AuditLog>,
    /// The name its anchor is kept under in the state store.
    pub(crate) name: String,
    store: Arc<dyn AuditSink>,
    anchoring: tokio::task::JoinHandle<()>,
}

/// The name the state store keeps this log's anchor under. sled and
/// memory hold one gateway's state: `local`. Replicas sharing Redis (and
/// often one gateway key) each write a log of their own: host and
/// directory tell them apart.
pub(crate) fn anchor_name(config: &Config, settings: &Settings) -> String {
    match (&config.state, config.ephemeral) {
        (StateConfig::Redis { .. }, false) => {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_owned())
                .ok()
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "localhost".to_owned());
            format!("{host}:{}", settings.dir.display())
        }
        _ => "local".to_owned(),
    }
}

/// Opens the log in `settings.dir` after checking it against the anchor
/// `store` keeps (a log cut or rewritten while dgw was down is refused,
/// nothing written), and starts anchoring its seals.
pub(crate) async fn open(
    config: &Config,
    settings: &Settings,
    store: Arc<dyn AuditSink>,
    key: Arc<Keypair>,
) -> Result<Audited, OpenError> {
    let name = anchor_name(config, settings);
    let anchor = store.anchor(&name).await?;
    let kept = anchor.clone();
    let (tell, told) = watch::channel(anchor.clone());
    let start = Start {
        anchor,
        new_log: config.new_audit_log,
    };
    let settings = settings.clone();
    // Reading the log's tail is file work: off the async workers.
    let log = tokio::task::spawn_blocking(move || {
        AuditLog::open_with(
            settings,
            key,
            &start,
            Some(Box::new(move |a: &AuditAnchor| {
                tell.send_replace(Some(a.clone()));
            })),
        )
    })
    .await
    .map_err(|e| AuditError::Record(format!("opening the log: {e}")))??;
    // On the first scrape too: 0 before the first seal is anchored.
    set_sealed_gauge(kept.as_ref());
    let anchoring = tokio::spawn(anchor_seals(store.clone(), name.clone(), kept, told));
    Ok(Audited {
        log: Arc::new(log),
        name,
        store,
        anchoring,
    })
}

/// Moves the state store's anchor (`kept` there now) to each seal the
/// writer syncs (once per `seal_interval` at most, never per record), and
/// keeps the gauge set.
async fn anchor_seals(
    store: Arc<dyn AuditSink>,
    name: String,
    mut kept: Option<AuditAnchor>,
    mut told: watch::Receiver<Option<AuditAnchor>>,
) {
    let mut refresh = tokio::time::interval(GAUGE_REFRESH);
    loop {
        tokio::select! {
            changed = told.changed() => if changed.is_err() { return },
            _ = refresh.tick() => {}
        }
        let latest = told.borrow_and_update().clone();
        if let Some(anchor) = latest.filter(|a| kept.as_ref() != Some(a)) {
            match store.advance_anchor(&name, &anchor).await {
                Ok(moved) => {
                    if !moved {
                        tracing::warn!(log = %name, %anchor, "audit log: the state store keeps an anchor at or past this seal already (another log anchored under this name?)");
                    }
                    kept = Some(anchor);
                }
                // Tried again at the next seal or refresh.
                Err(e) => {
                    tracing::error!(log = %name, error = %e, "audit log: anchoring a seal in the state store failed")
                }
            }
        }
        set_sealed_gauge(kept.as_ref());
    }
}

/// `dgw_audit_sealed_records` for the anchor the store keeps (0: none yet).
fn set_sealed_gauge(kept: Option<&AuditAnchor>) {
    telemetry::set_audit_sealed_records(kept.map_or(0, |a| a.seq.saturating_add(1)));
}

impl Audited {
    /// Seals the log with the shutdown seal and anchors it; what is
    /// recorded after (a request still running) gets a shutdown seal of
    /// its own in the file.
    pub(crate) async fn close(&self) {
        let log = self.log.clone();
        let closed = tokio::task::spawn_blocking(move || log.close())
            .await
            .ok()
            .flatten();
        if let Some(anchor) = closed {
            match self.store.advance_anchor(&self.name, &anchor).await {
                Ok(_) => telemetry::set_audit_sealed_records(anchor.seq.saturating_add(1)),
                Err(e) => {
                    tracing::error!(log = %self.name, error = %e, "audit log: anchoring the shutdown seal in the state store failed; the anchor stays at an earlier seal")
                }
            }
        }
        self.anchoring.abort();
    }
}
