//! LDP in the gateway: dgw stands in front of LDP delegates the way it
//! stands in front of MCP servers. Routers talk to dgw as if it were the
//! delegate (`/ldp/{name}/…`, the reference's routes under it); every
//! message is parsed, checked fresh, unreplayed and signed (the shared
//! secret), and legal in its session; a TASK_SUBMIT is authorized and
//! reserved through the one pipeline with the router's DCT; the delegate's
//! answer is verified the same way; a TASK_RESULT settles the reservation
//! and becomes a gateway-signed attestation (a result reaches the router
//! only if it was charged), a TASK_FAILED releases it; a TASK_CANCEL or
//! SESSION_CLOSE, only from the session's payer, cancels tasks (`ending`).
//! Sessions live in the record store. Pure logic is in `adapters/ldp`; `docs/adapters/ldp.md`
//! maps each message to what dgw does.

mod cards;
mod config;
mod ending;
mod exchange;
mod methods;
pub mod module;
mod panel;
mod payer;
mod refused;
mod replies;
mod sessions;
mod tasks;

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use delegateos::Keypair;
use serde_json::{json, Value};

use dgw_core::caller::Caller;
use dgw_core::gatekeeper::Gatekeeper;
use dgw_core::protocol::{
    Hosts, HttpAnswer, HttpRequest, MethodResult, Protocol, ProtocolId, ProtocolInfo,
};
use dgw_core::state::{AuditSink, DelegationStore, ReplayStore};
use dgw_net::outbound::JsonClient;

pub use config::{Delegate, LdpConfig, PayingDomain, RawLdp};
use sessions::Sessions;

/// LDP's name in metrics, audit and `data.protocol`.
pub const ID: ProtocolId = ProtocolId::new(&ProtocolInfo {
    name: "ldp",
    title: "LDP",
    denial_message: None,
});

const PATHS: &[&str] = &["/ldp", "/.well-known/ldp-identity"];

const METHODS: &[&str] = &[
    "ldp/session",
    "ldp/sessions",
    "ldp/task",
    "ldp/attestation",
    "ldp/contract",
    "ldp/session/close",
];

/// The LDP protocol.
pub struct Ldp {
    config: LdpConfig,
    gate: Arc<Gatekeeper>,
    replay: Arc<dyn ReplayStore>,
    delegations: Arc<dyn DelegationStore>,
    audit: Arc<dyn AuditSink>,
    key: Arc<Keypair>,
    sessions: Sessions,
    client: JsonClient,
    cards: cards::Cards,
    /// dgw's own URL, once the listener is bound.
    base_url: OnceLock<String>,
}

impl Ldp {
    /// The protocol over its delegates.
    pub fn new(config: LdpConfig, state: dgw_protocol::Services) -> Self {
        let client = JsonClient::new(config.delegate_timeout);
        Self {
            cards: cards::Cards::new(client.clone()),
            client,
            config,
            gate: state.gate,
            replay: state.replay,
            delegations: state.delegations,
            audit: state.audit,
            key: state.key,
            sessions: Sessions::new(state.records),
            base_url: OnceLock::new(),
        }
    }

    /// Tells it where routers reach dgw (the HTTP listener), unless the
    /// config says.
    pub fn listening_at(&self, addr: std::net::SocketAddr, tls: bool) {
        let url = match &self.config.public_url {
            Some(u) => u.clone(),
            None => format!("{}://{addr}", if tls { "https" } else { "http" }),
        };
        let _ = self.base_url.set(url);
    }

    fn delegate(&self, name: &str) -> Option<&Delegate> {
        self.config.delegates.iter().find(|d| d.name == name)
    }

    /// Where routers reach `delegate` through dgw.
    fn endpoint(&self, delegate: &Delegate) -> String {
        let base = self.base_url.get().cloned().unwrap_or_default();
        format!("{base}/ldp/{}", delegate.name)
    }

    async fn audit(&self, event: &'static str, fields: Value) {
        dgw_core::protocol::event::record(self.audit.as_ref(), ID, event, fields).await;
    }

    async fn route(&self, request: &HttpRequest<'_>) -> HttpAnswer {
        if request.path == "/.well-known/ldp-identity" && request.method == "GET" {
            return self.directory().await;
        }
        let rest = request.path.strip_prefix("/ldp/").unwrap_or_default();
        let (name, tail) = rest.split_once('/').unwrap_or((rest, ""));
        let Some(delegate) = self.delegate(name) else {
            return HttpAnswer::not_found();
        };
        match (request.method, tail) {
            ("GET", ".well-known/ldp-identity" | "ldp/identity") => self.card(delegate).await,
            ("POST", "messages" | "ldp/messages") => self.exchange(delegate, request).await,
            _ => HttpAnswer::not_found(),
        }
    }

    /// `GET /ldp/{name}/.well-known/ldp-identity`: the delegate's card,
    /// its endpoint dgw's.
    async fn card(&self, delegate: &Delegate) -> HttpAnswer {
        match self.cards.get(delegate).await {
            Ok(card) => {
                let mut card = serde_json::to_value(card).unwrap_or(Value::Null);
                card["endpoint"] = json!(self.endpoint(delegate));
                HttpAnswer::new(200, card)
            }
            Err(e) => HttpAnswer::new(
                502,
                json!({"error": {"type": "delegate_unavailable", "message": e}}),
            ),
        }
    }

    /// `GET /.well-known/ldp-identity`: dgw's own card (`[ldp.identity]`),
    /// its capabilities the skills of the delegates it fronts, each
    /// delegate's endpoint in `metadata` (`ldp.delegate.<name>`).
    async fn directory(&self) -> HttpAnswer {
        let own = &self.config.identity;
        let mut skills: Vec<Value> = Vec::new();
        let mut metadata = serde_json::Map::new();
        for d in &self.config.delegates {
            metadata.insert(format!("ldp.delegate.{}", d.name), json!(self.endpoint(d)));
            if let Ok(card) = self.cards.get(d).await {
                for c in card.capabilities {
                    if !skills.iter().any(|s| s["name"] == json!(c.name)) {
                        skills.push(json!({"name": c.name, "description": c.description}));
                    }
                }
            }
        }
        let base = self.base_url.get().cloned().unwrap_or_default();
        HttpAnswer::new(
            200,
            json!({
                "delegate_id": format!("{}{}", ldp::identity::DELEGATE_PREFIX, own.name),
                "name": own.name,
                "description": own.description.clone().unwrap_or_else(|| format!(
                    "dgw, the delegate gateway, in front of {} LDP delegate(s)", self.config.delegates.len())),
                "model_family": "gateway",
                "model_version": env!("CARGO_PKG_VERSION"),
                "trust_domain": {"name": own.trust_domain, "allow_cross_domain": false, "trusted_peers": []},
                "context_window": 0,
                "jurisdiction": own.jurisdiction,
                "capabilities": skills,
                "supported_payload_modes": ["semantic_frame", "text"],
                "endpoint": format!("{base}/ldp"),
                "metadata": metadata,
            }),
        )
    }
}

#[async_trait]
impl Protocol for Ldp {
    fn id(&self) -> ProtocolId {
        ID
    }

    fn budget_roots(&self) -> Vec<(String, String)> {
        self.config
            .domains
            .iter()
            .map(|d| (payer::domain_root(&d.name), d.tenant.clone()))
            .collect()
    }

    async fn sweep(&self) {
        self.expire_sessions().await;
    }

    fn hosts(self: Arc<Self>) -> Option<Arc<dyn Hosts>> {
        Some(self)
    }
}

#[async_trait]
impl Hosts for Ldp {
    fn http_paths(&self) -> &'static [&'static str] {
        PATHS
    }

    async fn serve_http(&self, request: HttpRequest<'_>) -> HttpAnswer {
        self.route(&request).await
    }

    fn methods(&self) -> &'static [&'static str] {
        METHODS
    }

    async fn call_method(&self, caller: &Caller, method: &str, params: Value) -> MethodResult {
        methods::call(self, caller, method, params).await
    }
}
