//! The budget model: what each change does to the levels of a chain, as
//! one [`Book::apply`] that live changes and recovery (a journal replay, or
//! a backend's own log) both go through, and the checks made before a change
//! is applied. Pure: no I/O, no clock, no locks.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{
    BudgetKey, Child, HolderDigest, LedgerError, LevelReport, OnExpiry, TopLevel, CHILDREN_PAGE,
};

/// The stored state of a node: its limit and what has been spent.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct LevelRecord {
    pub limit: u64,
    pub spent: u64,
}

/// A stored open reservation (`open/ID` in the reservations tree). It
/// carries each level's limit so that recovery never depends on a level
/// record written separately.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReservationRecord {
    pub levels: Vec<(BudgetKey, u64)>,
    pub amount: u64,
    pub deadline_ms: u64,
    /// Absent in records written before it existed: those are released.
    #[serde(default)]
    pub on_expiry: OnExpiry,
    /// Who may end it besides an administrator: the digest of the
    /// credential that made it. Absent for the gateway's own reservations
    /// (and records written before holders existed): only the gateway or an
    /// administrator ends those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<HolderDigest>,
}

/// One change to the ledger, as journaled. `seq` orders changes; a
/// snapshot records the last `seq` it includes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Entry {
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
    pub fn seq(&self) -> u64 {
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
pub struct Unsaved {
    pub levels: FastSet<BudgetKey>,
    /// Reservations opened (`Some`) or ended (`None`) since then. One opened
    /// and ended in between leaves nothing: it was never saved.
    pub reservations: FastMap<String, Option<Arc<ReservationRecord>>>,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct LevelState {
    pub limit: u64,
    pub spent: u64,
    pub reserved: u64,
    /// The lease ceiling (0: none), and the `seq` of the record that set it.
    pub leased: u64,
    pub lease_seq: u64,
    /// Room freed by changes up to `freed_seq` that may not be on disk yet:
    /// a crash would undo them, so leased reservations must not count on it.
    pub freed_unsynced: u64,
    pub freed_seq: u64,
    /// Reservations open at this level.
    pub open: usize,
}

/// Maps with a fast keyed hash: budget keys are long strings hashed on every
/// operation, and the per-process random key keeps them DoS-resistant.
pub type FastMap<K, V> = HashMap<K, V, ahash::RandomState>;
pub type FastSet<K> = HashSet<K, ahash::RandomState>;

#[derive(Default)]
pub struct Book {
    pub levels: FastMap<BudgetKey, LevelState>,
    pub reservations: FastMap<String, Arc<ReservationRecord>>,
    /// Open reservations by deadline, so the sweeper reads only the expired.
    pub deadlines: BTreeSet<(u64, String)>,
    pub by_delegation: FastMap<String, BTreeSet<BudgetKey>>,
    /// The nodes directly below each node (and each root's top levels).
    pub children: FastMap<BudgetKey, BTreeSet<BudgetKey>>,
    /// Levels with a lease.
    pub leased: FastSet<BudgetKey>,
    pub unsaved: Unsaved,
    /// Whether changes are noted in `unsaved` (for a backend that saves
    /// snapshots of what changed; one that keeps nothing leaves it off).
    pub tracks_unsaved: bool,
    /// The last journaled change applied.
    pub seq: u64,
    /// The last journaled change known to be on disk (with every one before it).
    pub durable_seq: u64,
}

impl Book {
    /// Applies a change: the one code path for live changes and replay.
    /// Checks (fit, existence) happen before a change is journaled.
    pub fn apply(&mut self, entry: &Entry) {
        match entry {
            Entry::Reserve { id, record, .. } => {
                for (key, limit) in &record.levels {
                    let state = self.level_mut(key, *limit);
                    state.reserved += record.amount;
                    state.open += 1;
                }
                let record = Arc::new(record.clone());
                self.deadlines.insert((record.deadline_ms, id.clone()));
                if self.tracks_unsaved {
                    self.unsaved
                        .reservations
                        .insert(id.clone(), Some(record.clone()));
                }
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
    pub fn unlease(&mut self) {
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
    pub fn charge_leases(&mut self) -> u64 {
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
    pub fn end(&mut self, id: &str) -> Option<Arc<ReservationRecord>> {
        let res = self.reservations.remove(id)?;
        self.deadlines.remove(&(res.deadline_ms, id.to_owned()));
        for (key, _) in &res.levels {
            if let Some(state) = self.levels.get_mut(key) {
                state.open = state.open.saturating_sub(1);
            }
        }
        if self.tracks_unsaved {
            if let Some(Some(_)) = self.unsaved.reservations.get(id) {
                self.unsaved.reservations.remove(id);
            } else {
                self.unsaved.reservations.insert(id.to_owned(), None);
            }
        }
        Some(res)
    }

    /// Marks a level's saved record (`limit`, `spent`) as changed.
    pub fn mark_unsaved(&mut self, key: &BudgetKey) {
        if self.tracks_unsaved && !self.unsaved.levels.contains(key) {
            self.unsaved.levels.insert(key.clone());
        }
    }

    /// A level's state, created at `limit` if new; a smaller `limit` lowers
    /// it. Callers that change `spent` mark the level unsaved themselves:
    /// `reserved` is not saved, so reserving marks nothing.
    pub fn level_mut(&mut self, key: &BudgetKey, limit: u64) -> &mut LevelState {
        match self.levels.get(key).map(|s| s.limit) {
            Some(known) if known <= limit => {}
            known => {
                self.mark_unsaved(key);
                if known.is_none() {
                    self.by_delegation
                        .entry(key.delegation_id().to_owned())
                        .or_default()
                        .insert(key.clone());
                    if let Some(parent) = key.parent() {
                        self.children.entry(parent).or_default().insert(key.clone());
                    }
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
    pub fn freed(&mut self, amount: u64, seq: u64, durable_seq: u64) {
        if self.freed_seq <= durable_seq {
            self.freed_unsynced = 0;
        }
        self.freed_unsynced += amount;
        self.freed_seq = seq;
    }

    /// Room freed by changes that may still be lost.
    pub fn freed_unsynced(&self, durable_seq: u64) -> u64 {
        if self.freed_seq > durable_seq {
            self.freed_unsynced
        } else {
            0
        }
    }
}

impl Book {
    /// Whether `amount` fits at every level: `spent + reserved + amount ≤
    /// limit`, each level's limit the smaller of the known and the presented.
    pub fn check(&self, levels: &[(BudgetKey, u64)], amount: u64) -> Result<(), LedgerError> {
        for (key, limit) in levels {
            let state = self.levels.get(key).copied().unwrap_or(LevelState {
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

    /// Refuses another reservation under a delegation that already holds
    /// `max_open`, so one credential cannot fill the ledger (and the disk)
    /// with reservations, zero-cost ones included.
    pub fn check_open(
        &self,
        levels: &[(BudgetKey, u64)],
        max_open: usize,
    ) -> Result<(), LedgerError> {
        let open = levels
            .iter()
            .map(|(k, _)| (k, self.levels.get(k).map_or(0, |s| s.open)))
            .max_by_key(|(_, n)| *n);
        match open {
            Some((key, n)) if n >= max_open => Err(LedgerError::TooManyOpen {
                delegation_id: key.delegation_id().to_owned(),
                open: n,
            }),
            _ => Ok(()),
        }
    }

    /// The amount of an open reservation.
    pub fn reserved(&self, reservation_id: &str) -> Result<u64, LedgerError> {
        self.reservations
            .get(reservation_id)
            .map(|r| r.amount)
            .ok_or_else(|| LedgerError::UnknownReservation(reservation_id.to_owned()))
    }

    /// Who holds an open reservation (`None`: the gateway itself).
    pub fn holder(&self, reservation_id: &str) -> Result<Option<HolderDigest>, LedgerError> {
        self.reservations
            .get(reservation_id)
            .map(|r| r.holder)
            .ok_or_else(|| LedgerError::UnknownReservation(reservation_id.to_owned()))
    }

    /// Checks that a settle of `actual` can apply to an open reservation;
    /// with `charged_only`, that the reservation is charged on expiry.
    pub fn check_settle(
        &self,
        reservation_id: &str,
        actual: u64,
        charged_only: bool,
    ) -> Result<u64, LedgerError> {
        let r = self
            .reservations
            .get(reservation_id)
            .ok_or_else(|| LedgerError::UnknownReservation(reservation_id.to_owned()))?;
        if charged_only && r.on_expiry != OnExpiry::Charge {
            return Err(LedgerError::NotChargedOnExpiry(reservation_id.to_owned()));
        }
        if actual > r.amount {
            return Err(LedgerError::ExceedsReservation {
                actual,
                reserved: r.amount,
            });
        }
        Ok(r.amount)
    }

    /// Open reservations whose deadline is at or before `now_ms`: their
    /// IDs, how each ends, and their amounts.
    pub fn expired(&self, now_ms: u64) -> Vec<(String, OnExpiry, u64)> {
        self.deadlines
            .range(..(now_ms.saturating_add(1), String::new()))
            .filter_map(|(_, id)| {
                let r = self.reservations.get(id)?;
                Some((id.clone(), r.on_expiry, r.amount))
            })
            .collect()
    }

    /// What has been spent at a node.
    pub fn spent(&self, key: &BudgetKey) -> u64 {
        self.levels.get(key).map_or(0, |l| l.spent)
    }

    /// The state of the given levels (unknown ones at zero).
    pub fn report_levels(&self, levels: &[(BudgetKey, u64)]) -> Vec<LevelReport> {
        levels
            .iter()
            .map(|(k, limit)| {
                level_report(
                    k,
                    self.levels.get(k).copied().unwrap_or(LevelState {
                        limit: *limit,
                        ..Default::default()
                    }),
                )
            })
            .collect()
    }

    /// Every chain that ends at `delegation_id`, each level root first.
    pub fn report(&self, delegation_id: &str) -> Vec<Vec<LevelReport>> {
        let Some(keys) = self.by_delegation.get(delegation_id) else {
            return Vec::new();
        };
        keys.iter()
            .map(|key| {
                key.lineage()
                    .iter()
                    .map(|k| level_report(k, self.levels.get(k).copied().unwrap_or_default()))
                    .collect()
            })
            .collect()
    }

    /// One page of the nodes directly below `parent`, in key order, after
    /// `after` (see [`crate::state::BudgetStore::children`]).
    pub fn children(
        &self,
        parent: &BudgetKey,
        after: Option<&BudgetKey>,
        limit: usize,
    ) -> Vec<Child> {
        use std::ops::Bound;
        let Some(below) = self.children.get(parent) else {
            return Vec::new();
        };
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        below
            .range::<BudgetKey, _>((from, Bound::Unbounded))
            .take(limit.min(CHILDREN_PAGE))
            .map(|k| Child {
                key: k.clone(),
                level: level_report(k, self.levels.get(k).copied().unwrap_or_default()),
            })
            .collect()
    }

    /// Spent and remaining over each tenant root's top-level nodes.
    pub fn top_levels(&self) -> Vec<TopLevel> {
        self.levels
            .iter()
            .filter(|(k, _)| k.is_top())
            .map(|(key, s)| TopLevel {
                root: key.root().to_owned(),
                level: level_report(key, *s),
            })
            .collect()
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
