//! Budgets in memory: the budget model under one lock, nothing on disk.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

use dgw_core::budget::book::{Book, Entry, ReservationRecord};
use dgw_core::budget::{
    BudgetKey, Child, HolderDigest, LedgerError, LevelReport, OnExpiry, Reservation,
    ReservationIds, Settlement, TopLevel,
};
use dgw_core::state::{BudgetSettings, BudgetStore, StorageError};

/// The in-memory [`BudgetStore`].
pub struct MemoryBudgets {
    book: Mutex<Book>,
    ids: ReservationIds,
    ttl: Duration,
    max_open: usize,
}

impl MemoryBudgets {
    pub fn new(settings: BudgetSettings) -> Result<Self, LedgerError> {
        Ok(Self {
            book: Mutex::new(Book::default()),
            ids: ReservationIds::new()?,
            ttl: settings.reservation_ttl,
            max_open: settings.max_open,
        })
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        // Changes apply whole under the lock: a panic elsewhere leaves none half-done.
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn apply(book: &mut Book, make: impl FnOnce(u64) -> Entry) {
        let entry = make(book.seq + 1);
        book.apply(&entry);
    }

    fn end(
        &self,
        reservation_id: &str,
        actual: u64,
        charged_only: bool,
    ) -> Result<Settlement, LedgerError> {
        let mut book = self.book();
        let reserved = book.check_settle(reservation_id, actual, charged_only)?;
        Self::apply(&mut book, |seq| Entry::Settle {
            seq,
            id: reservation_id.to_owned(),
            actual,
        });
        Ok(Settlement {
            reservation_id: reservation_id.to_owned(),
            charged_microcents: actual,
            released_microcents: reserved - actual,
        })
    }
}

#[async_trait]
impl BudgetStore for MemoryBudgets {
    fn reservation_ttl(&self) -> Duration {
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
        let id = self.ids.next_id();
        let mut book = self.book();
        book.check(levels, amount)?;
        book.check_open(levels, self.max_open)?;
        Self::apply(&mut book, |seq| Entry::Reserve {
            seq,
            id: id.clone(),
            record: ReservationRecord {
                levels: levels.to_vec(),
                amount,
                deadline_ms,
                on_expiry,
                holder,
            },
        });
        Ok(Reservation {
            reservation_id: id,
            amount_microcents: amount,
            deadline_ms,
        })
    }

    async fn settle(&self, reservation_id: &str, actual: u64) -> Result<Settlement, LedgerError> {
        self.end(reservation_id, actual, false)
    }

    async fn settle_charged(
        &self,
        reservation_id: &str,
        actual: u64,
    ) -> Result<Settlement, LedgerError> {
        self.end(reservation_id, actual, true)
    }

    async fn charge(&self, levels: &[(BudgetKey, u64)], amount: u64) -> Result<(), LedgerError> {
        let mut book = self.book();
        book.check(levels, amount)?;
        Self::apply(&mut book, |seq| Entry::Charge {
            seq,
            levels: levels.to_vec(),
            amount,
        });
        Ok(())
    }

    async fn release(&self, reservation_id: &str) -> Result<u64, LedgerError> {
        let mut book = self.book();
        let amount = book.reserved(reservation_id)?;
        Self::apply(&mut book, |seq| Entry::Release {
            seq,
            id: reservation_id.to_owned(),
        });
        Ok(amount)
    }

    async fn sweep(&self, now_ms: u64) -> Result<usize, LedgerError> {
        let mut book = self.book();
        let expired = book.expired(now_ms);
        for (id, on_expiry, amount) in &expired {
            Self::apply(&mut book, |seq| match on_expiry {
                OnExpiry::Release => Entry::Release {
                    seq,
                    id: id.clone(),
                },
                OnExpiry::Charge => Entry::Settle {
                    seq,
                    id: id.clone(),
                    actual: *amount,
                },
            });
        }
        Ok(expired.len())
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
        Ok(self.book().reservations.len())
    }

    fn writable(&self) -> bool {
        true
    }

    fn checkpoint(&self) -> Result<(), StorageError> {
        Ok(())
    }
}
