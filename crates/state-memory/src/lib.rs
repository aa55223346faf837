//! The in-memory backend: every store in this process's memory, nothing on
//! disk. For tests and `dgw serve --ephemeral`; a restart forgets all.

mod ledger;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use delegateos::attestation::Attestation;
use delegateos::{Dct, Delegation, DelegationId, TaskContract};
use serde_json::Value;
use tokio::sync::broadcast;

pub use ledger::MemoryBudgets;

use dgw_core::state::{
    AuditAnchor, AuditSink, BudgetSettings, Capped, ContractPut, DelegationStore, RecordStore,
    ReplayStore, RevocationRecord, RevocationStore, SpaceUsage, StorageError, Stores,
};

/// Most audit events kept (the oldest go first).
const AUDIT_EVENTS: usize = 100_000;

/// Opens an empty in-memory backend.
pub fn open(budget: BudgetSettings) -> Result<Stores, StorageError> {
    let budgets = MemoryBudgets::new(budget).map_err(|e| StorageError::Backend(e.to_string()))?;
    Ok(Stores {
        budgets: Arc::new(budgets),
        revocations: Arc::new(MemoryRevocations::default()),
        delegations: Arc::new(MemoryDelegations::default()),
        replay: Arc::new(MemoryReplay::default()),
        records: Arc::new(MemoryRecords::default()),
        audit: Arc::new(MemoryAudit::default()),
        close: Arc::new(|| Ok(())),
    })
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The in-memory [`RevocationStore`].
pub struct MemoryRevocations {
    records: Mutex<HashMap<(&'static str, String), Value>>,
    added: broadcast::Sender<RevocationRecord>,
}

impl Default for MemoryRevocations {
    fn default() -> Self {
        Self {
            records: Mutex::default(),
            added: broadcast::channel(1024).0,
        }
    }
}

#[async_trait]
impl RevocationStore for MemoryRevocations {
    async fn add(&self, record: RevocationRecord) -> Result<bool, StorageError> {
        let inserted = {
            let mut records = lock(&self.records);
            match records.entry((record.kind, record.key.clone())) {
                std::collections::hash_map::Entry::Occupied(_) => false,
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(record.value.clone());
                    true
                }
            }
        };
        if inserted {
            let _ = self.added.send(record);
        }
        Ok(inserted)
    }

    async fn contains(&self, kind: &'static str, key: &str) -> Result<bool, StorageError> {
        Ok(lock(&self.records).contains_key(&(kind, key.to_owned())))
    }

    async fn all(&self, kind: &'static str) -> Result<Vec<RevocationRecord>, StorageError> {
        Ok(lock(&self.records)
            .iter()
            .filter(|((k, _), _)| *k == kind)
            .map(|((kind, key), value)| RevocationRecord {
                kind,
                key: key.clone(),
                value: value.clone(),
            })
            .collect())
    }

    fn subscribe(&self) -> broadcast::Receiver<RevocationRecord> {
        self.added.subscribe()
    }
}

/// The in-memory [`DelegationStore`].
#[derive(Default)]
pub struct MemoryDelegations {
    delegations: Mutex<HashMap<String, Delegation>>,
    /// `(revocation ID, delegation ID)`.
    carrying: Mutex<std::collections::BTreeSet<(String, DelegationId)>>,
    contracts: Mutex<HashMap<String, TaskContract>>,
    attestations: Mutex<HashMap<String, Attestation>>,
}

#[async_trait]
impl DelegationStore for MemoryDelegations {
    async fn insert_new(&self, delegation: &Delegation, token: &Dct) -> Result<bool, StorageError> {
        {
            let mut all = lock(&self.delegations);
            if all.contains_key(delegation.id.as_str()) {
                return Ok(false);
            }
            all.insert(delegation.id.as_str().to_owned(), delegation.clone());
        }
        let mut carrying = lock(&self.carrying);
        for rev in token.revocation_ids() {
            carrying.insert((rev.to_string(), delegation.id.clone()));
        }
        Ok(true)
    }

    async fn get(&self, id: &DelegationId) -> Result<Option<Delegation>, StorageError> {
        Ok(lock(&self.delegations).get(id.as_str()).cloned())
    }

    async fn replace(&self, expected: &Delegation, new: &Delegation) -> Result<bool, StorageError> {
        let mut all = lock(&self.delegations);
        match all.get_mut(expected.id.as_str()) {
            Some(current) if current == expected => {
                *current = new.clone();
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn carrying_block(&self, revocation_id: &str) -> Result<Vec<DelegationId>, StorageError> {
        Ok(lock(&self.carrying)
            .iter()
            .filter(|(rev, _)| rev == revocation_id)
            .map(|(_, d)| d.clone())
            .collect())
    }

    async fn put_contract(&self, contract: &TaskContract) -> Result<ContractPut, StorageError> {
        let mut all = lock(&self.contracts);
        match all.get(contract.id.as_str()) {
            None => {
                all.insert(contract.id.as_str().to_owned(), contract.clone());
                Ok(ContractPut::Inserted)
            }
            Some(existing) if existing == contract => Ok(ContractPut::Unchanged),
            Some(_) => Ok(ContractPut::Conflict),
        }
    }

    async fn contract(
        &self,
        id: &delegateos::ContractId,
    ) -> Result<Option<TaskContract>, StorageError> {
        Ok(lock(&self.contracts).get(id.as_str()).cloned())
    }

    async fn remove_contract(&self, id: &delegateos::ContractId) -> Result<bool, StorageError> {
        Ok(lock(&self.contracts).remove(id.as_str()).is_some())
    }

    async fn put_attestation(&self, attestation: &Attestation) -> Result<(), StorageError> {
        lock(&self.attestations)
            .entry(attestation.id.as_str().to_owned())
            .or_insert_with(|| attestation.clone());
        Ok(())
    }

    async fn attestation(
        &self,
        id: &delegateos::AttestationId,
    ) -> Result<Option<Attestation>, StorageError> {
        Ok(lock(&self.attestations).get(id.as_str()).cloned())
    }

    async fn sync(&self) -> Result<(), StorageError> {
        Ok(())
    }
}

/// The in-memory [`ReplayStore`].
#[derive(Default)]
pub struct MemoryReplay {
    seen: Mutex<HashMap<(&'static str, Vec<u8>), i64>>,
}

#[async_trait]
impl ReplayStore for MemoryReplay {
    async fn insert_new(
        &self,
        namespace: &'static str,
        key: &[u8],
        now: i64,
        valid_until: i64,
    ) -> Result<bool, StorageError> {
        let mut seen = lock(&self.seen);
        match seen.get(&(namespace, key.to_vec())) {
            Some(until) if *until >= now => Ok(false),
            _ => {
                seen.insert((namespace, key.to_vec()), valid_until);
                Ok(true)
            }
        }
    }

    async fn sweep(&self, now: i64) -> Result<usize, StorageError> {
        let mut seen = lock(&self.seen);
        let before = seen.len();
        seen.retain(|_, until| *until >= now);
        Ok(before - seen.len())
    }
}

/// The in-memory [`RecordStore`].
#[derive(Default)]
pub struct MemoryRecords {
    spaces: Mutex<HashMap<&'static str, BTreeMap<String, Value>>>,
}

#[async_trait]
impl RecordStore for MemoryRecords {
    async fn get(&self, space: &'static str, key: &str) -> Result<Option<Value>, StorageError> {
        Ok(lock(&self.spaces)
            .get(space)
            .and_then(|s| s.get(key))
            .cloned())
    }

    async fn insert_new(
        &self,
        space: &'static str,
        key: &str,
        value: &Value,
    ) -> Result<bool, StorageError> {
        let mut spaces = lock(&self.spaces);
        let space = spaces.entry(space).or_default();
        if space.contains_key(key) {
            return Ok(false);
        }
        space.insert(key.to_owned(), value.clone());
        Ok(true)
    }

    async fn replace(
        &self,
        space: &'static str,
        key: &str,
        expected: &Value,
        new: &Value,
    ) -> Result<bool, StorageError> {
        let mut spaces = lock(&self.spaces);
        match spaces.get_mut(space).and_then(|s| s.get_mut(key)) {
            Some(current) if current == expected => {
                *current = new.clone();
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn remove(&self, space: &'static str, key: &str) -> Result<bool, StorageError> {
        Ok(lock(&self.spaces)
            .get_mut(space)
            .is_some_and(|s| s.remove(key).is_some()))
    }

    async fn scan(&self, space: &'static str) -> Result<Vec<(String, Value)>, StorageError> {
        Ok(lock(&self.spaces)
            .get(space)
            .map(|s| s.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default())
    }

    async fn insert_capped(
        &self,
        space: &'static str,
        key: &str,
        value: &Value,
        cap: usize,
    ) -> Result<Capped, StorageError> {
        let mut spaces = lock(&self.spaces);
        let space = spaces.entry(space).or_default();
        Ok(if space.contains_key(key) {
            Capped::Taken
        } else if space.len() >= cap {
            Capped::Full
        } else {
            space.insert(key.to_owned(), value.clone());
            Capped::Inserted
        })
    }

    /// The documents as compact JSON: what a stored copy would take.
    async fn usage(&self, space: &'static str) -> Result<SpaceUsage, StorageError> {
        let spaces = lock(&self.spaces);
        let Some(space) = spaces.get(space) else {
            return Ok(SpaceUsage::default());
        };
        Ok(SpaceUsage {
            records: space.len(),
            bytes: space
                .iter()
                .map(|(k, v)| (k.len() + v.to_string().len()) as u64)
                .sum(),
        })
    }
}

/// The in-memory [`AuditSink`]: the last [`AUDIT_EVENTS`] events, and the
/// logs' anchors.
#[derive(Default)]
pub struct MemoryAudit {
    events: Mutex<BTreeMap<u64, Value>>,
    anchors: Mutex<HashMap<String, AuditAnchor>>,
}

#[async_trait]
impl AuditSink for MemoryAudit {
    async fn append(&self, event: &Value) -> Result<(), StorageError> {
        let mut events = lock(&self.events);
        let next = events.last_key_value().map_or(0, |(k, _)| k + 1);
        events.insert(next, event.clone());
        while events.len() > AUDIT_EVENTS {
            events.pop_first();
        }
        Ok(())
    }

    async fn recent(&self, limit: usize) -> Result<Vec<Value>, StorageError> {
        let events = lock(&self.events);
        let skip = events.len().saturating_sub(limit);
        Ok(events.values().skip(skip).cloned().collect())
    }

    async fn anchor(&self, log: &str) -> Result<Option<AuditAnchor>, StorageError> {
        Ok(lock(&self.anchors).get(log).cloned())
    }

    async fn advance_anchor(&self, log: &str, anchor: &AuditAnchor) -> Result<bool, StorageError> {
        let mut anchors = lock(&self.anchors);
        if anchors.get(log).is_some_and(|kept| kept.seq >= anchor.seq) {
            return Ok(false);
        }
        anchors.insert(log.to_owned(), anchor.clone());
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dgw_core::state::contract::Backend;
    use dgw_core::state::BudgetStore;

    /// One in-memory backend; nothing survives a restart.
    #[derive(Default)]
    struct Memory {
        records: Arc<MemoryRecords>,
        audit: Arc<MemoryAudit>,
    }

    impl Backend for Memory {
        fn budgets(&self, settings: BudgetSettings) -> Arc<dyn BudgetStore> {
            Arc::new(MemoryBudgets::new(settings).unwrap())
        }
        fn persistent(&self) -> bool {
            false
        }
        fn stop(&self, _: Arc<dyn BudgetStore>) {}
        fn crash(&self, _: Arc<dyn BudgetStore>) {}
        fn revocations(&self) -> Arc<dyn RevocationStore> {
            Arc::new(MemoryRevocations::default())
        }
        fn replay(&self) -> Arc<dyn ReplayStore> {
            Arc::new(MemoryReplay::default())
        }
        fn delegations(&self) -> Arc<dyn DelegationStore> {
            Arc::new(MemoryDelegations::default())
        }
        fn audit(&self) -> Arc<dyn AuditSink> {
            self.audit.clone()
        }
        fn records(&self) -> Arc<dyn RecordStore> {
            self.records.clone()
        }
    }

    dgw_core::contract_suite!(Memory::default);
}
