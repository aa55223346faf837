//! The Redis backend: every store in one Redis (or Redis Cluster) that
//! several dgw replicas share, so a budget, a replay guard or a revocation
//! is one truth for all of them.
//!
//! - Budgets: each change one Lua script over the levels of one chain;
//!   every key of a delegation tree carries the hash tag of its root, so a
//!   script touches one slot and runs unchanged on Redis Cluster
//!   (`budgets.rs`).
//! - Revocations: a hash per kind plus a stream every replica follows
//!   (`revocations.rs`).
//! - Replay guards: `SET NX EXAT`; records, delegations, audit: hashes, a
//!   stream (`documents.rs`).
//!
//! Values are integers below 2^53 (Lua's exact range): larger limits are
//! clamped to it (90 billion dollars), larger amounts never fit.
//! Durability is Redis's: an acknowledged write survives a Redis crash
//! only as its persistence allows (`docs/operations.md`, "Redis").

mod budgets;
mod connection;
mod documents;
mod revocations;
mod telemetry;

use std::sync::Arc;
use std::time::Duration;

use dgw_core::state::{BudgetSettings, StorageError, Stores};

pub use budgets::RedisBudgets;
pub use connection::Connection;
pub use documents::{RedisAudit, RedisDelegations, RedisRecords, RedisReplay};
pub use revocations::RedisRevocations;
pub use telemetry::METRICS;

/// Where the state is and how long to wait for it.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// `redis://`, `rediss://` (TLS), `redis+cluster://host:port,host:port`
    /// (`rediss+cluster://`) URL.
    pub url: String,
    /// The prefix of every key (several gateways can share one Redis).
    pub prefix: String,
    /// The longest a command may take, connecting included.
    pub timeout: Duration,
    /// For `rediss://`: the PEM of the CA that signed Redis's certificate
    /// (none: the system's roots).
    pub ca_pem: Option<Vec<u8>>,
}

/// Opens every store over the Redis at `settings.url` (connected on first
/// use; `dgw serve` reads its state at start, so it does not start while
/// Redis is out of reach).
pub fn open(settings: &RedisSettings, budget: BudgetSettings) -> Result<Stores, StorageError> {
    let connection = Connection::new(settings)?;
    let prefix: Arc<str> = Arc::from(settings.prefix.as_str());
    let budgets = RedisBudgets::new(connection.clone(), prefix.clone(), budget)?;
    Ok(Stores {
        budgets: Arc::new(budgets),
        revocations: Arc::new(RedisRevocations::new(connection.clone(), prefix.clone())),
        delegations: Arc::new(RedisDelegations::new(connection.clone(), prefix.clone())),
        replay: Arc::new(RedisReplay::new(connection.clone(), prefix.clone())),
        records: Arc::new(RedisRecords::new(connection.clone(), prefix.clone())),
        audit: Arc::new(RedisAudit::new(connection, prefix)),
        close: Arc::new(|| Ok(())),
    })
}

/// A Redis failure as the state seam reports it: Redis out of reach is
/// `Unavailable` (decisions are refused until it is back), anything else
/// a backend failure.
pub(crate) fn backend(e: redis::RedisError) -> StorageError {
    if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal() {
        StorageError::Unavailable(format!("redis: {e}"))
    } else {
        StorageError::Backend(format!("redis: {e}"))
    }
}

/// A value stored by dgw that does not read back.
pub(crate) fn corrupt(tree: &'static str, key: &str, problem: impl ToString) -> StorageError {
    StorageError::Corrupt {
        tree,
        key: key.to_owned(),
        problem: problem.to_string(),
    }
}
