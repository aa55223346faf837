//! The MCP proxy (§11.3), whatever the downstream transport: answers
//! `initialize` and `ping`, lists the upstreams' tools filtered by the
//! caller's credential, enforces every `tools/call` through the protocol
//! registry and the gatekeeper (which protocol the call carries, its grant,
//! the capability from the tool's rule, its cost reserved, settled when the
//! upstream answers), and passes other methods through.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::caller_state::{CallerState, SubscriptionBook};
use super::cancel::{Cancel, InFlight};
use super::message::{Id, Message, Reply};
use super::upstream::{
    Upstream, UpstreamError, UpstreamSpec, PROTOCOL_VERSION, SUPPORTED_VERSIONS,
};
use dgw_core::gatekeeper::Gatekeeper;
use dgw_core::protocol::{Denial, Found, Registry};
use dgw_core::telemetry::{Outcome, RequestRecord};
use dgw_front_jsonrpc::{
    denial_error, RpcError, DENIED, INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND,
};

/// The MCP methods the gateway serves itself, each counted under its own
/// name in `dgw_requests_total{front="mcp"}` (with [`DATA_METHODS`]; any
/// other is counted as `other`).
pub const METHODS: &[&str] = &["initialize", "ping", "tools/list", "tools/call"];

/// The resource, prompt and logging methods dgw serves itself through the
/// upstreams' resource and prompt rules and each caller's own state
/// ([`super::data`]), each counted under its own name too.
pub const DATA_METHODS: &[&str] = &[
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "logging/setLevel",
];

/// Separates an upstream's name from a tool's when two upstreams offer
/// tools of the same name.
pub const CLASH_SEPARATOR: &str = "__";

/// What a downstream session remembers between requests.
#[derive(Debug)]
pub struct Session {
    /// Names the session where a protocol needs one (replay protection,
    /// when its envelope names no session of its own).
    pub(super) id: String,
    /// The credential presented in `initialize`, for the whole session.
    credential: RwLock<Option<Found>>,
    /// Set when the session's credential was given by whoever started dgw
    /// (`dgw mcp --dct-file`): no message replaces it, and a credential
    /// in a request counts only when it extends it.
    pinned: bool,
    /// Forwarded requests the client may cancel.
    in_flight: InFlight,
    /// The trust generation ([`McpProxy::trust_changed`]) at which the
    /// credential it was opened with last stood.
    checked: AtomicU64,
    /// Set for the stand-in of one stateless (2026-07-28) request: there
    /// is no session, so replay is scoped by the credential instead.
    per_request: bool,
    /// What this caller asked of the upstreams for itself (log level,
    /// subscriptions), kept by dgw: never another caller's.
    pub(super) state: CallerState,
    /// What upstreams may ask of this caller, and what they asked.
    pub(super) to_caller: super::relay::ToCaller,
}

impl Session {
    /// A session named `id` (its `Mcp-Session-Id`, the same on every
    /// replica, so what a protocol keys by it is shared too).
    pub fn named(id: String) -> Self {
        Self {
            id,
            ..Self::default()
        }
    }

    /// The stand-in for one stateless request, which has no session.
    pub fn stateless() -> Self {
        Self {
            per_request: true,
            ..Self::default()
        }
    }

    /// Whether this stands in for one stateless request.
    pub fn per_request(&self) -> bool {
        self.per_request
    }

    /// Whether this caller gets an upstream's notification (a log message
    /// at or above the level it set, an update of a resource it
    /// subscribed to, anything else): what a relay of notifications asks
    /// before it delivers one.
    pub fn wants(&self, method: &str, params: Option<&Value>) -> bool {
        self.state.wants(method, params)
    }

    /// A session whose credential is `found` for its whole life (`dgw
    /// mcp`'s DCT from a file or the environment).
    pub fn pinned_to(found: Found) -> Self {
        Self {
            credential: RwLock::new(Some(found)),
            pinned: true,
            ..Self::default()
        }
    }

    /// Its credential stood at trust generation `generation`.
    pub(super) fn stood_at(&self, generation: u64) {
        self.checked.fetch_max(generation, Ordering::AcqRel);
    }

    /// Ends the session: its requests still in flight are cancelled, as if
    /// the client had cancelled each.
    pub fn end(&self) {
        self.in_flight.cancel_all();
    }
}

impl Default for Session {
    fn default() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = dgw_core::random::session_id().unwrap_or_else(|_| format!("local-{n}"));
        Self {
            id,
            credential: RwLock::new(None),
            pinned: false,
            in_flight: InFlight::default(),
            checked: AtomicU64::new(0),
            per_request: false,
            state: CallerState::default(),
            to_caller: Default::default(),
        }
    }
}

/// Who is calling: the session, and the `Authorization` header the
/// transport carried with this request (Streamable HTTP), for the protocol
/// whose scheme it names, with the request's other headers (for a
/// protocol's own credential header).
#[derive(Clone, Copy)]
pub struct Caller<'a> {
    pub session: &'a Session,
    pub authorization: Option<&'a str>,
    pub headers: Option<&'a hyper::HeaderMap>,
}

/// A tool as offered downstream.
#[derive(Debug, Clone)]
pub(super) struct CatalogTool {
    pub(super) exposed: String,
    pub(super) upstream: Arc<Upstream>,
    pub(super) original: String,
    pub(super) definition: Map<String, Value>,
}

/// Every upstream's tools under the names offered downstream.
#[derive(Debug, Default)]
struct Catalog {
    tools: Vec<Arc<CatalogTool>>,
    by_name: HashMap<String, usize>,
}

impl Catalog {
    /// Names clash when two upstreams offer the same one: then each of
    /// those tools is offered as `<upstream>__<tool>`.
    fn build(upstreams: &[Arc<Upstream>], strict_names: bool) -> Self {
        let name_of = |t: &Map<String, Value>| {
            t.get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let listed: Vec<(usize, Map<String, Value>)> = upstreams
            .iter()
            .enumerate()
            .flat_map(|(i, u)| u.tools().into_iter().map(move |t| (i, t)))
            .filter(|(i, t)| {
                let name = name_of(t);
                let ok = !strict_names || offerable_tool_name(&name);
                if !ok {
                    tracing::warn!(upstream = %upstreams[*i].name, tool = %name.chars().take(128).collect::<String>().escape_debug(), "dropping a tool whose name is not 1-128 printable ASCII characters without \"{CLASH_SEPARATOR}\" (mcp.strict_tool_names)");
                }
                ok
            })
            .collect();
        let mut counts: HashMap<String, usize> = HashMap::new();
        for (_, t) in &listed {
            *counts.entry(name_of(t)).or_default() += 1;
        }
        let mut catalog = Catalog::default();
        for (upstream, mut definition) in listed {
            let original = name_of(&definition);
            let exposed = if counts[&original] > 1 {
                format!("{}{CLASH_SEPARATOR}{original}", upstreams[upstream].name)
            } else {
                original.clone()
            };
            if catalog.by_name.contains_key(&exposed) {
                tracing::warn!(tool = %exposed, "two tools would be offered under one name; offering the first");
                continue;
            }
            definition.insert("name".into(), json!(exposed));
            catalog.by_name.insert(exposed.clone(), catalog.tools.len());
            catalog.tools.push(Arc::new(CatalogTool {
                exposed,
                upstream: upstreams[upstream].clone(),
                original,
                definition,
            }));
        }
        catalog
    }
}

/// Whether an upstream's tool name may be offered: 1–128 printable ASCII
/// characters (no look-alikes of another tool's name, which a rule for that
/// name would miss) without the gateway's own `<upstream>__<tool>`
/// separator (which would let one upstream's tool pass for another's).
pub fn offerable_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_graphic())
        && !name.contains(CLASH_SEPARATOR)
}

/// What [`McpProxy::replace_upstreams`] did, by upstream name.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UpstreamChanges {
    /// Running on, with the new rules and timeout.
    pub kept: Vec<String>,
    /// New, or reached another way.
    pub started: Vec<String>,
    /// No longer offered; stopped once their calls could have finished.
    pub retired: Vec<String>,
}

/// The proxy over a gatekeeper and its upstreams.
pub struct McpProxy {
    pub(super) gate: Arc<Gatekeeper>,
    pub(super) protocols: Arc<Registry>,
    /// Replaced whole on reload; a call keeps the upstream it found.
    upstreams: arc_swap::ArcSwap<Vec<Arc<Upstream>>>,
    /// Which callers hold each upstream subscription.
    pub(super) subscriptions: SubscriptionBook,
    /// Drop upstream tools whose names are not [`offerable_tool_name`].
    strict_tool_names: bool,
    catalog: RwLock<Arc<Catalog>>,
    /// Counts the reloads that may have withdrawn trust (tenants, issuers,
    /// delegators): a session checks its credential again once after each.
    trust: AtomicU64,
    /// The `requestState`s of input-required answers passed out.
    pub(super) request_states: super::request_state::RequestStates,
    /// The `subscriptions/listen` streams open.
    pub(super) listens: Arc<super::listen::Listens>,
}

pub(super) fn invalid_params(kind: &str, message: impl Into<String>) -> RpcError {
    RpcError::new(INVALID_PARAMS, kind, message)
}

pub(super) fn call_denied(kind: &str, message: impl Into<String>) -> RpcError {
    RpcError::new(DENIED, kind, message)
}

pub(super) fn upstream_error(e: &UpstreamError) -> RpcError {
    let (code, kind) = match e {
        // Never sent to the client, which expects no answer once it cancelled.
        UpstreamError::Cancelled { .. } => (REQUEST_CANCELLED, "request_cancelled"),
        e if e.reached() => (INTERNAL_ERROR, "upstream_no_answer"),
        _ => (INTERNAL_ERROR, "upstream_unavailable"),
    };
    RpcError::new(code, kind, e.to_string())
}

/// The error code of a cancelled request, as LSP numbers it (MCP sends
/// none: this one only reaches metrics and logs).
pub(super) const REQUEST_CANCELLED: i64 = -32800;

/// `request` when it is a DCT whose chain extends `pinned`'s (the same
/// root block, then the same attenuations and signatures, then its own):
/// narrower or the same, never wider, never another root's.
fn narrower(request: Found, pinned: &Found) -> Result<Found, Denial> {
    let refuse = |why: &str| {
        Denial::protocol(
            request.protocol.id(),
            "session_credential_mismatch",
            format!("this dgw mcp session runs under the DCT it was started with; a DCT in a request must extend it ({why})"),
        )
    };
    let (Ok(asked), Ok(base)) = (
        delegateos::Dct::decode(request.credential.presented()),
        delegateos::Dct::decode(pinned.credential.presented()),
    ) else {
        return Err(refuse("it is not a DCT"));
    };
    let (a, b) = (asked.token(), base.token());
    let n = b.attenuations.len();
    let extends = a.format == b.format
        && a.authority == b.authority
        && a.attenuations.len() >= n
        && a.attenuations[..n] == b.attenuations[..]
        && a.signatures.len() > n
        && b.signatures.len() == n + 1
        && a.signatures[..=n] == b.signatures[..];
    if !extends {
        return Err(refuse("it does not extend the session's chain"));
    }
    Ok(request)
}

impl McpProxy {
    /// The gatekeeper every call goes through.
    pub fn gate(&self) -> &Gatekeeper {
        &self.gate
    }

    pub fn new(
        gate: Arc<Gatekeeper>,
        protocols: Arc<Registry>,
        upstreams: Vec<Arc<Upstream>>,
        strict_tool_names: bool,
    ) -> Self {
        Self {
            gate,
            protocols,
            upstreams: arc_swap::ArcSwap::from_pointee(upstreams),
            subscriptions: SubscriptionBook::default(),
            strict_tool_names,
            catalog: RwLock::new(Arc::default()),
            trust: AtomicU64::new(0),
            request_states: Default::default(),
            listens: Default::default(),
        }
    }

    /// Keeps the `requestState`s passed out in `records`, which every
    /// replica sharing them reads (decision 452).
    pub fn share_request_states(&mut self, records: Arc<dyn dgw_core::state::RecordStore>) {
        self.request_states = super::request_state::RequestStates::shared(records);
    }

    /// A reload replaced what credentials are trusted under: every open
    /// session checks its credential again at its next request.
    pub fn trust_changed(&self) {
        self.trust.fetch_add(1, Ordering::AcqRel);
    }

    /// The current trust generation.
    pub(super) fn trust_generation(&self) -> u64 {
        self.trust.load(Ordering::Acquire)
    }

    /// Whether the credential the caller's session was opened with (the
    /// bound header's, else the one `initialize` carried) still stands,
    /// checked once per trust generation: a session must not outlive the
    /// trust it was opened under (a tenant or delegator a reload removed).
    pub(super) async fn session_stands(&self, caller: Caller<'_>) -> Result<(), Denial> {
        let generation = self.trust_generation();
        if caller.session.checked.load(Ordering::Acquire) >= generation {
            return Ok(());
        }
        if let Some(found) = self.presented(caller, None)? {
            self.standing(&found).await?;
        }
        caller.session.stood_at(generation);
        Ok(())
    }

    /// The upstreams as they stand now.
    pub fn upstreams(&self) -> Arc<Vec<Arc<Upstream>>> {
        self.upstreams.load_full()
    }

    /// Serves `specs` from now on (reload): an upstream reached the same
    /// way keeps running with the new rules and timeout; a new or changed
    /// one is started and given up to `ready_timeout` to initialize before
    /// it is offered; one no longer configured is retired once the calls
    /// it already has could have finished. Calls in flight are not failed.
    pub async fn replace_upstreams(
        &self,
        specs: Vec<UpstreamSpec>,
        ready_timeout: Duration,
    ) -> UpstreamChanges {
        let old = self.upstreams();
        let mut changes = UpstreamChanges::default();
        let mut next = Vec::with_capacity(specs.len());
        for spec in specs {
            match old.iter().find(|u| u.same_upstream(&spec)) {
                Some(kept) => {
                    kept.set_terms(&spec);
                    changes.kept.push(spec.name.clone());
                    next.push(kept.clone());
                }
                None => {
                    changes.started.push(spec.name.clone());
                    next.push(Upstream::start(spec));
                }
            }
        }
        let started: Vec<_> = next
            .iter()
            .filter(|u| !old.iter().any(|o| Arc::ptr_eq(o, u)))
            .cloned()
            .collect();
        for up in &started {
            if !up.wait_ready(ready_timeout).await {
                tracing::error!(upstream = %up.name, limit = %dgw_core::units::show_duration(ready_timeout), "reloaded upstream not ready in time; offering it anyway, retried until it is");
            }
        }
        for up in old.iter() {
            if !next.iter().any(|n| Arc::ptr_eq(n, up)) {
                changes.retired.push(up.name.clone());
                up.retire();
            }
        }
        self.upstreams.store(Arc::new(next));
        self.rebuild_catalog();
        changes
    }

    /// The protocols whose credentials calls may carry.
    pub fn protocols(&self) -> &Registry {
        &self.protocols
    }

    /// The credential an `Authorization` header names, for the protocol
    /// that claims its scheme (`None`: none, or an administrator's Bearer).
    fn header_credential(&self, authorization: Option<&str>) -> Option<Result<Found, Denial>> {
        self.protocols.from_header(authorization?)
    }

    /// The credential an `initialize` opens a session with: the header's,
    /// else the one its params carry (`_delegateos`); taken out of `params`.
    pub async fn initialize_credential(
        &self,
        authorization: Option<&str>,
        headers: Option<&hyper::HeaderMap>,
        params: &mut Map<String, Value>,
    ) -> Result<Option<Found>, Denial> {
        let in_params = self.carried(headers, params).await?;
        match self.header_credential(authorization).transpose()? {
            Some(header) => Ok(Some(
                in_params
                    .and_then(|p| self.protocols.combine(&header, &p))
                    .unwrap_or(header),
            )),
            None => Ok(in_params),
        }
    }

    /// The credential a request carries: in its params (taken out), else in
    /// a protocol's own request header.
    pub(super) async fn carried(
        &self,
        headers: Option<&hyper::HeaderMap>,
        params: &mut Map<String, Value>,
    ) -> Result<Option<Found>, Denial> {
        match self.take_credential(params).await? {
            Some(found) => Ok(Some(found)),
            None => self.named_header_credential(headers).transpose(),
        }
    }

    /// The credential a protocol's own request header carries.
    pub(super) fn named_header_credential(
        &self,
        headers: Option<&hyper::HeaderMap>,
    ) -> Option<Result<Found, Denial>> {
        let headers = headers?;
        self.protocols
            .from_named_header(|name| headers.get(name)?.to_str().ok())
    }

    /// Takes every protocol's credential out of a request's params.
    async fn take_credential(
        &self,
        params: &mut Map<String, Value>,
    ) -> Result<Option<Found>, Denial> {
        self.protocols.take_from_params(params).await
    }

    /// What a credential may do now (`None`: its protocol cannot say); a
    /// credential that could never authorize anything is refused.
    pub async fn standing(
        &self,
        found: &Found,
    ) -> Result<Option<Vec<delegateos::Capability>>, Denial> {
        found.credential.standing().await
    }

    fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Lists every ready upstream's tools again and rebuilds the catalog.
    pub async fn refresh_catalog(&self) {
        for up in self.upstreams().iter() {
            if let Err(e) = up.list_tools().await {
                tracing::warn!(upstream = %up.name, error = %e, "listing tools failed; keeping the last list");
            }
        }
        self.rebuild_catalog();
    }

    /// Rebuilds the catalog from the tools the upstreams last listed.
    pub fn rebuild_catalog(&self) {
        let catalog = Arc::new(Catalog::build(&self.upstreams(), self.strict_tool_names));
        *self.catalog.write().unwrap_or_else(|p| p.into_inner()) = catalog;
    }

    /// Handles one message from a client; `None` when nothing goes back.
    pub async fn handle(&self, caller: Caller<'_>, message: Message) -> Option<Value> {
        match message {
            Message::Request { id, method, params } => {
                // A request the client cancelled gets no answer (MCP).
                let in_flight = caller.session.in_flight.begin(&id);
                let answer = self
                    .request(caller, id, &method, params, in_flight.signal())
                    .await;
                (!in_flight.signal().is_cancelled()).then_some(answer)
            }
            Message::Notification { method, params } if method == "notifications/cancelled" => {
                // Stops the forwarded request, which tells its upstream
                // under the ID the gateway gave it there.
                let id = params.as_ref().and_then(|p| p.get("requestId"));
                let cancelled = id.is_some_and(|id| caller.session.in_flight.cancel(id));
                tracing::debug!(request = %id.map_or_else(|| "none".to_owned(), |v| v.to_string()), cancelled, "client cancelled a request");
                None
            }
            Message::Notification { method, .. } => {
                // `notifications/initialized` is ours to swallow: each
                // upstream was initialized by the gateway.
                tracing::debug!(%method, "client notification");
                None
            }
            Message::Response { .. } => None,
        }
    }

    async fn request(
        &self,
        caller: Caller<'_>,
        id: Id,
        method: &str,
        params: Option<Map<String, Value>>,
        cancel: &Cancel,
    ) -> Value {
        let record = RequestRecord::start(
            "mcp",
            match method {
                _ if METHODS.contains(&method) || DATA_METHODS.contains(&method) => method,
                _ => "other",
            },
        );
        let result = match method {
            // Each boxed: a request's future holds only the method it
            // runs, not the largest of them (docs/performance.md).
            "initialize" => Box::pin(self.initialize(caller, params)).await,
            "ping" => Ok(Reply::Result(json!({}))),
            "tools/list" => Box::pin(self.list_tools(caller, params)).await,
            "tools/call" => Box::pin(self.call_tool(caller, &id, params, cancel)).await,
            "resources/list" | "resources/templates/list" | "prompts/list" => {
                Box::pin(self.list_data(caller, method, params, cancel)).await
            }
            "resources/read" => {
                Box::pin(self.get_data(caller, &id, "resources/read", params, cancel)).await
            }
            "resources/subscribe" => {
                Box::pin(self.get_data(caller, &id, "resources/subscribe", params, cancel)).await
            }
            "prompts/get" => {
                Box::pin(self.get_data(caller, &id, "prompts/get", params, cancel)).await
            }
            "resources/unsubscribe" => Box::pin(self.unsubscribe(caller, params, cancel)).await,
            "logging/setLevel" => self.set_level(caller, params),
            _ => Box::pin(self.pass_through(method, params, cancel)).await,
        };
        record.end(match &result {
            Ok(_) => Outcome::Ok,
            Err(e) if e.code == DENIED => Outcome::Denied,
            Err(e) if e.code == REQUEST_CANCELLED => Outcome::Cancelled,
            Err(_) => Outcome::Error,
        });
        match result {
            Ok(reply) => reply.into_response(id),
            Err(e) => e.response(id),
        }
    }

    /// Our server info, the upstreams' capabilities merged (§11.3 step 3).
    async fn initialize(
        &self,
        caller: Caller<'_>,
        params: Option<Map<String, Value>>,
    ) -> Result<Reply, RpcError> {
        let mut params = params.unwrap_or_default();
        caller.session.to_caller.declare(&params);
        let found = self
            .carried(caller.headers, &mut params)
            .await
            .map_err(|d| denial_error(&d))?;
        if let Some(found) = found {
            // Refuse a session credential that could never authorize anything.
            self.standing(&found).await.map_err(|d| denial_error(&d))?;
            if caller.session.pinned {
                let found = self
                    .presented(caller, Some(found))
                    .map_err(|d| denial_error(&d))?;
                tracing::debug!(
                    protocol = found.as_ref().map_or("none", |f| f.protocol.id().name),
                    "initialize's credential extends the session's; the session keeps its own"
                );
                return self.initialize_answer(params);
            }
            *caller
                .session
                .credential
                .write()
                .unwrap_or_else(|p| p.into_inner()) = Some(found);
        }
        self.initialize_answer(params)
    }

    /// `initialize`'s result.
    fn initialize_answer(&self, params: Map<String, Value>) -> Result<Reply, RpcError> {
        let asked = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid_params("invalid_params", "protocolVersion must be a string"))?;
        let version = if SUPPORTED_VERSIONS.contains(&asked) {
            asked
        } else {
            PROTOCOL_VERSION
        };
        let (capabilities, instructions) = self.offered_capabilities();
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": {
                "name": "dgw",
                "title": "delegate-gateway",
                "version": env!("CARGO_PKG_VERSION"),
            },
        });
        if let Some(text) = instructions {
            result["instructions"] = json!(text);
        }
        Ok(Reply::Result(result))
    }

    /// What dgw offers: `tools`, plus each family (`resources`, `prompts`,
    /// `completions`, `logging`) some upstream declares; and the
    /// upstreams' instructions, each under its name.
    pub(super) fn offered_capabilities(&self) -> (Map<String, Value>, Option<String>) {
        let mut capabilities = Map::new();
        capabilities.insert("tools".into(), json!({"listChanged": false}));
        let mut instructions = Vec::new();
        for up in self.upstreams().iter() {
            let Some(init) = up.initialize_result() else {
                continue;
            };
            if let Some(Value::Object(caps)) = init.get("capabilities") {
                for family in ["resources", "prompts", "completions", "logging"] {
                    if caps.contains_key(family) {
                        capabilities.insert(family.into(), json!({}));
                    }
                }
            }
            if let Some(text) = init.get("instructions").and_then(Value::as_str) {
                instructions.push(format!("{}: {text}", up.name));
            }
        }
        (
            capabilities,
            (!instructions.is_empty()).then(|| instructions.join("\n\n")),
        )
    }

    /// The credential for this request: the call's own, else the
    /// transport's header, else the session's.
    pub(super) fn presented(
        &self,
        caller: Caller<'_>,
        in_request: Option<Found>,
    ) -> Result<Option<Found>, Denial> {
        let header = self.header_credential(caller.authorization).transpose()?;
        if caller.session.pinned {
            let pinned = caller
                .session
                .credential
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            return Ok(match (in_request, pinned) {
                (Some(request), Some(pinned)) => Some(narrower(request, &pinned)?),
                (request, pinned) => request.or(pinned),
            });
        }
        let session = || {
            caller
                .session
                .credential
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
        };
        // A credential in two parts (a bearer token in the header, its
        // delegation in the request or the session) is combined; else
        // the request's wins, then the header's, then the session's.
        Ok(match (in_request, header) {
            (Some(request), Some(header)) => {
                Some(self.protocols.combine(&header, &request).unwrap_or(request))
            }
            (Some(request), None) => Some(request),
            (None, Some(header)) => Some(
                session()
                    .and_then(|s| self.protocols.combine(&header, &s))
                    .unwrap_or(header),
            ),
            (None, None) => session(),
        })
    }

    /// §11.3 step 4: the upstreams' tools, only those a rule names, and
    /// with a DCT only those its capabilities reach.
    async fn list_tools(
        &self,
        caller: Caller<'_>,
        params: Option<Map<String, Value>>,
    ) -> Result<Reply, RpcError> {
        let mut params = params.unwrap_or_default();
        let in_params = self
            .carried(caller.headers, &mut params)
            .await
            .map_err(|d| denial_error(&d))?;
        let capabilities = match self
            .presented(caller, in_params)
            .map_err(|d| denial_error(&d))?
        {
            Some(found) => self.standing(&found).await.map_err(|d| denial_error(&d))?,
            None => None,
        };
        self.refresh_catalog().await;
        let catalog = self.catalog();
        // The protocols' own tools (open), then the upstreams' they do not shadow.
        let mut tools = self.protocols.tools();
        tools.extend(
            catalog
                .tools
                .iter()
                .filter(|t| self.protocols.serving_tool(&t.exposed).is_none())
                .filter(|t| match t.upstream.rules().policy_for(&t.original) {
                    None => false,
                    Some(policy) => capabilities
                        .as_deref()
                        .is_none_or(|caps| policy.offered_to(caps)),
                })
                .map(|t| Value::Object(t.definition.clone())),
        );
        Ok(Reply::Result(json!({ "tools": tools })))
    }

    /// Finds a tool by the name offered downstream, listing again once when
    /// the name is unknown or an upstream said its list changed.
    pub(super) async fn find_tool(&self, name: &str) -> Option<Arc<CatalogTool>> {
        let stale = self.upstreams.load().iter().any(|u| u.tools_stale());
        if !stale {
            let catalog = self.catalog();
            if let Some(&i) = catalog.by_name.get(name) {
                return Some(catalog.tools[i].clone());
            }
        }
        self.refresh_catalog().await;
        let catalog = self.catalog();
        catalog.by_name.get(name).map(|&i| catalog.tools[i].clone())
    }

    /// Other methods (`completion/complete`, …) go to the first upstream
    /// that declares their family.
    async fn pass_through(
        &self,
        method: &str,
        params: Option<Map<String, Value>>,
        cancel: &Cancel,
    ) -> Result<Reply, RpcError> {
        let family = match method.split('/').next().unwrap_or_default() {
            "completion" => "completions",
            other => other,
        };
        let upstream = self
            .upstreams()
            .iter()
            .find(|u| u.is_ready() && u.declares(family))
            .cloned()
            .ok_or_else(|| {
                RpcError::new(
                    METHOD_NOT_FOUND,
                    "method_not_found",
                    format!("method {method:?} not found: no upstream offers {family:?}"),
                )
            })?;
        let mut params = params;
        if let Some(p) = params.as_mut() {
            // No credential leaves dgw, whichever protocol's it is.
            let _ = self.take_credential(p).await;
        }
        upstream
            .request(method, params, cancel, None)
            .await
            .map_err(|e| upstream_error(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::offerable_tool_name;

    #[test]
    fn look_alike_and_separator_names_are_not_offered() {
        for ok in ["read_secret", "read-file.v2", "a", &"x".repeat(128)] {
            assert!(offerable_tool_name(ok), "{ok}");
        }
        for bad in [
            "r\u{435}ad_secret", // Cyrillic е
            "files__read",
            "with space",
            "",
            &"x".repeat(129),
            "tab\t",
        ] {
            assert!(!offerable_tool_name(bad), "{bad:?}");
        }
    }
}
