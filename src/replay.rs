//! Replay protection for Talos correlation IDs (§6): the adapter's
//! per-session LRU in memory, backed by the `replay/v1` tree so that a
//! restart does not reopen the window while the capability is still valid.

use std::sync::Mutex;

use talos::replay::ReplayCache;

use crate::storage::{Storage, StorageError};

/// Correlation IDs seen.
pub struct ReplayStore {
    storage: Storage,
    cache: Mutex<ReplayCache>,
}

fn key(session: &str, correlation_id: &str) -> Vec<u8> {
    let mut k = session.as_bytes().to_vec();
    k.push(0);
    k.extend_from_slice(correlation_id.as_bytes());
    k
}

impl ReplayStore {
    pub fn new(storage: Storage) -> Self {
        Self {
            storage,
            cache: Mutex::new(ReplayCache::new()),
        }
    }

    /// Records a correlation ID, durably, until `valid_until` (Unix
    /// seconds: the capability's expiry plus skew); false if it was seen
    /// before (in memory, or stored and not yet past its validity).
    pub async fn record(
        &self,
        session: &str,
        correlation_id: &str,
        now: i64,
        valid_until: i64,
    ) -> Result<bool, StorageError> {
        let fresh_in_memory = self
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .record(session, correlation_id);
        if !fresh_in_memory {
            return Ok(false);
        }
        let k = key(session, correlation_id);
        let tree = &self.storage.trees.replay;
        let previous = tree
            .insert(&k, valid_until.to_be_bytes().to_vec())
            .map_err(StorageError::from)?;
        if let Some(prev) = previous {
            let until = prev
                .as_ref()
                .try_into()
                .map(i64::from_be_bytes)
                .unwrap_or(i64::MAX);
            if until >= now {
                return Ok(false);
            }
        }
        self.storage.sync().await?;
        Ok(true)
    }

    /// Deletes stored IDs whose capability can no longer be used.
    pub fn sweep(&self, now: i64) -> Result<usize, StorageError> {
        let mut removed = 0;
        for item in self.storage.trees.replay.iter() {
            let (k, v) = item.map_err(StorageError::from)?;
            let until = v
                .as_ref()
                .try_into()
                .map(i64::from_be_bytes)
                .unwrap_or(i64::MAX);
            if until < now {
                self.storage
                    .trees
                    .replay
                    .remove(k)
                    .map_err(StorageError::from)?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}
