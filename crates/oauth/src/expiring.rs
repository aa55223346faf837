//! Short-lived records of the authorization code flow (pending logins,
//! codes, refresh token families) in the state backend, so any replica
//! can finish what another began: each space is capped (a full space is
//! swept of expired records before anything is refused), every record
//! carries its expiry (`exp`, Unix seconds) and is ignored after it, and
//! keys are digests of the secrets, never the secrets.

use std::sync::Arc;

use dgw_core::state::{Capped, RecordStore, StorageError};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Why a record could not be kept.
#[derive(Debug, thiserror::Error)]
pub enum KeepError {
    #[error("too many {0} are kept; try again later")]
    Full(&'static str),
    /// The key is taken (a family revoked before it was stored).
    #[error("the record is already there")]
    Taken,
    #[error("the state backend failed: {0}")]
    Storage(#[from] StorageError),
}

/// One capped record space.
pub struct Expiring {
    records: Arc<dyn RecordStore>,
    space: &'static str,
    cap: usize,
}

/// The key a secret is kept under: its SHA-256, hex.
pub fn key_of(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Now, in Unix seconds.
pub fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

fn live(doc: &Value, now: i64) -> bool {
    doc.get("exp")
        .and_then(Value::as_i64)
        .is_some_and(|e| e > now)
}

impl Expiring {
    pub fn new(records: Arc<dyn RecordStore>, space: &'static str, cap: usize) -> Self {
        Self {
            records,
            space,
            cap,
        }
    }

    /// Stores `doc` (which has its `exp`) under the new `key`.
    pub async fn put(&self, key: &str, doc: &Value) -> Result<(), KeepError> {
        for attempt in 0..2 {
            match self
                .records
                .insert_capped(self.space, key, doc, self.cap)
                .await?
            {
                Capped::Inserted => return Ok(()),
                Capped::Taken => return Err(KeepError::Taken),
                Capped::Full if attempt == 0 => self.sweep().await?,
                Capped::Full => {}
            }
        }
        Err(KeepError::Full(self.space))
    }

    /// The live record under `key`, removed: only one caller ever gets it.
    pub async fn take(&self, key: &str) -> Result<Option<Value>, StorageError> {
        let Some(doc) = self.records.get(self.space, key).await? else {
            return Ok(None);
        };
        if !self.records.remove(self.space, key).await? {
            return Ok(None);
        }
        Ok(live(&doc, now()).then_some(doc))
    }

    /// The live record under `key`.
    pub async fn get(&self, key: &str) -> Result<Option<Value>, StorageError> {
        let doc = self.records.get(self.space, key).await?;
        Ok(doc.filter(|d| live(d, now())))
    }

    /// Replaces `old` with `new` under `key` unless it changed meanwhile.
    pub async fn replace(&self, key: &str, old: &Value, new: &Value) -> Result<bool, StorageError> {
        self.records.replace(self.space, key, old, new).await
    }

    /// Removes every expired record.
    async fn sweep(&self) -> Result<(), StorageError> {
        let now = now();
        for (key, doc) in self.records.scan(self.space).await? {
            if !live(&doc, now) {
                self.records.remove(self.space, &key).await?;
            }
        }
        Ok(())
    }
}
