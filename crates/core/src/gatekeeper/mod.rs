//! The one enforcement pipeline every front and every protocol goes through:
//! verify the token (signature chain, attenuation, expiry, revocation), match
//! the capability, then reserve budget; plus the DelegateOS delegation
//! lifecycle (§9: delegate, complete, revoke) over the same state.
//!
//! Decisions are typed ([`Denial`], [`GateError`]); each front maps them to
//! its wire format in one place.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use delegateos::attestation::AttestationFailure;
use delegateos::dct::{self, VerifiedDct};
use delegateos::verification::CheckResult;
use delegateos::{
    AuthorizedScope, CapabilityRequest, CheckFunctionRegistry, DelegationId, DelegationStatus,
    DenialReason, DenialType, PrincipalId, RevocationScope, Timestamp,
};
use serde::Serialize;
use time::OffsetDateTime;

use crate::budget::{
    BudgetKey, HolderDigest, LedgerError, LevelReport, OnExpiry, Reservation, Settlement,
};
use crate::caller::Caller;
use crate::protocol::{Call, Found, ProtocolId, ProtocolInfo};
use crate::revocations::Revocations;
use crate::state::{BudgetStore, DelegationStore, StorageError};
use crate::telemetry;

pub mod error;
mod lifecycle;
mod lookup;
mod revoke;

pub use lookup::DelegationView;

/// Verified tokens kept, by their serialized bytes.
const TOKEN_CACHE_ENTRIES: usize = 16_384;

pub use crate::protocol::Denial;

pub use error::GateError;

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

/// Which decision was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecisionKind {
    Authorize,
    Delegate,
}

impl DecisionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Authorize => "authorize",
            DecisionKind::Delegate => "delegate",
        }
    }
}

/// One allow/deny decision, as published to watchers (gRPC
/// `WatchDecisions`), whichever front asked for it.
#[derive(Debug, Clone)]
pub struct DecisionEvent {
    pub at: OffsetDateTime,
    pub kind: DecisionKind,
    pub allowed: bool,
    /// The tenant, when the token verified and its root is a tenant.
    pub tenant: Option<String>,
    /// The delegation IDs of the token's chain (root first) when it
    /// verified; for a delegation, its parent's and its own.
    pub chain: Vec<DelegationId>,
    pub request: Option<CapabilityRequest>,
    pub cost_microcents: u64,
    pub reservation_id: Option<String>,
    pub denial_type: Option<String>,
    pub detail: Option<String>,
}

/// Decisions kept for a slow watcher before it misses some.
const DECISION_BACKLOG: usize = 4096;

/// Attestations and contracts by ID, as attestation verification takes them.
type AttestationsById = BTreeMap<delegateos::AttestationId, delegateos::Attestation>;
type ContractsById = BTreeMap<delegateos::ContractId, delegateos::TaskContract>;

/// A verified token with the budget nodes of its chain, computed once.
struct Verified {
    token: VerifiedDct,
    levels: Vec<(BudgetKey, u64)>,
}

/// The gatekeeper.
pub struct Gatekeeper {
    roots: Vec<PrincipalId>,
    tenant_names: HashMap<PrincipalId, String>,
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

/// A DelegateOS denial, counted.
fn denied(reason: DenialReason, requested: Option<&CapabilityRequest>) -> Denial {
    telemetry::record_denial(DELEGATEOS.name, reason.kind.as_str());
    let d = Denial::pipeline(DELEGATEOS, reason);
    match requested {
        Some(r) => d.for_request(r),
        None => d,
    }
}

/// The first request that is not canonical, with why.
fn first_non_canonical(
    requests: &[CapabilityRequest],
) -> Option<(DenialReason, &CapabilityRequest)> {
    requests
        .iter()
        .find_map(|r| r.check_canonical().err().map(|e| (e, r)))
}

fn forbidden(kind: &'static str, detail: impl Into<String>) -> GateError {
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
            roots: tenants.iter().map(|(_, r)| r.clone()).collect(),
            tenant_names: tenants.into_iter().map(|(n, r)| (r, n)).collect(),
            cache: RwLock::new(HashMap::default()),
            budgets,
            revocations,
            delegations,
            registry: CheckFunctionRegistry::with_builtins(),
            decisions: tokio::sync::broadcast::channel(DECISION_BACKLOG).0,
            adapter_roots: RwLock::new(Vec::new()),
        }
    }

    /// Every decision from now on.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Arc<DecisionEvent>> {
        self.decisions.subscribe()
    }

    /// Publishes a decision when someone watches (built only then).
    fn publish(&self, make: impl FnOnce() -> DecisionEvent) {
        if self.decisions.receiver_count() > 0 {
            let _ = self.decisions.send(Arc::new(make()));
        }
    }

    /// An authorization decision.
    fn publish_authorize(
        &self,
        grant: Option<&Grant>,
        request: &CapabilityRequest,
        cost_microcents: u64,
        outcome: Result<Option<&Reservation>, &Denial>,
    ) {
        self.publish_decision(
            || grant.map(|g| g.tenant.clone()),
            || grant.map(|g| g.chain.clone()).unwrap_or_default(),
            request,
            cost_microcents,
            outcome,
        );
    }

    fn publish_decision(
        &self,
        tenant: impl FnOnce() -> Option<String>,
        chain: impl FnOnce() -> Vec<DelegationId>,
        request: &CapabilityRequest,
        cost_microcents: u64,
        outcome: Result<Option<&Reservation>, &Denial>,
    ) {
        self.publish(|| DecisionEvent {
            at: OffsetDateTime::now_utc(),
            kind: DecisionKind::Authorize,
            allowed: outcome.is_ok(),
            tenant: tenant(),
            chain: chain(),
            request: Some(request.clone()),
            cost_microcents,
            reservation_id: outcome.ok().flatten().map(|r| r.reservation_id.clone()),
            denial_type: outcome.err().map(|d| d.kind.as_str().to_owned()),
            detail: outcome.err().map(|d| d.detail.clone()),
        });
    }

    /// The budgets, for the sweeper and metrics.
    pub fn budgets(&self) -> &Arc<dyn BudgetStore> {
        &self.budgets
    }

    /// §10.1 steps 1–4, from the cache when these exact bytes were verified before.
    fn verified(&self, token: &str) -> Result<Arc<Verified>, DenialReason> {
        if let Some(v) = self
            .cache
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(token)
        {
            return Ok(v.clone());
        }
        let checked = dct::verify_token(token, &self.roots, &self.revocations.read())?;
        let levels =
            BudgetKey::for_chain(&checked.dct().token().authority.issuer, checked.levels());
        let verified = Arc::new(Verified {
            token: checked,
            levels,
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
            .verify_chain(&self.roots)
            .ok()
    }

    fn tenant_of(&self, verified: &VerifiedDct) -> String {
        let issuer = &verified.dct().token().authority.issuer;
        self.tenant_names
            .get(issuer)
            .cloned()
            .unwrap_or_else(|| issuer.to_string())
    }

    /// The grant of a DCT: its chain verified against a tenant root, not
    /// revoked, not expired (§10.1 steps 1–4, from the cache when these
    /// exact bytes were verified before). Each request is then checked
    /// against the token itself (capabilities, budget, revocation and
    /// expiry at that instant).
    pub fn dct_grant(&self, token: &str) -> Result<Grant, Denial> {
        let verified = self.verified(token).map_err(|r| denied(r, None))?;
        Ok(Grant {
            protocol: DELEGATEOS,
            tenant: self.tenant_of(&verified.token),
            levels: verified.levels.clone(),
            chain: verified
                .token
                .levels()
                .iter()
                .map(|l| l.delegation_id.clone())
                .collect(),
            requests: None,
            scope: None,
            holder: HolderDigest::of(token),
            authority: Box::new(DctAuthority {
                verified,
                revocations: self.revocations.clone(),
                now: now().0,
            }),
            context: Box::new(()),
        })
    }

    /// The contract a DCT is for, if its chain verifies.
    pub fn contract_of(&self, token: &str) -> Option<delegateos::ContractId> {
        self.verified(token)
            .ok()
            .map(|v| v.token.dct().contract_id().clone())
    }

    /// Verifies `token` for every one of `requests` (a call may name several
    /// resources) and reserves `cost` once at every level of its chain; the
    /// reservation ends at its deadline as `on_expiry` says.
    pub async fn authorize(
        &self,
        token: &str,
        requests: &[CapabilityRequest],
        cost_microcents: u64,
        on_expiry: OnExpiry,
    ) -> Result<Result<Authorization, Denial>, GateError> {
        let Some(first) = requests.first() else {
            return Err(no_requests());
        };
        if let Some((reason, request)) = first_non_canonical(requests) {
            let d = denied(reason, Some(request));
            self.publish_authorize(None, request, cost_microcents, Err(&d));
            return Ok(Err(d));
        }
        let grant = match self.dct_grant(token) {
            Ok(g) => g,
            Err(d) => {
                let d = d.for_request(first);
                self.publish_authorize(None, first, cost_microcents, Err(&d));
                return Ok(Err(d));
            }
        };
        self.authorize_grant(&grant, requests, cost_microcents, on_expiry)
            .await
    }

    /// The one pipeline, after a protocol verified its credential into a
    /// [`Grant`]: every request canonical and permitted by the grant at the
    /// budget spent so far, then `cost` reserved at every level of its
    /// chain, ending at its deadline as `on_expiry` says. Every decision is
    /// published and counted under the grant's protocol.
    pub async fn authorize_grant(
        &self,
        grant: &Grant,
        requests: &[CapabilityRequest],
        cost_microcents: u64,
        on_expiry: OnExpiry,
    ) -> Result<Result<Authorization, Denial>, GateError> {
        let started = Instant::now();
        let Some(first) = requests.first() else {
            return Err(no_requests());
        };
        let deny = |d: Denial| {
            telemetry::record_denial(d.protocol.name, d.kind.as_str());
            self.publish_authorize(
                Some(grant),
                d.requested.as_deref().unwrap_or(first),
                cost_microcents,
                Err(&d),
            );
            Ok(Err(d))
        };
        if let Some((reason, request)) = first_non_canonical(requests) {
            return deny(Denial::pipeline(grant.protocol, reason).for_request(request));
        }
        let leaf = &grant
            .levels
            .last()
            .ok_or_else(|| GateError::InvalidParams("a grant has at least one level".into()))?
            .0;
        let spent = self.budgets.spent(leaf).await.map_err(ledger_error)?;
        let requests = grant.requests.as_deref().unwrap_or(requests);
        let mut scope = grant.scope.clone();
        for request in requests {
            match grant.authority.permits(request, spent) {
                Ok(s) => {
                    scope = scope.or(s);
                }
                Err(reason) => {
                    return deny(Denial::pipeline(grant.protocol, reason).for_request(request))
                }
            }
        }
        // A reservation released on expiry is the caller's to settle or
        // release, so it is bound to the credential that made it; one
        // charged on expiry is the gateway's own (it forwards the work
        // itself). A caller's zero-cost request holds nothing: there is
        // nothing to settle, and it cannot fill the ledger with empty
        // reservations.
        let reservation = if on_expiry == OnExpiry::Release && cost_microcents == 0 {
            None
        } else {
            let holder = (on_expiry == OnExpiry::Release).then_some(grant.holder);
            match self
                .reserve(&grant.levels, cost_microcents, now().1, on_expiry, holder)
                .await?
            {
                Ok(r) => Some(r),
                Err(reason) => {
                    return deny(Denial::pipeline(grant.protocol, reason).for_request(first))
                }
            }
        };
        self.publish_authorize(
            Some(grant),
            first,
            cost_microcents,
            Ok(reservation.as_ref()),
        );
        telemetry::record_authorize(started.elapsed());
        Ok(Ok(Authorization {
            allowed: true,
            reservation,
            scope,
            tenant: grant.tenant.clone(),
            protocol: grant.protocol.name,
        }))
    }

    /// The entry point of every front: the credential a request carried,
    /// verified by its protocol into a grant, then the pipeline. The
    /// protocol sees the outcome (it may audit it). Returns the grant for
    /// [`crate::protocol::Protocol::completed`] after the call.
    pub async fn authorize_with(
        &self,
        found: &Found,
        call: &Call<'_>,
        on_expiry: OnExpiry,
    ) -> Result<Result<(Authorization, Grant), Denial>, GateError> {
        let Some(first) = call.requests.first() else {
            return Err(no_requests());
        };
        let protocol = &found.protocol;
        let refused = |d: Denial| {
            telemetry::record_denial(d.protocol.name, d.kind.as_str());
            self.publish_authorize(
                None,
                d.requested.as_deref().unwrap_or(first),
                call.cost_microcents,
                Err(&d),
            );
            d
        };
        if let Some((reason, request)) = first_non_canonical(call.requests) {
            let d = refused(Denial::pipeline(protocol.id(), reason).for_request(request));
            protocol.denied(None, &found.credential, call, &d).await;
            return Ok(Err(d));
        }
        let grant = match protocol.grant(&found.credential, call).await? {
            Ok(g) => g,
            Err(d) => return Ok(Err(refused(d.for_request(first)))),
        };
        match self
            .authorize_grant(&grant, call.requests, call.cost_microcents, on_expiry)
            .await?
        {
            Ok(a) => {
                protocol.allowed(&grant, call).await;
                Ok(Ok((a, grant)))
            }
            Err(d) => {
                protocol
                    .denied(Some(&grant), &found.credential, call, &d)
                    .await;
                Ok(Err(d))
            }
        }
    }

    /// Counts a refusal a front made for a protocol before
    /// any credential was checked (an unknown tool under Talos).
    pub fn record_refusal(&self, denial: &Denial) {
        telemetry::record_denial(denial.protocol.name, denial.kind.as_str());
    }

    /// Reserves `cost` at every level; a budget that does not fit is a
    /// `budget_exceeded` denial naming the level.
    async fn reserve(
        &self,
        levels: &[(BudgetKey, u64)],
        cost_microcents: u64,
        now_ms: u64,
        on_expiry: OnExpiry,
        holder: Option<HolderDigest>,
    ) -> Result<Result<Reservation, DenialReason>, GateError> {
        match self
            .budgets
            .reserve(levels, cost_microcents, now_ms, on_expiry, holder)
            .await
        {
            Ok(r) => Ok(Ok(r)),
            Err(e @ (LedgerError::Exceeded { .. } | LedgerError::TooManyOpen { .. })) => Ok(Err(
                DenialReason::new(DenialType::BudgetExceeded, e.to_string()),
            )),
            Err(e) => Err(ledger_error(e)),
        }
    }

    /// The revocations (protocols record theirs there too).
    pub fn revocations(&self) -> &Revocations {
        &self.revocations
    }

    /// Whether `token` is in good standing now (signatures, chain,
    /// revocation, expiry, budget left), without a request to match: what
    /// MCP `tools/list` filters with.
    pub async fn standing(&self, token: &str) -> Result<AuthorizedScope, Box<Denial>> {
        let verified = self
            .verified(token)
            .map_err(|r| Box::new(denied(r, None)))?;
        let leaf = &verified
            .levels
            .last()
            .expect("a chain has at least its authority")
            .0;
        // A budget that cannot be read stands as spent: fail closed.
        let spent = self.budgets.spent(leaf).await.unwrap_or(u64::MAX);
        verified
            .token
            .check_standing(&self.revocations.read(), &now().0, spent)
            .map_err(|r| Box::new(denied(r, None)))
    }

    /// Whether `caller` may end `reservation_id`: its holder (the same
    /// credential, compared by digest), the gateway, or an administrator who
    /// proved it with a secret. Anything else is `not_reservation_holder`.
    async fn check_holder(&self, caller: &Caller, reservation_id: &str) -> Result<(), GateError> {
        if caller.is_authenticated_admin() {
            return Ok(());
        }
        let holder = self
            .budgets
            .holder(reservation_id)
            .await
            .map_err(ledger_error)?;
        let presented = caller.credential().map(HolderDigest::of);
        match (holder, presented) {
            (Some(h), Some(p)) if h.matches(&p) => Ok(()),
            _ => Err(forbidden(
                "not_reservation_holder",
                "only the credential that made a reservation (or an admin) may settle or release it",
            )),
        }
    }

    /// Charges the actual cost of a reservation and releases the rest.
    pub async fn settle(
        &self,
        caller: &Caller,
        reservation_id: &str,
        actual_microcents: u64,
    ) -> Result<Settlement, GateError> {
        self.check_holder(caller, reservation_id).await?;
        self.budgets
            .settle(reservation_id, actual_microcents)
            .await
            .map_err(ledger_error)
    }

    /// Settles a reservation made with [`OnExpiry::Charge`] without waiting
    /// for the disk (see [`BudgetStore::settle_charged`]).
    pub async fn settle_charged(
        &self,
        reservation_id: &str,
        actual_microcents: u64,
    ) -> Result<Settlement, GateError> {
        self.budgets
            .settle_charged(reservation_id, actual_microcents)
            .await
            .map_err(ledger_error)
    }

    /// Cancels a reservation.
    pub async fn release(&self, caller: &Caller, reservation_id: &str) -> Result<u64, GateError> {
        self.check_holder(caller, reservation_id).await?;
        self.budgets
            .release(reservation_id)
            .await
            .map_err(ledger_error)
    }

    /// Refreshes the budget gauges (before a scrape).
    pub async fn refresh_gauges(&self) {
        telemetry::set_state_writable(self.budgets.writable());
        let (Ok(totals), Ok(open)) = (
            self.budgets.tenant_totals().await,
            self.budgets.open_reservations().await,
        ) else {
            tracing::error!("reading the budgets for the gauges failed");
            return;
        };
        let mut per_tenant: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        let adapter_roots = self.adapter_roots.read().unwrap_or_else(|p| p.into_inner());
        let roots = self
            .tenant_names
            .iter()
            .map(|(root, name)| (root.to_string(), name.as_str()))
            .chain(adapter_roots.iter().map(|(r, n)| (r.clone(), n.as_str())));
        for (root, name) in roots {
            let t = totals.get(root.as_str()).copied().unwrap_or_default();
            let sum = per_tenant.entry(name).or_default();
            sum.0 += t.spent;
            sum.1 += t.remaining;
        }
        for (name, (spent, remaining)) in per_tenant {
            telemetry::set_budget_gauges(name, spent, remaining, open);
        }
    }

    /// Counts the budgets under `root` (an adapter's budget-key root, such
    /// as `talos:<issuer DID>`) in `tenant`'s gauges.
    pub fn add_budget_root(&self, root: String, tenant: String) {
        self.adapter_roots
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push((root, tenant));
    }
}

fn no_requests() -> GateError {
    GateError::InvalidParams("an authorization needs at least one capability request".into())
}

/// A DCT's authority: the token itself decides each request, against the
/// revocations and the clock of the moment the grant was made.
struct DctAuthority {
    verified: Arc<Verified>,
    revocations: Arc<Revocations>,
    now: Timestamp,
}

impl crate::protocol::Authority for DctAuthority {
    fn permits(
        &self,
        request: &CapabilityRequest,
        spent: u64,
    ) -> Result<Option<AuthorizedScope>, DenialReason> {
        self.verified
            .token
            .authorize(&self.revocations.read(), &self.now, spent, request)
            .map(Some)
    }
}

fn ledger_error(e: LedgerError) -> GateError {
    match e {
        LedgerError::UnknownReservation(id) => GateError::NotFound {
            kind: "reservation",
            id,
        },
        e @ LedgerError::ExceedsReservation { .. } => GateError::Conflict {
            kind: "settlement_exceeds_reservation",
            detail: e.to_string(),
        },
        e @ LedgerError::NotChargedOnExpiry(_) => GateError::Conflict {
            kind: "not_charged_on_expiry",
            detail: e.to_string(),
        },
        e @ LedgerError::Exceeded { .. } => GateError::Conflict {
            kind: "budget_exceeded",
            detail: e.to_string(),
        },
        e @ LedgerError::TooManyOpen { .. } => GateError::Conflict {
            kind: "too_many_reservations",
            detail: e.to_string(),
        },
        LedgerError::Storage(e) => GateError::Storage(e),
        LedgerError::Random(e) => GateError::Storage(StorageError::Backend(e.to_string())),
    }
}
