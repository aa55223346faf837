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
    /// The key of the next event.
    next: std::sync::atomic::AtomicU64,
}

impl AuditLog {
    pub fn new(storage: Storage, key: Arc<Keypair>) -> Self {
        // Keys continue from the last event stored, not from sled's ID
        // generator, which a rewrite of the database starts again.
        let next = match storage.trees.audit.last() {
            Ok(Some((k, _))) => <[u8; 8]>::try_from(k.as_ref()).map_or(0, u64::from_be_bytes) + 1,
            _ => 0,
        };
        Self {
            storage,
            key,
            next: std::sync::atomic::AtomicU64::new(next),
        }
    }

    /// Signs an event with the gateway's key and appends it (durable with
    /// the next flush; the events are evidence, not state).
    pub fn record(&self, event: AuditEvent) -> Result<AuditEvent, StorageError> {
        let event = event.sign(&self.key);
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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
