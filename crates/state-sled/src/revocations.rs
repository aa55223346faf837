//! Revocations in sled: one tree per kind (`<kind>/v1`), each value the
//! record's JSON; a broadcast of what this process added.

use std::collections::HashMap;
use std::sync::RwLock;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::broadcast;

use super::{decode, encode, Storage};
use crate::Db;
use dgw_core::state::{RevocationRecord, RevocationStore, StorageError};

/// Records a slow subscriber may fall behind by before it reads them all again.
const BACKLOG: usize = 1024;

/// The sled [`RevocationStore`].
pub struct SledRevocations {
    storage: Storage,
    trees: RwLock<HashMap<&'static str, sled::Tree>>,
    added: broadcast::Sender<RevocationRecord>,
}

impl SledRevocations {
    pub fn new(storage: Storage) -> Self {
        Self {
            storage,
            trees: RwLock::new(HashMap::new()),
            added: broadcast::channel(BACKLOG).0,
        }
    }

    /// The tree of a kind. Named `<kind>/v1`, as the trees of data dirs made
    /// before the state seam were (`revocations/v1`, `talos_revocations/v1`).
    fn tree(&self, kind: &'static str) -> Result<sled::Tree, StorageError> {
        if let Some(t) = self
            .trees
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(kind)
        {
            return Ok(t.clone());
        }
        let tree = self.storage.open_tree(&format!("{kind}/v1"))?;
        self.trees
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(kind, tree.clone());
        Ok(tree)
    }
}

#[async_trait]
impl RevocationStore for SledRevocations {
    async fn add(&self, record: RevocationRecord) -> Result<bool, StorageError> {
        let tree = self.tree(record.kind)?;
        let inserted = self
            .storage
            .insert_new(&tree, record.key.as_bytes(), encode(&record.value))
            .await?;
        if inserted {
            let _ = self.added.send(record);
        }
        Ok(inserted)
    }

    async fn contains(&self, kind: &'static str, key: &str) -> Result<bool, StorageError> {
        Ok(self.tree(kind)?.contains_key(key.as_bytes()).db()?)
    }

    async fn all(&self, kind: &'static str) -> Result<Vec<RevocationRecord>, StorageError> {
        let tree = self.tree(kind)?;
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
