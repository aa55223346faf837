//! The pipeline in process, over the memory backend (no sockets): the
//! branches that only a failing or racing store reaches, driven through
//! test doubles of the state traits — the seam lets a test stand in for
//! another writer or a full disk.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use async_trait::async_trait;
use delegate_gateway::caller::Caller;
use delegate_gateway::gatekeeper::{GateError, Gatekeeper};
use delegate_gateway::protocol::Hosts;
use delegate_gateway::revocations::Revocations;
use delegate_gateway::state::{
    self, BudgetSettings, ContractPut, DelegationStore, RevocationRecord, RevocationStore,
    StorageError, Stores,
};
use delegateos::attestation::Attestation;
use delegateos::messages::{CompleteParams, DelegateParams, DelegateResponse};
use delegateos::{Dct, Delegation, DelegationId, Keypair, TaskContract};
use dgw_proto_talos::{Talos, TalosIssuer};
use serde_json::{json, Value};
use support::*;
use tokio::sync::broadcast;

fn settings() -> BudgetSettings {
    BudgetSettings {
        reservation_ttl: std::time::Duration::from_secs(60),
        lease: delegate_gateway::budget::LeasePolicy::OFF,
        max_open: 100,
    }
}

/// A gatekeeper over memory, trusting `root`, with `delegations` standing in
/// for the backend's when given.
async fn gatekeeper(
    root: &Keypair,
    delegations: Option<Arc<dyn DelegationStore>>,
) -> (Arc<Gatekeeper>, Stores) {
    let stores = state::open(state::Backend::Ephemeral, settings()).unwrap();
    let revocations = Arc::new(Revocations::load(stores.revocations.clone()).await.unwrap());
    let gate = Arc::new(Gatekeeper::new(
        vec![("acme".into(), root.principal_id().clone())],
        stores.budgets.clone(),
        revocations,
        delegations.unwrap_or_else(|| stores.delegations.clone()),
    ));
    (gate, stores)
}

fn delegate_params(
    c: &TaskContract,
    token: &Dct,
    id: DelegationId,
    parent: DelegationId,
) -> DelegateParams {
    serde_json::from_value(json!({"contract": c, "dct": token.encode(),
        "dctFormat": "delegateos-sjt-v1", "delegationId": id, "parentDelegationId": parent}))
    .unwrap()
}

fn rejected(r: DelegateResponse) -> String {
    match r {
        DelegateResponse::Reject(r) => r.reason,
        DelegateResponse::Accept(a) => panic!("accepted {a:?}"),
    }
}

/// A contract like [`contract`] but allowing `max_depth` levels of delegation.
fn contract_with_depth(root: &Keypair, max_depth: u32) -> TaskContract {
    let draft = json!({
        "task": {"title": "Count words", "description": "Count the words", "inputs": {},
                 "outputSchema": {"type": "object", "required": ["words"]}},
        "verification": {"method": "deterministic_check", "checkName": "field_exists", "checkParams": {"fields": ["words"]}},
        "constraints": {"maxBudgetMicrocents": 1000, "deadline": "2099-01-01T00:00:00Z",
                        "maxChainDepth": max_depth, "requiredCapabilities": []}
    });
    delegateos::contract::ContractDraft::parse(draft.to_string().as_bytes())
        .unwrap()
        .sign(
            root,
            ct(1),
            at(0),
            &delegateos::CheckFunctionRegistry::with_builtins(),
        )
        .unwrap()
}

#[tokio::test]
async fn a_delegation_deeper_than_its_contract_allows_breaks_the_chain_invariant() {
    let (root, alice, bob) = (seed(1), seed(2), seed(3));
    let (gate, _) = gatekeeper(&root, None).await;
    let c = contract_with_depth(&root, 0);
    let t0 = root_token(&root, &alice, &["docs:read:/project/**"], 100, 3600);
    let t1 = attenuate(&t0, &alice, &bob, 2, None, None);
    let r = gate
        .delegate(delegate_params(&c, &t1, del(2), del(1)))
        .await
        .unwrap();
    assert_eq!(rejected(r), "chain_invariant");
}

#[tokio::test]
async fn a_second_contract_under_a_recorded_id_conflicts() {
    let (root, alice) = (seed(1), seed(2));
    let (gate, stores) = gatekeeper(&root, None).await;
    let first = contract(&root, ct(1), &[]);
    let t0 = root_token(&root, &alice, &["docs:read:/project/**"], 100, 3600);
    let r = gate
        .delegate(delegate_params(
            &first,
            &t0,
            del(1),
            DelegationId::root_parent(),
        ))
        .await
        .unwrap();
    assert!(matches!(r, DelegateResponse::Accept(_)), "{r:?}");
    // Same ID, other content.
    let other = contract_with_depth(&root, 2);
    let t5 = root_token_for(&root, &alice, &["docs:read:/project/**"], 100, 3600, del(5));
    let r = gate
        .delegate(delegate_params(
            &other,
            &t5,
            del(5),
            DelegationId::root_parent(),
        ))
        .await
        .unwrap();
    assert_eq!(rejected(r), "contract_conflict");
    assert!(
        stores.delegations.get(&del(5)).await.unwrap().is_none(),
        "nothing recorded"
    );
}

/// The memory store, with a writer that gets in between: every replace
/// finds the record changed, and reads may hand out a corrupted token.
struct Contested {
    inner: Arc<dyn DelegationStore>,
    corrupt_tokens: bool,
}

#[async_trait]
impl DelegationStore for Contested {
    async fn insert_new(&self, d: &Delegation, token: &Dct) -> Result<bool, StorageError> {
        self.inner.insert_new(d, token).await
    }
    async fn get(&self, id: &DelegationId) -> Result<Option<Delegation>, StorageError> {
        let mut d = self.inner.get(id).await?;
        if self.corrupt_tokens {
            if let Some(d) = d.as_mut() {
                d.dct.token = "not-a-token".into();
            }
        }
        Ok(d)
    }
    async fn replace(&self, _: &Delegation, _: &Delegation) -> Result<bool, StorageError> {
        Ok(false)
    }
    async fn carrying_block(&self, r: &str) -> Result<Vec<DelegationId>, StorageError> {
        self.inner.carrying_block(r).await
    }
    async fn put_contract(&self, c: &TaskContract) -> Result<ContractPut, StorageError> {
        self.inner.put_contract(c).await
    }
    async fn contract(
        &self,
        id: &delegateos::ContractId,
    ) -> Result<Option<TaskContract>, StorageError> {
        self.inner.contract(id).await
    }
    async fn remove_contract(&self, id: &delegateos::ContractId) -> Result<bool, StorageError> {
        self.inner.remove_contract(id).await
    }
    async fn put_attestation(&self, a: &Attestation) -> Result<(), StorageError> {
        self.inner.put_attestation(a).await
    }
    async fn attestation(
        &self,
        id: &delegateos::AttestationId,
    ) -> Result<Option<Attestation>, StorageError> {
        self.inner.attestation(id).await
    }
    async fn sync(&self) -> Result<(), StorageError> {
        self.inner.sync().await
    }
}

/// Delegates `del(1)` to alice and has her complete it, over `Contested`.
async fn complete_contested(
    corrupt_tokens: bool,
) -> Result<delegate_gateway::gatekeeper::Completion, GateError> {
    let (root, alice) = (seed(1), seed(2));
    let memory = state::open(state::Backend::Ephemeral, settings()).unwrap();
    let contested = Arc::new(Contested {
        inner: memory.delegations.clone(),
        corrupt_tokens,
    });
    let (gate, _) = gatekeeper(&root, Some(contested)).await;
    let c = contract(&root, ct(1), &[]);
    let t0 = root_token(&root, &alice, &["docs:read:/project/**"], 100, 3600);
    let r = gate
        .delegate(delegate_params(
            &c,
            &t0,
            del(1),
            DelegationId::root_parent(),
        ))
        .await
        .unwrap();
    assert!(matches!(r, DelegateResponse::Accept(_)), "{r:?}");
    let att = attestation(&alice, 1, del(1), json!({"words": 3}), 10, true);
    let params: CompleteParams =
        serde_json::from_value(json!({"delegationId": del(1), "attestation": att})).unwrap();
    gate.complete(params).await
}

#[tokio::test]
async fn a_delegation_changed_while_completing_is_a_concurrent_update() {
    match complete_contested(false).await {
        Err(GateError::Conflict { kind, .. }) => assert_eq!(kind.as_str(), "concurrent_update"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_recorded_token_that_no_longer_verifies_is_token_invalid() {
    match complete_contested(true).await {
        Err(GateError::Conflict { kind, .. }) => assert_eq!(kind.as_str(), "token_invalid"),
        other => panic!("{other:?}"),
    }
}

/// A revocation store whose disk is full.
struct Full;

#[async_trait]
impl RevocationStore for Full {
    async fn add(&self, _: RevocationRecord) -> Result<bool, StorageError> {
        Err(StorageError::Backend("no space left on device".into()))
    }
    async fn contains(&self, _: &'static str, _: &str) -> Result<bool, StorageError> {
        Ok(false)
    }
    async fn all(&self, _: &'static str) -> Result<Vec<RevocationRecord>, StorageError> {
        Ok(Vec::new())
    }
    fn subscribe(&self) -> broadcast::Receiver<RevocationRecord> {
        broadcast::channel(1).1
    }
}

#[tokio::test]
async fn a_talos_revocation_the_store_cannot_record_is_revocation_failed() {
    let memory = state::open(state::Backend::Ephemeral, settings()).unwrap();
    let revocations = Arc::new(Revocations::load(Arc::new(Full)).await.unwrap());
    let issuer = seed(9);
    let talos = Talos::new(
        &[TalosIssuer {
            did: "did:key:issuer".into(),
            key: issuer.public_key(),
            tenant: "acme".into(),
            budget_microcents: 100,
        }],
        revocations.clone(),
        memory.replay.clone(),
        memory.audit.clone(),
        Arc::new(seed(8)),
    )
    .await
    .unwrap();
    let name = "ab".repeat(32);
    let r = talos
        .call_method(&Caller::gateway(), "talos/revoke", json!({"revoke": name}))
        .await;
    match r {
        Err(GateError::Rejected { kind, .. }) => assert_eq!(kind, "revocation_failed"),
        other => panic!("{other:?}"),
    }
    assert!(
        !revocations.contains_name("talos_revocations", &name),
        "nothing unrecorded counts as revoked"
    );
    let events: Vec<Value> = memory.audit.recent(10).await.unwrap();
    assert!(
        events.is_empty(),
        "no REVOKE event for a revocation not recorded: {events:?}"
    );
}
