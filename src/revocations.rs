//! Persisted revocations: every verified entry, in memory for verification
//! and in sled so a restart forgets none.

use std::collections::HashSet;
use std::sync::{RwLock, RwLockReadGuard};

use talos::revocation::TalosRevocation;

use delegateos::{PrincipalId, RevocationCheck, RevocationEntry, RevocationList};

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
    /// Blocks an administrator revoked, whoever signed them.
    by_admin: RwLock<HashSet<String>>,
}

/// A block an administrator revoked without a signed entry.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct AdminRevocation {
    revocation_id: String,
    revoked_at: delegateos::Timestamp,
    /// How the administrator was known (`token:ops`, `cert:CN=ops`).
    revoked_by: Option<String>,
}

/// The revocation state a verification reads: signed entries (which apply
/// to the blocks their signers signed) and administrators' revocations
/// (which apply to the block whoever signed it).
pub struct Revoked<'a> {
    list: RwLockReadGuard<'a, RevocationList>,
    by_admin: RwLockReadGuard<'a, HashSet<String>>,
}

impl RevocationCheck for Revoked<'_> {
    fn is_block_revoked(&self, revocation_id: &str, signer: &PrincipalId) -> bool {
        self.by_admin.contains(revocation_id) || self.list.is_block_revoked(revocation_id, signer)
    }
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
        let mut by_admin = HashSet::new();
        for (_, r) in
            scan::<AdminRevocation>(&storage.trees.admin_revocations, "admin_revocations")?
        {
            by_admin.insert(r.revocation_id);
        }
        Ok(Self {
            storage,
            list: RwLock::new(list),
            talos: RwLock::new(talos),
            by_admin: RwLock::new(by_admin),
        })
    }

    /// Records durably that an administrator (`by`) revoked the block
    /// `revocation_id`; `false` if it already was.
    pub async fn add_by_admin(
        &self,
        revocation_id: &str,
        by: Option<String>,
    ) -> Result<bool, RevokeError> {
        delegateos::revocation::check_revocation_id(revocation_id)?;
        let record = AdminRevocation {
            revocation_id: revocation_id.to_owned(),
            revoked_at: delegateos::Timestamp::from_instant(time::OffsetDateTime::now_utc()),
            revoked_by: by,
        };
        let inserted = self
            .storage
            .insert_new(
                &self.storage.trees.admin_revocations,
                revocation_id.as_bytes(),
                encode(&record),
            )
            .await?;
        // Visible to verification only once durable.
        self.by_admin
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(record.revocation_id);
        Ok(inserted)
    }

    /// Verifies and records an entry durably; `false` if it was already known.
    pub async fn add(&self, entry: RevocationEntry) -> Result<bool, RevokeError> {
        let entry = entry.into_verified()?;
        let inserted = self
            .storage
            .insert_new(
                &self.storage.trees.revocations,
                &key(entry.entry()),
                encode(entry.entry()),
            )
            .await?;
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
            .insert_new(
                &self.storage.trees.talos_revocations,
                revocation.revoke.as_bytes(),
                encode(&revocation),
            )
            .await?;
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

    /// The revocation state, for verification.
    pub fn read(&self) -> Revoked<'_> {
        Revoked {
            list: self.list.read().unwrap_or_else(|p| p.into_inner()),
            by_admin: self.by_admin.read().unwrap_or_else(|p| p.into_inner()),
        }
    }

    /// How many entries are recorded (signed and administrators').
    pub fn len(&self) -> usize {
        let r = self.read();
        r.list.list().len() + r.by_admin.len()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
