//! Hierarchical budgets with two-phase reservations that can never overspend.
//!
//! Every level of a token's chain (the authority, then each attenuation) is a
//! budget node, named by the tenant's root and the path of delegation IDs
//! from the root down to it: `ROOT/del_a/del_b`. Naming by path rather than by
//! bare delegation ID means a holder can only ever charge nodes below its
//! own signed chain, never a stranger's node that happens to share an ID,
//! while a token re-issued for the same delegation shares its node.
//!
//! `reserve` checks `spent + reserved + amount ≤ limit` at every level at
//! once, under one lock, and records the reservation durably before it is
//! acknowledged; `settle` moves the actual cost (at most the reserved amount)
//! to `spent` at every level and releases the rest, durably; `release` and
//! the sweeper give reservations back. The lock makes the check-and-reserve
//! atomic in this process, and sled allows only one process per data dir.
//!
//! The state lives in memory; every change is first appended to the budget
//! journal (`journal.rs`, group-committed), and snapshots of what changed
//! since the last one go to the `budgets/v1` and `reservations/v1` trees,
//! after which older journal files are deleted. Recovery loads the snapshot
//! and replays the journal records after it, through the same `Book::apply`
//! as live changes.
//!
//! Reservations charged on expiry (tool calls the gateway forwards itself)
//! may *lease* budget: one synced record raises a level's durable ceiling, a
//! bound on what may be spent or reserved there that recovery charges in full
//! after an unclean stop. A reservation under every level's durable ceiling
//! is journaled lazily and need not wait for the disk. See [`LeasePolicy`].

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delegateos::dct::ChainLevel;
use delegateos::PrincipalId;
use serde::{Deserialize, Serialize};

use blake2::digest::consts::U16;
use blake2::{Blake2b, Digest};
use tokio::sync::oneshot;

use crate::caller::HolderDigest;
use crate::random;

use crate::journal::Journal;
use crate::storage::{encode, get, scan, Storage, StorageError};

/// A budget node: `ROOT/del_…/del_…`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BudgetKey(Arc<str>);

impl BudgetKey {
    /// The keys of every level of a verified chain, with each level's limit.
    pub fn for_chain(root: &PrincipalId, levels: &[ChainLevel]) -> Vec<(BudgetKey, u64)> {
        let mut path = root.to_string();
        levels
            .iter()
            .map(|l| {
                path.push('/');
                path.push_str(l.delegation_id.as_str());
                (BudgetKey(Arc::from(path.as_str())), l.max_budget_microcents)
            })
            .collect()
    }

    /// The keys of a chain named by `names` under `root`, every level with
    /// the same `limit` (a Talos capability chain: root issuer, then each
    /// capability's hash).
    pub fn for_path(root: &str, names: &[String], limit: u64) -> Vec<(BudgetKey, u64)> {
        let mut path = root.to_owned();
        names
            .iter()
            .map(|n| {
                path.push('/');
                path.push_str(n);
                (BudgetKey(Arc::from(path.as_str())), limit)
            })
            .collect()
    }

    /// The tenant root this node belongs to.
    pub fn root(&self) -> &str {
        self.0.split('/').next().unwrap_or_default()
    }

    /// The delegation ID this node is for.
    pub fn delegation_id(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or_default()
    }

    /// The keys of this node and its ancestors, root level first.
    pub fn lineage(&self) -> Vec<BudgetKey> {
        let parts: Vec<&str> = self.0.split('/').collect();
        (2..=parts.len())
            .map(|n| BudgetKey(Arc::from(parts[..n].join("/"))))
            .collect()
    }

    /// Whether this is a tenant's top level (an authority block).
    pub fn is_top(&self) -> bool {
        self.0.matches('/').count() == 1
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Why a budget operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LedgerError {
    #[error("budget of {delegation_id} would be exceeded: {spent} spent + {reserved} reserved + {amount} requested > {limit} microcents")]
    Exceeded {
        delegation_id: String,
        limit: u64,
        spent: u64,
        reserved: u64,
        amount: u64,
    },
    #[error("no open reservation {0}")]
    UnknownReservation(String),
    #[error("{open} reservations are open under {delegation_id}, the most allowed (budget.max_open_reservations)")]
    TooManyOpen { delegation_id: String, open: usize },
    #[error("settlement of {actual} exceeds the {reserved} microcents reserved")]
    ExceedsReservation { actual: u64, reserved: u64 },
    #[error("reservation {0} is released on expiry, so its settle must be awaited")]
    NotChargedOnExpiry(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Random(#[from] random::RandomError),
}

/// The stored state of a node: its limit and what has been spent.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct LevelRecord {
    limit: u64,
    spent: u64,
}

/// A stored open reservation (`open/ID` in the reservations tree). It
/// carries each level's limit so that recovery never depends on a level
/// record written separately.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ReservationRecord {
    levels: Vec<(BudgetKey, u64)>,
    amount: u64,
    deadline_ms: u64,
    /// Absent in records written before it existed: those are released.
    #[serde(default)]
    on_expiry: OnExpiry,
    /// Who may end it besides an administrator: the digest of the
    /// credential that made it. Absent for the gateway's own reservations
    /// (and records written before holders existed): only the gateway or an
    /// administrator ends those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    holder: Option<HolderDigest>,
}

/// What happens to a reservation nobody settled or released by its deadline
/// (a vanished client, or a crash).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnExpiry {
    /// Released: the holder (a JSON-RPC client) may never have used it.
    #[default]
    Release,
    /// Charged in full: the gateway itself forwarded the work it pays for
    /// (an MCP tool call), so the work may have been done. This makes the
    /// charge durable before the work starts, and lets the settle after it
    /// skip waiting for the disk.
    Charge,
}

/// How far ahead reservations charged on expiry lease budget: when a level's
/// durable ceiling is too low for a reservation, it is raised to what the
/// reservation needs plus `fraction` of the room left above that, in one
/// synced record; reservations under it then skip their own sync. After an
/// unclean stop, every level is charged up to its ceiling (whatever may have
/// been used), so a crash costs a level at most `fraction` of its free room
/// and never overspends it. `0` turns leasing off: every reservation waits
/// for the disk.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeasePolicy {
    fraction: f64,
}

impl LeasePolicy {
    /// No leasing.
    pub const OFF: Self = Self { fraction: 0.0 };

    /// `None` unless `0 ≤ fraction ≤ 1`.
    pub fn new(fraction: f64) -> Option<Self> {
        (0.0..=1.0).contains(&fraction).then_some(Self { fraction })
    }

    fn is_on(self) -> bool {
        self.fraction > 0.0
    }

    /// The ceiling to raise a level to when a reservation needs `need` of its `limit`.
    fn ceiling(self, need: u64, limit: u64) -> u64 {
        let ahead = (limit.saturating_sub(need) as f64 * self.fraction) as u64;
        need.saturating_add(ahead).min(limit)
    }
}

/// One change to the ledger, as journaled. `seq` orders changes; a
/// snapshot records the last `seq` it includes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Entry {
    Reserve {
        seq: u64,
        id: String,
        record: ReservationRecord,
    },
    Settle {
        seq: u64,
        id: String,
        actual: u64,
    },
    Release {
        seq: u64,
        id: String,
    },
    Charge {
        seq: u64,
        levels: Vec<(BudgetKey, u64)>,
        amount: u64,
    },
    /// Raises durable ceilings: `(key, limit, ceiling)` per level.
    Lease {
        seq: u64,
        levels: Vec<(BudgetKey, u64, u64)>,
    },
    /// Voids every lease: written at a clean stop, after everything the
    /// leases covered.
    Unlease {
        seq: u64,
    },
}

impl Entry {
    fn seq(&self) -> u64 {
        match self {
            Entry::Reserve { seq, .. }
            | Entry::Settle { seq, .. }
            | Entry::Release { seq, .. }
            | Entry::Charge { seq, .. }
            | Entry::Lease { seq, .. }
            | Entry::Unlease { seq } => *seq,
        }
    }
}

/// What changed since the last snapshot took this: what the next one
/// writes. Taking it is O(1), so a snapshot never holds the book for long,
/// however many reservations are open.
#[derive(Default)]
struct Unsaved {
    levels: FastSet<BudgetKey>,
    /// Reservations opened (`Some`) or ended (`None`) since then. One opened
    /// and ended in between leaves nothing: it was never saved.
    reservations: FastMap<String, Option<Arc<ReservationRecord>>>,
}

/// The `ledger/v1` record of the last snapshot.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
struct SnapshotMeta {
    seq: u64,
}

const SNAPSHOT_KEY: &[u8] = b"snapshot";

#[derive(Debug, Clone, Copy, Default)]
struct LevelState {
    limit: u64,
    spent: u64,
    reserved: u64,
    /// The lease ceiling (0: none), and the `seq` of the record that set it.
    leased: u64,
    lease_seq: u64,
    /// Room freed by changes up to `freed_seq` that may not be on disk yet:
    /// a crash would undo them, so leased reservations must not count on it.
    freed_unsynced: u64,
    freed_seq: u64,
    /// Reservations open at this level.
    open: usize,
}

/// Maps with a fast keyed hash: budget keys are long strings hashed on every
/// operation, and the per-process random key keeps them DoS-resistant.
type FastMap<K, V> = HashMap<K, V, ahash::RandomState>;
type FastSet<K> = HashSet<K, ahash::RandomState>;

#[derive(Default)]
struct Book {
    levels: FastMap<BudgetKey, LevelState>,
    reservations: FastMap<String, Arc<ReservationRecord>>,
    /// Open reservations by deadline, so the sweeper reads only the expired.
    deadlines: BTreeSet<(u64, String)>,
    by_delegation: FastMap<String, BTreeSet<BudgetKey>>,
    /// Levels with a lease.
    leased: FastSet<BudgetKey>,
    unsaved: Unsaved,
    /// The last journaled change applied.
    seq: u64,
    /// The last journaled change known to be on disk (with every one before it).
    durable_seq: u64,
}

impl Book {
    /// Applies a change: the one code path for live changes and replay.
    /// Checks (fit, existence) happen before a change is journaled.
    fn apply(&mut self, entry: &Entry) {
        match entry {
            Entry::Reserve { id, record, .. } => {
                for (key, limit) in &record.levels {
                    let state = self.level_mut(key, *limit);
                    state.reserved += record.amount;
                    state.open += 1;
                }
                let record = Arc::new(record.clone());
                self.deadlines.insert((record.deadline_ms, id.clone()));
                self.unsaved
                    .reservations
                    .insert(id.clone(), Some(record.clone()));
                self.reservations.insert(id.clone(), record);
            }
            Entry::Settle { seq, id, actual } => {
                if let Some(res) = self.end(id) {
                    let durable = self.durable_seq;
                    for (key, limit) in &res.levels {
                        self.mark_unsaved(key);
                        let state = self.level_mut(key, *limit);
                        state.reserved -= res.amount;
                        state.spent += actual;
                        state.freed(res.amount - actual, *seq, durable);
                    }
                }
            }
            Entry::Release { seq, id } => {
                if let Some(res) = self.end(id) {
                    let durable = self.durable_seq;
                    for (key, limit) in &res.levels {
                        let state = self.level_mut(key, *limit);
                        state.reserved -= res.amount;
                        state.freed(res.amount, *seq, durable);
                    }
                }
            }
            Entry::Charge { levels, amount, .. } => {
                for (key, limit) in levels {
                    self.mark_unsaved(key);
                    self.level_mut(key, *limit).spent += amount;
                }
            }
            Entry::Lease { seq, levels } => {
                for (key, limit, ceiling) in levels {
                    let state = self.level_mut(key, *limit);
                    state.leased = state.leased.max(*ceiling);
                    state.lease_seq = *seq;
                    if !self.leased.contains(key) {
                        self.leased.insert(key.clone());
                    }
                }
            }
            Entry::Unlease { .. } => self.unlease(),
        }
        self.seq = self.seq.max(entry.seq());
    }

    /// Voids every lease.
    fn unlease(&mut self) {
        for key in self.leased.drain() {
            if let Some(state) = self.levels.get_mut(&key) {
                state.leased = 0;
                state.lease_seq = 0;
            }
        }
    }

    /// After an unclean stop: charges every leased level up to its ceiling
    /// (capped by its limit), since reservations under the ceiling may have
    /// been used without reaching the disk. Returns the total charged.
    fn charge_leases(&mut self) -> u64 {
        let mut total = 0;
        let keys: Vec<BudgetKey> = self.leased.iter().cloned().collect();
        for key in keys {
            let Some(state) = self.levels.get_mut(&key) else {
                continue;
            };
            let committed = state.spent.saturating_add(state.reserved);
            let extra = state.leased.min(state.limit).saturating_sub(committed);
            if extra > 0 {
                state.spent += extra;
                total += extra;
                self.mark_unsaved(&key);
            }
        }
        total
    }

    /// Removes an open reservation, if there is one.
    fn end(&mut self, id: &str) -> Option<Arc<ReservationRecord>> {
        let res = self.reservations.remove(id)?;
        self.deadlines.remove(&(res.deadline_ms, id.to_owned()));
        for (key, _) in &res.levels {
            if let Some(state) = self.levels.get_mut(key) {
                state.open = state.open.saturating_sub(1);
            }
        }
        if let Some(Some(_)) = self.unsaved.reservations.get(id) {
            self.unsaved.reservations.remove(id);
        } else {
            self.unsaved.reservations.insert(id.to_owned(), None);
        }
        Some(res)
    }

    /// Marks a level's saved record (`limit`, `spent`) as changed.
    fn mark_unsaved(&mut self, key: &BudgetKey) {
        if !self.unsaved.levels.contains(key) {
            self.unsaved.levels.insert(key.clone());
        }
    }

    /// A level's state, created at `limit` if new; a smaller `limit` lowers
    /// it. Callers that change `spent` mark the level unsaved themselves:
    /// `reserved` is not saved, so reserving marks nothing.
    fn level_mut(&mut self, key: &BudgetKey, limit: u64) -> &mut LevelState {
        match self.levels.get(key).map(|s| s.limit) {
            Some(known) if known <= limit => {}
            known => {
                self.mark_unsaved(key);
                if known.is_none() {
                    self.by_delegation
                        .entry(key.delegation_id().to_owned())
                        .or_default()
                        .insert(key.clone());
                }
            }
        }
        let state = self.levels.entry(key.clone()).or_insert(LevelState {
            limit,
            ..Default::default()
        });
        state.limit = state.limit.min(limit);
        state
    }
}

impl LevelState {
    /// Notes `amount` of room freed by change `seq`, not yet known durable.
    fn freed(&mut self, amount: u64, seq: u64, durable_seq: u64) {
        if self.freed_seq <= durable_seq {
            self.freed_unsynced = 0;
        }
        self.freed_unsynced += amount;
        self.freed_seq = seq;
    }

    /// Room freed by changes that may still be lost.
    fn freed_unsynced(&self, durable_seq: u64) -> u64 {
        if self.freed_seq > durable_seq {
            self.freed_unsynced
        } else {
            0
        }
    }
}

/// A granted reservation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    pub reservation_id: String,
    pub amount_microcents: u64,
    pub deadline_ms: u64,
}

/// A settled reservation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Settlement {
    pub reservation_id: String,
    pub charged_microcents: u64,
    pub released_microcents: u64,
}

/// One level of a budget report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LevelReport {
    pub delegation_id: String,
    pub budget_microcents: u64,
    pub spent_microcents: u64,
    pub reserved_microcents: u64,
    pub remaining_microcents: u64,
}

/// Totals over a tenant's top-level nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TenantTotals {
    pub spent: u64,
    pub remaining: u64,
}

/// Resolves when a journaled change is on disk.
type Durable = oneshot::Receiver<Result<(), StorageError>>;

/// The budget ledger.
pub struct Ledger {
    storage: Storage,
    journal: Journal,
    /// Held by the snapshot being written: one at a time.
    snapshotting: Mutex<()>,
    book: Mutex<Book>,
    ttl: Duration,
    lease: LeasePolicy,
    /// The `seq` before this process's first journal record: its n-th
    /// record has `base_seq + n`.
    base_seq: u64,
    /// Reservation IDs are BLAKE2b of this secret and a counter: 128 bits
    /// no one can predict from earlier IDs (a keyed PRF in counter mode),
    /// without a system call per reservation.
    id_secret: [u8; 32],
    id_counter: AtomicU64,
    /// Most reservations open at once under one delegation (any level).
    max_open: usize,
}

fn record_key(key: &BudgetKey) -> &[u8] {
    key.0.as_bytes()
}

impl Ledger {
    /// Loads the last snapshot from storage and replays the journal in
    /// `journal_dir` after it.
    pub fn open(
        storage: Storage,
        journal_dir: &std::path::Path,
        ttl: Duration,
        lease: LeasePolicy,
        max_open: usize,
    ) -> Result<Self, LedgerError> {
        let mut book = Book::default();
        for (k, rec) in scan::<LevelRecord>(&storage.trees.budgets, "budgets")? {
            let key = BudgetKey(Arc::from(String::from_utf8_lossy(&k)));
            book.level_mut(&key, rec.limit).spent = rec.spent;
        }
        for (k, res) in scan::<ReservationRecord>(&storage.trees.reservations, "reservations")? {
            let id = String::from_utf8_lossy(&k).into_owned();
            book.apply(&Entry::Reserve {
                seq: 0,
                id,
                record: res,
            });
        }
        // All of that is saved; what the journal replays below is not.
        book.unsaved = Unsaved::default();
        let meta: SnapshotMeta =
            get(&storage.trees.ledger, "ledger", SNAPSHOT_KEY)?.unwrap_or_default();
        book.seq = meta.seq;
        let (journal, recovered) = Journal::open::<Entry>(journal_dir)?;
        let mut replayed = 0;
        for entry in recovered.records.iter().filter(|e| e.seq() > meta.seq) {
            book.apply(entry);
            replayed += 1;
        }
        tracing::debug!(snapshot_seq = meta.seq, replayed, "budget ledger recovered");
        // Leases still in force were not voided by a clean stop.
        let leased_levels = book.leased.len();
        let lease_charged = book.charge_leases();
        book.durable_seq = book.seq;
        let ledger = Self {
            storage,
            journal,
            snapshotting: Mutex::new(()),
            base_seq: book.seq,
            book: Mutex::new(book),
            ttl,
            lease,
            id_secret: random::bytes::<32>()?,
            id_counter: AtomicU64::new(0),
            max_open,
        };
        if leased_levels > 0 {
            tracing::warn!(
                leased_levels,
                charged_microcents = lease_charged,
                "unclean stop: charged leased budget that may have been used"
            );
            crate::telemetry::record_lease_charged(lease_charged);
            // Makes the charge durable and voids the leases it settled.
            ledger.snapshot()?;
        }
        Ok(ledger)
    }

    /// Writes the state to the sled trees (only what changed since the last
    /// snapshot) in one transaction, then deletes the journal files it
    /// covers. Returns the sequence number it includes.
    pub fn snapshot(&self) -> Result<u64, StorageError> {
        use sled::transaction::{ConflictableTransactionError, TransactionalTree};
        use sled::Transactional;
        let _one = self.snapshotting.lock().unwrap_or_else(|p| p.into_inner());
        // Under the book lock only for as long as the changed levels take to
        // read: changes go on meanwhile.
        let (levels, reservations, seq, first_kept) = {
            let mut book = self.book();
            let unsaved = std::mem::take(&mut book.unsaved);
            // Everything the leases covered is in this snapshot; what comes
            // after it needs leases of its own, journaled after it.
            book.unlease();
            let levels: Vec<(BudgetKey, LevelRecord)> = unsaved
                .levels
                .into_iter()
                .filter_map(|k| {
                    let s = book.levels.get(&k)?;
                    let record = LevelRecord {
                        limit: s.limit,
                        spent: s.spent,
                    };
                    Some((k, record))
                })
                .collect();
            // Records appended from here on go to a new file, which this snapshot does not cover.
            let first_kept = self.journal.rotate();
            (levels, unsaved.reservations, book.seq, first_kept)
        };
        let trees = (
            &self.storage.trees.budgets,
            &self.storage.trees.reservations,
            &self.storage.trees.ledger,
        );
        let written = trees
            .transaction(
                |(budgets, res, ledger): &(
                    TransactionalTree,
                    TransactionalTree,
                    TransactionalTree,
                )| {
                    for (k, rec) in &levels {
                        budgets.insert(record_key(k), encode(rec))?;
                    }
                    for (id, rec) in &reservations {
                        match rec {
                            Some(rec) => res.insert(id.as_bytes(), encode(&**rec))?,
                            None => res.remove(id.as_bytes())?,
                        };
                    }
                    ledger.insert(SNAPSHOT_KEY, encode(&SnapshotMeta { seq }))?;
                    Ok::<(), ConflictableTransactionError<()>>(())
                },
            )
            .map_err(StorageError::from)
            .and_then(|()| self.storage.flush_now());
        if let Err(e) = written {
            // The next snapshot writes these, under anything newer.
            let mut book = self.book();
            book.unsaved
                .levels
                .extend(levels.into_iter().map(|(k, _)| k));
            for (id, rec) in reservations {
                book.unsaved.reservations.entry(id).or_insert(rec);
            }
            return Err(e);
        }
        self.journal.remove_before(first_kept)?;
        Ok(seq)
    }

    /// Journals a change and applies it, under the book lock so the journal
    /// order is the order of application. The receiver resolves when durable.
    fn commit(&self, book: &mut Book, make: impl FnOnce(u64) -> Entry) -> Durable {
        book.durable_seq = self.durable_seq();
        let entry = make(book.seq + 1);
        let durable = self.journal.append(&entry);
        book.apply(&entry);
        durable
    }

    /// [`Ledger::commit`] for a change whose loss in a crash is redone by
    /// the sweeper (a release, or the settle of a reservation charged on
    /// expiry): it shares the next sync instead of asking for one.
    fn commit_lazily(&self, book: &mut Book, make: impl FnOnce(u64) -> Entry) {
        book.durable_seq = self.durable_seq();
        let entry = make(book.seq + 1);
        self.journal.append_lazy(&entry);
        book.apply(&entry);
    }

    /// The last journaled change known to be on disk.
    fn durable_seq(&self) -> u64 {
        self.base_seq + self.journal.durable_records()
    }

    fn next_reservation_id(&self) -> String {
        let n = self.id_counter.fetch_add(1, Ordering::Relaxed);
        let mut hash = Blake2b::<U16>::new();
        hash.update(self.id_secret);
        hash.update(n.to_le_bytes());
        format!("res_{}", delegateos::base64url::encode(&hash.finalize()))
    }

    /// Who holds an open reservation (`None`: the gateway itself).
    pub fn holder(&self, reservation_id: &str) -> Result<Option<HolderDigest>, LedgerError> {
        self.book()
            .reservations
            .get(reservation_id)
            .map(|r| r.holder)
            .ok_or_else(|| LedgerError::UnknownReservation(reservation_id.to_owned()))
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        // A panic while holding the lock cannot leave a half-applied change:
        // memory is only changed after storage accepted the write.
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What has been spent at a node.
    pub fn spent(&self, key: &BudgetKey) -> u64 {
        self.book().levels.get(key).map_or(0, |l| l.spent)
    }

    /// Refuses another reservation under a delegation that already holds
    /// `max_open`, so one credential cannot fill the ledger (and the disk)
    /// with reservations, zero-cost ones included.
    fn check_open(&self, book: &Book, levels: &[(BudgetKey, u64)]) -> Result<(), LedgerError> {
        let open = levels
            .iter()
            .map(|(k, _)| (k, book.levels.get(k).map_or(0, |s| s.open)))
            .max_by_key(|(_, n)| *n);
        match open {
            Some((key, n)) if n >= self.max_open => Err(LedgerError::TooManyOpen {
                delegation_id: key.delegation_id().to_owned(),
                open: n,
            }),
            _ => Ok(()),
        }
    }

    fn check(book: &Book, levels: &[(BudgetKey, u64)], amount: u64) -> Result<(), LedgerError> {
        for (key, limit) in levels {
            let state = book.levels.get(key).copied().unwrap_or(LevelState {
                limit: *limit,
                ..Default::default()
            });
            let limit = state.limit.min(*limit);
            let committed = state
                .spent
                .saturating_add(state.reserved)
                .saturating_add(amount);
            if committed > limit {
                return Err(LedgerError::Exceeded {
                    delegation_id: key.delegation_id().to_owned(),
                    limit,
                    spent: state.spent,
                    reserved: state.reserved,
                    amount,
                });
            }
        }
        Ok(())
    }

    /// Reserves `amount` at every level, durably: on disk before this
    /// returns, or, for [`OnExpiry::Charge`] under a lease, covered by a
    /// durable ceiling that recovery charges.
    pub async fn reserve(
        &self,
        levels: &[(BudgetKey, u64)],
        amount: u64,
        now_ms: u64,
        on_expiry: OnExpiry,
        holder: Option<HolderDigest>,
    ) -> Result<Reservation, LedgerError> {
        let id = self.next_reservation_id();
        let deadline_ms = now_ms.saturating_add(self.ttl.as_millis() as u64);
        let record = ReservationRecord {
            levels: levels.to_vec(),
            amount,
            deadline_ms,
            on_expiry,
            holder,
        };
        let durable = {
            let mut book = self.book();
            Self::check(&book, levels, amount)?;
            self.check_open(&book, levels)?;
            let entry = |seq| Entry::Reserve {
                seq,
                id: id.clone(),
                record,
            };
            if on_expiry == OnExpiry::Charge
                && self.lease.is_on()
                && self.leased(&mut book, levels, amount)
            {
                self.commit_lazily(&mut book, entry);
                None
            } else {
                Some(self.commit(&mut book, entry))
            }
        };
        if let Some(durable) = durable {
            wait(durable).await?;
        }
        Ok(Reservation {
            reservation_id: id,
            amount_microcents: amount,
            deadline_ms,
        })
    }

    /// Whether a reservation of `amount` at `levels` (known to fit) is
    /// covered by durable lease ceilings at every level. If a ceiling is too
    /// low, raises it (the caller's synced record makes the raise durable).
    /// Room freed by changes not yet on disk does not count: a crash would
    /// give it back to whoever had it.
    fn leased(&self, book: &mut Book, levels: &[(BudgetKey, u64)], amount: u64) -> bool {
        let durable = self.durable_seq();
        let mut raise = Vec::new();
        let mut covered = true;
        for (key, limit) in levels {
            let (state, limit) = match book.levels.get(key) {
                Some(s) => (*s, s.limit.min(*limit)),
                None => (LevelState::default(), *limit),
            };
            let need = state
                .spent
                .saturating_add(state.reserved)
                .saturating_add(state.freed_unsynced(durable))
                .saturating_add(amount);
            if need > state.leased {
                raise.push((key.clone(), limit, self.lease.ceiling(need, limit)));
            } else if state.lease_seq > durable {
                covered = false;
            }
        }
        if raise.is_empty() {
            return covered;
        }
        self.commit_lazily(book, |seq| Entry::Lease { seq, levels: raise });
        crate::telemetry::record_lease();
        false
    }

    /// Charges `actual` (at most the reserved amount) and releases the rest, durably.
    pub async fn settle(
        &self,
        reservation_id: &str,
        actual: u64,
    ) -> Result<Settlement, LedgerError> {
        let (settlement, durable) = self.commit_settle(reservation_id, actual, false)?;
        if let Some(durable) = durable {
            wait(durable).await?;
        }
        Ok(settlement)
    }

    /// Settles a reservation made with [`OnExpiry::Charge`] without waiting
    /// for the disk: if the settle is lost in a crash, the reservation comes
    /// back and is charged in full when it expires, so the spend is never
    /// lost (at worst the difference between reserved and actual is charged).
    pub fn settle_charged(
        &self,
        reservation_id: &str,
        actual: u64,
    ) -> Result<Settlement, LedgerError> {
        {
            let book = self.book();
            match book.reservations.get(reservation_id) {
                Some(r) if r.on_expiry == OnExpiry::Charge => {}
                Some(_) => return Err(LedgerError::NotChargedOnExpiry(reservation_id.to_owned())),
                None => return Err(LedgerError::UnknownReservation(reservation_id.to_owned())),
            }
        }
        let (settlement, _) = self.commit_settle(reservation_id, actual, true)?;
        Ok(settlement)
    }

    /// Journals a settle; `None` for the receiver when `lazy`.
    fn commit_settle(
        &self,
        reservation_id: &str,
        actual: u64,
        lazy: bool,
    ) -> Result<(Settlement, Option<Durable>), LedgerError> {
        {
            let mut book = self.book();
            let reserved = book
                .reservations
                .get(reservation_id)
                .map(|r| r.amount)
                .ok_or_else(|| LedgerError::UnknownReservation(reservation_id.to_owned()))?;
            if actual > reserved {
                return Err(LedgerError::ExceedsReservation { actual, reserved });
            }
            let entry = |seq| Entry::Settle {
                seq,
                id: reservation_id.to_owned(),
                actual,
            };
            let durable = if lazy {
                self.commit_lazily(&mut book, entry);
                None
            } else {
                Some(self.commit(&mut book, entry))
            };
            Ok((
                Settlement {
                    reservation_id: reservation_id.to_owned(),
                    charged_microcents: actual,
                    released_microcents: reserved - actual,
                },
                durable,
            ))
        }
    }

    /// Charges `amount` at every level at once, if it fits, durably (for
    /// costs reported after the fact, such as an attestation's).
    pub async fn charge(
        &self,
        levels: &[(BudgetKey, u64)],
        amount: u64,
    ) -> Result<(), LedgerError> {
        let durable = {
            let mut book = self.book();
            Self::check(&book, levels, amount)?;
            self.commit(&mut book, |seq| Entry::Charge {
                seq,
                levels: levels.to_vec(),
                amount,
            })
        };
        wait(durable).await?;
        Ok(())
    }

    /// Cancels a reservation.
    pub fn release(&self, reservation_id: &str) -> Result<u64, LedgerError> {
        let mut book = self.book();
        let amount = book
            .reservations
            .get(reservation_id)
            .map(|r| r.amount)
            .ok_or_else(|| LedgerError::UnknownReservation(reservation_id.to_owned()))?;
        // Lazy: a release lost in a crash only brings back a reservation
        // that is released again when it expires.
        self.commit_lazily(&mut book, |seq| Entry::Release {
            seq,
            id: reservation_id.to_owned(),
        });
        Ok(amount)
    }

    /// Ends every reservation whose deadline has passed, as its
    /// [`OnExpiry`] says (released, or charged in full); returns how many.
    /// Not awaited: an ending lost in a crash is redone at the next sweep.
    pub fn sweep(&self, now_ms: u64) -> Result<usize, LedgerError> {
        let expired: Vec<(String, OnExpiry, u64)> = {
            let book = self.book();
            book.deadlines
                .range(..(now_ms.saturating_add(1), String::new()))
                .filter_map(|(_, id)| {
                    let r = book.reservations.get(id)?;
                    Some((id.clone(), r.on_expiry, r.amount))
                })
                .collect()
        };
        for (id, on_expiry, amount) in &expired {
            let ended = match on_expiry {
                OnExpiry::Release => self.release(id).map(drop),
                OnExpiry::Charge => self.settle_charged(id, *amount).map(drop),
            };
            match ended {
                Ok(()) | Err(LedgerError::UnknownReservation(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(expired.len())
    }

    /// Whether the journal failed a write and refuses every change until
    /// a restart.
    pub fn journal_failed(&self) -> bool {
        self.journal.failed()
    }

    /// Open reservations.
    pub fn open_reservations(&self) -> usize {
        self.book().reservations.len()
    }

    /// The storage the ledger writes to.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// The state of the given levels (unknown ones at zero).
    pub fn report_levels(&self, levels: &[(BudgetKey, u64)]) -> Vec<LevelReport> {
        let book = self.book();
        levels
            .iter()
            .map(|(k, limit)| {
                level_report(
                    k,
                    book.levels.get(k).copied().unwrap_or(LevelState {
                        limit: *limit,
                        ..Default::default()
                    }),
                )
            })
            .collect()
    }

    /// Every chain that ends at `delegation_id`, each level root first.
    pub fn report(&self, delegation_id: &str) -> Vec<Vec<LevelReport>> {
        let book = self.book();
        let Some(keys) = book.by_delegation.get(delegation_id) else {
            return Vec::new();
        };
        keys.iter()
            .map(|key| {
                key.lineage()
                    .iter()
                    .map(|k| level_report(k, book.levels.get(k).copied().unwrap_or_default()))
                    .collect()
            })
            .collect()
    }

    /// Spent and remaining over each tenant root's top-level nodes.
    pub fn tenant_totals(&self) -> HashMap<String, TenantTotals> {
        let book = self.book();
        let mut totals: HashMap<String, TenantTotals> = HashMap::new();
        for (key, s) in book.levels.iter().filter(|(k, _)| k.is_top()) {
            let t = totals.entry(key.root().to_owned()).or_default();
            t.spent += s.spent;
            t.remaining += s.limit.saturating_sub(s.spent).saturating_sub(s.reserved);
        }
        totals
    }
}

impl Drop for Ledger {
    /// A clean stop: the journal writes out everything before it closes, so
    /// nothing a lease covered can be missing and the leases are void.
    fn drop(&mut self) {
        let mut book = self.book();
        if !book.leased.is_empty() {
            self.commit_lazily(&mut book, |seq| Entry::Unlease { seq });
        }
    }
}

/// Waits for a journaled change to be durable.
async fn wait(durable: oneshot::Receiver<Result<(), StorageError>>) -> Result<(), StorageError> {
    durable.await.map_err(|_| StorageError::Closed)?
}

fn level_report(key: &BudgetKey, s: LevelState) -> LevelReport {
    LevelReport {
        delegation_id: key.delegation_id().to_owned(),
        budget_microcents: s.limit,
        spent_microcents: s.spent,
        reserved_microcents: s.reserved,
        remaining_microcents: s.limit.saturating_sub(s.spent).saturating_sub(s.reserved),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(path: &str) -> BudgetKey {
        BudgetKey(Arc::from(format!("ROOT/{path}")))
    }

    /// Three chains sharing a parent: `a`, `a/b`, `a/c` with limits.
    fn chains() -> Vec<Vec<(BudgetKey, u64)>> {
        vec![
            vec![(key("a"), 100)],
            vec![(key("a"), 100), (key("a/b"), 60)],
            vec![(key("a"), 100), (key("a/c"), 70)],
        ]
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// A reservation on chain `.0`; `.2`: charged on expiry (leased).
        Reserve(usize, u64, bool),
        Settle(usize, u64),
        Release(usize),
        Charge(usize, u64),
        Compact,
        Reload,
        /// Sweep at a time past every deadline: everything open is released.
        SweepAll,
        /// Stops without writing what is not on disk yet, and reopens.
        Crash,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..3usize, 0..40u64, any::<bool>()).prop_map(|(c, a, l)| Op::Reserve(c, a, l)),
            3 => (0..8usize, 0..40u64).prop_map(|(r, a)| Op::Settle(r, a)),
            1 => (0..8usize).prop_map(Op::Release),
            1 => (0..3usize, 0..40u64).prop_map(|(c, a)| Op::Charge(c, a)),
            1 => Just(Op::Compact),
            1 => Just(Op::Reload),
            1 => Just(Op::SweepAll),
            1 => Just(Op::Crash),
        ]
    }

    /// A data dir with one sled handle (sled locks its directory) and a
    /// runtime; the ledger, with its in-memory book and journal, is what a
    /// restart rebuilds.
    struct Fixture {
        rt: tokio::runtime::Runtime,
        dir: tempfile::TempDir,
        storage: Storage,
        ttl: Duration,
        lease: LeasePolicy,
    }

    impl Fixture {
        fn new(ttl: Duration, lease: LeasePolicy) -> Self {
            let dir = tempfile::tempdir().unwrap();
            Self {
                rt: tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap(),
                storage: Storage::open(&dir.path().join("db")).unwrap(),
                dir,
                ttl,
                lease,
            }
        }

        /// Opens (or reopens, after a stop) the ledger.
        fn open(&self) -> Ledger {
            Ledger::open(
                self.storage.clone(),
                &self.dir.path().join("journal"),
                self.ttl,
                self.lease,
                10_000,
            )
            .unwrap()
        }
    }

    fn state(l: &Ledger) -> Vec<(u64, u64)> {
        let book = l.book();
        ["a", "a/b", "a/c"]
            .iter()
            .map(|k| {
                book.levels
                    .get(&key(k))
                    .map_or((0, 0), |s| (s.spent, s.reserved))
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Under any sequence of operations, reloads, compactions and
        /// crashes, with or without leasing: no level ever has more spent +
        /// reserved than its limit; the ledger agrees with a simple model;
        /// reloading after a clean stop changes nothing; and a crash never
        /// loses a spend (nor a reservation charged on expiry, leased or not),
        /// at worst charging more.
        #[test]
        fn budgets_never_overspend(
            ops in prop::collection::vec(op(), 1..40),
            lease in prop_oneof![Just(0.0), Just(0.1), Just(0.5), Just(1.0)],
        ) {
            let f = Fixture::new(Duration::from_secs(60), LeasePolicy::new(lease).unwrap());
            f.rt.block_on(async {
                let mut ledger = f.open();
                let limits = [100u64, 60, 70];
                let mut model = [(0u64, 0u64); 3]; // (spent, reserved) for a, a/b, a/c
                // (id, chain, amount, charged on expiry)
                let mut open: Vec<(String, usize, u64, bool)> = Vec::new();
                let idx = |c: usize| -> Vec<usize> { match c { 0 => vec![0], 1 => vec![0, 1], _ => vec![0, 2] } };
                for op in ops {
                    match op {
                        Op::Reserve(c, amount, _) | Op::Charge(c, amount) => {
                            let fits = idx(c).iter().all(|&i| model[i].0 + model[i].1 + amount <= limits[i]);
                            let result = match op {
                                Op::Charge(..) => ledger.charge(&chains()[c], amount).await.map(|_| None),
                                Op::Reserve(_, _, leased) => {
                                    let on_expiry = if leased { OnExpiry::Charge } else { OnExpiry::Release };
                                    ledger.reserve(&chains()[c], amount, 0, on_expiry, None).await.map(|r| Some((r, leased)))
                                }
                                _ => unreachable!(),
                            };
                            match result {
                                Ok(r) => {
                                    prop_assert!(fits);
                                    for i in idx(c) {
                                        if r.is_none() { model[i].0 += amount } else { model[i].1 += amount }
                                    }
                                    if let Some((r, leased)) = r { open.push((r.reservation_id, c, amount, leased)); }
                                }
                                Err(LedgerError::Exceeded { .. }) => prop_assert!(!fits),
                                Err(e) => prop_assert!(false, "{e}"),
                            }
                        }
                        Op::Settle(r, actual) if r < open.len() => {
                            let (id, c, amount, leased) = open[r].clone();
                            let settled = if leased {
                                ledger.settle_charged(&id, actual)
                            } else {
                                ledger.settle(&id, actual).await
                            };
                            match settled {
                                Ok(s) => {
                                    prop_assert!(actual <= amount);
                                    prop_assert_eq!(s.released_microcents, amount - actual);
                                    for i in idx(c) { model[i].1 -= amount; model[i].0 += actual; }
                                    open.remove(r);
                                }
                                Err(LedgerError::ExceedsReservation { .. }) => prop_assert!(actual > amount),
                                Err(e) => prop_assert!(false, "{e}"),
                            }
                        }
                        Op::Release(r) if r < open.len() => {
                            let (id, c, amount, _) = open.remove(r);
                            prop_assert_eq!(ledger.release(&id).unwrap(), amount);
                            for i in idx(c) { model[i].1 -= amount; }
                        }
                        Op::Compact => { ledger.snapshot().unwrap(); }
                        Op::SweepAll => {
                            prop_assert_eq!(ledger.sweep(60_000).unwrap(), open.len());
                            for (_, c, amount, leased) in open.drain(..) {
                                for i in idx(c) {
                                    model[i].1 -= amount;
                                    if leased { model[i].0 += amount; }
                                }
                            }
                        }
                        Op::Reload => {
                            let before = state(&ledger);
                            drop(ledger);
                            ledger = f.open();
                            prop_assert_eq!(state(&ledger), before);
                        }
                        Op::Crash => {
                            ledger.crash();
                            ledger = f.open();
                            let now = state(&ledger);
                            for i in 0..3 {
                                prop_assert!(now[i].0 + now[i].1 >= model[i].0 + model[i].1, "level {}: {:?} < {:?}", i, now[i], model[i]);
                            }
                            // Expiry settles what the crash left open: every
                            // spend and every reservation charged on expiry is
                            // charged, whatever reached the disk.
                            ledger.sweep(60_000).unwrap();
                            for (_, c, amount, leased) in open.drain(..) {
                                for i in idx(c) {
                                    model[i].1 -= amount;
                                    if leased { model[i].0 += amount; }
                                }
                            }
                            let now = state(&ledger);
                            for i in 0..3 {
                                prop_assert!(now[i].0 >= model[i].0, "level {}: spent {} < {}", i, now[i].0, model[i].0);
                                prop_assert_eq!(now[i].1, 0);
                                model[i] = now[i];
                            }
                        }
                        _ => {}
                    }
                    let now = state(&ledger);
                    for i in 0..3 {
                        prop_assert_eq!(now[i], model[i]);
                        prop_assert!(now[i].0 + now[i].1 <= limits[i]);
                    }
                }
                Ok(())
            })?;
        }
    }

    impl Ledger {
        /// Stops as a crash would: what is not on disk stays off it.
        fn crash(self) {
            self.journal.abandon();
        }
    }

    #[test]
    fn sweeper_releases_only_expired() {
        let f = Fixture::new(Duration::from_millis(1000), LeasePolicy::OFF);
        f.rt.block_on(async {
            let ledger = f.open();
            let early = ledger
                .reserve(&chains()[1], 10, 0, OnExpiry::Release, None)
                .await
                .unwrap();
            let late = ledger
                .reserve(&chains()[1], 10, 5000, OnExpiry::Release, None)
                .await
                .unwrap();
            assert_eq!(ledger.sweep(999).unwrap(), 0);
            assert_eq!(ledger.sweep(1000).unwrap(), 1);
            assert!(matches!(
                ledger.settle(&early.reservation_id, 1).await,
                Err(LedgerError::UnknownReservation(_))
            ));
            ledger.settle(&late.reservation_id, 10).await.unwrap();
            assert_eq!(ledger.open_reservations(), 0);
            assert_eq!(ledger.report("b")[0][1].spent_microcents, 10);
        });
    }

    /// A reservation charged on expiry: its unawaited settle counts, and if
    /// the settle never happened (a crash), expiry charges it in full, also
    /// after a reload.
    #[test]
    fn reservations_charged_on_expiry() {
        let f = Fixture::new(Duration::from_millis(1000), LeasePolicy::OFF);
        f.rt.block_on(async {
            let ledger = f.open();
            let settled = ledger
                .reserve(&chains()[1], 10, 0, OnExpiry::Charge, None)
                .await
                .unwrap();
            let orphan = ledger
                .reserve(&chains()[1], 20, 0, OnExpiry::Charge, None)
                .await
                .unwrap();
            let plain = ledger
                .reserve(&chains()[1], 5, 0, OnExpiry::Release, None)
                .await
                .unwrap();
            assert!(matches!(
                ledger.settle_charged(&plain.reservation_id, 5),
                Err(LedgerError::NotChargedOnExpiry(_))
            ));
            ledger.settle_charged(&settled.reservation_id, 7).unwrap();
            assert_eq!(ledger.report("b")[0][1].spent_microcents, 7);
            drop(ledger);

            let ledger = f.open();
            assert_eq!(ledger.open_reservations(), 2);
            assert_eq!(ledger.sweep(1000).unwrap(), 2);
            let b = &ledger.report("b")[0][1];
            assert_eq!((b.spent_microcents, b.reserved_microcents), (27, 0));
            assert!(matches!(
                ledger.settle_charged(&orphan.reservation_id, 1),
                Err(LedgerError::UnknownReservation(_))
            ));
            drop(ledger);
            let b = &f.open().report("b")[0][1];
            assert_eq!((b.spent_microcents, b.reserved_microcents), (27, 0));
        });
    }

    async fn reserve_tens(ledger: &Ledger, n: usize) {
        for _ in 0..n {
            ledger
                .reserve(&chains()[0], 10, 0, OnExpiry::Charge, None)
                .await
                .unwrap();
        }
    }

    /// Leased reservations skip the disk; a crash charges each leased level
    /// up to its ceiling whatever reached the disk, and a clean stop voids
    /// the leases instead.
    #[test]
    fn crash_charges_leases_and_clean_stop_voids_them() {
        let f = Fixture::new(Duration::from_secs(60), LeasePolicy::new(0.5).unwrap());
        f.rt.block_on(async {
            let ledger = f.open();
            reserve_tens(&ledger, 5).await;
            // The first raised the ceiling of `a` (limit 100) to 10 + 90 / 2 =
            // 55 (the first record), with one sync; the other four were
            // covered by it and raised nothing.
            let a = ledger.book().levels[&key("a")];
            assert_eq!((a.leased, a.lease_seq), (55, ledger.base_seq + 1));
            ledger.crash();

            // Whether the four reached the disk or not: charged up to 55.
            let ledger = f.open();
            let a = &ledger.report_levels(&chains()[0])[0];
            assert_eq!(a.spent_microcents + a.reserved_microcents, 55);
            ledger.sweep(60_000).unwrap();
            let spent = ledger.spent(&key("a"));
            assert_eq!(spent, 55);

            // A clean stop: nothing is charged beyond what was reserved.
            reserve_tens(&ledger, 4).await;
            drop(ledger);
            let ledger = f.open();
            let a = &ledger.report_levels(&chains()[0])[0];
            assert_eq!((a.spent_microcents, a.reserved_microcents), (55, 40));
        });
    }

    /// A failed journal write refuses every later change that must be
    /// durable; a tool call under a durable lease still fits its ceiling,
    /// which a crash charges.
    #[test]
    fn a_failed_journal_refuses_durable_changes() {
        let f = Fixture::new(Duration::from_secs(60), LeasePolicy::new(0.5).unwrap());
        f.rt.block_on(async {
            let ledger = f.open();
            reserve_tens(&ledger, 1).await;
            ledger.journal.fail_next_write();
            assert!(matches!(
                ledger
                    .reserve(&chains()[0], 1, 0, OnExpiry::Release, None)
                    .await,
                Err(LedgerError::Storage(_))
            ));
            assert!(ledger.journal_failed());
            assert!(matches!(
                ledger.charge(&chains()[0], 1).await,
                Err(LedgerError::Storage(_))
            ));
            reserve_tens(&ledger, 1).await;
            ledger.crash();
            let a = &f.open().report_levels(&chains()[0])[0];
            assert_eq!(a.spent_microcents + a.reserved_microcents, 55);
        });
    }

    #[test]
    fn keys_name_paths() {
        let k = key("del_a/del_b");
        assert_eq!(k.root(), "ROOT");
        assert_eq!(k.delegation_id(), "del_b");
        assert_eq!(k.lineage(), vec![key("del_a"), key("del_a/del_b")]);
        assert!(key("del_a").is_top() && !k.is_top());
    }
}
