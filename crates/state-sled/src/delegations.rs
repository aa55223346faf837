//! Persisted delegation records, contracts and attestations, and the index
//! from token blocks to the delegations that carry them.

use async_trait::async_trait;
use delegateos::attestation::Attestation;
use delegateos::{Dct, Delegation, DelegationId, TaskContract};

use super::{encode, get, Storage};
use crate::Db;
use dgw_core::state::{ContractPut, DelegationStore, StorageError};

/// Delegations, contracts and attestations in sled.
#[derive(Clone)]
pub struct SledDelegations {
    storage: Storage,
}

impl SledDelegations {
    pub fn new(storage: Storage) -> Self {
        Self { storage }
    }
}

#[async_trait]
impl DelegationStore for SledDelegations {
    async fn insert_new(&self, delegation: &Delegation, token: &Dct) -> Result<bool, StorageError> {
        let t = &self.storage.trees;
        let inserted = t
            .delegations
            .compare_and_swap(
                delegation.id.as_str(),
                None as Option<&[u8]>,
                Some(encode(delegation)),
            )
            .db()?
            .is_ok();
        if inserted {
            for rev in token.revocation_ids() {
                t.revocation_index
                    .insert(format!("{rev}/{}", delegation.id).as_bytes(), &[])
                    .db()?;
            }
        }
        Ok(inserted)
    }

    /// A delegation by ID.
    async fn get(&self, id: &DelegationId) -> Result<Option<Delegation>, StorageError> {
        get(
            &self.storage.trees.delegations,
            "delegations",
            id.as_str().as_bytes(),
        )
    }

    /// Replaces a delegation record, only if it is still `expected`
    /// (so two concurrent transitions cannot both apply). `false` if it changed.
    async fn replace(&self, expected: &Delegation, new: &Delegation) -> Result<bool, StorageError> {
        Ok(self
            .storage
            .trees
            .delegations
            .compare_and_swap(
                expected.id.as_str(),
                Some(encode(expected)),
                Some(encode(new)),
            )
            .db()?
            .is_ok())
    }

    /// The delegations whose tokens contain the block with this revocation ID.
    async fn carrying_block(&self, revocation_id: &str) -> Result<Vec<DelegationId>, StorageError> {
        let prefix = format!("{revocation_id}/");
        self.storage
            .trees
            .revocation_index
            .scan_prefix(prefix.as_bytes())
            .map(|item| {
                let (k, _) = item.db()?;
                let text = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
                DelegationId::parse(&text).map_err(|e| StorageError::Corrupt {
                    tree: "revocation_index",
                    key: text,
                    problem: e.to_string(),
                })
            })
            .collect()
    }

    /// Stores a contract unless its ID is taken.
    async fn put_contract(&self, contract: &TaskContract) -> Result<ContractPut, StorageError> {
        let bytes = encode(contract);
        match self
            .storage
            .trees
            .contracts
            .compare_and_swap(
                contract.id.as_str(),
                None as Option<&[u8]>,
                Some(bytes.clone()),
            )
            .db()?
        {
            Ok(()) => Ok(ContractPut::Inserted),
            Err(existing) if existing.current.as_deref() == Some(&bytes[..]) => {
                Ok(ContractPut::Unchanged)
            }
            Err(_) => Ok(ContractPut::Conflict),
        }
    }

    /// A contract by ID.
    async fn contract(
        &self,
        id: &delegateos::ContractId,
    ) -> Result<Option<TaskContract>, StorageError> {
        get(
            &self.storage.trees.contracts,
            "contracts",
            id.as_str().as_bytes(),
        )
    }

    /// Forgets a contract (durable with the next sync).
    async fn remove_contract(&self, id: &delegateos::ContractId) -> Result<bool, StorageError> {
        Ok(self
            .storage
            .trees
            .contracts
            .remove(id.as_str().as_bytes())
            .db()?
            .is_some())
    }

    /// Stores an attestation (the first one with an ID wins).
    async fn put_attestation(&self, attestation: &Attestation) -> Result<(), StorageError> {
        self.storage
            .trees
            .attestations
            .compare_and_swap(
                attestation.id.as_str(),
                None as Option<&[u8]>,
                Some(encode(attestation)),
            )
            .db()?
            .ok();
        Ok(())
    }

    /// An attestation by ID.
    async fn attestation(
        &self,
        id: &delegateos::AttestationId,
    ) -> Result<Option<Attestation>, StorageError> {
        get(
            &self.storage.trees.attestations,
            "attestations",
            id.as_str().as_bytes(),
        )
    }

    async fn sync(&self) -> Result<(), StorageError> {
        self.storage.sync().await
    }
}
