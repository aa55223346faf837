//! The embedded default backend: sled, one tree per concept, a versioned
//! value encoding, and group-committed durability; the budgets journaled
//! beside it (`ledger.rs`). Layout: `docs/storage.md`.

mod audit;
mod compact;
mod delegations;
mod journal;
mod ledger;
mod records;
mod replay;
mod revocations;
mod telemetry;

pub use audit::SledAudit;
pub use delegations::SledDelegations;
pub use ledger::Ledger;
pub use records::SledRecords;
pub use replay::SledReplay;
pub use revocations::SledRevocations;
pub use telemetry::METRICS;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::oneshot;

use dgw_core::state::{BudgetSettings, StorageError, Stores};

/// The encoding version written as the first byte of every value.
pub const VALUE_VERSION: u8 = 1;

/// Sled's errors as the state seam reports them (`.db()?`).
pub(crate) trait Db<T> {
    fn db(self) -> Result<T, StorageError>;
}

impl<T> Db<T> for sled::Result<T> {
    fn db(self) -> Result<T, StorageError> {
        self.map_err(|e| StorageError::Backend(e.to_string()))
    }
}

impl<T, E: std::fmt::Debug> Db<T> for Result<T, sled::transaction::TransactionError<E>> {
    fn db(self) -> Result<T, StorageError> {
        self.map_err(|e| StorageError::Backend(format!("{e:?}")))
    }
}

/// Opens the sled backend in `data_dir` (the database in `db/`, the budget
/// journal in `journal/`): its stores, recovered.
pub fn open(data_dir: &Path, budget: BudgetSettings) -> Result<Stores, StorageError> {
    let storage = Storage::open(&data_dir.join("db"))?;
    let ledger = Arc::new(
        Ledger::open(storage.clone(), &data_dir.join("journal"), budget)
            .map_err(|e| StorageError::Backend(e.to_string()))?,
    );
    let close = {
        let (ledger, storage) = (ledger.clone(), storage.clone());
        Arc::new(move || {
            ledger.snapshot()?;
            storage.flush_now()
        })
    };
    Ok(Stores {
        budgets: ledger,
        revocations: Arc::new(SledRevocations::new(storage.clone())),
        delegations: Arc::new(SledDelegations::new(storage.clone())),
        replay: Arc::new(SledReplay::new(storage.clone())),
        records: Arc::new(SledRecords::new(storage.clone())),
        audit: Arc::new(SledAudit::new(&storage)),
        close,
    })
}

/// Trees opened on first use, one per kind or namespace: `<name>/v1` (the
/// names of the trees that held them before the state seam, so older data
/// dirs open as they are: `revocations/v1`, a protocol's
/// `<kind>_revocations/v1`, `replay/v1`). The names are the callers'.
pub(crate) struct TreesByName {
    storage: Storage,
    trees: std::sync::RwLock<std::collections::HashMap<&'static str, sled::Tree>>,
}

impl TreesByName {
    pub(crate) fn new(storage: Storage) -> Self {
        Self {
            storage,
            trees: Default::default(),
        }
    }

    /// The tree of `name`, opened (or created) the first time.
    pub(crate) fn get(&self, name: &'static str) -> Result<sled::Tree, StorageError> {
        if let Some(t) = self
            .trees
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
        {
            return Ok(t.clone());
        }
        let tree = self.storage.open_tree(&format!("{name}/v1"))?;
        self.trees
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name, tree.clone());
        Ok(tree)
    }

    /// Every tree opened so far.
    pub(crate) fn opened(&self) -> Vec<sled::Tree> {
        self.trees
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// The storage, for syncs.
    pub(crate) fn storage(&self) -> &Storage {
        &self.storage
    }
}

/// The trees of fixed names (see `docs/storage.md`); revocations and
/// replay keep a tree per kind, opened when first used.
#[derive(Clone)]
pub struct Trees {
    pub budgets: sled::Tree,
    pub reservations: sled::Tree,
    pub delegations: sled::Tree,
    pub contracts: sled::Tree,
    pub attestations: sled::Tree,
    pub revocation_index: sled::Tree,
    pub ledger: sled::Tree,
    /// Audit events, in order.
    pub audit: sled::Tree,
    /// The tamper-evident logs' anchors, by log name.
    pub audit_anchors: sled::Tree,
}

/// The database and its group-commit flusher.
#[derive(Clone)]
pub struct Storage {
    db: sled::Db,
    pub trees: Trees,
    durability: Durability,
    /// How many documents each record space that a capped insert has
    /// used holds ([`SledRecords`]): sled counts a tree only by walking it,
    /// and this process is the only one with the database open.
    pub(crate) record_counts: Arc<std::sync::Mutex<std::collections::HashMap<&'static str, usize>>>,
}

impl Storage {
    /// Opens (or creates) the database in `dir` and starts the flusher
    /// thread. A database file that holds much less than its size (after a
    /// burst of reservations that ended) is rewritten first ([`compact`]).
    pub fn open(dir: &Path) -> Result<Self, StorageError> {
        let io =
            |e: std::io::Error| StorageError::Backend(format!("compacting {}: {e}", dir.display()));
        compact::recover(dir).map_err(io)?;
        let mut db = open_db(dir).db()?;
        if compact::worth_it(&db).db()? {
            let before = db.size_on_disk().db()?;
            drop(db);
            compact::rewrite(dir, open_db).map_err(io)?;
            db = open_db(dir).db()?;
            tracing::info!(
                before,
                after = db.size_on_disk().db()?,
                "database rewritten to give disk space back"
            );
        }
        let trees = Trees {
            budgets: db.open_tree("budgets/v1").db()?,
            reservations: db.open_tree("reservations/v1").db()?,
            delegations: db.open_tree("delegations/v1").db()?,
            contracts: db.open_tree("contracts/v1").db()?,
            attestations: db.open_tree("attestations/v1").db()?,
            revocation_index: db.open_tree("revocation_index/v1").db()?,
            ledger: db.open_tree("ledger/v1").db()?,
            audit: db.open_tree("audit/v1").db()?,
            audit_anchors: db.open_tree("audit_anchors/v1").db()?,
        };
        let durability = Durability::start(db.clone());
        Ok(Self {
            db,
            trees,
            durability,
            record_counts: Default::default(),
        })
    }

    /// Waits until everything written before this call is on disk. Concurrent
    /// callers share one flush.
    pub async fn sync(&self) -> Result<(), StorageError> {
        self.durability.sync().await
    }

    /// Stores `value` under `key` in `tree` unless something is there, and
    /// waits until it is on disk; whether it was new.
    pub async fn insert_new(
        &self,
        tree: &sled::Tree,
        key: &[u8],
        value: Vec<u8>,
    ) -> Result<bool, StorageError> {
        let inserted = tree
            .compare_and_swap(key, None as Option<&[u8]>, Some(value))
            .db()?
            .is_ok();
        self.sync().await?;
        Ok(inserted)
    }

    /// Opens (or creates) a tree.
    pub fn open_tree(&self, name: &str) -> Result<sled::Tree, StorageError> {
        self.db.open_tree(name).db()
    }

    /// Flushes synchronously (at shutdown).
    pub fn flush_now(&self) -> Result<(), StorageError> {
        self.db.flush().db()?;
        Ok(())
    }
}

fn open_db(dir: &Path) -> sled::Result<sled::Db> {
    sled::Config::new()
        .path(dir)
        .mode(sled::Mode::HighThroughput)
        .open()
}

/// Encodes a value: the version byte, then JSON.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Room for a typical record: growing from one byte reallocated six
    // times per value (issue 36).
    let mut bytes = Vec::with_capacity(256);
    encode_into(&mut bytes, value);
    bytes
}

/// [`encode`] appended to `out`.
pub fn encode_into<T: Serialize>(out: &mut Vec<u8>, value: &T) {
    out.push(VALUE_VERSION);
    serde_json::to_writer(&mut *out, value).expect("stored values always serialize");
}

/// Decodes a value written by [`encode`].
pub fn decode<T: DeserializeOwned>(
    tree: &'static str,
    key: &[u8],
    bytes: &[u8],
) -> Result<T, StorageError> {
    let corrupt = |problem: String| StorageError::Corrupt {
        tree,
        key: String::from_utf8_lossy(key).into_owned(),
        problem,
    };
    match bytes.split_first() {
        Some((&VALUE_VERSION, json)) => {
            serde_json::from_slice(json).map_err(|e| corrupt(e.to_string()))
        }
        Some((v, _)) => Err(corrupt(format!("unknown value version {v}"))),
        None => Err(corrupt("empty value".into())),
    }
}

type Waiter = oneshot::Sender<Result<(), StorageError>>;

/// Group commit: writers register after writing; one flush serves every
/// writer registered before it started. Flushes run on a dedicated thread.
#[derive(Clone)]
struct Durability {
    tx: std::sync::mpsc::Sender<Waiter>,
}

impl Durability {
    fn start(db: sled::Db) -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<Waiter>();
        std::thread::Builder::new()
            .name("dgw-flush".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut waiters = vec![first];
                    waiters.extend(rx.try_iter());
                    let started = Instant::now();
                    let result = db.flush().map(|_| ()).db();
                    crate::telemetry::record_flush(started.elapsed(), waiters.len());
                    if let Err(e) = &result {
                        tracing::error!(error = %e, "sled flush failed");
                    }
                    for w in waiters {
                        let _ = w.send(result.clone());
                    }
                }
            })
            .expect("the flush thread starts");
        Self { tx }
    }

    async fn sync(&self) -> Result<(), StorageError> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(tx).map_err(|_| StorageError::Closed)?;
        rx.await.map_err(|_| StorageError::Closed)?
    }
}

/// Reads one value written by [`encode`], if the key is there.
pub fn get<T: DeserializeOwned>(
    tree: &sled::Tree,
    name: &'static str,
    key: &[u8],
) -> Result<Option<T>, StorageError> {
    tree.get(key)
        .db()?
        .map(|v| decode(name, key, &v))
        .transpose()
}

/// Reads every value of a tree, in key order.
pub fn scan<T: DeserializeOwned>(
    tree: &sled::Tree,
    name: &'static str,
) -> Result<Vec<(Vec<u8>, T)>, StorageError> {
    tree.iter()
        .map(|item| {
            let (k, v) = item.db()?;
            Ok((k.to_vec(), decode(name, &k, &v)?))
        })
        .collect()
}

/// A shared handle.
pub type SharedStorage = Arc<Storage>;

#[cfg(test)]
mod contract_suite {
    use std::sync::Mutex;

    use super::*;
    use dgw_core::state::contract::Backend;
    use dgw_core::state::{
        AuditSink, BudgetStore, DelegationStore, RecordStore, ReplayStore, RevocationStore,
    };

    /// A data dir with one sled handle (sled locks its directory); the
    /// ledger, with its in-memory book and journal, is what a restart
    /// rebuilds.
    struct Sled {
        dir: tempfile::TempDir,
        storage: Storage,
        /// The open ledger, kept to stop it as a crash would.
        ledger: Mutex<Option<Arc<Ledger>>>,
    }

    impl Sled {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            Self {
                storage: Storage::open(&dir.path().join("db")).unwrap(),
                dir,
                ledger: Mutex::new(None),
            }
        }

        fn take(&self, store: Arc<dyn BudgetStore>) -> Ledger {
            drop(store);
            let ledger = self
                .ledger
                .lock()
                .unwrap()
                .take()
                .expect("a ledger is open");
            Arc::try_unwrap(ledger)
                .ok()
                .expect("only the suite held the store")
        }
    }

    impl Backend for Sled {
        fn budgets(&self, settings: BudgetSettings) -> Arc<dyn BudgetStore> {
            let ledger = Arc::new(
                Ledger::open(
                    self.storage.clone(),
                    &self.dir.path().join("journal"),
                    settings,
                )
                .unwrap(),
            );
            *self.ledger.lock().unwrap() = Some(ledger.clone());
            ledger
        }
        fn persistent(&self) -> bool {
            true
        }
        fn stop(&self, store: Arc<dyn BudgetStore>) {
            drop(self.take(store));
        }
        fn crash(&self, store: Arc<dyn BudgetStore>) {
            self.take(store).crash();
        }
        fn revocations(&self) -> Arc<dyn RevocationStore> {
            Arc::new(SledRevocations::new(self.storage.clone()))
        }
        fn replay(&self) -> Arc<dyn ReplayStore> {
            Arc::new(SledReplay::new(self.storage.clone()))
        }
        fn delegations(&self) -> Arc<dyn DelegationStore> {
            Arc::new(SledDelegations::new(self.storage.clone()))
        }
        fn audit(&self) -> Arc<dyn AuditSink> {
            Arc::new(SledAudit::new(&self.storage))
        }
        fn records(&self) -> Arc<dyn RecordStore> {
            Arc::new(SledRecords::new(self.storage.clone()))
        }
    }

    dgw_core::contract_suite!(Sled::new);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Opens `dir` once the flusher thread of a dropped `Storage` over it
    /// has let go of sled's lock.
    fn reopen(dir: &Path) -> Storage {
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        loop {
            match Storage::open(dir) {
                Ok(s) => return s,
                Err(e) if e.to_string().contains("lock") && Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => panic!("{e}"),
            }
        }
    }

    fn dir_size(dir: &Path) -> u64 {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                if e.file_type().unwrap().is_dir() {
                    dir_size(&e.path())
                } else {
                    e.metadata().unwrap().len()
                }
            })
            .sum()
    }

    /// A burst that all ended leaves the file at its peak size; the next
    /// open rewrites it, keeping what is live.
    #[test]
    fn a_database_that_holds_little_is_rewritten_smaller() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("db");
        {
            let s = Storage::open(&dir).unwrap();
            s.trees.budgets.insert(b"keep", b"me".as_slice()).unwrap();
            let value = vec![7u8; 1024];
            for i in 0..20_000u32 {
                s.trees
                    .reservations
                    .insert(i.to_be_bytes(), value.as_slice())
                    .unwrap();
            }
            s.flush_now().unwrap();
            for i in 0..20_000u32 {
                s.trees.reservations.remove(i.to_be_bytes()).unwrap();
            }
            s.flush_now().unwrap();
        }
        let peak = dir_size(&dir);
        assert!(peak > 8 << 20, "the burst took {peak} bytes");
        let s = reopen(&dir);
        let after = dir_size(&dir);
        assert!(after < peak / 4, "{after} bytes after, {peak} before");
        assert_eq!(
            s.trees.budgets.get(b"keep").unwrap().unwrap(),
            b"me".as_slice()
        );
        assert!(s.trees.reservations.is_empty());
        assert!(!root.path().join("db.compacting").exists());
        assert!(!root.path().join("db.old").exists());
    }

    /// A crash mid-swap: a complete rewrite not yet in place is put in
    /// place; an incomplete one is dropped and the original kept.
    #[test]
    fn an_interrupted_rewrite_is_finished_or_undone() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("db");
        {
            let s = Storage::open(&dir).unwrap();
            s.trees.budgets.insert(b"k", b"v".as_slice()).unwrap();
            s.flush_now().unwrap();
        }
        // Incomplete copy beside a live database: dropped.
        std::fs::create_dir_all(root.path().join("db.compacting")).unwrap();
        let s = reopen(&dir);
        assert_eq!(s.trees.budgets.get(b"k").unwrap().unwrap(), b"v".as_slice());
        drop(s);
        assert!(!root.path().join("db.compacting").exists());
        // Crashed after moving the original aside, before the new one was
        // in place: the complete copy becomes the database.
        std::fs::rename(&dir, root.path().join("db.compacting")).unwrap();
        std::fs::write(root.path().join("db.compacting/COMPLETE"), b"").unwrap();
        std::fs::create_dir_all(root.path().join("db.old")).unwrap();
        let s = reopen(&dir);
        assert_eq!(s.trees.budgets.get(b"k").unwrap().unwrap(), b"v".as_slice());
        assert!(!root.path().join("db.old").exists());
        assert!(!dir.join("COMPLETE").exists());
    }
}
