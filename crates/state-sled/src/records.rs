//! Protocols' documents in sled: one tree per space (`<space>/v1`), each
//! value [`crate::encode`]d JSON, changed by compare-and-swap and synced
//! before a write returns.

use async_trait::async_trait;
use serde_json::Value;

use super::{decode, encode, Storage, TreesByName};
use crate::Db;
use dgw_core::state::{RecordStore, StorageError};

/// The sled [`RecordStore`].
pub struct SledRecords {
    trees: TreesByName,
}

impl SledRecords {
    pub fn new(storage: Storage) -> Self {
        Self {
            trees: TreesByName::new(storage),
        }
    }
}

#[async_trait]
impl RecordStore for SledRecords {
    async fn get(&self, space: &'static str, key: &str) -> Result<Option<Value>, StorageError> {
        let tree = self.trees.get(space)?;
        tree.get(key.as_bytes())
            .db()?
            .map(|v| decode(space, key.as_bytes(), &v))
            .transpose()
    }

    async fn insert_new(
        &self,
        space: &'static str,
        key: &str,
        value: &Value,
    ) -> Result<bool, StorageError> {
        let tree = self.trees.get(space)?;
        self.trees
            .storage()
            .insert_new(&tree, key.as_bytes(), encode(value))
            .await
    }

    async fn replace(
        &self,
        space: &'static str,
        key: &str,
        expected: &Value,
        new: &Value,
    ) -> Result<bool, StorageError> {
        let tree = self.trees.get(space)?;
        // Compared as documents, not bytes: the same JSON may have been
        // encoded with another member order by an older process.
        let Some(current) = tree.get(key.as_bytes()).db()? else {
            return Ok(false);
        };
        if decode::<Value>(space, key.as_bytes(), &current)? != *expected {
            return Ok(false);
        }
        let swapped = tree
            .compare_and_swap(key.as_bytes(), Some(current), Some(encode(new)))
            .db()?
            .is_ok();
        if swapped {
            self.trees.storage().sync().await?;
        }
        Ok(swapped)
    }

    async fn remove(&self, space: &'static str, key: &str) -> Result<bool, StorageError> {
        let tree = self.trees.get(space)?;
        let removed = tree.remove(key.as_bytes()).db()?.is_some();
        if removed {
            self.trees.storage().sync().await?;
        }
        Ok(removed)
    }

    async fn scan(&self, space: &'static str) -> Result<Vec<(String, Value)>, StorageError> {
        let tree = self.trees.get(space)?;
        crate::scan::<Value>(&tree, space).map(|all| {
            all.into_iter()
                .map(|(k, v)| (String::from_utf8_lossy(&k).into_owned(), v))
                .collect()
        })
    }
}
