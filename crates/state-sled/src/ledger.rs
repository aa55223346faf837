//! The sled backend's [`BudgetStore`]: the budget model ([`Book`]) in
//! memory under one lock, which makes check-and-reserve atomic in this
//! process (sled allows only one process per data dir).
//!
//! Every change is first appended to the budget journal (`journal.rs`,
//! group-committed), and snapshots of what changed since the last one go to
//! the `budgets/v1` and `reservations/v1` trees, after which older journal
//! files are deleted. Recovery loads the snapshot and replays the journal
//! records after it, through the same `Book::apply` as live changes.
//!
//! Reservations charged on expiry (tool calls the gateway forwards itself)
//! may *lease* budget: one synced record raises a level's durable ceiling, a
//! bound on what may be spent or reserved there that recovery charges in full
//! after an unclean stop. A reservation under every level's durable ceiling
//! is journaled lazily and need not wait for the disk. See [`LeasePolicy`].

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::journal::Journal;
use super::{encode, get, scan, Db, Storage};
use dgw_core::budget::book::{Book, Entry, LevelRecord, LevelState, ReservationRecord, Unsaved};
use dgw_core::budget::{
    BudgetKey, Child, HolderDigest, LeasePolicy, LedgerError, LevelReport, OnExpiry, Reservation,
    ReservationIds, Settlement, TopLevel,
};
use dgw_core::state::{BudgetSettings, BudgetStore, StorageError};

/// The `ledger/v1` record of the last snapshot.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
struct SnapshotMeta {
    seq: u64,
}

const SNAPSHOT_KEY: &[u8] = b"snapshot";

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
    ids: ReservationIds,
    /// Most reservations open at once under one delegation (any level).
    max_open: usize,
}

fn record_key(key: &BudgetKey) -> &[u8] {
    key.as_str().as_bytes()
}

impl Ledger {
    /// Loads the last snapshot from storage and replays the journal in
    /// `journal_dir` after it.
    pub fn open(
        storage: Storage,
        journal_dir: &std::path::Path,
        settings: BudgetSettings,
    ) -> Result<Self, LedgerError> {
        let BudgetSettings {
            reservation_ttl: ttl,
            lease,
            max_open,
        } = settings;
        let mut book = Book {
            tracks_unsaved: true,
            ..Book::default()
        };
        for (k, rec) in scan::<LevelRecord>(&storage.trees.budgets, "budgets")? {
            let key = BudgetKey::from_stored(&String::from_utf8_lossy(&k));
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
            ids: ReservationIds::new()?,
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
            .db()
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

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        // A panic while holding the lock cannot leave a half-applied change:
        // memory is only changed after storage accepted the write.
        self.book.lock().unwrap_or_else(|p| p.into_inner())
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
        let deadline_ms = now_ms.saturating_add(self.ttl.as_millis() as u64);
        self.reserve_until(levels, amount, deadline_ms, on_expiry, holder)
            .await
    }

    /// [`Ledger::reserve`] with its own deadline.
    pub async fn reserve_until(
        &self,
        levels: &[(BudgetKey, u64)],
        amount: u64,
        deadline_ms: u64,
        on_expiry: OnExpiry,
        holder: Option<HolderDigest>,
    ) -> Result<Reservation, LedgerError> {
        let id = self.ids.next_id();
        let record = ReservationRecord {
            levels: levels.to_vec(),
            amount,
            deadline_ms,
            on_expiry,
            holder,
        };
        let durable = {
            let mut book = self.book();
            book.check(levels, amount)?;
            book.check_open(levels, self.max_open)?;
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
            let reserved = book.check_settle(reservation_id, actual, lazy)?;
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
            book.check(levels, amount)?;
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
        let amount = book.reserved(reservation_id)?;
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
        let expired = self.book().expired(now_ms);
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

#[async_trait]
impl BudgetStore for Ledger {
    fn reservation_ttl(&self) -> std::time::Duration {
        self.ttl
    }

    async fn reserve_until(
        &self,
        levels: &[(BudgetKey, u64)],
        amount: u64,
        deadline_ms: u64,
        on_expiry: OnExpiry,
        holder: Option<HolderDigest>,
    ) -> Result<Reservation, LedgerError> {
        Ledger::reserve_until(self, levels, amount, deadline_ms, on_expiry, holder).await
    }

    async fn settle(&self, reservation_id: &str, actual: u64) -> Result<Settlement, LedgerError> {
        Ledger::settle(self, reservation_id, actual).await
    }

    async fn settle_charged(
        &self,
        reservation_id: &str,
        actual: u64,
    ) -> Result<Settlement, LedgerError> {
        Ledger::settle_charged(self, reservation_id, actual)
    }

    async fn charge(&self, levels: &[(BudgetKey, u64)], amount: u64) -> Result<(), LedgerError> {
        Ledger::charge(self, levels, amount).await
    }

    async fn release(&self, reservation_id: &str) -> Result<u64, LedgerError> {
        Ledger::release(self, reservation_id)
    }

    async fn sweep(&self, now_ms: u64) -> Result<usize, LedgerError> {
        Ledger::sweep(self, now_ms)
    }

    async fn holder(&self, reservation_id: &str) -> Result<Option<HolderDigest>, LedgerError> {
        self.book().holder(reservation_id)
    }

    async fn spent(&self, key: &BudgetKey) -> Result<u64, LedgerError> {
        Ok(self.book().spent(key))
    }

    async fn report_levels(
        &self,
        levels: &[(BudgetKey, u64)],
    ) -> Result<Vec<LevelReport>, LedgerError> {
        Ok(self.book().report_levels(levels))
    }

    async fn report(&self, delegation_id: &str) -> Result<Vec<Vec<LevelReport>>, LedgerError> {
        Ok(self.book().report(delegation_id))
    }

    async fn top_levels(&self) -> Result<Vec<TopLevel>, LedgerError> {
        Ok(self.book().top_levels())
    }

    async fn children(
        &self,
        parent: &BudgetKey,
        after: Option<&BudgetKey>,
        limit: usize,
    ) -> Result<Vec<Child>, LedgerError> {
        Ok(self.book().children(parent, after, limit))
    }

    async fn open_reservations(&self) -> Result<usize, LedgerError> {
        Ok(Ledger::open_reservations(self))
    }

    fn writable(&self) -> bool {
        !self.journal_failed()
    }

    fn checkpoint(&self) -> Result<(), StorageError> {
        self.snapshot().map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(path: &str) -> BudgetKey {
        BudgetKey::from_stored(&format!("ROOT/{path}"))
    }

    /// Three chains sharing a parent: `a`, `a/b`, `a/c` with limits.
    fn chains() -> Vec<Vec<(BudgetKey, u64)>> {
        vec![
            vec![(key("a"), 100)],
            vec![(key("a"), 100), (key("a/b"), 60)],
            vec![(key("a"), 100), (key("a/c"), 70)],
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
                BudgetSettings {
                    reservation_ttl: self.ttl,
                    lease: self.lease,
                    max_open: 10_000,
                },
            )
            .unwrap()
        }
    }

    impl Ledger {
        /// Stops as a crash would: what is not on disk stays off it.
        pub(crate) fn crash(self) {
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
            assert_eq!(ledger.report("b").await.unwrap()[0][1].spent_microcents, 10);
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
            assert_eq!(ledger.report("b").await.unwrap()[0][1].spent_microcents, 7);
            drop(ledger);

            let ledger = f.open();
            assert_eq!(ledger.open_reservations(), 2);
            assert_eq!(ledger.sweep(1000).unwrap(), 2);
            let b = &ledger.report("b").await.unwrap()[0][1];
            assert_eq!((b.spent_microcents, b.reserved_microcents), (27, 0));
            assert!(matches!(
                ledger.settle_charged(&orphan.reservation_id, 1),
                Err(LedgerError::UnknownReservation(_))
            ));
            drop(ledger);
            let b = &f.open().report("b").await.unwrap()[0][1];
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
            let a = &ledger.report_levels(&chains()[0]).await.unwrap()[0];
            assert_eq!(a.spent_microcents + a.reserved_microcents, 55);
            ledger.sweep(60_000).unwrap();
            let spent = ledger.spent(&key("a")).await.unwrap();
            assert_eq!(spent, 55);

            // A clean stop: nothing is charged beyond what was reserved.
            reserve_tens(&ledger, 4).await;
            drop(ledger);
            let ledger = f.open();
            let a = &ledger.report_levels(&chains()[0]).await.unwrap()[0];
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
            let a = &f.open().report_levels(&chains()[0]).await.unwrap()[0];
            assert_eq!(a.spent_microcents + a.reserved_microcents, 55);
        });
    }
}
