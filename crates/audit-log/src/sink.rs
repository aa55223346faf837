//! The state's audit sink, with every event also in the chained log.

use std::sync::Arc;

use async_trait::async_trait;
use dgw_core::state::{AuditAnchor, AuditSink, StorageError};
use dgw_core::trail::{Trail, TrailEntry};
use serde_json::Value;

/// An [`AuditSink`] (what `dgw/audit` reads back) whose every event also
/// goes to the trail.
pub struct Trailed {
    inner: Arc<dyn AuditSink>,
    trail: Arc<dyn Trail>,
}

impl Trailed {
    pub fn new(inner: Arc<dyn AuditSink>, trail: Arc<dyn Trail>) -> Self {
        Self { inner, trail }
    }
}

#[async_trait]
impl AuditSink for Trailed {
    async fn append(&self, event: &Value) -> Result<(), StorageError> {
        self.trail.record(TrailEntry::Event(event.clone()));
        self.inner.append(event).await
    }

    async fn recent(&self, limit: usize) -> Result<Vec<Value>, StorageError> {
        self.inner.recent(limit).await
    }

    async fn anchor(&self, log: &str) -> Result<Option<AuditAnchor>, StorageError> {
        self.inner.anchor(log).await
    }

    async fn advance_anchor(&self, log: &str, anchor: &AuditAnchor) -> Result<bool, StorageError> {
        self.inner.advance_anchor(log, anchor).await
    }
}
