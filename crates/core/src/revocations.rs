//! The revocations verification reads: every recorded entry, indexed in
//! memory, loaded from the [`RevocationStore`] at start and kept current by
//! its subscription (entries other processes add included).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use delegateos::{PrincipalId, RevocationCheck, RevocationEntry, RevocationList};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;

use crate::state::{RevocationRecord, RevocationStore, StorageError};

/// The kind of signed DelegateOS entries, keyed `<revocation ID>/<signer>`
/// (named as the tree that held them before the state seam).
pub const SIGNED: &str = "revocations";
/// The kind of blocks an administrator revoked, keyed by revocation ID.
pub const BY_ADMIN: &str = "admin_revocations";

/// Why a revocation was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum RevokeError {
    #[error("{0}")]
    Invalid(#[from] delegateos::revocation::RevocationError),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// A block an administrator revoked without a signed entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AdminRevocation {
    revocation_id: String,
    revoked_at: delegateos::Timestamp,
    /// How the administrator was known (`token:ops`, `cert:CN=ops`).
    revoked_by: Option<String>,
}

/// The gateway's revocations: signed DelegateOS entries, administrators'
/// revocations, and the kinds protocols record (a protocol's own names,
/// such as capability IDs and hashes).
pub struct Revocations {
    store: Arc<dyn RevocationStore>,
    list: RwLock<RevocationList>,
    by_admin: RwLock<HashSet<String>>,
    /// Per protocol kind, the revoked names.
    names: RwLock<HashMap<&'static str, HashSet<String>>>,
    /// Whether the index has every recorded entry: false while a shared
    /// store's feed is lost, until it is read again (decisions are refused
    /// meanwhile: a revocation made elsewhere may be missing).
    current: AtomicBool,
    /// The tamper-evident audit trail, when the gateway keeps one.
    trail: crate::trail::TrailSlot,
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

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

impl Revocations {
    /// Loads every stored DelegateOS entry, checking each signed one
    /// again; protocols load their own kinds ([`Revocations::track`]).
    pub async fn load(store: Arc<dyn RevocationStore>) -> Result<Self, RevokeError> {
        let this = Self {
            store,
            list: RwLock::new(RevocationList::new()),
            by_admin: RwLock::new(HashSet::new()),
            names: RwLock::new(HashMap::new()),
            current: AtomicBool::new(true),
            trail: crate::trail::TrailSlot::default(),
        };
        this.reload().await?;
        Ok(this)
    }

    /// Reads every kind from the store again.
    async fn reload(&self) -> Result<(), RevokeError> {
        let kinds: Vec<&'static str> = read(&self.names).keys().copied().collect();
        for kind in [SIGNED, BY_ADMIN].into_iter().chain(kinds) {
            for record in self.store.all(kind).await? {
                self.index(&record)?;
            }
        }
        Ok(())
    }

    /// Loads a protocol's revocation kind and keeps it current from now on.
    pub async fn track(&self, kind: &'static str) -> Result<(), StorageError> {
        write(&self.names).entry(kind).or_default();
        for record in self.store.all(kind).await? {
            write(&self.names)
                .entry(kind)
                .or_default()
                .insert(record.key);
        }
        Ok(())
    }

    /// Adds a stored record to the index.
    fn index(&self, record: &RevocationRecord) -> Result<(), RevokeError> {
        let corrupt = |e: serde_json::Error| StorageError::Corrupt {
            tree: record.kind,
            key: record.key.clone(),
            problem: e.to_string(),
        };
        match record.kind {
            SIGNED => {
                let entry: RevocationEntry =
                    serde_json::from_value(record.value.clone()).map_err(corrupt)?;
                write(&self.list).add(entry)?;
            }
            BY_ADMIN => {
                let r: AdminRevocation =
                    serde_json::from_value(record.value.clone()).map_err(corrupt)?;
                write(&self.by_admin).insert(r.revocation_id);
            }
            kind => {
                write(&self.names)
                    .entry(kind)
                    .or_default()
                    .insert(record.key.clone());
            }
        }
        Ok(())
    }

    /// Every signed DelegateOS entry recorded, oldest `revokedAt` first
    /// (administrators' revocations carry no signature a peer could check,
    /// and protocols' kinds are theirs).
    pub fn signed_entries(&self) -> Vec<RevocationEntry> {
        let mut entries: Vec<RevocationEntry> =
            read(&self.list).list().into_iter().cloned().collect();
        entries.sort_by(|a, b| {
            (&a.revoked_at, &a.revocation_id).cmp(&(&b.revoked_at, &b.revocation_id))
        });
        entries
    }

    /// Whether the index has every recorded entry (see [`Revocations::follow`]).
    pub fn is_current(&self) -> bool {
        self.current.load(Ordering::Acquire)
    }

    /// Keeps the index current with what other processes record, until the
    /// store's subscription ends. While the store's feed is lost the index
    /// is not current; once it follows again the index is read again, and
    /// is current when that read succeeds.
    pub fn follow(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        let mut added = this.store.subscribe();
        let mut following = this.store.following();
        crate::telemetry::set_revocation_index_complete(this.is_current());
        tokio::spawn(async move {
            let mut feed_open = true;
            loop {
                let result = tokio::select! {
                    changed = following.changed(), if feed_open => {
                        if changed.is_err() {
                            feed_open = false;
                            continue;
                        }
                        let now = *following.borrow_and_update();
                        if now {
                            // Read again until it succeeds (or the feed is lost again).
                            while let Err(e) = this.reload().await {
                                tracing::warn!(error = %e, "revocations: reading them again failed; retrying");
                                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                                if !*following.borrow() {
                                    break;
                                }
                            }
                            if *following.borrow() {
                                this.current.store(true, Ordering::Release);
                                crate::telemetry::set_revocation_index_complete(true);
                                tracing::info!("revocations: the feed is followed again; the index is current");
                            }
                            Ok(())
                        } else {
                            this.current.store(false, Ordering::Release);
                            crate::telemetry::set_revocation_index_complete(false);
                            tracing::warn!("revocations: the feed is lost; decisions are refused until it is back");
                            Ok(())
                        }
                    }
                    record = added.recv() => match record {
                        Ok(record) => this.index(&record),
                        Err(RecvError::Lagged(_)) => this.reload().await,
                        Err(RecvError::Closed) => return,
                    },
                };
                if let Err(e) = result {
                    tracing::error!(error = %e, "indexing a revocation failed");
                }
            }
        })
    }

    /// Sends every revocation recorded here to `trail` from now on.
    pub fn set_trail(&self, trail: std::sync::Arc<dyn crate::trail::Trail>) {
        self.trail.set(trail);
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
            .store
            .add(RevocationRecord {
                kind: BY_ADMIN,
                key: revocation_id.to_owned(),
                value: serde_json::to_value(&record)
                    .map_err(|e| StorageError::Backend(e.to_string()))?,
            })
            .await?;
        self.trail.event(
            "revoke",
            serde_json::json!({"kind": "admin", "id": record.revocation_id,
                "by": record.revoked_by, "newlyRecorded": inserted}),
        );
        // Visible to verification only once durable.
        write(&self.by_admin).insert(record.revocation_id);
        Ok(inserted)
    }

    /// Verifies and records an entry durably; `false` if it was already known.
    pub async fn add(&self, entry: RevocationEntry) -> Result<bool, RevokeError> {
        let entry = entry.into_verified()?;
        let e = entry.entry();
        let inserted = self
            .store
            .add(RevocationRecord {
                kind: SIGNED,
                key: format!("{}/{}", e.revocation_id, e.revoked_by),
                value: serde_json::to_value(e).map_err(|e| StorageError::Backend(e.to_string()))?,
            })
            .await?;
        self.trail.event(
            "revoke",
            serde_json::json!({"kind": "delegateos", "id": e.revocation_id,
                "by": e.revoked_by.as_str(), "newlyRecorded": inserted}),
        );
        // Visible to verification only once durable.
        write(&self.list).insert(entry);
        Ok(inserted)
    }

    /// Records that `name` is revoked in a protocol's `kind` (verified by
    /// the protocol), durably; `false` if it already was.
    pub async fn add_name(
        &self,
        kind: &'static str,
        name: &str,
        record: serde_json::Value,
    ) -> Result<bool, StorageError> {
        let inserted = self
            .store
            .add(RevocationRecord {
                kind,
                key: name.to_owned(),
                value: record,
            })
            .await?;
        self.trail.event(
            "revoke",
            serde_json::json!({"kind": kind, "id": name, "newlyRecorded": inserted}),
        );
        write(&self.names)
            .entry(kind)
            .or_default()
            .insert(name.to_owned());
        Ok(inserted)
    }

    /// Whether `name` is revoked in a protocol's `kind`.
    pub fn contains_name(&self, kind: &str, name: &str) -> bool {
        read(&self.names)
            .get(kind)
            .is_some_and(|s| s.contains(name))
    }

    /// The revocation state, for verification.
    pub fn read(&self) -> Revoked<'_> {
        Revoked {
            list: read(&self.list),
            by_admin: read(&self.by_admin),
        }
    }

    /// How many DelegateOS entries are recorded (signed and administrators').
    pub fn len(&self) -> usize {
        let r = self.read();
        r.list.list().len() + r.by_admin.len()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
