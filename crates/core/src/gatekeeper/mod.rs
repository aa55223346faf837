//! The one enforcement pipeline every front and every protocol goes through:
//! verify the token (signature chain, attenuation, expiry, revocation), match
//! the capability, then reserve budget; plus the DelegateOS delegation
//! lifecycle (§9: delegate, complete, revoke) over the same state.
//!
//! Decisions are typed ([`Denial`], [`GateError`]); each front maps them to
//! its wire format in one place.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use delegateos::attestation::AttestationFailure;
use delegateos::dct::{self, VerifiedDct};
use delegateos::verification::CheckResult;
use delegateos::{
    AuthorizedScope, CheckFunctionRegistry, DelegationId, DelegationStatus, DenialReason,
    PrincipalId, RevocationScope, Timestamp,
};
use serde::Serialize;
use time::OffsetDateTime;

use crate::budget::{BudgetKey, HolderDigest, LedgerError, LevelReport, Reservation};
use crate::protocol::{ProtocolId, ProtocolInfo};
use crate::revocations::Revocations;
use crate::state::{BudgetStore, DelegationStore, StorageError};
use crate::telemetry;

mod budgets;
mod decisions;
mod lifecycle;
mod lookup;
mod pipeline;
mod revoke;

pub use decisions::{DecisionEvent, DecisionKind};
pub use lookup::DelegationView;

/// Verified tokens kept, by their serialized bytes.
const TOKEN_CACHE_ENTRIES: usize = 16_384;

pub use crate::protocol::Denial;

pub use crate::error::{Conflict, Forbidden, GateError, Missing};

/// An allowed request: its reservation and scope.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Authorization {
    pub allowed: bool,
    /// What is held; none for a caller's zero-cost request.
    #[serde(flatten)]
    pub reservation: Option<Reservation>,
    /// The DelegateOS scope, when the credential was a DCT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<AuthorizedScope>,
    pub tenant: String,
    /// The protocol whose credential was presented.
    pub protocol: &'static str,
}

/// What `complete` did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    pub delegation_id: DelegationId,
    pub status: DelegationStatus,
    pub charged_microcents: u64,
    pub verification: Option<CheckResult>,
    pub reason: Option<AttestationFailure>,
}

/// What `revoke` did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Revocation {
    pub revocation_id: String,
    pub scope: RevocationScope,
    pub newly_recorded: bool,
    pub revoked_delegations: Vec<DelegationId>,
}

/// Budgets along every chain that ends at a delegation.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetReport {
    pub delegation_id: DelegationId,
    pub chains: Vec<Vec<LevelReport>>,
}

pub use crate::protocol::Grant;

/// Attestations and contracts by ID, as attestation verification takes them.
type AttestationsById = BTreeMap<delegateos::AttestationId, delegateos::Attestation>;
type ContractsById = BTreeMap<delegateos::ContractId, delegateos::TaskContract>;

/// A verified token with the budget nodes of its chain, computed once.
struct Verified {
    token: VerifiedDct,
    levels: Vec<(BudgetKey, u64)>,
    /// The digest a reservation made with these bytes is held by, computed
    /// with the verification: BLAKE2b of a kilobyte token per authorize
    /// was a tenth of its instructions (issue 36).
    holder: HolderDigest,
    /// The [`Tenants::generation`] it was verified against: an entry from
    /// before a reload is verified again.
    generation: u64,
}

/// The trusted tenant roots, replaced whole on reload.
struct Tenants {
    generation: u64,
    roots: Vec<PrincipalId>,
    names: HashMap<PrincipalId, String>,
}

impl Tenants {
    fn new(generation: u64, tenants: Vec<(String, PrincipalId)>) -> Self {
        Self {
            generation,
            roots: tenants.iter().map(|(_, r)| r.clone()).collect(),
            names: tenants.into_iter().map(|(n, r)| (r, n)).collect(),
        }
    }
}

/// The gatekeeper.
pub struct Gatekeeper {
    tenants: arc_swap::ArcSwap<Tenants>,
    /// Keyed by the token's bytes; `ahash` because the keys are kilobytes
    /// long and hashed on every request (keyed per process, so DoS-resistant).
    cache: RwLock<HashMap<String, Arc<Verified>, ahash::RandomState>>,
    budgets: Arc<dyn BudgetStore>,
    revocations: Arc<Revocations>,
    delegations: Arc<dyn DelegationStore>,
    registry: CheckFunctionRegistry,
    decisions: tokio::sync::broadcast::Sender<Arc<DecisionEvent>>,
    /// Budget-key roots of adapters' grants, with their tenants (for gauges).
    adapter_roots: RwLock<Vec<(String, String)>>,
    /// The tamper-evident audit trail, when the gateway keeps one.
    trail: crate::trail::TrailSlot,
}

/// The current time, as a timestamp and as Unix milliseconds.
pub fn now() -> (Timestamp, u64) {
    let t = OffsetDateTime::now_utc();
    let ms = (t.unix_timestamp_nanos() / 1_000_000).max(0) as u64;
    (Timestamp::from_instant(t), ms)
}

/// DelegateOS, the pivot protocol, whose tokens the gatekeeper verifies itself.
pub const DELEGATEOS: ProtocolId = ProtocolId::new(&ProtocolInfo {
    name: "delegateos",
    title: "DelegateOS",
    denial_message: Some("DCT verification failed"),
});

fn forbidden(kind: Forbidden, detail: impl Into<String>) -> GateError {
    GateError::Forbidden {
        kind,
        detail: detail.into(),
    }
}

impl Gatekeeper {
    /// A gatekeeper over opened state, trusting each tenant's root.
    pub fn new(
        tenants: Vec<(String, PrincipalId)>,
        budgets: Arc<dyn BudgetStore>,
        revocations: Arc<Revocations>,
        delegations: Arc<dyn DelegationStore>,
    ) -> Self {
        Self {
            tenants: arc_swap::ArcSwap::from_pointee(Tenants::new(0, tenants)),
            cache: RwLock::new(HashMap::default()),
            budgets,
            revocations,
            delegations,
            registry: CheckFunctionRegistry::with_builtins(),
            decisions: tokio::sync::broadcast::channel(decisions::DECISION_BACKLOG).0,
            adapter_roots: RwLock::new(Vec::new()),
            trail: crate::trail::TrailSlot::default(),
        }
    }

    /// Sends every decision and settlement to `trail` from now on.
    pub fn set_trail(&self, trail: Arc<dyn crate::trail::Trail>) {
        self.trail.set(trail);
    }

    /// The trail, for the parts of the gateway that record into it.
    pub fn trail(&self) -> &crate::trail::TrailSlot {
        &self.trail
    }

    /// Trusts exactly these tenant roots from now on (reload): tokens
    /// verified before are verified again against the new roots.
    pub fn set_tenants(&self, tenants: Vec<(String, PrincipalId)>) {
        let generation = self.tenants.load().generation + 1;
        self.tenants
            .store(Arc::new(Tenants::new(generation, tenants)));
        self.cache
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// The trusted tenants, by name with their roots (the console's budgets).
    pub fn tenants(&self) -> Vec<(String, PrincipalId)> {
        let tenants = self.tenants.load();
        let mut all: Vec<_> = tenants
            .names
            .iter()
            .map(|(root, name)| (name.clone(), root.clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Whether `root` is a trusted tenant root.
    pub(crate) fn is_tenant_root(&self, root: &PrincipalId) -> bool {
        self.tenants.load().roots.contains(root)
    }

    /// The budgets, for the sweeper and metrics.
    pub fn budgets(&self) -> &Arc<dyn BudgetStore> {
        &self.budgets
    }

    /// §10.1 steps 1–4, from the cache when these exact bytes were verified before.
    fn verified(&self, token: &str) -> Result<Arc<Verified>, DenialReason> {
        let tenants = self.tenants.load();
        if let Some(v) = self
            .cache
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(token)
            .filter(|v| v.generation == tenants.generation)
        {
            telemetry::record_token_cache(true);
            return Ok(v.clone());
        }
        telemetry::record_token_cache(false);
        let checked = dct::verify_token(token, &tenants.roots, &self.revocations.read())?;
        let levels =
            BudgetKey::for_chain(&checked.dct().token().authority.issuer, checked.levels());
        let verified = Arc::new(Verified {
            token: checked,
            levels,
            holder: HolderDigest::of(token),
            generation: tenants.generation,
        });
        let mut cache = self.cache.write().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= TOKEN_CACHE_ENTRIES {
            // Drop an eighth, chosen by the map's per-process random order,
            // rather than everything: hot tokens mostly survive, and the
            // sweep is paid once per 2,048 insertions.
            let mut n = 0usize;
            cache.retain(|_, _| {
                n += 1;
                !n.is_multiple_of(8)
            });
        }
        cache.insert(token.to_owned(), verified.clone());
        Ok(verified)
    }

    /// `token`, if it decodes and its signature chain verifies against a
    /// tenant root, whatever its revocation, expiry or budget: who signed
    /// what, for deciding who may read or revoke.
    fn signed_chain(&self, token: &str) -> Option<VerifiedDct> {
        delegateos::Dct::decode(token)
            .ok()?
            .verify_chain(&self.tenants.load().roots)
            .ok()
    }

    fn tenant_of(&self, verified: &VerifiedDct) -> String {
        let issuer = &verified.dct().token().authority.issuer;
        self.tenants
            .load()
            .names
            .get(issuer)
            .cloned()
            .unwrap_or_else(|| issuer.to_string())
    }

    /// The revocations (protocols record theirs there too).
    pub fn revocations(&self) -> &Revocations {
        &self.revocations
    }
}

impl From<LedgerError> for GateError {
    fn from(e: LedgerError) -> Self {
        ledger_error(e)
    }
}

fn ledger_error(e: LedgerError) -> GateError {
    match e {
        LedgerError::UnknownReservation(id) => GateError::NotFound {
            kind: Missing::Reservation,
            id,
        },
        e @ LedgerError::ExceedsReservation { .. } => GateError::Conflict {
            kind: Conflict::SettlementExceedsReservation,
            detail: e.to_string(),
        },
        e @ LedgerError::NotChargedOnExpiry(_) => GateError::Conflict {
            kind: Conflict::NotChargedOnExpiry,
            detail: e.to_string(),
        },
        e @ LedgerError::Exceeded { .. } => GateError::Conflict {
            kind: Conflict::BudgetExceeded,
            detail: e.to_string(),
        },
        e @ LedgerError::TooManyOpen { .. } => GateError::Conflict {
            kind: Conflict::TooManyReservations,
            detail: e.to_string(),
        },
        LedgerError::Storage(e) => GateError::Storage(e),
        LedgerError::Random(e) => GateError::Storage(StorageError::Backend(e.to_string())),
    }
}
