//! The audit log: signed events (Talos §5), appended to the backend's
//! [`AuditSink`] in order and written to the log (target `dgw::audit`, one
//! JSON line each).

use std::sync::Arc;

use delegateos::Keypair;
use talos::audit::AuditEvent;

use crate::state::{AuditSink, StorageError};

/// The gateway's audit log.
pub struct AuditLog {
    sink: Arc<dyn AuditSink>,
    key: Arc<Keypair>,
}

impl AuditLog {
    pub fn new(sink: Arc<dyn AuditSink>, key: Arc<Keypair>) -> Self {
        Self { sink, key }
    }

    /// Signs an event with the gateway's key and appends it.
    pub async fn record(&self, event: AuditEvent) -> Result<AuditEvent, StorageError> {
        let event = event.sign(&self.key);
        let value =
            serde_json::to_value(&event).map_err(|e| StorageError::Backend(e.to_string()))?;
        self.sink.append(&value).await?;
        tracing::info!(target: "dgw::audit", event = %value, "audit");
        Ok(event)
    }

    /// The last `limit` events, oldest first.
    pub async fn recent(&self, limit: usize) -> Result<Vec<AuditEvent>, StorageError> {
        self.sink
            .recent(limit)
            .await?
            .into_iter()
            .map(|v| {
                serde_json::from_value(v).map_err(|e| StorageError::Corrupt {
                    tree: "audit",
                    key: String::new(),
                    problem: e.to_string(),
                })
            })
            .collect()
    }
}
