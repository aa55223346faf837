//! The MCP proxy (§11.3), whatever the downstream transport: answers
//! `initialize` and `ping`, lists the upstreams' tools filtered by the
//! caller's credential, enforces every `tools/call` through the protocol
//! registry and the gatekeeper (which protocol the call carries, its grant,
//! the capability from the tool's rule, its cost reserved, settled when the
//! upstream answers), and passes other methods through.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::cancel::{Cancel, InFlight};
use super::message::{Id, Message, Reply};
use super::resolve;
use super::scrub;
use super::tools::ToolPolicy;
use super::upstream::{Upstream, UpstreamError, PROTOCOL_VERSION, SUPPORTED_VERSIONS};
use crate::budget::OnExpiry;
use crate::caller;
use crate::gatekeeper::Gatekeeper;
use crate::jsonrpc::{
    denial_error, gate_error, RpcError, DENIED, INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND,
};
use crate::protocol::{Call, Completed, Denial, EarlyRefusal, Found, Registry};
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
    /// The credential presented in `initialize`, for the whole session.
    credential: RwLock<Option<Found>>,
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
            credential: RwLock::new(None),
            in_flight: InFlight::default(),
        }
    }
}

/// Who is calling: the session, and the `Authorization` header the
/// transport carried with this request (Streamable HTTP), for the protocol
/// whose scheme it names.
#[derive(Clone, Copy)]
pub struct Caller<'a> {
    pub session: &'a Session,
    pub authorization: Option<&'a str>,
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
    protocols: Arc<Registry>,
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
/// A call matched to its tool and rule.
struct Routed {
    tool: Arc<CatalogTool>,
    upstream: Arc<Upstream>,
    /// The rule's action; `None` for an open tool.
    action: Option<String>,
    requests: Vec<delegateos::CapabilityRequest>,
    cost: u64,
}

impl Routed {
    /// The call as the pipeline and the protocols see it.
    fn call<'a>(&'a self, action: &'a str, session: &'a str) -> Call<'a> {
        Call {
            tool: &self.tool.exposed,
            action,
            requests: &self.requests,
            cost_microcents: self.cost,
            session,
        }
    }
}

/// What the pipeline allowed, kept until the call ends.
struct Granted {
    /// What is held (none for a zero-cost call).
    reservation: Option<String>,
    grant: crate::protocol::Grant,
    found: Found,
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
        unchecked_methods: Vec<String>,
        strict_tool_names: bool,
    ) -> Self {
        Self {
            gate,
            protocols,
            upstreams,
            unchecked_methods,
            strict_tool_names,
            catalog: RwLock::new(Arc::default()),
        }
    }

    pub fn upstreams(&self) -> &[Arc<Upstream>] {
        &self.upstreams
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
        params: &mut Map<String, Value>,
    ) -> Result<Option<Found>, Denial> {
        let in_params = self.take_credential(params).await?;
        match self.header_credential(authorization).transpose()? {
            Some(found) => Ok(Some(found)),
            None => Ok(in_params),
        }
    }

    /// Takes every protocol's credential out of a request's params.
    async fn take_credential(
        &self,
        params: &mut Map<String, Value>,
    ) -> Result<Option<Found>, Denial> {
        let mut request = Map::new();
        request.insert("params".into(), Value::Object(std::mem::take(params)));
        let found = self.protocols.take_from_request(&mut request).await;
        if let Some(Value::Object(p)) = request.remove("params") {
            *params = p;
        }
        found
    }

    /// What a credential may do now (`None`: its protocol cannot say); a
    /// credential that could never authorize anything is refused.
    pub async fn standing(
        &self,
        found: &Found,
    ) -> Result<Option<Vec<delegateos::Capability>>, Denial> {
        found.protocol.standing(&found.credential).await
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
        let found = self
            .take_credential(&mut params)
            .await
            .map_err(|d| denial_error(&d))?;
        if let Some(found) = found {
            // Refuse a session credential that could never authorize anything.
            self.standing(&found).await.map_err(|d| denial_error(&d))?;
            *caller
                .session
                .credential
                .write()
                .unwrap_or_else(|p| p.into_inner()) = Some(found);
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

    /// The credential for this request: the call's own, else the
    /// transport's header, else the session's.
    fn presented(
        &self,
        caller: Caller<'_>,
        in_request: Option<Found>,
    ) -> Result<Option<Found>, Denial> {
        if in_request.is_some() {
            return Ok(in_request);
        }
        if let Some(found) = self.header_credential(caller.authorization).transpose()? {
            return Ok(Some(found));
        }
        Ok(caller
            .session
            .credential
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone())
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
            .take_credential(&mut params)
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

    /// A `tools/call`: whose credential, which tool and what it asks, the
    /// pipeline's decision, then the upstream.
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
        let (mut params, found) = self.call_credential(caller, id, params).await?;
        if let Some(f) = &found {
            labels.protocol = f.protocol.id().name;
        }
        let routed = self
            .route(caller, found.as_ref(), &mut params, labels)
            .await?;
        let granted = match (&routed.action, found) {
            (None, _) => {
                labels.protocol = "open";
                None
            }
            (Some(_), None) => {
                return Err(call_denied(
                    "dct_required",
                    format!("tool {:?} needs a credential: a DCT in params._delegateos, an `Authorization: DCT` header or initialize's _delegateos, or another protocol's ({})", routed.tool.exposed, self.protocol_names()),
                ));
            }
            (Some(action), Some(found)) => {
                let call = routed.call(action, &caller.session.id);
                // Charged on expiry: once forwarded, the call may have run,
                // so a crash before the settle must still charge it
                // (docs/decisions.md).
                match self
                    .gate
                    .authorize_with(&found, &call, OnExpiry::Charge)
                    .await
                {
                    Ok(Ok((a, grant))) => Some(Granted {
                        reservation: a.reservation.map(|r| r.reservation_id),
                        grant,
                        found,
                    }),
                    Ok(Err(d)) => return Err(denial_error(&d)),
                    Err(e) => return Err(gate_error(&e)),
                }
            }
        };
        let (reply, took) = self
            .forward(id, cancel, &caller.session.id, params, &routed, granted)
            .await?;
        *upstream_time = Some(took);
        let named: Vec<String> = routed.requests.into_iter().map(|r| r.resource).collect();
        reply
            .map(|r| scrub::scrub_reply(r, &named))
            .map_err(|e| upstream_error(&e))
    }

    /// Takes every protocol's credential out of the request as the client
    /// sent it (a Talos request hash covers it without its envelope, §3), so
    /// none of it is forwarded; the credential of the call, else the
    /// transport's header, else the session's.
    async fn call_credential(
        &self,
        caller: Caller<'_>,
        id: &Id,
        params: Map<String, Value>,
    ) -> Result<(Map<String, Value>, Option<Found>), RpcError> {
        let mut request = Map::new();
        request.insert("jsonrpc".into(), json!("2.0"));
        request.insert("id".into(), id.clone());
        request.insert("method".into(), json!("tools/call"));
        request.insert("params".into(), Value::Object(params));
        let in_request = self.protocols.take_from_request(&mut request).await;
        let params = match request.remove("params") {
            Some(Value::Object(p)) => p,
            _ => Map::new(),
        };
        let tool = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_owned();
        let found = in_request
            .and_then(|f| self.presented(caller, f))
            .map_err(|d| self.refused(d, &tool))?;
        Ok((params, found))
    }

    /// The tool a call names, its rule, and the capability requests its
    /// arguments make (paths resolved where the rule says so, rewritten in
    /// `params` to what is checked).
    async fn route(
        &self,
        caller: Caller<'_>,
        found: Option<&Found>,
        params: &mut Map<String, Value>,
        labels: &mut CallLabels,
    ) -> Result<Routed, RpcError> {
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
        let Some(tool) = self.find_tool(&name).await else {
            let detail = format!("unknown tool {name:?}");
            if let Some(d) = self
                .refused_early(found, &name, caller, EarlyRefusal::UnknownTool, &detail)
                .await
            {
                return Err(d);
            }
            let mut e = invalid_params("unknown_tool", detail);
            e.data["tool"] = json!(name);
            return Err(e);
        };
        let upstream = self.upstreams[tool.upstream].clone();
        labels.upstream = upstream.name.clone();
        labels.tool = tool.exposed.clone();
        let Some(policy) = upstream.rules.policy_for(&tool.original) else {
            let detail = format!("tool {name:?} is not mapped to a capability, so it is denied");
            if let Some(d) = self
                .refused_early(found, &name, caller, EarlyRefusal::UnmappedTool, &detail)
                .await
            {
                return Err(d);
            }
            return Err(call_denied("tool_not_mapped", detail));
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
        let action = match policy {
            ToolPolicy::Open => None,
            ToolPolicy::Enforced { action, .. } => Some(action.clone()),
        };
        Ok(Routed {
            cost: policy.cost_microcents(),
            tool,
            upstream,
            action,
            requests,
        })
    }

    /// Forwards under the upstream's own name in a task of its own: once the
    /// upstream may act, the call ends here (answered, or cancelled upstream,
    /// and settled) even if the client goes away meanwhile, which cancels
    /// it. Charged once the upstream was reached (it may have acted);
    /// released when the call never left dgw; the protocol is told.
    async fn forward(
        &self,
        id: &Id,
        cancel: &Cancel,
        session: &str,
        mut params: Map<String, Value>,
        routed: &Routed,
        granted: Option<Granted>,
    ) -> Result<(Result<Reply, UpstreamError>, std::time::Duration), RpcError> {
        params.insert("name".into(), json!(routed.tool.original));
        let (upstream, gate) = (routed.upstream.clone(), self.gate.clone());
        let (id, cancel, session) = (id.clone(), cancel.clone(), session.to_owned());
        let (tool, action) = (routed.tool.exposed.clone(), routed.action.clone());
        let (requests, cost) = (routed.requests.clone(), routed.cost);
        let forwarded = tokio::spawn(async move {
            let started = Instant::now();
            let reply = upstream.request("tools/call", Some(params), &cancel).await;
            let took = started.elapsed();
            let Some(granted) = granted else {
                return (reply, took);
            };
            if let Some(reservation) = &granted.reservation {
                let ended = match &reply {
                    Err(e) if !e.reached() => gate
                        .release(&caller::Caller::gateway(), reservation)
                        .await
                        .map(drop),
                    _ => gate.settle_charged(reservation, cost).await.map(drop),
                };
                if let Err(e) = ended {
                    tracing::error!(%reservation, error = %e, "ending a tool call's reservation failed");
                }
            }
            let call = Call {
                tool: &tool,
                action: action.as_deref().unwrap_or_default(),
                requests: &requests,
                cost_microcents: cost,
                session: &session,
            };
            let protocol = &granted.found.protocol;
            match &reply {
                Ok(r) => {
                    let response = r.clone().into_response(id);
                    let ok = matches!(r, Reply::Result(_));
                    let how = Completed::Answered {
                        response: &response,
                        ok,
                    };
                    protocol.completed(&granted.grant, &call, how).await;
                }
                Err(e) if e.reached() => {
                    protocol
                        .completed(&granted.grant, &call, Completed::Failed)
                        .await
                }
                Err(_) => {}
            }
            (reply, took)
        });
        forwarded.await.map_err(|e| {
            RpcError::new(
                INTERNAL_ERROR,
                "internal_error",
                format!("forwarding the call failed: {e}"),
            )
        })
    }

    /// A credential refused before the call was read: counted, answered.
    fn refused(&self, d: Denial, tool: &str) -> RpcError {
        self.gate.record_refusal(&d);
        let mut e = denial_error(&d);
        if e.code != DENIED {
            e.data["tool"] = json!(tool);
        }
        e
    }

    /// The denial a credential's protocol gives a call refused before its
    /// credential was read (Talos: `UNKNOWN_TOOL`), if it has one.
    async fn refused_early(
        &self,
        found: Option<&Found>,
        name: &str,
        caller: Caller<'_>,
        why: EarlyRefusal,
        detail: &str,
    ) -> Option<RpcError> {
        let found = found?;
        let call = Call {
            tool: name,
            action: "",
            requests: &[],
            cost_microcents: 0,
            session: &caller.session.id,
        };
        let d = found
            .protocol
            .refused_early(&found.credential, &call, why, detail)
            .await?;
        self.gate.record_refusal(&d);
        Some(denial_error(&d))
    }

    /// The registered protocols' names, for messages.
    fn protocol_names(&self) -> String {
        self.protocols
            .all()
            .iter()
            .map(|p| p.id().title)
            .collect::<Vec<_>>()
            .join(", ")
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
            // No credential leaves dgw, whichever protocol's it is.
            let _ = self.take_credential(p).await;
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
