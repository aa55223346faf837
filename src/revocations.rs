//! Persisted revocations: every verified entry, in memory for verification
//! and in sled so a restart forgets none.

use std::collections::HashSet;
use std::sync::{RwLock, RwLockReadGuard};

use talos::revocation::TalosRevocation;

use delegateos::{RevocationEntry, RevocationList};

use crate::storage::{encode, scan, Storage, StorageError};

/// Why a revocation was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum RevokeError {
    #[error("{0}")]
    Invalid(#[from] delegateos::revocation::RevocationError),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// The gateway's revocation list: DelegateOS entries, and Talos
/// revocations (capability ids and hashes).
pub struct RevocationStore {
    storage: Storage,
    list: RwLock<RevocationList>,
    talos: RwLock<HashSet<String>>,
}

fn key(entry: &RevocationEntry) -> Vec<u8> {
    format!("{}/{}", entry.revocation_id, entry.revoked_by).into_bytes()
}

impl RevocationStore {
    /// Loads every stored entry, checking each signature again.
    pub fn open(storage: Storage) -> Result<Self, RevokeError> {
        let mut list = RevocationList::new();
        for (_, entry) in scan::<RevocationEntry>(&storage.trees.revocations, "revocations")? {
            list.add(entry)?;
        }
        let mut talos = HashSet::new();
        for (_, r) in
            scan::<TalosRevocation>(&storage.trees.talos_revocations, "talos_revocations")?
        {
            talos.insert(r.revoke);
        }
        Ok(Self {
            storage,
            list: RwLock::new(list),
            talos: RwLock::new(talos),
        })
    }

    /// Verifies and records an entry durably; `false` if it was already known.
    pub async fn add(&self, entry: RevocationEntry) -> Result<bool, RevokeError> {
        let entry = entry.into_verified()?;
        let k = key(entry.entry());
        let inserted = self
            .storage
            .trees
            .revocations
            .compare_and_swap(&k, None as Option<&[u8]>, Some(encode(entry.entry())))
            .map_err(StorageError::from)?
            .is_ok();
        self.storage.sync().await?;
        // Visible to verification only once durable.
        self.list
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(entry);
        Ok(inserted)
    }

    /// Records a Talos revocation (verified by the caller against the
    /// trusted issuers) durably; `false` if the name was already revoked.
    pub async fn add_talos(&self, revocation: TalosRevocation) -> Result<bool, RevokeError> {
        let inserted = self
            .storage
            .trees
            .talos_revocations
            .compare_and_swap(
                revocation.revoke.as_bytes(),
                None as Option<&[u8]>,
                Some(encode(&revocation)),
            )
            .map_err(StorageError::from)?
            .is_ok();
        self.storage.sync().await?;
        self.talos
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(revocation.revoke);
        Ok(inserted)
    }

    /// Whether a Talos capability id or hash is revoked.
    pub fn is_talos_revoked(&self, name: &str) -> bool {
        self.talos
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(name)
    }

    /// The list, for verification.
    pub fn read(&self) -> RwLockReadGuard<'_, RevocationList> {
        self.list.read().unwrap_or_else(|p| p.into_inner())
    }

    /// How many entries are recorded.
    pub fn len(&self) -> usize {
        self.read().list().len()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
