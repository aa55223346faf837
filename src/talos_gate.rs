//! Talos through the central pipeline: the adapter verifies the capability
//! the Talos way (§4.2 steps 1–6), the replay store checks the correlation
//! ID (step 7), then the capability, translated to DelegateOS terms, goes
//! through the same [`Gatekeeper`] as a DCT (capability match, budget
//! reservation, decisions, metrics). Every grant, denial and invocation is
//! a signed audit event.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use talos::audit::{AuditEvent, EventType, ResultCode};
use talos::capability::Capability;
use talos::envelope::Envelope;
use talos::keys::Issuers;
use talos::replay::ReplayCache;
use talos::revocation::TalosRevocation;
use talos::{Context, Denied, TalosDenial, TalosRequest};
use time::OffsetDateTime;

use crate::audit::AuditLog;
use crate::budget::{BudgetKey, OnExpiry, Reservation};
use crate::caller::Caller;
use crate::config::TalosIssuer;
use crate::gatekeeper::{GateError, Gatekeeper, Grant};
use crate::state::ReplayStore;
use crate::telemetry;

/// A refused Talos call: the Talos reason (or the pipeline's denial type,
/// for a budget or capability the translated scope does not cover).
#[derive(Debug, Clone)]
pub struct Refusal {
    pub reason: String,
    pub detail: String,
}

/// An allowed Talos call, for settling and auditing after it ran.
#[derive(Debug, Clone)]
pub struct Allowed {
    pub reservation: Reservation,
    pub capability_hash: String,
    pub agent_id: String,
    pub tool: String,
    pub request_hash: String,
}

/// A refusal's reason, detail and capability (once read).
type Rejected = (String, String, Option<Capability>);

/// What a tool call asks, in Talos terms.
pub struct Call<'a> {
    pub envelope: Envelope,
    /// The tool as the client names it.
    pub tool: &'a str,
    /// The tool rule's action.
    pub method: &'a str,
    pub resources: Vec<String>,
    pub cost_microcents: u64,
    /// The MCP session, when the envelope names none.
    pub mcp_session: &'a str,
    pub request_hash: String,
}

/// The gateway's Talos side.
pub struct TalosGate {
    gate: Arc<Gatekeeper>,
    issuers: Issuers,
    settings: HashMap<String, TalosIssuer>,
    /// Correlation IDs seen lately, per session (the adapter's LRU): a
    /// replay is refused without a trip to the store.
    seen: Mutex<ReplayCache>,
    /// Correlation IDs seen, durably, until their capability expires.
    replay: Arc<dyn ReplayStore>,
    audit: AuditLog,
}

/// The revocation kind of Talos capability IDs and hashes (named as the
/// tree that held them before the state seam).
pub const REVOCATIONS: &str = "talos_revocations";
/// The replay namespace of correlation IDs, keyed `session \0 correlation ID`.
const REPLAY: &str = "replay";

/// The budget-key root of an issuer's capabilities.
fn budget_root(issuer: &str) -> String {
    format!("talos:{issuer}")
}

fn now_secs() -> i64 {
    OffsetDateTime::now_utc().unix_timestamp()
}

fn timestamp() -> String {
    OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

impl TalosGate {
    pub fn new(
        gate: Arc<Gatekeeper>,
        issuers: &[TalosIssuer],
        replay: Arc<dyn ReplayStore>,
        audit: AuditLog,
    ) -> Self {
        let mut keys = Issuers::new();
        for i in issuers {
            keys.insert(&i.did, i.key);
            gate.add_budget_root(budget_root(&i.did), i.tenant.clone());
        }
        Self {
            gate,
            issuers: keys,
            settings: issuers.iter().map(|i| (i.did.clone(), i.clone())).collect(),
            seen: Mutex::new(ReplayCache::new()),
            replay,
            audit,
        }
    }

    /// Records a correlation ID until `valid_until`; false if seen before
    /// (lately in memory, or in the store and still valid).
    async fn fresh(
        &self,
        session: &str,
        correlation_id: &str,
        now: i64,
        valid_until: i64,
    ) -> Result<bool, crate::state::StorageError> {
        let fresh_in_memory = self
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .record(session, correlation_id);
        if !fresh_in_memory {
            return Ok(false);
        }
        let mut key = session.as_bytes().to_vec();
        key.push(0);
        key.extend_from_slice(correlation_id.as_bytes());
        self.replay.insert_new(REPLAY, &key, now, valid_until).await
    }

    /// The audit log.
    pub fn audit(&self) -> &AuditLog {
        &self.audit
    }

    async fn refuse(
        &self,
        call: &Call<'_>,
        cap: Option<&Capability>,
        reason: &str,
        detail: String,
    ) -> Refusal {
        self.deny(call.tool, &call.request_hash, cap, reason, detail)
            .await
    }

    /// A Talos request refused before its capability was read (a malformed
    /// envelope, an unknown tool): counted and audited like any denial.
    pub async fn refuse_early(
        &self,
        tool: &str,
        request_hash: &str,
        reason: &str,
        detail: String,
    ) -> Refusal {
        self.deny(tool, request_hash, None, reason, detail).await
    }

    async fn deny(
        &self,
        tool: &str,
        request_hash: &str,
        cap: Option<&Capability>,
        reason: &str,
        detail: String,
    ) -> Refusal {
        telemetry::record_denial("talos", reason);
        self.log(AuditEvent {
            event_type: EventType::Deny,
            tool: tool.to_owned(),
            capability_hash: cap.map(|c| c.capability_hash()).unwrap_or_default(),
            request_hash: request_hash.to_owned(),
            response_hash: None,
            agent_id: cap.map(|c| c.subject.clone()).unwrap_or_default(),
            tool_id: format!("did:talos:tool:{tool}"),
            timestamp: timestamp(),
            result_code: ResultCode::Denied,
            denial_reason: Some(reason.to_owned()),
            signature: String::new(),
        })
        .await;
        Refusal {
            reason: reason.to_owned(),
            detail,
        }
    }

    async fn log(&self, event: AuditEvent) {
        if let Err(e) = self.audit.record(event).await {
            tracing::error!(error = %e, "writing an audit event failed");
        }
    }

    /// §4.2, then the pipeline; the reservation is charged on expiry (the
    /// gateway forwards the call itself).
    pub async fn authorize(&self, call: Call<'_>) -> Result<Result<Allowed, Refusal>, GateError> {
        match self.decide(&call).await? {
            Ok(allowed) => Ok(Ok(allowed)),
            Err((reason, detail, cap)) => {
                Ok(Err(self.refuse(&call, cap.as_ref(), &reason, detail).await))
            }
        }
    }

    /// The decision: allowed, or the reason, detail and capability (once
    /// read) of a refusal.
    async fn decide(&self, call: &Call<'_>) -> Result<Result<Allowed, Rejected>, GateError> {
        let denied = |d: Denied, cap: Option<&Capability>| {
            Ok(Err((d.reason.as_str().to_owned(), d.detail, cap.cloned())))
        };
        let Some(raw) = &call.envelope.capability else {
            return denied(
                Denied::new(
                    TalosDenial::NoCapability,
                    "the request carries no _talos_capability",
                ),
                None,
            );
        };
        let cap = match Capability::from_value(raw) {
            Ok(c) => c,
            Err(d) => return denied(d, None),
        };
        let now = now_secs();
        let request = TalosRequest {
            tool: call.tool.to_owned(),
            method: call.method.to_owned(),
            resources: call.resources.clone(),
        };
        // The context holds borrowed closures (not Send): done before any await.
        let checked = {
            let revocations = self.gate.revocations();
            let revoked = |name: &str| revocations.contains_name(REVOCATIONS, name);
            let ctx = Context {
                issuers: &self.issuers,
                now,
                revoked: &revoked,
                known_tool: &|_| true,
            };
            talos::authorize(&cap, &request, &ctx)
        };
        let authorized = match checked {
            Ok(a) => a,
            Err(d) => return denied(d, Some(&cap)),
        };
        let session = call
            .envelope
            .session_id
            .clone()
            .unwrap_or_else(|| format!("mcp:{}", call.mcp_session));
        let fresh = self
            .fresh(
                &session,
                &call.envelope.correlation_id,
                now,
                authorized.expires_at + talos::SKEW_SECS,
            )
            .await?;
        if !fresh {
            return denied(
                Denied::new(
                    TalosDenial::Replay,
                    format!(
                        "correlation ID {:?} was already used in this session",
                        call.envelope.correlation_id
                    ),
                ),
                Some(&cap),
            );
        }
        let Some(settings) = self.settings.get(&authorized.root_issuer) else {
            return denied(
                Denied::new(
                    TalosDenial::SignatureInvalid,
                    "the root issuer is not configured",
                ),
                Some(&cap),
            );
        };
        let names: Vec<String> = cap
            .chain
            .iter()
            .chain(std::iter::once(&cap))
            .map(Capability::content_hash)
            .collect();
        let grant = Grant {
            protocol: "talos",
            tenant: settings.tenant.clone(),
            levels: BudgetKey::for_path(
                &budget_root(&authorized.root_issuer),
                &names,
                settings.budget_microcents,
            ),
            capabilities: talos::translate::capabilities(&authorized.scope),
        };
        let requests = talos::translate::requests(&request);
        match self
            .gate
            .authorize_grant(&grant, &requests, call.cost_microcents, OnExpiry::Charge)
            .await?
        {
            Ok(reservation) => {
                let allowed = Allowed {
                    reservation,
                    capability_hash: cap.capability_hash(),
                    agent_id: cap.subject.clone(),
                    tool: call.tool.to_owned(),
                    request_hash: call.request_hash.clone(),
                };
                self.log(AuditEvent {
                    event_type: EventType::Grant,
                    tool: allowed.tool.clone(),
                    capability_hash: allowed.capability_hash.clone(),
                    request_hash: allowed.request_hash.clone(),
                    response_hash: None,
                    agent_id: allowed.agent_id.clone(),
                    tool_id: format!("did:talos:tool:{}", allowed.tool),
                    timestamp: timestamp(),
                    result_code: ResultCode::Ok,
                    denial_reason: None,
                    signature: String::new(),
                })
                .await;
                Ok(Ok(allowed))
            }
            Err(d) => Ok(Err((
                d.reason.kind.as_str().to_owned(),
                d.reason.detail,
                Some(cap),
            ))),
        }
    }

    /// The call ran (or failed at the upstream): an INVOKE event with the
    /// response's hash.
    pub async fn invoked(&self, allowed: &Allowed, response_hash: String, ok: bool) {
        self.log(AuditEvent {
            event_type: EventType::Invoke,
            tool: allowed.tool.clone(),
            capability_hash: allowed.capability_hash.clone(),
            request_hash: allowed.request_hash.clone(),
            response_hash: Some(response_hash),
            agent_id: allowed.agent_id.clone(),
            tool_id: format!("did:talos:tool:{}", allowed.tool),
            timestamp: timestamp(),
            result_code: if ok {
                ResultCode::Ok
            } else {
                ResultCode::Error
            },
            denial_reason: None,
            signature: String::new(),
        })
        .await;
    }

    /// Verifies a revocation against the trusted issuers and records it in
    /// the gateway's revocation store; a REVOKE event.
    pub async fn revoke(&self, revocation: TalosRevocation) -> Result<bool, GateError> {
        revocation
            .verify(&self.issuers)
            .map_err(|d| GateError::Rejected {
                kind: d.reason.as_str().to_owned(),
                detail: d.detail,
            })?;
        let name = revocation.revoke.clone();
        let issuer = revocation.issuer.clone();
        let newly = self
            .gate
            .revocations()
            .add_name(REVOCATIONS, &name, record_value(&revocation)?)
            .await
            .map_err(|e| GateError::Rejected {
                kind: "revocation_failed".into(),
                detail: e.to_string(),
            })?;
        self.revoked(name, issuer).await;
        Ok(newly)
    }

    /// Counts and audits a recorded revocation of `name` by `by`.
    async fn revoked(&self, name: String, by: String) {
        telemetry::record_revocation();
        self.log(AuditEvent {
            event_type: EventType::Revoke,
            tool: String::new(),
            capability_hash: name,
            request_hash: String::new(),
            response_hash: None,
            agent_id: by,
            tool_id: String::new(),
            timestamp: timestamp(),
            result_code: ResultCode::Ok,
            denial_reason: None,
            signature: String::new(),
        })
        .await;
    }

    /// An administrator revokes the capability `name` (an id or hash)
    /// without an issuer's signature; recorded with issuer `admin:<who>`.
    pub async fn revoke_by_admin(&self, caller: &Caller, name: &str) -> Result<bool, GateError> {
        if !caller.is_authenticated_admin() {
            return Err(GateError::Forbidden {
                kind: "admin_required",
                detail:
                    "revoking without an issuer's signature needs an admin token or certificate"
                        .into(),
            });
        }
        if !talos::revocation::is_revocable_name(name) {
            return Err(GateError::InvalidParams(
                "revoke must be a capability id (cap_…) or a 64-hex hash".into(),
            ));
        }
        let by = format!("admin:{}", caller.admin_name().unwrap_or_default());
        let record = TalosRevocation {
            revoke: name.to_owned(),
            issuer: by.clone(),
            revoked_at: now_secs(),
            signature: String::new(),
        };
        let newly = self
            .gate
            .revocations()
            .add_name(REVOCATIONS, name, record_value(&record)?)
            .await
            .map_err(|e| GateError::Rejected {
                kind: "revocation_failed".into(),
                detail: e.to_string(),
            })?;
        self.revoked(name.to_owned(), by).await;
        Ok(newly)
    }

    /// Drops stored correlation IDs whose capabilities have expired.
    pub async fn sweep(&self) {
        if let Err(e) = self.replay.sweep(now_secs()).await {
            tracing::error!(error = %e, "sweeping the replay store failed");
        }
    }
}

/// A Talos revocation as the revocation store keeps it.
fn record_value(r: &TalosRevocation) -> Result<serde_json::Value, GateError> {
    serde_json::to_value(r)
        .map_err(|e| GateError::Storage(crate::state::StorageError::Backend(e.to_string())))
}
