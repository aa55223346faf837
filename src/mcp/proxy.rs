//! The MCP proxy (§11.3), whatever the downstream transport: answers
//! `initialize` and `ping`, lists the upstreams' tools filtered by the
//! caller's DCT, enforces every `tools/call` through the gatekeeper
//! (verify, capability from the tool's rule, reserve its cost, settle when
//! the upstream answers), and passes other methods through.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use delegateos::messages::{McpDelegateos, MCP_FIELD};
use serde_json::{json, Map, Value};

use super::cancel::{Cancel, InFlight};
use super::message::{Id, Message, Reply};
use super::resolve;
use super::scrub;
use super::tools::ToolPolicy;
use super::upstream::{Upstream, UpstreamError, PROTOCOL_VERSION, SUPPORTED_VERSIONS};
use crate::budget::OnExpiry;
use crate::caller;
use crate::gatekeeper::{Authorization, Gatekeeper};
use crate::jsonrpc::{
    denial_error, gate_error, RpcError, DENIED, INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND,
};
use crate::talos_gate::{self, TalosGate};
use crate::telemetry::{self, Outcome, RequestRecord};

/// Methods that read data an upstream holds. The gateway cannot tie them
/// to a capability, so it refuses them unless the config lists them in
/// `[mcp] unchecked_methods`.
pub const DATA_METHODS: &[&str] = &[
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/get",
];

/// Separates an upstream's name from a tool's when two upstreams offer
/// tools of the same name.
pub const CLASH_SEPARATOR: &str = "__";

/// What a downstream session remembers between requests.
#[derive(Debug)]
pub struct Session {
    /// Names the session where a protocol needs one (Talos replay
    /// protection, when the envelope names no session of its own).
    id: String,
    /// The DCT presented in `initialize` params, for the whole session.
    dct: RwLock<Option<McpDelegateos>>,
    /// Forwarded requests the client may cancel.
    in_flight: InFlight,
}

impl Session {
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
        let id = crate::random::session_id().unwrap_or_else(|_| format!("local-{n}"));
        Self {
            id,
            dct: RwLock::new(None),
            in_flight: InFlight::default(),
        }
    }
}

/// Who is calling: the session, and a DCT the transport carried with this
/// request (the `Authorization: DCT …` header on Streamable HTTP).
#[derive(Clone, Copy)]
pub struct Caller<'a> {
    pub session: &'a Session,
    pub header_dct: Option<&'a str>,
}

/// A tool as offered downstream.
#[derive(Debug, Clone)]
struct CatalogTool {
    exposed: String,
    upstream: usize,
    original: String,
    definition: Map<String, Value>,
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
                    tracing::warn!(upstream = %upstreams[*i].name, tool = ?name.chars().take(128).collect::<String>(), "dropping a tool whose name is not 1-128 printable ASCII characters without {CLASH_SEPARATOR:?} (mcp.strict_tool_names)");
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
                upstream,
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

/// A `tools/call`'s metric labels.
struct CallLabels {
    protocol: &'static str,
    upstream: String,
    tool: String,
}

/// A `tools/call` as metrics count it, recorded when dropped: also when the
/// client went away mid-call (its connection closed) and the call's future
/// with it, which counts as `cancelled`.
struct CallRecord {
    started: Instant,
    labels: CallLabels,
    upstream_time: Option<std::time::Duration>,
    outcome: CallOutcome,
}

impl Drop for CallRecord {
    fn drop(&mut self) {
        telemetry::record_mcp_call(
            self.labels.protocol,
            &self.labels.upstream,
            &self.labels.tool,
            self.outcome.as_str(),
            self.started.elapsed(),
            self.upstream_time,
        );
    }
}

/// A Talos denial: -32001 with the Talos reason in `data.type` and in the
/// message.
fn talos_denied(reason: &str, detail: &str) -> RpcError {
    let mut e = RpcError::new(
        DENIED,
        reason,
        format!("Talos authorization denied: {reason}: {detail}"),
    );
    e.data["detail"] = json!(detail);
    e.data["protocol"] = json!("talos");
    e
}

/// How a `tools/call` ended, for metrics.
#[derive(Clone, Copy)]
enum CallOutcome {
    /// The upstream answered.
    Forwarded,
    Denied,
    /// Bad params or an unknown tool.
    Invalid,
    /// The upstream could not be reached or did not answer.
    UpstreamFailed,
    /// The client cancelled the call while the upstream worked on it, or
    /// went away.
    Cancelled,
}

impl CallOutcome {
    fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Forwarded => "forwarded",
            CallOutcome::Denied => "denied",
            CallOutcome::Invalid => "invalid",
            CallOutcome::UpstreamFailed => "upstream_failed",
            CallOutcome::Cancelled => "cancelled",
        }
    }
}

/// The proxy over a gatekeeper and its upstreams.
pub struct McpProxy {
    gate: Arc<Gatekeeper>,
    talos: Arc<TalosGate>,
    upstreams: Vec<Arc<Upstream>>,
    unchecked_methods: Vec<String>,
    /// Drop upstream tools whose names are not [`offerable_tool_name`].
    strict_tool_names: bool,
    catalog: RwLock<Arc<Catalog>>,
}

fn invalid_params(kind: &str, message: impl Into<String>) -> RpcError {
    RpcError::new(INVALID_PARAMS, kind, message)
}

fn call_denied(kind: &str, message: impl Into<String>) -> RpcError {
    RpcError::new(DENIED, kind, message)
}

fn upstream_error(e: &UpstreamError) -> RpcError {
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
const REQUEST_CANCELLED: i64 = -32800;

/// Takes `_delegateos` out of params, typed.
fn take_delegateos(params: &mut Map<String, Value>) -> Result<Option<McpDelegateos>, RpcError> {
    let Some(raw) = params.remove(MCP_FIELD) else {
        return Ok(None);
    };
    let field: McpDelegateos = serde_json::from_value(raw)
        .map_err(|e| invalid_params("invalid_params", format!("{MCP_FIELD}: {e}")))?;
    field
        .check_format()
        .map_err(|m| invalid_params("invalid_params", m))?;
    Ok(Some(field))
}

impl McpProxy {
    /// The gatekeeper every call goes through.
    pub fn gate(&self) -> &Gatekeeper {
        &self.gate
    }

    pub fn new(
        gate: Arc<Gatekeeper>,
        talos: Arc<TalosGate>,
        upstreams: Vec<Arc<Upstream>>,
        unchecked_methods: Vec<String>,
        strict_tool_names: bool,
    ) -> Self {
        Self {
            gate,
            talos,
            upstreams,
            unchecked_methods,
            strict_tool_names,
            catalog: RwLock::new(Arc::default()),
        }
    }

    pub fn upstreams(&self) -> &[Arc<Upstream>] {
        &self.upstreams
    }

    fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Lists every ready upstream's tools again and rebuilds the catalog.
    pub async fn refresh_catalog(&self) {
        for up in &self.upstreams {
            if let Err(e) = up.list_tools().await {
                tracing::warn!(upstream = %up.name, error = %e, "listing tools failed; keeping the last list");
            }
        }
        self.rebuild_catalog();
    }

    /// Rebuilds the catalog from the tools the upstreams last listed.
    pub fn rebuild_catalog(&self) {
        let catalog = Arc::new(Catalog::build(&self.upstreams, self.strict_tool_names));
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
                tracing::debug!(request = ?id, cancelled, "client cancelled a request");
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
                "initialize" | "ping" | "tools/list" | "tools/call" => method,
                _ if DATA_METHODS.contains(&method) => method,
                _ => "other",
            },
        );
        let result = match method {
            "initialize" => self.initialize(caller, params).await,
            "ping" => Ok(Reply::Result(json!({}))),
            "tools/list" => self.list_tools(caller, params).await,
            "tools/call" => self.call_tool(caller, &id, params, cancel).await,
            _ => self.pass_through(method, params, cancel).await,
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
        if let Some(field) = take_delegateos(&mut params)? {
            // Refuse a session DCT that could never authorize anything.
            self.gate
                .standing(&field.dct)
                .await
                .map_err(|d| denial_error(&d))?;
            *caller
                .session
                .dct
                .write()
                .unwrap_or_else(|p| p.into_inner()) = Some(field);
        }
        let asked = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid_params("invalid_params", "protocolVersion must be a string"))?;
        let version = if SUPPORTED_VERSIONS.contains(&asked) {
            asked
        } else {
            PROTOCOL_VERSION
        };
        let mut capabilities = Map::new();
        capabilities.insert("tools".into(), json!({"listChanged": false}));
        let mut instructions = Vec::new();
        for up in &self.upstreams {
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
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": {
                "name": "dgw",
                "title": "delegate-gateway",
                "version": env!("CARGO_PKG_VERSION"),
            },
        });
        if !instructions.is_empty() {
            result["instructions"] = json!(instructions.join("\n\n"));
        }
        Ok(Reply::Result(result))
    }

    /// The DCT for this request: the call's own `_delegateos`, else the
    /// transport's header, else the session's.
    fn presented(&self, caller: Caller<'_>, field: Option<McpDelegateos>) -> Option<McpDelegateos> {
        field
            .or_else(|| {
                caller.header_dct.map(|dct| McpDelegateos {
                    dct: dct.to_owned(),
                    format: None,
                    delegation_id: None,
                    contract_id: None,
                })
            })
            .or_else(|| {
                caller
                    .session
                    .dct
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone()
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
        let field = take_delegateos(&mut params)?;
        let capabilities = match self.presented(caller, field) {
            Some(p) => Some(
                self.gate
                    .standing(&p.dct)
                    .await
                    .map_err(|d| denial_error(&d))?
                    .capabilities,
            ),
            None => None,
        };
        self.refresh_catalog().await;
        let catalog = self.catalog();
        let tools: Vec<Value> = catalog
            .tools
            .iter()
            .filter(
                |t| match self.upstreams[t.upstream].rules.policy_for(&t.original) {
                    None => false,
                    Some(policy) => capabilities
                        .as_deref()
                        .is_none_or(|caps| policy.offered_to(caps)),
                },
            )
            .map(|t| Value::Object(t.definition.clone()))
            .collect();
        Ok(Reply::Result(json!({ "tools": tools })))
    }

    /// Finds a tool by the name offered downstream, listing again once when
    /// the name is unknown or an upstream said its list changed.
    async fn find_tool(&self, name: &str) -> Option<Arc<CatalogTool>> {
        let stale = self.upstreams.iter().any(|u| u.tools_stale());
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

    async fn call_tool(
        &self,
        caller: Caller<'_>,
        id: &Id,
        params: Option<Map<String, Value>>,
        cancel: &Cancel,
    ) -> Result<Reply, RpcError> {
        let mut record = CallRecord {
            started: Instant::now(),
            labels: CallLabels {
                protocol: "delegateos",
                upstream: "-".to_owned(),
                tool: "unknown".to_owned(),
            },
            upstream_time: None,
            outcome: CallOutcome::Cancelled,
        };
        let result = self
            .enforce_and_forward(
                caller,
                id,
                params,
                cancel,
                &mut record.labels,
                &mut record.upstream_time,
            )
            .await;
        record.outcome = match &result {
            Ok(_) => CallOutcome::Forwarded,
            Err(e) if e.code == DENIED => CallOutcome::Denied,
            Err(e) if e.code == REQUEST_CANCELLED => CallOutcome::Cancelled,
            Err(e) if e.code == INTERNAL_ERROR => CallOutcome::UpstreamFailed,
            Err(_) => CallOutcome::Invalid,
        };
        result
    }

    async fn enforce_and_forward(
        &self,
        caller: Caller<'_>,
        id: &Id,
        params: Option<Map<String, Value>>,
        cancel: &Cancel,
        labels: &mut CallLabels,
        upstream_time: &mut Option<std::time::Duration>,
    ) -> Result<Reply, RpcError> {
        let params =
            params.ok_or_else(|| invalid_params("invalid_params", "tools/call needs params"))?;
        // A Talos envelope comes out first; the request hash is of the
        // request without it (§3).
        let mut request = Map::new();
        request.insert("jsonrpc".into(), json!("2.0"));
        request.insert("id".into(), id.clone());
        request.insert("method".into(), json!("tools/call"));
        request.insert("params".into(), Value::Object(params));
        let envelope = match talos::envelope::take(&mut request) {
            Ok(e) => e,
            Err(d) => {
                let tool = request
                    .get("params")
                    .and_then(|p| p.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let r = self
                    .talos
                    .refuse_early(&tool, "", d.reason.as_str(), d.detail)
                    .await;
                return Err(talos_denied(&r.reason, &r.detail));
            }
        };
        let request_hash = envelope
            .as_ref()
            .map(|_| talos::envelope::request_hash(&request))
            .unwrap_or_default();
        let mut params = match request.remove("params") {
            Some(Value::Object(p)) => p,
            _ => Map::new(),
        };
        let field = take_delegateos(&mut params)?;
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid_params("invalid_params", "params.name must be a string"))?
            .to_owned();
        if !matches!(params.get("arguments"), None | Some(Value::Object(_))) {
            return Err(invalid_params(
                "invalid_params",
                "params.arguments must be an object",
            ));
        }
        // Talos names an unknown or unmapped tool UNKNOWN_TOOL (§4.2 step 6).
        let unknown_to_talos = |detail: String| {
            let (name, request_hash) = (&name, &request_hash);
            async move {
                let r = self
                    .talos
                    .refuse_early(name, request_hash, "UNKNOWN_TOOL", detail)
                    .await;
                talos_denied(&r.reason, &r.detail)
            }
        };
        if envelope.is_some() {
            labels.protocol = "talos";
        }
        let Some(tool) = self.find_tool(&name).await else {
            if envelope.is_some() {
                return Err(unknown_to_talos(format!("unknown tool {name:?}")).await);
            }
            let mut e = invalid_params("unknown_tool", format!("unknown tool {name:?}"));
            e.data["tool"] = json!(name);
            return Err(e);
        };
        let upstream = &self.upstreams[tool.upstream];
        labels.upstream = upstream.name.clone();
        labels.tool = tool.exposed.clone();
        let Some(policy) = upstream.rules.policy_for(&tool.original) else {
            if envelope.is_some() {
                return Err(unknown_to_talos(format!(
                    "tool {name:?} is not mapped to a capability, so it is denied"
                ))
                .await);
            }
            return Err(call_denied(
                "tool_not_mapped",
                format!("tool {name:?} is not mapped to a capability, so it is denied"),
            ));
        };
        if let (
            ToolPolicy::Enforced {
                resource,
                resolve_path: true,
                ..
            },
            Some(Value::Object(arguments)),
        ) = (policy, params.get_mut("arguments"))
        {
            // Checked and forwarded as the kernel will resolve it.
            resource.rewrite(arguments, resolve::resolve).map_err(|e| {
                let mut err = call_denied("invalid_resource", format!("tool {name:?}: {e}"));
                err.data["tool"] = json!(name);
                err
            })?;
        }
        let no_arguments = Map::new();
        let arguments = match params.get("arguments") {
            Some(Value::Object(a)) => a,
            _ => &no_arguments,
        };
        let requests = policy.requests(arguments).map_err(|e| {
            let mut err = call_denied("resource_missing", format!("tool {name:?}: {e}"));
            err.data["tool"] = json!(name);
            err
        })?;

        // Authorize by the credential presented: a Talos envelope, else a
        // DCT; an open tool needs neither. Either way a reservation that is
        // charged on expiry, then one forwarding path.
        let cost = policy.cost_microcents();
        let (reservation, talos_call) = match (envelope, policy) {
            (_, ToolPolicy::Open) => {
                labels.protocol = "open";
                (None, None)
            }
            (Some(envelope), ToolPolicy::Enforced { action, .. }) => {
                let call = talos_gate::Call {
                    envelope,
                    tool: &tool.exposed,
                    method: action,
                    resources: requests.iter().map(|r| r.resource.clone()).collect(),
                    cost_microcents: cost,
                    mcp_session: &caller.session.id,
                    request_hash,
                };
                let allowed = match self.talos.authorize(call).await {
                    Ok(Ok(a)) => a,
                    Ok(Err(refusal)) => return Err(talos_denied(&refusal.reason, &refusal.detail)),
                    Err(e) => return Err(gate_error(&e)),
                };
                (
                    Some(allowed.reservation.reservation_id.clone()),
                    Some(allowed),
                )
            }
            (None, ToolPolicy::Enforced { .. }) => {
                let presented = self.presented(caller, field).ok_or_else(|| {
                    call_denied(
                        "dct_required",
                        format!("tool {name:?} needs a DCT: in params._delegateos, an `Authorization: DCT` header, or initialize's _delegateos"),
                    )
                })?;
                let a = self.authorize(&presented, &requests, cost).await?;
                (a.reservation.map(|r| r.reservation_id), None)
            }
        };

        // Forward under the upstream's own name, without `_delegateos`, in
        // a task of its own: once the upstream may act, the call ends here
        // (answered, or cancelled upstream, and settled) even if the client
        // goes away meanwhile, which cancels it.
        params.insert("name".into(), json!(tool.original));
        let (upstream, gate, talos) = (upstream.clone(), self.gate.clone(), self.talos.clone());
        let (id, cancel) = (id.clone(), cancel.clone());
        let forwarded = tokio::spawn(async move {
            let started = Instant::now();
            let reply = upstream.request("tools/call", Some(params), &cancel).await;
            let upstream_time = started.elapsed();
            // Charged once the upstream was reached (it may have acted);
            // released when the call never left dgw.
            if let Some(reservation) = &reservation {
                match &reply {
                    Err(e) if !e.reached() => {
                        if let Err(r) = gate.release(&caller::Caller::gateway(), reservation).await
                        {
                            tracing::error!(error = %r, "releasing a reservation failed");
                        }
                    }
                    _ => {
                        if let Err(e) = gate.settle_charged(reservation, cost).await {
                            tracing::error!(%reservation, error = %e, "settling a tool call failed");
                        }
                    }
                }
            }
            if let Some(allowed) = &talos_call {
                match &reply {
                    Ok(r) => {
                        let response = r.clone().into_response(id);
                        let ok = matches!(r, Reply::Result(_));
                        talos
                            .invoked(allowed, talos::canonical::sha256_hex(&response), ok)
                            .await;
                    }
                    Err(e) if e.reached() => talos.invoked(allowed, String::new(), false).await,
                    Err(_) => {}
                }
            }
            (reply, upstream_time)
        });
        let (reply, took) = forwarded.await.map_err(|e| {
            RpcError::new(
                INTERNAL_ERROR,
                "internal_error",
                format!("forwarding the call failed: {e}"),
            )
        })?;
        *upstream_time = Some(took);
        let named: Vec<String> = requests.into_iter().map(|r| r.resource).collect();
        reply
            .map(|r| scrub::scrub_reply(r, &named))
            .map_err(|e| upstream_error(&e))
    }

    async fn authorize(
        &self,
        presented: &McpDelegateos,
        requests: &[delegateos::CapabilityRequest],
        cost: u64,
    ) -> Result<Authorization, RpcError> {
        // Charged on expiry: once forwarded, the call may have run, so a
        // crash before the settle must still charge it (docs/decisions.md).
        let a = match self
            .gate
            .authorize(&presented.dct, requests, cost, OnExpiry::Charge)
            .await
        {
            Ok(Ok(a)) => a,
            Ok(Err(denial)) => return Err(denial_error(&denial)),
            Err(e) => return Err(gate_error(&e)),
        };
        let mismatch = match (&presented.delegation_id, &presented.contract_id) {
            (Some(d), _) if *d != a.scope.delegation_id => Some(format!(
                "_delegateos.delegationId is {d} but the DCT's delegation is {}",
                a.scope.delegation_id
            )),
            (_, Some(c)) if *c != a.scope.contract_id => Some(format!(
                "_delegateos.contractId is {c} but the DCT's contract is {}",
                a.scope.contract_id
            )),
            _ => None,
        };
        if let Some(m) = mismatch {
            if let Some(r) = &a.reservation {
                if let Err(e) = self
                    .gate
                    .release(&caller::Caller::gateway(), &r.reservation_id)
                    .await
                {
                    tracing::error!(error = %e, "releasing a reservation failed");
                }
            }
            return Err(invalid_params("delegation_mismatch", m));
        }
        Ok(a)
    }

    /// Other methods go to the first upstream that declares their family.
    async fn pass_through(
        &self,
        method: &str,
        params: Option<Map<String, Value>>,
        cancel: &Cancel,
    ) -> Result<Reply, RpcError> {
        if DATA_METHODS.contains(&method) && !self.unchecked_methods.iter().any(|m| m == method) {
            return Err(RpcError::new(
                METHOD_NOT_FOUND,
                "method_not_allowed",
                format!("dgw cannot enforce a DCT on {method}, so it does not pass it through; list it in [mcp] unchecked_methods to allow it"),
            ));
        }
        let family = match method.split('/').next().unwrap_or_default() {
            "completion" => "completions",
            other => other,
        };
        let upstream = self
            .upstreams
            .iter()
            .find(|u| u.is_ready() && u.declares(family))
            .ok_or_else(|| {
                RpcError::new(
                    METHOD_NOT_FOUND,
                    "method_not_found",
                    format!("method {method:?} not found: no upstream offers {family:?}"),
                )
            })?;
        let mut params = params;
        if let Some(p) = params.as_mut() {
            p.remove(MCP_FIELD);
        }
        upstream
            .request(method, params, cancel)
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
