//! Motebit in the gateway. A Motebit caller authenticates with a signed
//! bearer token (`Authorization: Bearer motebit:<token>`) and is authorized
//! by a delegation chain rooted at a configured delegator (in the request's
//! `_meta["motebit/delegation"]`, or the session's): the chain, the bearer
//! token, revocations, pinned keys and the token's `jti` are checked here,
//! and the chain's scope becomes capabilities for the one pipeline, which
//! matches and reserves like any other protocol's. Receipts an upstream
//! Motebit service returns are verified before they are passed on
//! ([`receipts`]). `motebit/verify`, `motebit/verdict`, `motebit/pin`,
//! `motebit/unpin` and `motebit/revoke` serve JSON-RPC (and gRPC's
//! `CallProtocol`). Pure logic is in `adapters/motebit`; the choices where
//! the texts are silent are in `docs/adapters/motebit.md`.

pub(crate) mod cli;
mod config;
pub mod inspect;
mod methods;
pub mod module;
pub mod pins;
mod receipts;
mod trust;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use delegateos::Keypair;
use motebit::bearer::SignedToken;
use motebit::token::{self, DelegationToken, StandingDelegation};
use motebit::{Failure, Reason};
use serde_json::{json, Map, Value};

use dgw_core::budget::BudgetKey;
use dgw_core::caller::Caller;
use dgw_core::gatekeeper::GateError;
use dgw_core::protocol::capabilities::Capabilities;
use dgw_core::protocol::Review;
use dgw_core::protocol::{
    admitting, Admits, Call, Completed, Credentials, Decision, Denial, Grant, Hosts, MethodResult,
    Presented, Protocol, ProtocolId, ProtocolInfo, Translates,
};
use dgw_core::revocations::Revocations;
use dgw_core::state::{AuditSink, DelegationStore, ReplayStore, StorageError};

pub use config::{Delegator, MotebitConfig, RawMotebit};
use pins::Pins;

/// Motebit's name in metrics, audit and `data.protocol`.
pub const ID: ProtocolId = ProtocolId::new(&ProtocolInfo {
    name: "motebit",
    title: "Motebit",
    denial_message: None,
});

/// The revocation kind of Motebit grants and tokens.
pub const REVOCATIONS: &str = "motebit_revocations";

/// The replay namespace of bearer tokens' `jti`s.
const REPLAY: &str = "motebit_jti";

/// Where a request carries its delegation: `params._meta[META]`.
pub const META: &str = "motebit/delegation";

const METHODS: &[&str] = &[
    "motebit/verify",
    "motebit/verdict",
    "motebit/pin",
    "motebit/unpin",
    "motebit/revoke",
    "motebit/attestation",
    "motebit/receipt",
];

/// The Motebit protocol.
pub struct Motebit {
    /// Replaced whole on reload.
    config: arc_swap::ArcSwap<MotebitConfig>,
    revocations: Arc<Revocations>,
    replay: Arc<dyn ReplayStore>,
    delegations: Arc<dyn DelegationStore>,
    audit: Arc<dyn AuditSink>,
    key: Arc<Keypair>,
    pins: Pins,
    /// Digests of delegation chains and bearer tokens whose signatures,
    /// keys, linkage and narrowing verified: true at any instant, so a
    /// client sending the same ones again (the reference client sends one
    /// token per connection) skips the Ed25519 work. Windows, trust,
    /// revocations, pins and replay are checked on every call.
    verified: Mutex<HashSet<String>>,
}

/// At most this many digests are remembered (then all are forgotten).
const MAX_REMEMBERED: usize = 65_536;

/// What a request presented: the bearer token (header), the delegation
/// chain (request or session), or both once combined.
#[derive(Clone)]
pub struct Halves {
    bearer: Option<SignedToken>,
    chain: Option<Arc<Chain>>,
}

/// A caller's delegation chain and the standing grant its root is a tick
/// of, if it is one.
struct Chain {
    tokens: Vec<DelegationToken>,
    grants: Vec<StandingDelegation>,
}

/// What a grant remembers for the events after it.
pub struct Granted {
    caller: String,
    root: String,
    jti: String,
    /// The first-use pin to write once the request is authorized
    /// ([`pins::Pins::check_chain`]).
    pin: Option<(String, String)>,
}

fn now_ms() -> u64 {
    dgw_core::gatekeeper::now().1
}

fn denial(f: &Failure) -> Denial {
    Denial::protocol(ID, f.reason.as_str(), f.detail.clone())
}

/// The digest a token is named by in budgets and revocations.
fn token_name(t: &DelegationToken) -> String {
    motebit::encoding::sha256_hex(t.signature.as_bytes())
}

impl Motebit {
    /// The protocol; loads its revocations.
    pub async fn new(
        config: MotebitConfig,
        state: dgw_protocol::Services,
    ) -> Result<Self, StorageError> {
        state.revocations.track(REVOCATIONS).await?;
        Ok(Self {
            config: arc_swap::ArcSwap::from_pointee(config),
            revocations: state.revocations,
            replay: state.replay,
            delegations: state.delegations,
            audit: state.audit,
            key: state.key,
            pins: Pins::new(state.records),
            verified: Mutex::new(HashSet::new()),
        })
    }

    /// Trusts these delegators, for this audience, from now on (reload).
    pub fn set_config(&self, config: MotebitConfig) {
        self.config.store(Arc::new(config));
    }

    /// Appends an audit event and counts it.
    async fn audit(&self, event: &'static str, fields: Value) {
        dgw_core::protocol::event::record(self.audit.as_ref(), ID, event, fields).await;
    }

    /// Records a `jti` as used: once per MCP session (the reference client
    /// sends one token on every request of its connection), once at all
    /// elsewhere; `false` when it was used before outside this session.
    async fn fresh_jti(
        &self,
        mid: &str,
        jti: &str,
        call: &Call<'_>,
        exp_ms: f64,
    ) -> Result<bool, StorageError> {
        let now = (now_ms() / 1000) as i64;
        let until = (exp_ms / 1000.0) as i64 + (motebit::bearer::SKEW_MS / 1000.0) as i64 + 1;
        let token = format!("{mid}\0{jti}");
        if call.in_session {
            let in_session = format!("s\0{}\0{token}", call.session);
            if !self
                .replay
                .insert_new(REPLAY, in_session.as_bytes(), now, until)
                .await?
            {
                return Ok(true); // this session presented it before
            }
        }
        self.replay
            .insert_new(REPLAY, format!("t\0{token}").as_bytes(), now, until)
            .await
    }

    /// Whether `digest` verified before; else runs `verify` and remembers
    /// a success.
    fn verified_once<E>(
        &self,
        digest: String,
        verify: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), E> {
        let lock = || self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if lock().contains(&digest) {
            return Ok(());
        }
        verify()?;
        let mut set = lock();
        if set.len() >= MAX_REMEMBERED {
            set.clear();
        }
        set.insert(digest);
        Ok(())
    }

    /// The chain, bearer token, trust, revocations, pins and replay of a
    /// call: the grant, or why not. `presented`: the chain's canonical JSON.
    async fn check(
        &self,
        p: &Halves,
        presented: &str,
        call: &Call<'_>,
    ) -> Result<Result<Grant<Granted>, Failure>, GateError> {
        let Some(bearer) = &p.bearer else {
            return Ok(Err(Failure::new(
                Reason::Untrusted,
                "a Motebit caller authenticates with `Authorization: Bearer motebit:<token>`",
            )));
        };
        let Some(chain) = &p.chain else {
            return Ok(Err(Failure::new(
                Reason::Untrusted,
                format!("a Motebit caller is authorized by a delegation in params._meta[\"{META}\"] (or its session's)"),
            )));
        };
        let now = now_ms();
        let grants = &chain.grants;
        let chain = &chain.tokens;
        let chain_digest = format!("c{}", motebit::encoding::sha256_hex(presented.as_bytes()));
        let checked = self
            .verified_once(chain_digest, || {
                token::verify_chain_signed(chain)?;
                motebit::delegation::root_grant(chain, grants)
                    .map(drop)
                    .map_err(|f| (0, f))
            })
            .and_then(|()| token::chain_windows(chain, now as f64))
            .and_then(
                |()| match motebit::delegation::find_root_grant(chain, grants) {
                    Ok(Some(g)) => g.window(now as f64).map_err(|f| (0, f)),
                    Ok(None) => Ok(()),
                    Err(f) => Err((0, f)),
                },
            );
        if let Err((i, f)) = checked {
            return Ok(Err(Failure::new(
                f.reason,
                format!("delegation {i}: {}", f.detail),
            )));
        }
        // Verified above (signature, shape and fit remembered by digest).
        let grant = motebit::delegation::find_root_grant(chain, grants)
            .ok()
            .flatten();
        let (root, last) = match (chain.first(), chain.last()) {
            (Some(r), Some(l)) => (r, l),
            _ => return Ok(Err(Failure::malformed("the delegation chain is empty"))),
        };
        let config = self.config.load_full();
        let delegator = match trust::root_delegator(&config, chain) {
            Ok(d) => d,
            Err(f) => return Ok(Err(f)),
        };
        let claims = &bearer.claims;
        if claims.mid != last.delegate_id {
            return Ok(Err(Failure::new(
                Reason::BrokenLinkage,
                format!(
                    "the bearer token is {:?}'s; the delegation is to {:?}",
                    claims.mid, last.delegate_id
                ),
            )));
        }
        let delegate_key = match last.delegate_key() {
            Ok(k) => k,
            Err(f) => return Ok(Err(f)),
        };
        let bearer_digest = format!("b{}", bearer.digest(&delegate_key));
        let checked = self
            .verified_once(bearer_digest, || bearer.verify_signature(&delegate_key))
            .and_then(|()| bearer.check_claims(&config.audience, now as f64).map(drop));
        if let Err(f) = checked {
            return Ok(Err(f));
        }
        if let Err(f) = self.unrevoked(chain) {
            return Ok(Err(f));
        }
        let pin = match self.pins.check_chain(chain, &config).await? {
            Ok(pin) => pin,
            Err(f) => return Ok(Err(f)),
        };
        if !self
            .fresh_jti(&claims.mid, &claims.jti, call, claims.exp)
            .await?
        {
            return Ok(Err(Failure::new(
                Reason::Replayed,
                format!("bearer token {:?} was already used", claims.jti),
            )));
        }
        let mut names: Vec<String> = chain.iter().map(token_name).collect();
        // A tick's charges meet first at its grant's node, whatever the
        // tick: the delegator's signed ceiling caps them all (§3.3).
        let limit = match grant {
            Some(g) => {
                names.insert(0, grant_name(g));
                delegator
                    .budget_microcents
                    .min(motebit::ceiling::grant_bound_microcents(
                        g.spend_ceiling.as_ref(),
                    ))
            }
            None => delegator.budget_microcents,
        };
        let scope = motebit::scope::Scope::parse(&last.scope);
        let resources: Vec<String> = call.requests.iter().map(|r| r.resource.clone()).collect();
        Ok(Ok(Grant {
            protocol: ID,
            tenant: delegator.tenant.clone(),
            levels: BudgetKey::for_path(&budget_root(&delegator.motebit_id), &names, limit),
            chain: Vec::new(),
            authority: Box::new(Capabilities(motebit::translate::capabilities(&scope))),
            requests: Some(motebit::translate::requests(
                call.tool,
                call.action,
                &resources,
            )),
            scope: None,
            within: None,
            context: Granted {
                caller: claims.mid.clone(),
                root: root.delegator_id.clone(),
                jti: claims.jti.clone(),
                pin,
            },
        }))
    }
}

/// The synthetic tool a Motebit service answers its identity with.
pub const IDENTITY_TOOL: &str = "motebit_identity";

/// `value` as a Motebit service writes a tool's text: its JSON, then the
/// identity tag line (`[motebit:<id prefix> key:<key prefix>]`).
fn identity_text(value: &Value, motebit_id: &str, public_key: &str) -> String {
    let id: String = motebit_id.chars().take(8).collect();
    let key: String = public_key.chars().take(16).collect();
    format!("{value}\n[motebit:{id} key:{key}]")
}

/// The budget node of a standing grant below its delegator's root: by its
/// delegator key and `grant_id` (as the reference keys its spend state),
/// digested so that no `grant_id` can shape the path.
fn grant_name(g: &StandingDelegation) -> String {
    let id = format!("{}/{}", g.delegator_public_key, g.grant_id);
    format!("grant-{}", motebit::encoding::sha256_hex(id.as_bytes()))
}

/// The budget-key root of a delegator's delegations.
fn budget_root(delegator: &str) -> String {
    format!("motebit:{delegator}")
}

/// The request header a delegation may travel in instead of `_meta`:
/// base64url (no padding) of its JSON.
pub const DELEGATION_HEADER: &str = "motebit-delegation";

/// A delegation (a token or a chain, root first) as a credential's half.
/// The delegation is the authority: reservations and sessions are bound to
/// it, not to the short-lived bearer token.
fn delegation_credential(value: &Value) -> Result<Presented<Halves>, Denial> {
    let d = motebit::delegation::from_value(value).map_err(|f| denial(&f))?;
    let presented = motebit::encoding::canonical(value).map_err(|f| denial(&f))?;
    Ok(Presented::new(
        String::from_utf8_lossy(&presented).into_owned(),
        Halves {
            bearer: None,
            chain: Some(Arc::new(Chain {
                tokens: d.chain,
                grants: d.grants,
            })),
        },
    ))
}

/// The delegation a request's `params._meta` carries: a token, a chain,
/// or either as a JSON string (as the reference's `delegation_token`).
fn take_delegation(request: &mut Map<String, Value>) -> Option<Value> {
    let meta = request
        .get_mut("params")?
        .as_object_mut()?
        .get_mut("_meta")?
        .as_object_mut()?;
    let taken = meta.remove(META)?;
    let empty = meta.is_empty();
    if empty {
        if let Some(Value::Object(params)) = request.get_mut("params") {
            params.remove("_meta");
        }
    }
    Some(taken)
}

#[async_trait]
impl Credentials for Motebit {
    type Credential = Halves;
    type Granted = Granted;

    fn bearer_prefix(&self) -> Option<&'static str> {
        Some(motebit::bearer::PREFIX)
    }

    fn read_header(&self, credentials: &str) -> Result<Presented<Halves>, Denial> {
        let bearer = SignedToken::read(credentials).map_err(|f| denial(&f))?;
        Ok(Presented::new(
            format!("{}{credentials}", motebit::bearer::PREFIX),
            Halves {
                bearer: Some(bearer),
                chain: None,
            },
        ))
    }

    async fn take_from_request(
        &self,
        request: &mut Map<String, Value>,
    ) -> Result<Option<Presented<Halves>>, Denial> {
        let Some(taken) = take_delegation(request) else {
            return Ok(None);
        };
        let value = match taken {
            Value::String(text) => token::parse_value(text.as_bytes()).map_err(|f| denial(&f))?,
            other => other,
        };
        delegation_credential(&value).map(Some)
    }

    fn credential_header(&self) -> Option<&'static str> {
        Some(DELEGATION_HEADER)
    }

    /// A delegation must be trusted now (its root configured, nothing of
    /// it revoked); what it allows is only known with a call.
    async fn standing(
        &self,
        presented: &Halves,
    ) -> Result<Option<Vec<delegateos::Capability>>, Denial> {
        if let Some(chain) = &presented.chain {
            self.chain_stands(&chain.tokens).map_err(|f| denial(&f))?;
        }
        Ok(None)
    }

    fn read_named_header(&self, value: &str) -> Result<Presented<Halves>, Denial> {
        let bytes = motebit::encoding::from_b64url(value.trim()).ok_or_else(|| {
            denial(&Failure::malformed(format!(
                "{DELEGATION_HEADER} must be base64url (no padding) of the delegation's JSON"
            )))
        })?;
        delegation_credential(&token::parse_value(&bytes).map_err(|f| denial(&f))?)
    }

    /// The header's half is the bearer token as presented
    /// (`motebit:<token>`): read again, it joins the carried delegation.
    fn combine(
        &self,
        header: &str,
        carried: &Halves,
        carried_presented: &str,
    ) -> Option<Presented<Halves>> {
        let token = header.strip_prefix(motebit::bearer::PREFIX)?;
        let bearer = SignedToken::read(token).ok()?;
        let chain = carried.chain.clone()?;
        Some(Presented::new(
            carried_presented,
            Halves {
                bearer: Some(bearer),
                chain: Some(chain),
            },
        ))
    }

    async fn grant(
        &self,
        presented: &Halves,
        text: &str,
        call: &Call<'_>,
    ) -> Result<Decision<Grant<Granted>>, GateError> {
        match self.check(presented, text, call).await? {
            Ok(grant) => Ok(Decision::Allowed(grant)),
            Err(f) => {
                let caller = presented.bearer.as_ref().map(|b| b.claims.mid.clone());
                self.audit(
                    "deny",
                    json!({"tool": call.tool, "caller": caller,
                    "reason": f.reason.as_str(), "detail": f.detail}),
                )
                .await;
                Ok(Decision::Denied(denial(&f)))
            }
        }
    }

    async fn denied(&self, g: Option<&Granted>, _: &Halves, call: &Call<'_>, d: &Denial) {
        self.audit(
            "deny",
            json!({"tool": call.tool, "caller": g.map(|g| &g.caller),
            "reason": d.kind.as_str(), "detail": d.detail}),
        )
        .await;
    }

    async fn allowed(&self, g: &Granted, call: &Call<'_>) {
        if let Some((id, key)) = &g.pin {
            self.pin_first_use(id, key).await;
        }
        self.audit(
            "grant",
            json!({"tool": call.tool, "caller": g.caller,
            "delegator": g.root, "jti": g.jti, "cost_microcents": call.cost_microcents}),
        )
        .await;
    }

    async fn completed(&self, g: &Granted, call: &Call<'_>, how: Completed<'_>) {
        let ok = matches!(how, Completed::Answered { ok: true, .. });
        self.audit(
            "invoke",
            json!({"tool": call.tool, "caller": g.caller, "ok": ok}),
        )
        .await;
    }
}

#[async_trait]
impl Protocol for Motebit {
    fn id(&self) -> ProtocolId {
        ID
    }

    fn admits(self: Arc<Self>) -> Option<Arc<dyn Admits>> {
        Some(admitting(self))
    }

    async fn review(&self, call: &Call<'_>, result: &mut Value) -> Review {
        self.review_answer(call, result).await
    }

    fn budget_roots(&self) -> Vec<(String, String)> {
        self.config
            .load()
            .delegators
            .iter()
            .map(|d| (budget_root(&d.motebit_id), d.tenant.clone()))
            .collect()
    }

    async fn sweep(&self) {
        let now = (now_ms() / 1000) as i64;
        if let Err(e) = self.replay.sweep(now).await {
            tracing::error!(error = %e, "sweeping the replay store failed");
        }
    }

    fn translates(self: Arc<Self>) -> Option<Arc<dyn Translates>> {
        Some(self)
    }

    fn hosts(self: Arc<Self>) -> Option<Arc<dyn Hosts>> {
        Some(self)
    }
}

impl Translates for Motebit {
    fn receipt_of(
        &self,
        attestation: &delegateos::Attestation,
    ) -> Result<Value, dgw_core::protocol::Translation> {
        motebit::translate::attestation_to_receipt(attestation, &self.key).map_err(|f| {
            dgw_core::protocol::Translation::Invalid {
                reason: f.reason.as_str(),
                detail: f.detail,
            }
        })
    }
}

#[async_trait]
impl Hosts for Motebit {
    fn methods(&self) -> &'static [&'static str] {
        METHODS
    }

    async fn call_method(&self, caller: &Caller, method: &str, params: Value) -> MethodResult {
        methods::call(self, caller, method, params).await
    }

    fn tools(&self) -> Vec<Value> {
        // Served when Motebit callers are expected: the reference client
        // calls it first and disconnects when it fails (fail-closed).
        if self.config.load().delegators.is_empty() {
            return Vec::new();
        }
        vec![json!({
            "name": IDENTITY_TOOL,
            "description": "Return this motebit's identity information",
            "inputSchema": {"type": "object", "properties": {}},
            "annotations": {"readOnlyHint": true},
        })]
    }

    async fn call_tool(
        &self,
        name: &str,
        _arguments: &Value,
    ) -> Result<Value, dgw_core::protocol::Translation> {
        if name != IDENTITY_TOOL {
            return Err(dgw_core::protocol::Translation::Invalid {
                reason: "unknown_tool",
                detail: format!("{name} is not served"),
            });
        }
        let (motebit_id, public_key) = motebit::translate::gateway_identity(&self.key);
        let identity = json!({
            "motebit_id": motebit_id,
            "public_key": public_key,
            "did": motebit::identity::did_key(&self.key.public_key()),
            "motebit_type": "service",
        });
        Ok(
            json!({"content": [{"type": "text", "text": identity_text(&identity, &motebit_id, &public_key)}]}),
        )
    }
}
