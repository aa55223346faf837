//! Talos on the protocol seam: the envelope beside `method` (or in
//! `params`) is the credential; the adapter verifies the capability the
//! Talos way (§4.2 steps 1–6), the replay store checks the correlation ID
//! (step 7), and the capability, translated to DelegateOS terms, becomes a
//! [`Grant`] for the one pipeline. Every grant, denial and invocation is a
//! signed audit event; `talos/revoke` records revocations.

pub mod module;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use talos::audit::{AuditEvent, EventType, ResultCode};
use talos::capability::Capability;
use talos::envelope::Envelope;
use talos::keys::Issuers;
use talos::replay::ReplayCache;
use talos::revocation::TalosRevocation;
use talos::{Context, Denied, TalosDenial, TalosRequest};
use time::OffsetDateTime;

use dgw_core::budget::BudgetKey;
use dgw_core::caller::Caller;
use dgw_core::gatekeeper::GateError;
use dgw_core::protocol::capabilities::Capabilities;
use dgw_core::protocol::{
    admitting, Admits, Call, Completed, Credentials, Decision, Denial, EarlyRefusal, Grant, Hosts,
    MethodResult, Presented, Protocol, ProtocolId, ProtocolInfo,
};
use dgw_core::revocations::Revocations;
use dgw_core::state::{AuditSink, ReplayStore, StorageError};
use dgw_core::telemetry;

/// Its name.
pub const ID: ProtocolId = ProtocolId::new(&ProtocolInfo {
    name: "talos",
    title: "Talos",
    denial_message: None,
});

/// The revocation kind of Talos capability IDs and hashes (named as the
/// tree that held them before the state seam).
pub const REVOCATIONS: &str = "talos_revocations";
/// The replay namespace of correlation IDs, keyed `session \0 correlation ID`.
const REPLAY: &str = "replay";

/// A trusted Talos issuer (`[[talos.issuers]]`): its DID and key, the
/// tenant its capabilities belong to, and the budget each gets.
#[derive(Debug, Clone)]
pub struct TalosIssuer {
    pub did: String,
    pub key: ed25519_dalek::VerifyingKey,
    pub tenant: String,
    pub budget_microcents: u64,
}

/// The `[talos]` config section as written.
#[derive(Deserialize, schemars::JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct TalosSection {
    #[serde(default)]
    issuers: Vec<RawIssuer>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawIssuer {
    did: String,
    key: String,
    tenant: String,
    budget_microcents: u64,
}

impl TalosSection {
    /// The trusted issuers, validated; an error names the key and the problem.
    pub fn issuers(self) -> Result<Vec<TalosIssuer>, (String, String)> {
        let mut out: Vec<TalosIssuer> = Vec::new();
        for (i, t) in self.issuers.into_iter().enumerate() {
            let key = |field: &str| format!("talos.issuers[{i}].{field}");
            if !t.did.starts_with("did:") || t.did.len() > 512 {
                return Err((key("did"), format!("{:?} is not a DID", t.did)));
            }
            if out.iter().any(|x| x.did == t.did) {
                return Err((key("did"), format!("{:?} is listed twice", t.did)));
            }
            let public = talos::keys::parse_public_key(&t.key).ok_or_else(|| {
                (
                    key("key"),
                    "must be an Ed25519 public key: 64 hex digits or 43 base64url characters"
                        .to_owned(),
                )
            })?;
            if t.tenant.is_empty() {
                return Err((key("tenant"), "must name a tenant".into()));
            }
            out.push(TalosIssuer {
                did: t.did,
                key: public,
                tenant: t.tenant,
                budget_microcents: t.budget_microcents,
            });
        }
        Ok(out)
    }
}

/// A request's envelope, with the hash of the request without it (§3):
/// Talos's credential.
pub struct Enveloped {
    envelope: Envelope,
    request_hash: String,
}

/// What a grant remembers for the audit events after it.
pub struct Granted {
    capability_hash: String,
    agent_id: String,
    request_hash: String,
}

/// The trusted issuers: their keys for the adapter, their settings by DID.
struct Trust {
    issuers: Issuers,
    settings: HashMap<String, TalosIssuer>,
}

impl Trust {
    fn new(issuers: &[TalosIssuer]) -> Self {
        let mut keys = Issuers::new();
        for i in issuers {
            keys.insert(&i.did, i.key);
        }
        Self {
            issuers: keys,
            settings: issuers.iter().map(|i| (i.did.clone(), i.clone())).collect(),
        }
    }
}

/// The Talos protocol.
pub struct Talos {
    /// Replaced whole on reload.
    trust: arc_swap::ArcSwap<Trust>,
    revocations: Arc<Revocations>,
    /// Correlation IDs seen lately, per session (the adapter's LRU): a
    /// replay is refused without a trip to the store.
    seen: Mutex<ReplayCache>,
    /// Correlation IDs seen, durably, until their capability expires.
    replay: Arc<dyn ReplayStore>,
    /// Where the signed events go, and the gateway key that signs them.
    audit: Arc<dyn AuditSink>,
    key: Arc<delegateos::Keypair>,
}

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

fn denial(d: Denied) -> Denial {
    Denial::protocol(ID, d.reason.as_str(), d.detail)
}

/// `talos/revoke` params: an issuer-signed `revocation`, or (from an
/// administrator) only the capability to `revoke`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RevokeParams {
    #[serde(default)]
    revocation: Option<TalosRevocation>,
    #[serde(default)]
    revoke: Option<String>,
}

impl Talos {
    /// The trusted issuers as the console shows them: DID, then tenant and
    /// budget in microcents.
    pub fn issuer_rows(&self) -> Vec<(String, String)> {
        let trust = self.trust.load();
        let mut rows: Vec<(String, String)> = trust
            .settings
            .values()
            .map(|i| {
                (
                    format!("issuer {}", i.did),
                    format!(
                        "tenant {}, budget {} microcents",
                        i.tenant, i.budget_microcents
                    ),
                )
            })
            .collect();
        rows.sort();
        if rows.is_empty() {
            rows.push(("issuers".to_owned(), "none trusted".to_owned()));
        }
        rows
    }

    /// The protocol over the trusted issuers; loads its revocations.
    pub async fn new(
        issuers: &[TalosIssuer],
        revocations: Arc<Revocations>,
        replay: Arc<dyn ReplayStore>,
        audit: Arc<dyn AuditSink>,
        key: Arc<delegateos::Keypair>,
    ) -> Result<Self, StorageError> {
        revocations.track(REVOCATIONS).await?;
        Ok(Self {
            trust: arc_swap::ArcSwap::from_pointee(Trust::new(issuers)),
            revocations,
            seen: Mutex::new(ReplayCache::new()),
            replay,
            audit,
            key,
        })
    }

    /// Trusts exactly these issuers from now on (reload).
    pub fn set_issuers(&self, issuers: &[TalosIssuer]) {
        self.trust.store(Arc::new(Trust::new(issuers)));
    }

    /// Records a correlation ID until `valid_until`; false if seen before
    /// (lately in memory, or in the store and still valid).
    async fn fresh(
        &self,
        session: &str,
        correlation_id: &str,
        now: i64,
        valid_until: i64,
    ) -> Result<bool, StorageError> {
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

    /// Audits a denial.
    async fn audit_denial(
        &self,
        tool: &str,
        request_hash: &str,
        cap: Option<(&str, &str)>,
        reason: &str,
    ) {
        self.log(AuditEvent {
            event_type: EventType::Deny,
            tool: tool.to_owned(),
            capability_hash: cap.map(|c| c.0.to_owned()).unwrap_or_default(),
            request_hash: request_hash.to_owned(),
            response_hash: None,
            agent_id: cap.map(|c| c.1.to_owned()).unwrap_or_default(),
            tool_id: format!("did:talos:tool:{tool}"),
            timestamp: timestamp(),
            result_code: ResultCode::Denied,
            denial_reason: Some(reason.to_owned()),
            signature: String::new(),
        })
        .await;
    }

    async fn log(&self, event: AuditEvent) {
        // Signed with the gateway's key (§5), appended, and logged (target
        // `dgw::audit`, one JSON line each).
        let event = event.sign(&self.key);
        let value = match serde_json::to_value(&event) {
            Ok(v) => v,
            Err(e) => return tracing::error!(error = %e, "encoding an audit event failed"),
        };
        tracing::info!(target: "dgw::audit", event = %value, "audit");
        if let Err(e) = self.audit.append(&value).await {
            tracing::error!(error = %e, "writing an audit event failed");
        }
    }

    /// §4.2 and the replay check: the grant, or the Talos denial.
    async fn check(
        &self,
        presented: &Enveloped,
        call: &Call<'_>,
    ) -> Result<Result<(Grant<Granted>, Capability), (Denied, Option<Capability>)>, GateError> {
        let Some(raw) = &presented.envelope.capability else {
            return Ok(Err((
                Denied::new(
                    TalosDenial::NoCapability,
                    "the request carries no _talos_capability",
                ),
                None,
            )));
        };
        let cap = match Capability::from_value(raw) {
            Ok(c) => c,
            Err(d) => return Ok(Err((d, None))),
        };
        let now = now_secs();
        let request = TalosRequest {
            tool: call.tool.to_owned(),
            method: call.action.to_owned(),
            resources: call.requests.iter().map(|r| r.resource.clone()).collect(),
        };
        // The context holds borrowed closures (not Send): done before any await.
        let trust = self.trust.load_full();
        let checked = {
            let revoked = |name: &str| self.revocations.contains_name(REVOCATIONS, name);
            let ctx = Context {
                issuers: &trust.issuers,
                now,
                revoked: &revoked,
                known_tool: &|_| true,
            };
            talos::authorize(&cap, &request, &ctx)
        };
        let authorized = match checked {
            Ok(a) => a,
            Err(d) => return Ok(Err((d, Some(cap)))),
        };
        let session = presented
            .envelope
            .session_id
            .clone()
            .unwrap_or_else(|| format!("mcp:{}", call.session));
        let correlation_id = &presented.envelope.correlation_id;
        let valid_until = authorized.expires_at + talos::SKEW_SECS;
        if !self
            .fresh(&session, correlation_id, now, valid_until)
            .await?
        {
            let d = Denied::new(
                TalosDenial::Replay,
                format!("correlation ID {correlation_id:?} was already used in this session"),
            );
            return Ok(Err((d, Some(cap))));
        }
        let Some(settings) = trust.settings.get(&authorized.root_issuer) else {
            let d = Denied::new(
                TalosDenial::SignatureInvalid,
                "the root issuer is not configured",
            );
            return Ok(Err((d, Some(cap))));
        };
        let names: Vec<String> = cap
            .chain
            .iter()
            .chain(std::iter::once(&cap))
            .map(Capability::content_hash)
            .collect();
        let grant = Grant {
            protocol: ID,
            tenant: settings.tenant.clone(),
            levels: BudgetKey::for_path(
                &budget_root(&authorized.root_issuer),
                &names,
                settings.budget_microcents,
            ),
            chain: Vec::new(),
            authority: Box::new(Capabilities(talos::translate::capabilities(
                &authorized.scope,
            ))),
            requests: Some(talos::translate::requests(&request)),
            scope: None,
            within: None,
            context: Granted {
                capability_hash: cap.capability_hash(),
                agent_id: cap.subject.clone(),
                request_hash: presented.request_hash.clone(),
            },
        };
        Ok(Ok((grant, cap)))
    }

    /// Verifies a revocation against the trusted issuers and records it; a
    /// REVOKE event.
    async fn revoke(&self, revocation: TalosRevocation) -> Result<bool, GateError> {
        revocation
            .verify(&self.trust.load().issuers)
            .map_err(|d| GateError::Rejected {
                kind: d.reason.as_str().to_owned(),
                detail: d.detail,
            })?;
        let name = revocation.revoke.clone();
        let issuer = revocation.issuer.clone();
        let newly = self.record(&name, &revocation).await?;
        self.revoked(name, issuer).await;
        Ok(newly)
    }

    async fn record(&self, name: &str, r: &TalosRevocation) -> Result<bool, GateError> {
        let value = serde_json::to_value(r).map_err(|e| StorageError::Backend(e.to_string()))?;
        self.revocations
            .add_name(REVOCATIONS, name, value)
            .await
            .map_err(|e| GateError::Rejected {
                kind: "revocation_failed".into(),
                detail: e.to_string(),
            })
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
    async fn revoke_by_admin(&self, caller: &Caller, name: &str) -> Result<bool, GateError> {
        if !caller.is_authenticated_admin() {
            return Err(GateError::Forbidden {
                kind: dgw_core::gatekeeper::Forbidden::AdminRequired,
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
        let newly = self.record(name, &record).await?;
        self.revoked(name.to_owned(), by).await;
        Ok(newly)
    }
}

#[async_trait]
impl Credentials for Talos {
    type Credential = Enveloped;
    type Granted = Granted;

    fn envelope_prefix(&self) -> Option<&'static str> {
        Some(talos::envelope::PREFIX)
    }

    async fn take_from_request(
        &self,
        request: &mut Map<String, Value>,
    ) -> Result<Option<Presented<Enveloped>>, Denial> {
        match talos::envelope::take(request) {
            Ok(None) => Ok(None),
            Ok(Some(envelope)) => {
                // The request hash is of the request without the envelope (§3).
                let request_hash = talos::envelope::request_hash(request);
                let presented = envelope
                    .capability
                    .as_ref()
                    .map(Value::to_string)
                    .unwrap_or_default();
                Ok(Some(Presented::new(
                    presented,
                    Enveloped {
                        envelope,
                        request_hash,
                    },
                )))
            }
            Err(d) => {
                let tool = request
                    .get("params")
                    .and_then(|p| p.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                self.audit_denial(&tool, "", None, d.reason.as_str()).await;
                Err(denial(d))
            }
        }
    }

    async fn grant(
        &self,
        presented: &Enveloped,
        _: &str,
        call: &Call<'_>,
    ) -> Result<Decision<Grant<Granted>>, GateError> {
        match self.check(presented, call).await? {
            Ok((grant, _)) => Ok(Decision::Allowed(grant)),
            Err((d, cap)) => {
                let ids = cap
                    .as_ref()
                    .map(|c| (c.capability_hash(), c.subject.clone()));
                self.audit_denial(
                    call.tool,
                    &presented.request_hash,
                    ids.as_ref().map(|(h, s)| (h.as_str(), s.as_str())),
                    d.reason.as_str(),
                )
                .await;
                Ok(Decision::Denied(denial(d)))
            }
        }
    }

    async fn refused_early(
        &self,
        presented: &Enveloped,
        call: &Call<'_>,
        _why: EarlyRefusal,
        detail: &str,
    ) -> Option<Denial> {
        // Talos names an unknown or unmapped tool UNKNOWN_TOOL (§4.2 step 6).
        self.audit_denial(call.tool, &presented.request_hash, None, "UNKNOWN_TOOL")
            .await;
        Some(Denial::protocol(ID, "UNKNOWN_TOOL", detail))
    }

    async fn denied(
        &self,
        g: Option<&Granted>,
        presented: &Enveloped,
        call: &Call<'_>,
        d: &Denial,
    ) {
        self.audit_denial(
            call.tool,
            &presented.request_hash,
            g.map(|g| (g.capability_hash.as_str(), g.agent_id.as_str())),
            d.kind.as_str(),
        )
        .await;
    }

    async fn allowed(&self, g: &Granted, call: &Call<'_>) {
        self.log(AuditEvent {
            event_type: EventType::Grant,
            tool: call.tool.to_owned(),
            capability_hash: g.capability_hash.clone(),
            request_hash: g.request_hash.clone(),
            response_hash: None,
            agent_id: g.agent_id.clone(),
            tool_id: format!("did:talos:tool:{}", call.tool),
            timestamp: timestamp(),
            result_code: ResultCode::Ok,
            denial_reason: None,
            signature: String::new(),
        })
        .await;
    }

    async fn completed(&self, g: &Granted, call: &Call<'_>, how: Completed<'_>) {
        let (response_hash, ok) = match how {
            Completed::Answered { response, ok } => (talos::canonical::sha256_hex(response), ok),
            Completed::Failed => (String::new(), false),
        };
        self.log(AuditEvent {
            event_type: EventType::Invoke,
            tool: call.tool.to_owned(),
            capability_hash: g.capability_hash.clone(),
            request_hash: g.request_hash.clone(),
            response_hash: Some(response_hash),
            agent_id: g.agent_id.clone(),
            tool_id: format!("did:talos:tool:{}", call.tool),
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
}

#[async_trait]
impl Protocol for Talos {
    fn id(&self) -> ProtocolId {
        ID
    }

    fn admits(self: Arc<Self>) -> Option<Arc<dyn Admits>> {
        Some(admitting(self))
    }

    fn budget_roots(&self) -> Vec<(String, String)> {
        self.trust
            .load()
            .settings
            .values()
            .map(|i| (budget_root(&i.did), i.tenant.clone()))
            .collect()
    }

    async fn sweep(&self) {
        if let Err(e) = self.replay.sweep(now_secs()).await {
            tracing::error!(error = %e, "sweeping the replay store failed");
        }
    }

    fn hosts(self: Arc<Self>) -> Option<Arc<dyn Hosts>> {
        Some(self)
    }
}

#[async_trait]
impl Hosts for Talos {
    fn methods(&self) -> &'static [&'static str] {
        &["talos/revoke"]
    }

    async fn call_method(&self, caller: &Caller, method: &str, params: Value) -> MethodResult {
        if method != "talos/revoke" {
            return Err(GateError::InvalidParams(format!("{method} is not served")));
        }
        let p: RevokeParams = serde_json::from_value(params)
            .map_err(|e| GateError::InvalidParams(format!("invalid params: {e}")))?;
        let (name, newly) = match (p.revocation, p.revoke) {
            (Some(revocation), None) => {
                let name = revocation.revoke.clone();
                (name, self.revoke(revocation).await?)
            }
            (None, Some(name)) => {
                let newly = self.revoke_by_admin(caller, &name).await?;
                (name, newly)
            }
            _ => {
                return Err(GateError::InvalidParams(
                    "give either `revocation` (issuer-signed) or `revoke` (admins only)".into(),
                ))
            }
        };
        Ok(json!({"revoked": name, "newlyRecorded": newly}))
    }
}
