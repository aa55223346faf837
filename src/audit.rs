//! The audit log: signed events (Talos §5) kept in the `audit/v1` tree in
//! order, and written to the log (target `dgw::audit`, one JSON line each).

use std::sync::Arc;

use delegateos::Keypair;
use talos::audit::AuditEvent;

use crate::storage::{decode, encode, Storage, StorageError};

/// The gateway's audit log.
pub struct AuditLog {
    storage: Storage,
    key: Arc<Keypair>,
}

impl AuditLog {
    pub fn new(storage: Storage, key: Arc<Keypair>) -> Self {
        Self { storage, key }
    }

    /// Signs an event with the gateway's key and appends it (durable with
    /// the next flush; the events are evidence, not state).
    pub fn record(&self, event: AuditEvent) -> Result<AuditEvent, StorageError> {
        let event = event.sign(&self.key);
        let id = self.storage.next_id()?;
        self.storage
            .trees
            .audit
            .insert(id.to_be_bytes(), encode(&event))
            .map_err(StorageError::from)?;
        tracing::info!(target: "dgw::audit", event = %serde_json::to_string(&event).unwrap_or_default(), "audit");
        Ok(event)
    }

    /// The last `limit` events, oldest first.
    pub fn recent(&self, limit: usize) -> Result<Vec<AuditEvent>, StorageError> {
        let mut out = Vec::new();
        for item in self.storage.trees.audit.iter().rev().take(limit) {
            let (k, v) = item.map_err(StorageError::from)?;
            out.push(decode("audit", &k, &v)?);
        }
        out.reverse();
        Ok(out)
    }
}
