//! The one pipeline: a protocol's credential becomes a [`Grant`]; every
//! request canonical and permitted by its authority at the budget spent so
//! far; the cost reserved at every level of its chain. DCTs are the pivot's
//! own credential, verified here.

use std::sync::Arc;
use std::time::Instant;

use delegateos::{AuthorizedScope, CapabilityRequest, DenialReason, DenialType, Timestamp};

use super::{
    ledger_error, now, Authorization, Denial, GateError, Gatekeeper, Grant, Verified, DELEGATEOS,
};
use crate::budget::{BudgetKey, Hold, HolderDigest, LedgerError, Reservation};
use crate::protocol::{Call, Decision, Found};
use crate::revocations::Revocations;
use crate::stages;
use crate::state::StorageError;
use crate::telemetry;
use tracing::Instrument;

impl Gatekeeper {
    /// The grant of a DCT: its chain verified against a tenant root, not
    /// revoked, not expired (§10.1 steps 1–4, from the cache when these
    /// exact bytes were verified before). Each request is then checked
    /// against the token itself (capabilities, budget, revocation and
    /// expiry at that instant).
    pub fn dct_grant(&self, token: &str) -> Result<Grant, Denial> {
        let verified = self.verified(token).map_err(|r| denied(r, None))?;
        Ok(self.grant_of(verified))
    }

    /// The grant of a verified DCT (see [`Self::dct_grant`]).
    fn grant_of(&self, verified: Arc<Verified>) -> Grant {
        Grant {
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
            authority: Box::new(DctAuthority {
                verified,
                revocations: self.revocations.clone(),
                now: now().0,
            }),
            context: Box::new(()),
            within: None,
        }
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
        hold: impl Into<Hold>,
    ) -> Result<Decision<Authorization>, GateError> {
        let Some(first) = requests.first() else {
            return Err(no_requests());
        };
        if !self.revocations.is_current() {
            // A revocation recorded elsewhere may be missing here.
            return Err(GateError::Storage(StorageError::Unavailable(
                "the revocation feed is lost; every decision is refused until it is read again"
                    .into(),
            )));
        }
        if let Some((reason, request)) = first_non_canonical(requests) {
            let d = denied(reason, Some(request));
            self.publish_authorize(None, None, request, cost_microcents, Err(&d));
            return Ok(Decision::Denied(d));
        }
        let verify = crate::stage_span!("credential_verify");
        let (grant, holder) = match verify.in_scope(|| self.verified(token)) {
            Ok(v) => {
                // The digest the verification computed, not a second one.
                let holder = v.holder;
                let g = self.grant_of(v);
                g.record_in(&verify);
                stages::allowed(&verify);
                (g, holder)
            }
            Err(reason) => {
                let d = denied(reason, Some(first));
                d.record_in(&verify);
                self.publish_authorize(None, None, first, cost_microcents, Err(&d));
                return Ok(Decision::Denied(d));
            }
        };
        drop(verify);
        self.authorize_held(&grant, || holder, None, requests, cost_microcents, hold)
            .await
    }

    /// The one pipeline, after a protocol verified its credential (the bytes
    /// its holder `presented`) into a [`Grant`]: every request canonical and
    /// permitted by the grant at the budget spent so far, then `cost`
    /// reserved at every level of its chain, held as `hold` says. Every
    /// decision is published and counted under the grant's protocol.
    pub async fn authorize_grant(
        &self,
        grant: &Grant,
        presented: &str,
        requests: &[CapabilityRequest],
        cost_microcents: u64,
        hold: impl Into<Hold>,
    ) -> Result<Decision<Authorization>, GateError> {
        let holder = || HolderDigest::of(presented);
        self.authorize_held(grant, holder, None, requests, cost_microcents, hold.into())
            .await
    }

    /// [`Self::authorize_grant`], the holder's digest given by `holder`
    /// (asked only for a caller's reservation), its decision recorded on
    /// `tool` when the front named one.
    async fn authorize_held(
        &self,
        grant: &Grant,
        holder: impl FnOnce() -> HolderDigest,
        tool: Option<&str>,
        requests: &[CapabilityRequest],
        cost_microcents: u64,
        hold: impl Into<Hold>,
    ) -> Result<Decision<Authorization>, GateError> {
        let hold = hold.into();
        let started = Instant::now();
        let Some(first) = requests.first() else {
            return Err(no_requests());
        };
        let deny = |d: Denial| {
            telemetry::record_denial(d.protocol.name, d.kind.as_str());
            self.publish_authorize(
                Some(grant),
                tool,
                d.requested.as_deref().unwrap_or(first),
                cost_microcents,
                Err(&d),
            );
            Ok(Decision::Denied(d))
        };
        if let Some((reason, request)) = first_non_canonical(requests) {
            return deny(Denial::pipeline(grant.protocol, reason).for_request(request));
        }
        let leaf = grant
            .levels
            .last()
            .ok_or_else(|| GateError::InvalidParams("a grant has at least one level".into()))?;
        let matching = crate::stage_span!("capability_match");
        grant.record_in(&matching);
        // One read gives what was spent at the leaf and the limit its node
        // enforces: the smallest any token gave it (decision 27), which a
        // re-issued token's own budget does not raise.
        let node = self
            .budgets
            .report_levels(std::slice::from_ref(leaf))
            .instrument(matching.clone())
            .await
            .map_err(ledger_error)?;
        let (spent, enforced) = node.first().map_or((0, leaf.1), |l| {
            (l.spent_microcents, l.budget_microcents.min(leaf.1))
        });
        let requests = grant.requests.as_deref().unwrap_or(requests);
        let mut scope = grant.scope.clone();
        for request in requests {
            match matching.in_scope(|| grant.authority.permits(request, spent)) {
                Ok(s) => {
                    scope = scope.or(s);
                }
                Err(reason) => {
                    let d = Denial::pipeline(grant.protocol, reason).for_request(request);
                    d.record_in(&matching);
                    return deny(d);
                }
            }
        }
        // What the answer states is what will be enforced.
        if let Some(s) = scope.as_mut() {
            s.remaining_budget_microcents = s
                .remaining_budget_microcents
                .min(enforced.saturating_sub(spent));
        }
        stages::allowed(&matching);
        drop(matching);
        // A caller's reservation is the caller's to settle or release, so it
        // is bound to the credential that made it; the gateway's own (work it
        // forwards or brokers) has no holder but the gateway. A caller's
        // zero-cost request holds nothing: there is nothing to settle, and
        // it cannot fill the ledger with empty reservations.
        let reservation = if hold.by_caller && cost_microcents == 0 {
            None
        } else {
            // Digested only here: the digest of a kilobyte token is not free.
            let holder = hold.by_caller.then(holder);
            let reserving = crate::stage_span!("reserve");
            grant.record_in(&reserving);
            match self
                .reserve(
                    &grant.budget_levels(),
                    cost_microcents,
                    now().1,
                    hold,
                    holder,
                )
                .instrument(reserving.clone())
                .await?
            {
                Ok(r) => {
                    stages::allowed(&reserving);
                    Some(r)
                }
                Err(reason) => {
                    let d = Denial::pipeline(grant.protocol, reason).for_request(first);
                    d.record_in(&reserving);
                    return deny(d);
                }
            }
        };
        self.publish_authorize(
            Some(grant),
            tool,
            first,
            cost_microcents,
            Ok(reservation.as_ref()),
        );
        telemetry::record_authorize(started.elapsed());
        Ok(Decision::Allowed(Authorization {
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
    /// [`Grant::completed`] after the call.
    pub async fn authorize_with(
        &self,
        found: &Found,
        call: &Call<'_>,
        hold: impl Into<Hold>,
    ) -> Result<Decision<(Authorization, Grant)>, GateError> {
        let hold = hold.into();
        let Some(first) = call.requests.first() else {
            return Err(no_requests());
        };
        let protocol = &found.protocol;
        let refused = |d: Denial| {
            telemetry::record_denial(d.protocol.name, d.kind.as_str());
            self.publish_authorize(
                None,
                Some(call.tool),
                d.requested.as_deref().unwrap_or(first),
                call.cost_microcents,
                Err(&d),
            );
            d
        };
        if let Some((reason, request)) = first_non_canonical(call.requests) {
            let d = refused(Denial::pipeline(protocol.id(), reason).for_request(request));
            found.credential.denied(call, &d).await;
            return Ok(Decision::Denied(d));
        }
        let verify = crate::stage_span!("credential_verify");
        verify.record("dgw.protocol", protocol.id().name);
        let grant = match found
            .credential
            .grant(call)
            .instrument(verify.clone())
            .await?
        {
            Decision::Allowed(g) => {
                g.record_in(&verify);
                stages::allowed(&verify);
                g
            }
            Decision::Denied(d) => {
                d.record_in(&verify);
                return Ok(Decision::Denied(refused(d.for_request(first))));
            }
        };
        drop(verify);
        let holder = || HolderDigest::of(found.credential.presented());
        match self
            .authorize_held(
                &grant,
                holder,
                Some(call.tool),
                call.requests,
                call.cost_microcents,
                hold,
            )
            .await?
        {
            Decision::Allowed(a) => {
                grant.allowed(call).await;
                Ok(Decision::Allowed((a, grant)))
            }
            Decision::Denied(d) => {
                grant.denied(call, &d).await;
                Ok(Decision::Denied(d))
            }
        }
    }

    /// Counts a refusal a front made for a protocol before
    /// any credential was checked (an unknown tool, for a protocol that
    /// audits its refusals).
    pub fn record_refusal(&self, denial: &Denial) {
        telemetry::record_denial(denial.protocol.name, denial.kind.as_str());
    }

    /// Reserves `cost` at every level; a budget that does not fit is a
    /// `budget_exceeded` denial naming the level.
    pub(super) async fn reserve(
        &self,
        levels: &[(BudgetKey, u64)],
        cost_microcents: u64,
        now_ms: u64,
        hold: Hold,
        holder: Option<HolderDigest>,
    ) -> Result<Result<Reservation, DenialReason>, GateError> {
        let reserved = match hold.until_ms {
            None => {
                self.budgets
                    .reserve(levels, cost_microcents, now_ms, hold.on_expiry, holder)
                    .await
            }
            Some(until) => {
                self.budgets
                    .reserve_until(levels, cost_microcents, until, hold.on_expiry, holder)
                    .await
            }
        };
        match reserved {
            Ok(r) => Ok(Ok(r)),
            Err(e @ (LedgerError::Exceeded { .. } | LedgerError::TooManyOpen { .. })) => Ok(Err(
                DenialReason::new(DenialType::BudgetExceeded, e.to_string()),
            )),
            Err(e) => Err(ledger_error(e)),
        }
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
}

/// A DelegateOS denial, counted.
pub(super) fn denied(reason: DenialReason, requested: Option<&CapabilityRequest>) -> Denial {
    telemetry::record_denial(DELEGATEOS.name, reason.kind.as_str());
    let d = Denial::pipeline(DELEGATEOS, reason);
    match requested {
        Some(r) => d.for_request(r),
        None => d,
    }
}

/// The first request that is not canonical, with why.
pub(super) fn first_non_canonical(
    requests: &[CapabilityRequest],
) -> Option<(DenialReason, &CapabilityRequest)> {
    requests
        .iter()
        .find_map(|r| r.check_canonical().err().map(|e| (e, r)))
}

pub(super) fn no_requests() -> GateError {
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
