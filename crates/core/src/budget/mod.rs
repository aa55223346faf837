//! Hierarchical budgets with two-phase reservations that can never overspend:
//! the vocabulary every budget store speaks, and [`book`], the one model of
//! what a reservation, a settle, a release and a charge do to the levels of a
//! chain, which every backend applies.
//!
//! Every level of a token's chain (the authority, then each attenuation) is a
//! budget node, named by the tenant's root and the path of delegation IDs
//! from the root down to it: `ROOT/del_a/del_b`. Naming by path rather than by
//! bare delegation ID means a holder can only ever charge nodes below its
//! own signed chain, never a stranger's node that happens to share an ID,
//! while a token re-issued for the same delegation shares its node.
//!
//! `reserve` checks `spent + reserved + amount ≤ limit` at every level at
//! once, atomically; `settle` moves the actual cost (at most the reserved
//! amount) to `spent` at every level and releases the rest; `release` and
//! the sweeper give reservations back. How a backend makes that atomic and
//! durable is its own (`state::sled` journals and leases; see
//! `docs/architecture.md`, "State").

pub mod book;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use blake2::digest::consts::{U16, U32};
use blake2::{Blake2b, Digest};
use delegateos::dct::ChainLevel;
use delegateos::PrincipalId;
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use crate::random;
use crate::storage::StorageError;

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
    /// the same `limit` (a capability chain: root issuer, then each
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

    /// The node `name` below this one.
    pub fn child(&self, name: &str) -> Self {
        BudgetKey(Arc::from(format!("{}/{name}", self.0).as_str()))
    }

    /// The node directly above this one: for a top-level node, its root
    /// alone (a key whose children are the root's top-level nodes).
    pub fn parent(&self) -> Option<BudgetKey> {
        self.0
            .rsplit_once('/')
            .map(|(above, _)| BudgetKey(Arc::from(above)))
    }

    /// The key of a root alone, whose children are its top-level nodes.
    pub fn of_root(root: &str) -> Self {
        BudgetKey(Arc::from(root))
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

    /// A key read back from storage, as [`BudgetKey::as_str`] wrote it.
    pub fn from_stored(path: &str) -> Self {
        BudgetKey(Arc::from(path))
    }

    /// The path, as stored.
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

/// How the pipeline holds a reservation: how it ends at its deadline, when
/// that is, and whether the caller holds it (and may settle or release it
/// with the same credential) or the gateway does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    pub on_expiry: OnExpiry,
    /// Its deadline (Unix ms); `None`: the store's reservation TTL.
    pub until_ms: Option<u64>,
    pub by_caller: bool,
}

impl Hold {
    /// A caller's own reservation (JSON-RPC and gRPC `authorize`), released
    /// at the TTL.
    pub const fn caller() -> Self {
        Self {
            on_expiry: OnExpiry::Release,
            until_ms: None,
            by_caller: true,
        }
    }

    /// Work the gateway forwards and pays for (an MCP tool call), charged at
    /// the TTL.
    pub const fn forwarded() -> Self {
        Self {
            on_expiry: OnExpiry::Charge,
            until_ms: None,
            by_caller: false,
        }
    }

    /// Work the gateway brokers until a deadline (a marketplace purchase): the
    /// gateway settles it when the work is reported, and releases it at the
    /// deadline if it never is. The buyer cannot end it.
    pub const fn brokered_until(deadline_ms: u64) -> Self {
        Self {
            on_expiry: OnExpiry::Release,
            until_ms: Some(deadline_ms),
            by_caller: false,
        }
    }
}

impl From<OnExpiry> for Hold {
    fn from(on_expiry: OnExpiry) -> Self {
        match on_expiry {
            OnExpiry::Release => Hold::caller(),
            OnExpiry::Charge => Hold::forwarded(),
        }
    }
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

    pub fn is_on(self) -> bool {
        self.fraction > 0.0
    }

    /// The ceiling to raise a level to when a reservation needs `need` of its `limit`.
    pub fn ceiling(self, need: u64, limit: u64) -> u64 {
        let ahead = (limit.saturating_sub(need) as f64 * self.fraction) as u64;
        need.saturating_add(ahead).min(limit)
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

/// A node directly below another, as [`crate::state::BudgetStore::children`]
/// lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    pub key: BudgetKey,
    pub level: LevelReport,
}

/// The most children one page of [`crate::state::BudgetStore::children`]
/// lists, whatever was asked: a root with a million attenuations is read a
/// page at a time.
pub const CHILDREN_PAGE: usize = 256;

/// Totals over a tenant's top-level nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TenantTotals {
    pub spent: u64,
    pub remaining: u64,
}

/// A top-level node (a root's direct delegation) with its root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopLevel {
    /// The budget-key root: a tenant root's principal ID or a protocol's root.
    pub root: String,
    pub level: LevelReport,
}

/// Spent and remaining per root, summed over its top-level nodes.
pub fn tenant_totals(levels: &[TopLevel]) -> HashMap<String, TenantTotals> {
    let mut totals: HashMap<String, TenantTotals> = HashMap::new();
    for t in levels {
        let sum = totals.entry(t.root.clone()).or_default();
        sum.spent += t.level.spent_microcents;
        sum.remaining += t.level.remaining_microcents;
    }
    totals
}

/// The digest a reservation's holder is known by: BLAKE2b-256 of the
/// credential that made it, who may end it besides an administrator. The
/// credential itself is never stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HolderDigest(pub [u8; 32]);

impl HolderDigest {
    /// The digest of a presented credential (a serialized DCT), without
    /// surrounding whitespace: a token read with its trailing newline is the
    /// same credential, as DCT decoding already treats it.
    pub fn of(credential: &str) -> Self {
        Self(Blake2b::<U32>::digest(credential.trim().as_bytes()).into())
    }

    /// Constant-time equality, so a probe learns nothing from timing.
    pub fn matches(&self, other: &HolderDigest) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

/// Stored as base64url text.
impl serde::Serialize for HolderDigest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&delegateos::base64url::encode(&self.0))
    }
}

impl<'de> serde::Deserialize<'de> for HolderDigest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        delegateos::base64url::decode_array(&text)
            .map(Self)
            .map_err(|_| serde::de::Error::custom("a holder digest is 32 bytes of base64url"))
    }
}

/// Reservation IDs: `res_` and BLAKE2b of a per-process secret and a
/// counter, 128 bits no one can predict from earlier IDs (a keyed PRF in
/// counter mode), without a system call per reservation.
pub struct ReservationIds {
    secret: [u8; 32],
    counter: AtomicU64,
}

impl ReservationIds {
    /// A generator with a fresh secret.
    pub fn new() -> Result<Self, random::RandomError> {
        Ok(Self {
            secret: random::bytes::<32>()?,
            counter: AtomicU64::new(0),
        })
    }

    /// The next ID.
    pub fn next_id(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut hash = Blake2b::<U16>::new();
        hash.update(self.secret);
        hash.update(n.to_le_bytes());
        format!("res_{}", delegateos::base64url::encode(&hash.finalize()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(path: &str) -> BudgetKey {
        BudgetKey(Arc::from(format!("ROOT/{path}")))
    }

    #[test]
    fn keys_name_paths() {
        let k = key("del_a/del_b");
        assert_eq!(k.root(), "ROOT");
        assert_eq!(k.delegation_id(), "del_b");
        assert_eq!(k.lineage(), vec![key("del_a"), key("del_a/del_b")]);
        assert!(key("del_a").is_top() && !k.is_top());
    }

    #[test]
    fn reservation_ids_differ() {
        let ids = ReservationIds::new().unwrap();
        let (a, b) = (ids.next_id(), ids.next_id());
        assert!(a.starts_with("res_") && a.len() == 4 + 22);
        assert_ne!(a, b);
    }
}
