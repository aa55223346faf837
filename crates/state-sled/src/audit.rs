//! The audit log in sled: the `audit/v1` tree, keyed by a counter; the
//! logs' anchors in `audit_anchors/v1`, keyed by log name.

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use serde_json::Value;

use super::{decode, encode, Storage};
use crate::Db;
use dgw_core::state::{AuditAnchor, AuditSink, StorageError};

/// The sled [`AuditSink`].
pub struct SledAudit {
    tree: sled::Tree,
    /// The key of the next event.
    next: AtomicU64,
    anchors: sled::Tree,
    /// For syncing an anchor before it is acknowledged.
    storage: Storage,
}

impl SledAudit {
    pub fn new(storage: &Storage) -> Self {
        let tree = storage.trees.audit.clone();
        // Keys continue from the last event stored, not from sled's ID
        // generator, which a rewrite of the database starts again.
        let next = match tree.last() {
            Ok(Some((k, _))) => <[u8; 8]>::try_from(k.as_ref()).map_or(0, u64::from_be_bytes) + 1,
            _ => 0,
        };
        Self {
            tree,
            next: AtomicU64::new(next),
            anchors: storage.trees.audit_anchors.clone(),
            storage: storage.clone(),
        }
    }
}

#[async_trait]
impl AuditSink for SledAudit {
    async fn append(&self, event: &Value) -> Result<(), StorageError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.tree.insert(id.to_be_bytes(), encode(event)).db()?;
        Ok(())
    }

    async fn recent(&self, limit: usize) -> Result<Vec<Value>, StorageError> {
        let mut out = Vec::new();
        for item in self.tree.iter().rev().take(limit) {
            let (k, v) = item.db()?;
            out.push(decode("audit", &k, &v)?);
        }
        out.reverse();
        Ok(out)
    }

    async fn anchor(&self, log: &str) -> Result<Option<AuditAnchor>, StorageError> {
        self.anchors
            .get(log.as_bytes())
            .db()?
            .map(|v| decode("audit_anchors", log.as_bytes(), &v))
            .transpose()
    }

    async fn advance_anchor(&self, log: &str, anchor: &AuditAnchor) -> Result<bool, StorageError> {
        let new = encode(anchor);
        loop {
            let kept = self.anchors.get(log.as_bytes()).db()?;
            if let Some(bytes) = &kept {
                let kept: AuditAnchor = decode("audit_anchors", log.as_bytes(), bytes)?;
                if kept.seq >= anchor.seq {
                    return Ok(false);
                }
            }
            // Another writer in between: read again.
            if self
                .anchors
                .compare_and_swap(log.as_bytes(), kept, Some(new.as_slice()))
                .db()?
                .is_ok()
            {
                break;
            }
        }
        self.storage.sync().await?;
        Ok(true)
    }
}
