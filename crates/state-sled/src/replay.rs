//! Things seen once, in sled: one tree per namespace (`<namespace>/v1`),
//! each value the Unix second until which the key counts.

use async_trait::async_trait;

use super::{Storage, TreesByName};
use crate::Db;
use dgw_core::state::{ReplayStore, StorageError};

/// The sled [`ReplayStore`]: a tree per namespace the protocols name
/// (`replay/v1` keeps the name it had before the state seam).
pub struct SledReplay {
    trees: TreesByName,
}

fn until(value: &[u8]) -> i64 {
    value.try_into().map(i64::from_be_bytes).unwrap_or(i64::MAX)
}

impl SledReplay {
    pub fn new(storage: Storage) -> Self {
        Self {
            trees: TreesByName::new(storage),
        }
    }
}

#[async_trait]
impl ReplayStore for SledReplay {
    async fn insert_new(
        &self,
        namespace: &'static str,
        key: &[u8],
        now: i64,
        valid_until: i64,
    ) -> Result<bool, StorageError> {
        let tree = self.trees.get(namespace)?;
        let value = valid_until.to_be_bytes();
        // Insert if absent or expired, atomically: two concurrent uses of
        // one key cannot both see it fresh.
        let mut current = tree.get(key).db()?;
        loop {
            if let Some(prev) = &current {
                if until(prev) >= now {
                    return Ok(false);
                }
            }
            match tree
                .compare_and_swap(key, current.clone(), Some(&value[..]))
                .db()?
            {
                Ok(()) => break,
                Err(e) => current = e.current,
            }
        }
        self.trees.storage().sync().await?;
        Ok(true)
    }

    async fn sweep(&self, now: i64) -> Result<usize, StorageError> {
        let trees = self.trees.opened();
        let mut removed = 0;
        for tree in trees {
            for item in tree.iter() {
                let (k, v) = item.db()?;
                if until(&v) < now
                    && tree
                        .compare_and_swap(&k, Some(v), None as Option<&[u8]>)
                        .db()?
                        .is_ok()
                {
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }
}
