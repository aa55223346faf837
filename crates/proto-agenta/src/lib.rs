//! Agenta (`agenta.delegation.v0`) in the gateway: dgw as the broker a
//! buyer organisation puts between its agents and the sellers it pays.
//! Offers are registered by administrators; an execution request is paid
//! with a DCT of the configured tenant, reserved through the one pipeline
//! until its deadline, and forwarded to the seller with a per-request
//! callback secret; the seller's receipts move the request through the
//! manifest's states, settle or release the reservation and become
//! gateway-signed DelegateOS attestations. Pure protocol logic is in
//! `adapters/agenta`; the choices where the spec is silent are in
//! `docs/adapters/agenta.md`.

mod buy;
mod config;
mod ending;
pub mod module;
mod offers;
mod origin;
mod panel;
mod records;
mod refusal;
mod report;
mod retention;
mod verification;

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use delegateos::Keypair;
use serde_json::{json, Value};

use dgw_core::caller::Caller;
use dgw_core::gatekeeper::{GateError, Gatekeeper};
use dgw_core::protocol::{
    Hosts, HttpAnswer, HttpRequest, MethodResult, Protocol, ProtocolId, ProtocolInfo,
};
use dgw_core::state::{AuditSink, DelegationStore};

pub use config::{AgentaConfig, RawAgenta};
use dgw_net::outbound::JsonClient;
use records::Records;
pub use refusal::Refusal;

/// Agenta's name in metrics, audit and `data.protocol`.
pub const ID: ProtocolId = ProtocolId::new(&ProtocolInfo {
    name: "agenta",
    title: "Agenta",
    denial_message: None,
});

/// The HTTP paths Agenta serves.
const PATHS: &[&str] = &["/agenta/v0", "/.well-known/agent.json"];

/// Where sellers post later receipts.
const RECEIPTS_PATH: &str = "/agenta/v0/execution-receipts";

/// The JSON-RPC twins of the HTTP endpoints.
const METHODS: &[&str] = &[
    "agenta/registerOffer",
    "agenta/getOffer",
    "agenta/execute",
    "agenta/postReceipt",
    "agenta/postAttestation",
    "agenta/postVerification",
    "agenta/getRequest",
];

/// The Agenta protocol, wired to the gateway's state.
pub struct Agenta {
    config: AgentaConfig,
    currencies: agenta::Currencies,
    schemas: agenta::Schemas,
    gate: Arc<Gatekeeper>,
    records: Records,
    delegations: Arc<dyn DelegationStore>,
    audit: Arc<dyn AuditSink>,
    key: Arc<Keypair>,
    sellers: JsonClient,
    /// The base URL sellers call back at, once the listener is bound.
    base_url: OnceLock<String>,
    /// When the retention pass last ran.
    last_retention: std::sync::Mutex<Option<std::time::Instant>>,
}

impl Agenta {
    /// Agenta over the gateway's state, with the offers of the config
    /// registered (a bad offer file stops the start with its name).
    pub async fn new(config: AgentaConfig, state: dgw_protocol::Services) -> Result<Self, String> {
        let schemas = agenta::Schemas::new().map_err(|e| format!("the Agenta schemas: {e}"))?;
        let agenta = Self {
            currencies: agenta::Currencies::new(config.currencies.clone()),
            sellers: JsonClient::new(config.seller_timeout),
            base_url: OnceLock::new(),
            last_retention: Default::default(),
            schemas,
            gate: state.gate,
            records: Records(state.records),
            delegations: state.delegations,
            audit: state.audit,
            key: state.key,
            config,
        };
        if let Some(url) = &agenta.config.public_url {
            let _ = agenta.base_url.set(url.clone());
        }
        for file in &agenta.config.offers {
            let text =
                std::fs::read(file).map_err(|e| format!("agenta offer {}: {e}", file.display()))?;
            let offer: Value = serde_json::from_slice(&text)
                .map_err(|e| format!("agenta offer {}: {e}", file.display()))?;
            agenta
                .register_offer(&offer)
                .await
                .map_err(|r| format!("agenta offer {}: {r}", file.display()))?;
        }
        Ok(agenta)
    }

    /// Tells Agenta where the HTTP listener is, for sellers' callbacks when
    /// `agenta.public_url` is not set.
    pub fn listening_at(&self, addr: std::net::SocketAddr, tls: bool) {
        let scheme = if tls { "https" } else { "http" };
        let _ = self.base_url.set(format!("{scheme}://{addr}"));
    }

    fn receipts_url(&self) -> String {
        format!(
            "{}{RECEIPTS_PATH}",
            self.base_url.get().map_or("", String::as_str)
        )
    }

    /// Counts an event and appends it to the audit log; a failure to append
    /// is logged, never fatal to the call.
    async fn audit(&self, event: &'static str, fields: Value) {
        dgw_core::protocol::event::record(self.audit.as_ref(), ID, event, fields).await;
    }

    /// Counts a refusal under `protocol="agenta"`.
    fn refused(&self, r: Refusal) -> Refusal {
        dgw_core::telemetry::record_denial(ID.name, r.code);
        r
    }

    /// Routes one HTTP request to its operation.
    async fn route(&self, request: &HttpRequest<'_>) -> Result<HttpAnswer, Refusal> {
        let segments: Vec<&str> = request.path.trim_end_matches('/').split('/').collect();
        let body = || -> Result<Value, Refusal> {
            serde_json::from_slice(request.body).map_err(|e| {
                Refusal::mode(
                    agenta::FailureMode::SchemaValidationFailure,
                    format!("the body is not JSON: {e}"),
                )
            })
        };
        match (request.method, segments.as_slice()) {
            ("GET", ["", ".well-known", "agent.json"]) => self.agent_card().await,
            ("GET", ["", "agenta", "v0", "schemas", name]) => self.schema(name),
            ("POST", ["", "agenta", "v0", "offers"]) => {
                admin_secret(request.caller, "registering an offer")?;
                self.register_offer(&body()?).await
            }
            ("GET", ["", "agenta", "v0", "offers", id]) => self.get_offer(id).await,
            ("POST", ["", "agenta", "v0", "execution-requests"]) => {
                self.execute(request.authorization, &body()?).await
            }
            ("GET", ["", "agenta", "v0", "execution-requests", id]) => {
                self.get_request(request.caller, request.authorization, id)
                    .await
            }
            ("POST", ["", "agenta", "v0", "execution-requests", id, "attestation"]) => {
                self.post_attestation(request.authorization, id, request.body)
                    .await
            }
            ("POST", ["", "agenta", "v0", "execution-receipts"]) => {
                self.post_receipt(request.authorization, &body()?).await
            }
            ("POST", ["", "agenta", "v0", "verification-results"]) => {
                self.post_verification(request.caller, request.authorization, &body()?)
                    .await
            }
            // The endpoints above, by another method.
            (
                _,
                ["", "agenta", "v0", "offers" | "execution-requests" | "execution-receipts" | "verification-results"]
                | ["", "agenta", "v0", "offers" | "execution-requests", _]
                | ["", "agenta", "v0", "execution-requests", _, "attestation"],
            ) => Err(Refusal::new(
                405,
                "method_not_allowed",
                "method not allowed",
            )),
            _ => Err(Refusal::not_found("endpoint")),
        }
    }

    /// `GET /.well-known/agent.json`: the protocol, its schemas and offers.
    async fn agent_card(&self) -> Result<HttpAnswer, Refusal> {
        let offers: Vec<Value> = self
            .records
            .scan::<records::OfferRecord>(records::OFFERS)
            .await?
            .into_iter()
            .filter_map(|(_, o)| o.versions.get(&o.current).cloned())
            .collect();
        let schemas: Vec<String> = agenta::MessageType::ALL
            .iter()
            .map(|t| format!("/agenta/v0/schemas/{}.schema.json", t.as_str()))
            .collect();
        Ok(HttpAnswer::new(
            200,
            json!({
                "protocols": [{
                    "protocol_id": agenta::PROTOCOL_ID,
                    "endpoints": {
                        "offers": "/agenta/v0/offers",
                        "execution_requests": "/agenta/v0/execution-requests",
                        "execution_receipts": RECEIPTS_PATH,
                        "verification_results": "/agenta/v0/verification-results",
                    },
                    "schemas": schemas,
                }],
                "offers": offers,
            }),
        ))
    }

    /// `GET /agenta/v0/schemas/{name}.schema.json`: a vendored schema.
    fn schema(&self, name: &str) -> Result<HttpAnswer, Refusal> {
        let found = agenta::MessageType::ALL
            .iter()
            .find(|t| format!("{}.schema.json", t.as_str()) == name)
            .ok_or_else(|| Refusal::not_found("schema"))?;
        let schema: Value = serde_json::from_str(found.schema_text())
            .map_err(|e| Refusal::new(500, "internal", e.to_string()))?;
        Ok(HttpAnswer::new(200, schema))
    }
}

/// The `Authorization` header's credential under `scheme` (compared without
/// regard to case), if it is one.
fn credential<'a>(authorization: Option<&'a str>, scheme: &str) -> Option<&'a str> {
    let (s, credential) = dgw_core::caller::split_authorization(authorization?)?;
    (s.eq_ignore_ascii_case(scheme) && !credential.is_empty()).then_some(credential)
}

/// Changes only an administrator who proved it with a secret may make
/// (never the loopback rule, decision 62).
fn admin_secret(caller: &Caller, what: &str) -> Result<(), Refusal> {
    if caller.is_authenticated_admin() {
        Ok(())
    } else {
        Err(Refusal::new(
            403,
            "admin_required",
            format!("{what} takes an admin token"),
        ))
    }
}

#[async_trait]
impl Protocol for Agenta {
    fn id(&self) -> ProtocolId {
        ID
    }

    /// Requests past their deadline become `expired` (their reservation
    /// released), final requests whose reservation a crash left open are
    /// settled or released, what the retention is over for is forgotten,
    /// and the stored-bytes gauges are set.
    async fn sweep(&self) {
        if let Err(r) = self.expire_and_finish().await {
            tracing::error!(error = %r, "sweeping Agenta requests failed");
        }
        self.keep_within_retention().await;
    }

    fn hosts(self: Arc<Self>) -> Option<Arc<dyn Hosts>> {
        Some(self)
    }
}

#[async_trait]
impl Hosts for Agenta {
    fn http_paths(&self) -> &'static [&'static str] {
        PATHS
    }

    async fn serve_http(&self, request: HttpRequest<'_>) -> HttpAnswer {
        match self.route(&request).await {
            Ok(a) => a,
            Err(r) => self.refused(r).answer(),
        }
    }

    fn methods(&self) -> &'static [&'static str] {
        METHODS
    }

    /// The JSON-RPC twins: the same operations, `params` carrying what the
    /// HTTP body and path carry; the credential is the `Authorization`
    /// header of `/rpc` (a `DCT` for buyers, an admin's `Bearer`), or
    /// `params.auth_reference` for a seller's receipt.
    async fn call_method(&self, caller: &Caller, method: &str, params: Value) -> MethodResult {
        let dct = caller
            .presented()
            .filter(|(s, _)| s.eq_ignore_ascii_case("DCT"))
            .map(|(_, c)| format!("DCT {c}"));
        let bearer = params
            .get("auth_reference")
            .and_then(Value::as_str)
            .map(|s| format!("Bearer {s}"));
        let message = || params.get("message").cloned().unwrap_or(Value::Null);
        let id = || {
            params
                .get("id")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| GateError::InvalidParams("params.id is required".into()))
        };
        let answer = match method {
            "agenta/registerOffer" => match admin_secret(caller, "registering an offer") {
                Ok(()) => self.register_offer(&message()).await,
                Err(r) => Err(r),
            },
            "agenta/getOffer" => self.get_offer(&id()?).await,
            "agenta/execute" => self.execute(dct.as_deref(), &message()).await,
            "agenta/postReceipt" => self.post_receipt(bearer.as_deref(), &message()).await,
            "agenta/postAttestation" => {
                let attestation = params.get("attestation").map(Value::to_string);
                self.post_attestation(
                    bearer.as_deref(),
                    &id()?,
                    attestation.unwrap_or_default().as_bytes(),
                )
                .await
            }
            "agenta/postVerification" => {
                self.post_verification(caller, bearer.as_deref().or(dct.as_deref()), &message())
                    .await
            }
            "agenta/getRequest" => {
                self.get_request(caller, bearer.as_deref().or(dct.as_deref()), &id()?)
                    .await
            }
            _ => return Err(GateError::InvalidParams(format!("{method} is not served"))),
        };
        match answer {
            Ok(a) if a.status < 300 => Ok(a.body),
            // A repeated idempotency key answers with the first answer, a
            // refusal too, as it was stored.
            Ok(a) => Err(GateError::Rejected {
                kind: a.body["error"]["code"]
                    .as_str()
                    .unwrap_or("rejected")
                    .to_owned(),
                detail: a.body["error"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            }),
            Err(r) => Err(self.refused(r).into_gate_error()),
        }
    }
}
