//! Protocols' documents in sled: one tree per space (`<space>/v1`), each
//! value [`crate::encode`]d JSON, changed by compare-and-swap and synced
//! before a write returns. A space that capped inserts use has its size
//! counted in memory from the first of them on, every insert and removal
//! changing tree and count under one lock.

use async_trait::async_trait;
use serde_json::Value;

use super::{decode, encode, Storage, TreesByName};
use crate::Db;
use dgw_core::state::{Capped, RecordStore, SpaceUsage, StorageError};

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

    /// The counted spaces' sizes, locked (never across an `.await`).
    fn counts(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<&'static str, usize>> {
        self.trees
            .storage()
            .record_counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
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
        let inserted = {
            let mut counts = self.counts();
            let inserted = tree
                .compare_and_swap(key.as_bytes(), None as Option<&[u8]>, Some(encode(value)))
                .db()?
                .is_ok();
            if let (true, Some(n)) = (inserted, counts.get_mut(space)) {
                *n += 1;
            }
            inserted
        };
        self.trees.storage().sync().await?;
        Ok(inserted)
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
        let removed = {
            let mut counts = self.counts();
            let removed = tree.remove(key.as_bytes()).db()?.is_some();
            if let (true, Some(n)) = (removed, counts.get_mut(space)) {
                *n = n.saturating_sub(1);
            }
            removed
        };
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

    async fn insert_capped(
        &self,
        space: &'static str,
        key: &str,
        value: &Value,
        cap: usize,
    ) -> Result<Capped, StorageError> {
        let tree = self.trees.get(space)?;
        let outcome = {
            let mut counts = self.counts();
            let n = match counts.entry(space) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => e.insert(tree.len()),
            };
            if tree.contains_key(key.as_bytes()).db()? {
                Capped::Taken
            } else if *n >= cap {
                Capped::Full
            } else if tree
                .compare_and_swap(key.as_bytes(), None as Option<&[u8]>, Some(encode(value)))
                .db()?
                .is_ok()
            {
                *n += 1;
                Capped::Inserted
            } else {
                Capped::Taken
            }
        };
        if outcome == Capped::Inserted {
            self.trees.storage().sync().await?;
        }
        Ok(outcome)
    }

    async fn usage(&self, space: &'static str) -> Result<SpaceUsage, StorageError> {
        let tree = self.trees.get(space)?;
        let mut usage = SpaceUsage::default();
        for item in tree.iter() {
            let (k, v) = item.db()?;
            usage.records += 1;
            usage.bytes += (k.len() + v.len()) as u64;
        }
        Ok(usage)
    }
}
