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

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use delegateos::dct::ChainLevel;
use delegateos::PrincipalId;
use serde::{Deserialize, Serialize};

use crate::random;
use crate::storage::{decode, encode, scan, Storage, StorageError};

/// A budget node: `ROOT/del_…/del_…`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BudgetKey(String);

impl BudgetKey {
    /// The keys of every level of a verified chain, with each level's limit.
    pub fn for_chain(root: &PrincipalId, levels: &[ChainLevel]) -> Vec<(BudgetKey, u64)> {
        let mut path = root.to_string();
        levels
            .iter()
            .map(|l| {
                path.push('/');
                path.push_str(l.delegation_id.as_str());
                (BudgetKey(path.clone()), l.max_budget_microcents)
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
            .map(|n| BudgetKey(parts[..n].join("/")))
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
    #[error("settlement of {actual} exceeds the {reserved} microcents reserved")]
    ExceedsReservation { actual: u64, reserved: u64 },
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

/// A stored reservation. It carries each level's limit so that recovery
/// never depends on a level record written separately.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ReservationRecord {
    levels: Vec<(BudgetKey, u64)>,
    amount: u64,
    deadline_ms: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct LevelState {
    limit: u64,
    spent: u64,
    reserved: u64,
}

#[derive(Default)]
struct Book {
    levels: HashMap<BudgetKey, LevelState>,
    reservations: HashMap<String, ReservationRecord>,
    by_delegation: HashMap<String, BTreeSet<BudgetKey>>,
}

impl Book {
    fn level_mut(&mut self, key: &BudgetKey, limit: u64) -> &mut LevelState {
        if !self.levels.contains_key(key) {
            self.by_delegation
                .entry(key.delegation_id().to_owned())
                .or_default()
                .insert(key.clone());
        }
        let state = self.levels.entry(key.clone()).or_insert(LevelState {
            limit,
            ..Default::default()
        });
        state.limit = state.limit.min(limit);
        state
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

/// The budget ledger.
pub struct Ledger {
    storage: Storage,
    book: Mutex<Book>,
    ttl: Duration,
}

fn record_key(key: &BudgetKey) -> &[u8] {
    key.0.as_bytes()
}

impl Ledger {
    /// Loads every node and open reservation from storage.
    pub fn open(storage: Storage, ttl: Duration) -> Result<Self, StorageError> {
        let mut book = Book::default();
        for (k, rec) in scan::<LevelRecord>(&storage.trees.budgets, "budgets")? {
            let key = BudgetKey(String::from_utf8_lossy(&k).into_owned());
            let state = book.level_mut(&key, rec.limit);
            state.spent = rec.spent;
        }
        for (k, res) in scan::<ReservationRecord>(&storage.trees.reservations, "reservations")? {
            for (key, limit) in &res.levels {
                book.level_mut(key, *limit).reserved += res.amount;
            }
            book.reservations
                .insert(String::from_utf8_lossy(&k).into_owned(), res);
        }
        Ok(Self {
            storage,
            book: Mutex::new(book),
            ttl,
        })
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

    /// Reserves `amount` at every level, durably.
    pub async fn reserve(
        &self,
        levels: &[(BudgetKey, u64)],
        amount: u64,
        now_ms: u64,
    ) -> Result<Reservation, LedgerError> {
        let id = format!("res_{}", hex(&random::bytes::<12>()?));
        let deadline_ms = now_ms.saturating_add(self.ttl.as_millis() as u64);
        let record = ReservationRecord {
            levels: levels.to_vec(),
            amount,
            deadline_ms,
        };
        {
            let mut book = self.book();
            Self::check(&book, levels, amount)?;
            self.storage
                .trees
                .reservations
                .insert(id.as_bytes(), encode(&record))
                .map_err(StorageError::from)?;
            for (key, limit) in levels {
                book.level_mut(key, *limit).reserved += amount;
            }
            book.reservations.insert(id.clone(), record);
        }
        self.storage.sync().await?;
        Ok(Reservation {
            reservation_id: id,
            amount_microcents: amount,
            deadline_ms,
        })
    }

    /// Charges `actual` (at most the reserved amount) and releases the rest, durably.
    pub async fn settle(
        &self,
        reservation_id: &str,
        actual: u64,
    ) -> Result<Settlement, LedgerError> {
        let settlement = {
            let mut book = self.book();
            let res = book
                .reservations
                .get(reservation_id)
                .cloned()
                .ok_or_else(|| LedgerError::UnknownReservation(reservation_id.to_owned()))?;
            if actual > res.amount {
                return Err(LedgerError::ExceedsReservation {
                    actual,
                    reserved: res.amount,
                });
            }
            let updates: Vec<(BudgetKey, LevelRecord)> = res
                .levels
                .iter()
                .map(|(key, limit)| {
                    let s = book.levels.get(key).copied().unwrap_or(LevelState {
                        limit: *limit,
                        ..Default::default()
                    });
                    (
                        key.clone(),
                        LevelRecord {
                            limit: s.limit.min(*limit),
                            spent: s.spent + actual,
                        },
                    )
                })
                .collect();
            self.write_settlement(Some(reservation_id), &updates)?;
            for (key, limit) in &res.levels {
                let state = book.level_mut(key, *limit);
                state.reserved -= res.amount;
                state.spent += actual;
            }
            book.reservations.remove(reservation_id);
            Settlement {
                reservation_id: reservation_id.to_owned(),
                charged_microcents: actual,
                released_microcents: res.amount - actual,
            }
        };
        self.storage.sync().await?;
        Ok(settlement)
    }

    /// Charges `amount` at every level at once, if it fits, durably (for
    /// costs reported after the fact, such as an attestation's).
    pub async fn charge(
        &self,
        levels: &[(BudgetKey, u64)],
        amount: u64,
    ) -> Result<(), LedgerError> {
        {
            let mut book = self.book();
            Self::check(&book, levels, amount)?;
            let updates: Vec<(BudgetKey, LevelRecord)> = levels
                .iter()
                .map(|(key, limit)| {
                    let s = book.levels.get(key).copied().unwrap_or(LevelState {
                        limit: *limit,
                        ..Default::default()
                    });
                    (
                        key.clone(),
                        LevelRecord {
                            limit: s.limit.min(*limit),
                            spent: s.spent + amount,
                        },
                    )
                })
                .collect();
            self.write_settlement(None, &updates)?;
            for (key, limit) in levels {
                book.level_mut(key, *limit).spent += amount;
            }
        }
        self.storage.sync().await?;
        Ok(())
    }

    /// Removes the reservation (if any) and writes level records, atomically.
    fn write_settlement(
        &self,
        reservation: Option<&str>,
        updates: &[(BudgetKey, LevelRecord)],
    ) -> Result<(), StorageError> {
        use sled::transaction::{ConflictableTransactionError, TransactionalTree};
        use sled::Transactional;
        let trees = (
            &self.storage.trees.budgets,
            &self.storage.trees.reservations,
        );
        trees.transaction(
            |(budgets, reservations): &(TransactionalTree, TransactionalTree)| {
                if let Some(id) = reservation {
                    reservations.remove(id.as_bytes())?;
                }
                for (key, rec) in updates {
                    budgets.insert(record_key(key), encode(rec))?;
                }
                Ok::<(), ConflictableTransactionError<()>>(())
            },
        )?;
        Ok(())
    }

    /// Cancels a reservation. Not flushed: a release lost in a crash only
    /// brings back a reservation that the sweeper releases again.
    pub fn release(&self, reservation_id: &str) -> Result<u64, LedgerError> {
        let mut book = self.book();
        let res = book
            .reservations
            .get(reservation_id)
            .cloned()
            .ok_or_else(|| LedgerError::UnknownReservation(reservation_id.to_owned()))?;
        self.storage
            .trees
            .reservations
            .remove(reservation_id.as_bytes())
            .map_err(StorageError::from)?;
        for (key, limit) in &res.levels {
            book.level_mut(key, *limit).reserved -= res.amount;
        }
        book.reservations.remove(reservation_id);
        Ok(res.amount)
    }

    /// Releases every reservation whose deadline has passed; returns how many.
    pub fn sweep(&self, now_ms: u64) -> Result<usize, LedgerError> {
        let expired: Vec<String> = self
            .book()
            .reservations
            .iter()
            .filter(|(_, r)| r.deadline_ms <= now_ms)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &expired {
            match self.release(id) {
                Ok(_) | Err(LedgerError::UnknownReservation(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(expired.len())
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

fn level_report(key: &BudgetKey, s: LevelState) -> LevelReport {
    LevelReport {
        delegation_id: key.delegation_id().to_owned(),
        budget_microcents: s.limit,
        spent_microcents: s.spent,
        reserved_microcents: s.reserved,
        remaining_microcents: s.limit.saturating_sub(s.spent).saturating_sub(s.reserved),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads a stored level record (for tests and tools).
pub fn read_level(storage: &Storage, key: &BudgetKey) -> Result<Option<(u64, u64)>, StorageError> {
    storage
        .trees
        .budgets
        .get(record_key(key))?
        .map(|v| decode::<LevelRecord>("budgets", record_key(key), &v).map(|r| (r.limit, r.spent)))
        .transpose()
}
