//! Key pinning, trust on first use (motebit-delegation "Key pinning"): the
//! first key verified for a `motebit_id` is pinned in the gateway's state;
//! another key for that ID later is refused (`key_mismatch`) and severs
//! the ID (every delegation naming it is refused) until an administrator
//! pins a key again (`dgw motebit pin`, `motebit/pin`).

use std::sync::Arc;

use dgw_core::state::{RecordStore, StorageError};
use motebit::{Failure, Reason};
use serde_json::{json, Value};

/// The record space of pins, keyed by `motebit_id`.
pub const SPACE: &str = "motebit_pins";

/// The pins, over the gateway's record store.
#[derive(Clone)]
pub struct Pins {
    records: Arc<dyn RecordStore>,
}

/// A pin as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Pin {
    /// The pinned key, hex.
    pub public_key: String,
    /// Who pinned it: `first_use` or `admin:<name>`.
    pub by: String,
    /// When, epoch ms.
    pub at: u64,
    /// The other key that was presented for the ID, if any: the ID is
    /// severed until re-pinned.
    pub severed_by: Option<String>,
}

impl Pin {
    fn to_json(&self) -> Value {
        json!({"public_key": self.public_key, "by": self.by, "at": self.at,
               "severed_by": self.severed_by})
    }

    fn from_json(v: &Value) -> Option<Self> {
        Some(Self {
            public_key: v.get("public_key")?.as_str()?.to_owned(),
            by: v.get("by")?.as_str()?.to_owned(),
            at: v.get("at")?.as_u64()?,
            severed_by: v
                .get("severed_by")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    }
}

/// Why a pin check could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// The key is refused.
    #[error(transparent)]
    Refused(#[from] Failure),
    /// The store failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl Pins {
    /// The pins in `records`.
    pub fn new(records: Arc<dyn RecordStore>) -> Self {
        Self { records }
    }

    /// The pin of `motebit_id`.
    pub async fn get(&self, motebit_id: &str) -> Result<Option<Pin>, StorageError> {
        Ok(self
            .records
            .get(SPACE, motebit_id)
            .await?
            .as_ref()
            .and_then(Pin::from_json))
    }

    /// Checks `key_hex` (lowercase hex, already verified) against the pin
    /// of `motebit_id`, pinning it when there is none.
    pub async fn check(&self, motebit_id: &str, key_hex: &str, now: u64) -> Result<(), PinError> {
        loop {
            let Some(stored) = self.records.get(SPACE, motebit_id).await? else {
                let pin = Pin {
                    public_key: key_hex.to_owned(),
                    by: "first_use".into(),
                    at: now,
                    severed_by: None,
                };
                if self
                    .records
                    .insert_new(SPACE, motebit_id, &pin.to_json())
                    .await?
                {
                    return Ok(());
                }
                continue; // pinned concurrently: check against that pin
            };
            let pin = Pin::from_json(&stored).ok_or_else(|| {
                StorageError::Backend(format!("the pin of {motebit_id:?} is unreadable"))
            })?;
            if pin.severed_by.is_some() {
                return Err(Failure::new(
                    Reason::KeyMismatch,
                    format!("{motebit_id:?} presented a key other than its pinned one and is severed until an administrator pins a key"),
                )
                .into());
            }
            if pin.public_key == key_hex {
                return Ok(());
            }
            let severed = Pin {
                severed_by: Some(key_hex.to_owned()),
                ..pin
            };
            if self
                .records
                .replace(SPACE, motebit_id, &stored, &severed.to_json())
                .await?
            {
                return Err(Failure::new(
                    Reason::KeyMismatch,
                    format!("{motebit_id:?} is pinned to another key; it is severed until an administrator pins a key"),
                )
                .into());
            }
        }
    }

    /// An administrator pins `key_hex` for `motebit_id` (clearing a
    /// severance); the previous pin, if any.
    pub async fn pin(
        &self,
        motebit_id: &str,
        key_hex: &str,
        by: &str,
        now: u64,
    ) -> Result<Option<Pin>, StorageError> {
        let pin = Pin {
            public_key: key_hex.to_owned(),
            by: format!("admin:{by}"),
            at: now,
            severed_by: None,
        };
        loop {
            match self.records.get(SPACE, motebit_id).await? {
                None => {
                    if self
                        .records
                        .insert_new(SPACE, motebit_id, &pin.to_json())
                        .await?
                    {
                        return Ok(None);
                    }
                }
                Some(old) => {
                    if self
                        .records
                        .replace(SPACE, motebit_id, &old, &pin.to_json())
                        .await?
                    {
                        return Ok(Pin::from_json(&old));
                    }
                }
            }
        }
    }

    /// Forgets the pin of `motebit_id` (the next key seen is pinned).
    pub async fn unpin(&self, motebit_id: &str) -> Result<bool, StorageError> {
        self.records.remove(SPACE, motebit_id).await
    }

    /// The pinned key of `motebit_id`, unless severed (for verdicts).
    pub async fn pinned_key(&self, motebit_id: &str) -> Result<Option<String>, StorageError> {
        Ok(self.get(motebit_id).await?.map(|p| p.public_key))
    }
}
