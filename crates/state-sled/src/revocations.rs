//! Revocations in sled: one tree per kind (`<kind>/v1`), each value the
//! record's JSON; a broadcast of what this process added.

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::broadcast;

use super::{decode, encode, Storage, TreesByName};
use crate::Db;
use dgw_core::state::{RevocationRecord, RevocationStore, StorageError};

/// Records a slow subscriber may fall behind by before it reads them all again.
const BACKLOG: usize = 1024;

/// The sled [`RevocationStore`]: a tree per kind.
pub struct SledRevocations {
    trees: TreesByName,
    added: broadcast::Sender<RevocationRecord>,
}

impl SledRevocations {
    pub fn new(storage: Storage) -> Self {
        Self {
            trees: TreesByName::new(storage),
            added: broadcast::channel(BACKLOG).0,
        }
    }
}

#[async_trait]
impl RevocationStore for SledRevocations {
    async fn add(&self, record: RevocationRecord) -> Result<bool, StorageError> {
        let tree = self.trees.get(record.kind)?;
        let inserted = self
            .trees
            .storage()
            .insert_new(&tree, record.key.as_bytes(), encode(&record.value))
            .await?;
        if inserted {
            let _ = self.added.send(record);
        }
        Ok(inserted)
    }

    async fn contains(&self, kind: &'static str, key: &str) -> Result<bool, StorageError> {
        Ok(self.trees.get(kind)?.contains_key(key.as_bytes()).db()?)
    }

    async fn all(&self, kind: &'static str) -> Result<Vec<RevocationRecord>, StorageError> {
        let tree = self.trees.get(kind)?;
        tree.iter()
            .map(|item| {
                let (k, v) = item.db()?;
                Ok(RevocationRecord {
                    kind,
                    key: String::from_utf8_lossy(&k).into_owned(),
                    value: decode::<Value>("revocations", &k, &v)?,
                })
            })
            .collect()
    }

    fn subscribe(&self) -> broadcast::Receiver<RevocationRecord> {
        self.added.subscribe()
    }
}
