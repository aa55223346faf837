//! The state seam: every piece of state the pipeline shares, as traits a
//! backend implements. The gatekeeper, the protocols, the fronts and the CLI
//! see only these; each backend is a folder of its own:
//!
//! - `dgw-state-sled`: the embedded default (a data directory; journal,
//!   snapshots and leases for the budgets);
//! - `dgw-state-memory`: nothing on disk (tests, `dgw serve --ephemeral`);
//! - `dgw-state-redis`: one Redis (or Redis Cluster) several replicas share.
//!
//! Every backend passes one contract suite (`contract.rs`): concurrent
//! reserve/settle/release never overspends, a crash loses nothing
//! acknowledged, expiry ends a reservation exactly once, revocation
//! subscribers see every entry. A new backend passes it or does not ship
//! (`docs/architecture.md`, "Adding a state backend").

use std::sync::Arc;

use async_trait::async_trait;
use delegateos::attestation::Attestation;
use delegateos::{Dct, Delegation, DelegationId, TaskContract};
use serde_json::Value;
use tokio::sync::{broadcast, watch};

use crate::budget::{
    BudgetKey, Child, HolderDigest, LedgerError, LevelReport, OnExpiry, Reservation, Settlement,
    TopLevel,
};

#[cfg(any(test, feature = "contract-suite"))]
pub mod contract;

pub use crate::storage::StorageError;

/// Hierarchical budgets with two-phase reservations (see [`crate::budget`]).
///
/// The contract: `reserve` checks and reserves at every level atomically,
/// against every process sharing the state; a reservation, settle or charge
/// that returned `Ok` survives a crash (a release, or the settle of a
/// reservation charged on expiry, may be lost and is redone by expiry); no
/// level ever has more spent and reserved than its limit.
#[async_trait]
pub trait BudgetStore: Send + Sync {
    /// Reserves `amount` at every level if it fits at each, until `now_ms`
    /// plus the backend's reservation TTL; then it ends as `on_expiry` says.
    async fn reserve(
        &self,
        levels: &[(BudgetKey, u64)],
        amount: u64,
        now_ms: u64,
        on_expiry: OnExpiry,
        holder: Option<HolderDigest>,
    ) -> Result<Reservation, LedgerError> {
        let deadline_ms = now_ms
            .saturating_add(u64::try_from(self.reservation_ttl().as_millis()).unwrap_or(u64::MAX));
        self.reserve_until(levels, amount, deadline_ms, on_expiry, holder)
            .await
    }

    /// [`BudgetStore::reserve`] with its own deadline (work that takes
    /// longer than the TTL, such as a brokered purchase).
    async fn reserve_until(
        &self,
        levels: &[(BudgetKey, u64)],
        amount: u64,
        deadline_ms: u64,
        on_expiry: OnExpiry,
        holder: Option<HolderDigest>,
    ) -> Result<Reservation, LedgerError>;

    /// How long a reservation made by [`BudgetStore::reserve`] lives.
    fn reservation_ttl(&self) -> std::time::Duration;

    /// Charges `actual` (at most the reserved amount) and releases the rest.
    async fn settle(&self, reservation_id: &str, actual: u64) -> Result<Settlement, LedgerError>;

    /// Settles a reservation made with [`OnExpiry::Charge`]; the backend
    /// need not wait for durability (a lost settle is charged in full at
    /// expiry, so the spend is never lost).
    async fn settle_charged(
        &self,
        reservation_id: &str,
        actual: u64,
    ) -> Result<Settlement, LedgerError>;

    /// Charges `amount` at every level at once, if it fits (a cost reported
    /// after the fact, such as an attestation's).
    async fn charge(&self, levels: &[(BudgetKey, u64)], amount: u64) -> Result<(), LedgerError>;

    /// Cancels a reservation; the amount it held.
    async fn release(&self, reservation_id: &str) -> Result<u64, LedgerError>;

    /// Ends every reservation whose deadline is at or before `now_ms`, as
    /// its [`OnExpiry`] says; how many. Each ends exactly once, even when
    /// several processes sweep.
    async fn sweep(&self, now_ms: u64) -> Result<usize, LedgerError>;

    /// Who holds an open reservation (`None`: the gateway itself).
    async fn holder(&self, reservation_id: &str) -> Result<Option<HolderDigest>, LedgerError>;

    /// What has been spent at a node.
    async fn spent(&self, key: &BudgetKey) -> Result<u64, LedgerError>;

    /// The state of the given levels (unknown ones at zero spent).
    async fn report_levels(
        &self,
        levels: &[(BudgetKey, u64)],
    ) -> Result<Vec<LevelReport>, LedgerError>;

    /// Every chain that ends at `delegation_id`, each level root first.
    async fn report(&self, delegation_id: &str) -> Result<Vec<Vec<LevelReport>>, LedgerError>;

    /// Spent and remaining over each tenant root's top-level nodes.
    /// Every top-level node (a root's direct delegation), for the gauges
    /// ([`crate::budget::tenant_totals`] sums them per root).
    async fn top_levels(&self) -> Result<Vec<TopLevel>, LedgerError>;

    /// One page of the nodes directly below `parent` (a node, or a root
    /// alone — [`BudgetKey::of_root`] — for its top-level nodes), in key
    /// order, after `after` when given, at most `limit` and never more
    /// than [`crate::budget::CHILDREN_PAGE`]: every node ever reserved or
    /// charged, by any process sharing the state. A page shorter than
    /// asked is the last.
    async fn children(
        &self,
        parent: &BudgetKey,
        after: Option<&BudgetKey>,
        limit: usize,
    ) -> Result<Vec<Child>, LedgerError>;

    /// Open reservations.
    async fn open_reservations(&self) -> Result<usize, LedgerError>;

    /// Whether changes are accepted (false after a failed durable write,
    /// until a restart).
    fn writable(&self) -> bool;

    /// Whether the budgets can be used now (`/readyz`): a shared backend
    /// asks its server.
    async fn ready(&self) -> Result<(), StorageError> {
        if self.writable() {
            Ok(())
        } else {
            Err(StorageError::Backend(
                "the budget journal cannot be written; restart dgw".into(),
            ))
        }
    }

    /// Compacts what is kept about the budgets (sled: a snapshot that lets
    /// the journal go); blocking, so run it off the async workers.
    fn checkpoint(&self) -> Result<(), StorageError>;
}

/// A revocation as stored: which list (`kind`), its key in that list, and
/// the record itself. Kinds belong to whoever records them (the gatekeeper
/// for DelegateOS and administrators, each protocol for its own); a backend
/// treats them as opaque names.
#[derive(Debug, Clone, PartialEq)]
pub struct RevocationRecord {
    pub kind: &'static str,
    pub key: String,
    pub value: Value,
}

/// Revocations: a grow-only set, durable, shared by every process.
#[async_trait]
pub trait RevocationStore: Send + Sync {
    /// Records durably; `false` if `(kind, key)` was already recorded.
    /// Subscribers see the record once it is durable.
    async fn add(&self, record: RevocationRecord) -> Result<bool, StorageError>;

    /// Whether `(kind, key)` is recorded.
    async fn contains(&self, kind: &'static str, key: &str) -> Result<bool, StorageError>;

    /// Every record of `kind` (read at start).
    async fn all(&self, kind: &'static str) -> Result<Vec<RevocationRecord>, StorageError>;

    /// Every record added from now on, by this process or another. A
    /// receiver that lags (`RecvError::Lagged`) reads [`RevocationStore::all`] again.
    fn subscribe(&self) -> broadcast::Receiver<RevocationRecord>;

    /// Whether the subscription is sure to carry every new record: `false`
    /// while a shared backend's feed is lost (entries may be missed), until
    /// it follows again; then the subscriber reads [`RevocationStore::all`]
    /// again. A backend in this process never loses its feed.
    fn following(&self) -> watch::Receiver<bool> {
        watch::channel(true).1
    }
}

/// Whether storing a contract added it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContractPut {
    Inserted,
    /// The same contract was already stored.
    Unchanged,
    /// A different contract already has this ID.
    Conflict,
}

/// Delegation records, contracts and attestations, and the index from token
/// blocks to the delegations that carry them. Writes are durable once
/// [`DelegationStore::sync`] returns.
#[async_trait]
pub trait DelegationStore: Send + Sync {
    /// Records a new delegation and indexes its token's blocks. `false` when
    /// the ID is already taken (a replay): nothing is written then.
    async fn insert_new(&self, delegation: &Delegation, token: &Dct) -> Result<bool, StorageError>;

    /// A delegation by ID.
    async fn get(&self, id: &DelegationId) -> Result<Option<Delegation>, StorageError>;

    /// Replaces a delegation record only if it is still `expected` (two
    /// concurrent transitions cannot both apply); `false` if it changed.
    async fn replace(&self, expected: &Delegation, new: &Delegation) -> Result<bool, StorageError>;

    /// The delegations whose tokens contain the block with this revocation ID.
    async fn carrying_block(&self, revocation_id: &str) -> Result<Vec<DelegationId>, StorageError>;

    /// Stores a contract unless its ID is taken.
    async fn put_contract(&self, contract: &TaskContract) -> Result<ContractPut, StorageError>;

    /// A contract by ID.
    async fn contract(
        &self,
        id: &delegateos::ContractId,
    ) -> Result<Option<TaskContract>, StorageError>;

    /// Forgets a contract (one made for work that never started); whether
    /// there was one.
    async fn remove_contract(&self, id: &delegateos::ContractId) -> Result<bool, StorageError>;

    /// Stores an attestation (the first one with an ID wins).
    async fn put_attestation(&self, attestation: &Attestation) -> Result<(), StorageError>;

    /// An attestation by ID.
    async fn attestation(
        &self,
        id: &delegateos::AttestationId,
    ) -> Result<Option<Attestation>, StorageError>;

    /// Waits until every write before this call is durable.
    async fn sync(&self) -> Result<(), StorageError>;
}

/// Things seen once: nonces, correlation IDs, token IDs, idempotency keys.
#[async_trait]
pub trait ReplayStore: Send + Sync {
    /// Records `key` in `namespace` until `valid_until` (Unix seconds),
    /// durably; `false` if it is there and still valid at `now`.
    async fn insert_new(
        &self,
        namespace: &'static str,
        key: &[u8],
        now: i64,
        valid_until: i64,
    ) -> Result<bool, StorageError>;

    /// Forgets keys whose validity ended before `now`; how many.
    async fn sweep(&self, now: i64) -> Result<usize, StorageError>;
}

/// A protocol's own documents (offers, requests, …), by space and
/// key: durable once a write returns, changed only by compare-and-swap so
/// two concurrent transitions of one document cannot both apply.
#[async_trait]
pub trait RecordStore: Send + Sync {
    /// The document under `key` in `space`.
    async fn get(&self, space: &'static str, key: &str) -> Result<Option<Value>, StorageError>;

    /// Stores `value` unless `key` is taken; whether it was.
    async fn insert_new(
        &self,
        space: &'static str,
        key: &str,
        value: &Value,
    ) -> Result<bool, StorageError>;

    /// Replaces the document only if it is still `expected`; `false` if it
    /// changed (or is gone).
    async fn replace(
        &self,
        space: &'static str,
        key: &str,
        expected: &Value,
        new: &Value,
    ) -> Result<bool, StorageError>;

    /// Forgets the document under `key`; whether there was one.
    async fn remove(&self, space: &'static str, key: &str) -> Result<bool, StorageError>;

    /// Every document of `space`, in key order (read at start and by
    /// sweeps).
    async fn scan(&self, space: &'static str) -> Result<Vec<(String, Value)>, StorageError>;

    /// Stores `value` unless `key` is taken or `space` already holds `cap`
    /// documents, as one atomic step against every process sharing the
    /// state: concurrent inserts never take `space` past `cap`.
    async fn insert_capped(
        &self,
        space: &'static str,
        key: &str,
        value: &Value,
        cap: usize,
    ) -> Result<Capped, StorageError>;

    /// How many documents `space` holds and their size as stored (keys and
    /// values), for the stored-bytes gauges.
    async fn usage(&self, space: &'static str) -> Result<SpaceUsage, StorageError>;
}

/// What [`RecordStore::insert_capped`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capped {
    Inserted,
    /// The key was taken: nothing written.
    Taken,
    /// The space holds its cap of documents: nothing written.
    Full,
}

/// A record space's documents and bytes ([`RecordStore::usage`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpaceUsage {
    pub records: usize,
    /// Keys and values as the backend stores them.
    pub bytes: u64,
}

/// The audit log: events in order (durable with the backend's next flush:
/// they are evidence, not state); and the anchors of the tamper-evident
/// logs, kept here, away from their directories.
#[async_trait]
pub trait AuditSink: Send + Sync {
    /// Appends an event.
    async fn append(&self, event: &Value) -> Result<(), StorageError>;

    /// The last `limit` events, oldest first.
    async fn recent(&self, limit: usize) -> Result<Vec<Value>, StorageError>;

    /// The anchor of the tamper-evident log named `log`, if one was kept.
    async fn anchor(&self, log: &str) -> Result<Option<AuditAnchor>, StorageError>;

    /// Moves the anchor of `log` to `anchor`, durably, if it is further on
    /// than the one kept (a higher `seq`); whether it moved. An anchor
    /// never moves back: a late or stale writer cannot undo a newer one.
    async fn advance_anchor(&self, log: &str, anchor: &AuditAnchor) -> Result<bool, StorageError>;
}

/// Where a tamper-evident audit log had got to: its latest seal, as the
/// record's sequence number and hash. Kept outside the log's directory, so
/// a log cut or rewritten there no longer reaches it (`dgw-audit-log`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct AuditAnchor {
    pub seq: u64,
    /// The seal record's hash (64 hex digits).
    pub head: String,
}

impl std::fmt::Display for AuditAnchor {
    /// `SEQ:HASH`, as `dgw audit verify --expect-head` takes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.seq, self.head)
    }
}

/// One backend's stores, as the gateway holds them.
#[derive(Clone)]
pub struct Stores {
    pub budgets: Arc<dyn BudgetStore>,
    pub revocations: Arc<dyn RevocationStore>,
    pub delegations: Arc<dyn DelegationStore>,
    pub replay: Arc<dyn ReplayStore>,
    pub records: Arc<dyn RecordStore>,
    pub audit: Arc<dyn AuditSink>,
    /// Flushes everything at exit.
    pub close: Arc<dyn Fn() -> Result<(), StorageError> + Send + Sync>,
}

/// The budget settings every backend takes.
#[derive(Debug, Clone, Copy)]
pub struct BudgetSettings {
    /// How long a reservation lives before the sweeper ends it.
    pub reservation_ttl: std::time::Duration,
    /// Most reservations open at once under one delegation (any level).
    pub max_open: usize,
    /// How far ahead reservations charged on expiry lease budget (backends
    /// that sync per change; see [`crate::budget::LeasePolicy`]).
    pub lease: crate::budget::LeasePolicy,
}
