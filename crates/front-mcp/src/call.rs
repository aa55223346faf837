//! `tools/call`: whose credential the call carries (the protocol registry),
//! which tool and rule, the pipeline's decision, then the upstream, and
//! how the call ended for metrics.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::auth::HttpCredentials;
use super::cancel::Cancel;
use super::message::{Id, Reply};
use super::proxy::{
    call_denied, invalid_params, upstream_error, Caller, CatalogTool, McpProxy, Session,
    REQUEST_CANCELLED,
};
use super::resolve;
use super::scrub;
use super::tools::ToolPolicy;
use super::upstream::{Upstream, UpstreamError};
use dgw_core::budget::OnExpiry;
use dgw_core::caller;
use dgw_core::protocol::{Call, Completed, Decision, Denial, EarlyRefusal, Found, Review};
use dgw_core::run_to_end::run_to_end;
use dgw_core::telemetry;
use dgw_front_jsonrpc::{denial_error, gate_error, RpcError, DENIED, INTERNAL_ERROR};

/// A `tools/call`'s metric labels, borrowed from what the call found (no
/// owned strings per call).
struct CallLabels {
    protocol: &'static str,
    target: Target,
}

/// What a call reached, for its `upstream` and `tool` labels.
enum Target {
    /// No tool yet (bad params, an unknown tool).
    Unknown,
    /// A protocol's own tool, answered by dgw.
    Served(String),
    Tool(Arc<CatalogTool>),
}

impl CallLabels {
    fn upstream(&self) -> &str {
        match &self.target {
            Target::Unknown => "-",
            Target::Served(_) => "dgw",
            Target::Tool(t) => &t.upstream.name,
        }
    }

    fn tool(&self) -> &str {
        match &self.target {
            Target::Unknown => "unknown",
            Target::Served(name) => name,
            Target::Tool(t) => &t.exposed,
        }
    }
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
            self.labels.upstream(),
            self.labels.tool(),
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

/// A call matched to its upstream and rule: a tool's, or a resource's or
/// prompt's ([`super::data`]).
pub(super) struct Routed {
    /// What the pipeline and the protocols call it: the tool's name as
    /// offered downstream, the resource's normalized URI, the prompt's name.
    pub(super) name: String,
    /// The method forwarded upstream.
    pub(super) method: &'static str,
    pub(super) upstream: Arc<Upstream>,
    /// The rule's action; `None` when the rule is open.
    pub(super) action: Option<String>,
    pub(super) requests: Vec<delegateos::CapabilityRequest>,
    pub(super) cost: u64,
    /// The rule's own credentials for the upstream, taken with its policy
    /// (so a reload between check and call cannot swap them).
    pub(super) presenting: Option<Arc<HttpCredentials>>,
}

impl Routed {
    /// The call as the pipeline and the protocols see it.
    fn call<'a>(&'a self, action: &'a str, scope: &'a Scope) -> Call<'a> {
        Call {
            tool: &self.name,
            action,
            requests: &self.requests,
            cost_microcents: self.cost,
            session: &scope.name,
            in_session: scope.in_session,
        }
    }
}

/// What a call's replay protection is scoped by: the MCP session, or for
/// a caller without one (2026-07-28) its credential, whose every request
/// stands alone (docs/decisions.md 350).
pub(super) struct Scope {
    name: String,
    in_session: bool,
}

impl Scope {
    pub(super) fn of(session: &Session, found: Option<&Found>) -> Self {
        match (session.per_request(), found) {
            (true, Some(f)) => Self {
                name: format!(
                    "credential:{}",
                    delegateos::base64url::encode(&f.credential.holder().0)
                ),
                in_session: false,
            },
            (true, None) => Self {
                name: "credential:none".to_owned(),
                in_session: false,
            },
            (false, _) => Self {
                name: session.id.clone(),
                in_session: true,
            },
        }
    }
}

/// A forwarded call's answer, how long the upstream took, and why its
/// answer was withheld, if it was.
type Forwarded = (
    Result<Reply, UpstreamError>,
    std::time::Duration,
    Option<(&'static str, String)>,
);

/// What the pipeline allowed, kept until the call ends.
pub(super) struct Granted {
    /// What is held (none for a zero-cost call).
    reservation: Option<String>,
    grant: dgw_core::protocol::Grant,
    /// What its replay protection was scoped by.
    scope: Scope,
}

impl McpProxy {
    pub(super) async fn call_tool(
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
                target: Target::Unknown,
            },
            upstream_time: None,
            outcome: CallOutcome::Cancelled,
        };
        let served = params
            .as_ref()
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .and_then(|name| self.protocols.serving_tool(name).map(|p| (name, p.clone())));
        let result = match served {
            // A protocol's own tool: open, answered by dgw.
            Some((name, protocol)) => {
                record.labels = CallLabels {
                    protocol: protocol.id.name,
                    target: Target::Served(name.to_owned()),
                };
                let arguments = params
                    .as_ref()
                    .and_then(|p| p.get("arguments"))
                    .cloned()
                    .unwrap_or(Value::Null);
                protocol
                    .call_tool(name, &arguments)
                    .await
                    .map(Reply::Result)
                    .map_err(|e| invalid_params("invalid_params", e.to_string()))
            }
            None => {
                self.enforce_and_forward(
                    caller,
                    id,
                    params,
                    cancel,
                    &mut record.labels,
                    &mut record.upstream_time,
                )
                .await
            }
        };
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
        let (mut params, found) = self
            .call_credential(caller, id, "tools/call", params)
            .await?;
        if let Some(f) = &found {
            labels.protocol = f.protocol.id().name;
        }
        let (tool, mut routed) = self
            .route(caller, found.as_ref(), &mut params, labels)
            .await?;
        if routed.action.is_none() {
            labels.protocol = "open";
        }
        // A 2026-07-28 caller's call may be one round of an input-required
        // exchange: its state is remembered for, and checked on, the retry.
        let holder = match (&routed.action, &found) {
            (Some(_), Some(f)) if is_stateless(&params) => Some(f.credential.holder()),
            _ => None,
        };
        if let (Some(holder), Some(state)) = (&holder, params.get("requestState")) {
            // The retry of a call already charged: enforced, not charged again.
            let state = state.as_str().ok_or_else(|| {
                invalid_params("invalid_params", "params.requestState must be a string")
            })?;
            self.request_states
                .take(state, holder, &tool.exposed)
                .await
                .map_err(|r| {
                    let mut e = call_denied(r.kind(), r.to_string());
                    e.data["tool"] = json!(tool.exposed);
                    e
                })?;
            routed.cost = 0;
        }
        let granted = self
            .grant(caller, &routed, found, &format!("tool {:?}", tool.exposed))
            .await?;
        params.insert("name".into(), json!(tool.original));
        let reply = self
            .forward_granted(id, cancel, caller, params, &routed, granted, upstream_time)
            .await?;
        if let (Some(holder), Reply::Result(r)) = (holder, &reply) {
            if r.get("resultType").and_then(Value::as_str) == Some("input_required") {
                if let Some(state) = r.get("requestState").and_then(Value::as_str) {
                    self.request_states
                        .remember(state, holder, &tool.exposed)
                        .await;
                }
            }
        }
        let named: Vec<String> = routed.requests.into_iter().map(|r| r.resource).collect();
        Ok(scrub::scrub_reply(reply, &named))
    }

    /// The pipeline's decision on a routed call: `None` for an open rule;
    /// a call its rule enforces needs a credential the pipeline allows
    /// (its cost reserved). `what` names the call in messages.
    pub(super) async fn grant(
        &self,
        caller: Caller<'_>,
        routed: &Routed,
        found: Option<Found>,
        what: &str,
    ) -> Result<Option<Granted>, RpcError> {
        match (&routed.action, found) {
            (None, _) => Ok(None),
            (Some(_), None) => Err(call_denied(
                "dct_required",
                format!("{what} needs a credential: a DCT in params._delegateos, an `Authorization: DCT` header or initialize's _delegateos, or another protocol's ({})", self.protocol_names()),
            )),
            (Some(action), Some(found)) => {
                let scope = Scope::of(caller.session, Some(&found));
                let call = routed.call(action, &scope);
                // Charged on expiry: once forwarded, the call may have run,
                // so a crash before the settle must still charge it
                // (docs/decisions.md).
                match self
                    .gate
                    .authorize_with(&found, &call, OnExpiry::Charge)
                    .await
                {
                    Ok(Decision::Allowed((a, grant))) => Ok(Some(Granted {
                        reservation: a.reservation.map(|r| r.reservation_id),
                        grant,
                        scope,
                    })),
                    Ok(Decision::Denied(d)) => Err(denial_error(&d)),
                    Err(e) => Err(gate_error(&e)),
                }
            }
        }
    }

    /// [`Self::forward`], then the upstream's answer as the caller gets
    /// it: withheld (`receipt_withheld`) when a protocol's review said so.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn forward_granted(
        &self,
        id: &Id,
        cancel: &Cancel,
        caller: Caller<'_>,
        params: Map<String, Value>,
        routed: &Routed,
        granted: Option<Granted>,
        upstream_time: &mut Option<std::time::Duration>,
    ) -> Result<Reply, RpcError> {
        let scope = match &granted {
            Some(g) => Scope {
                name: g.scope.name.clone(),
                in_session: g.scope.in_session,
            },
            None => Scope::of(caller.session, None),
        };
        let (reply, took, withheld) = self
            .forward(id, cancel, scope, params, routed, granted)
            .await?;
        *upstream_time = Some(took);
        if let Some((reason, detail)) = withheld {
            let mut e = RpcError::new(
                INTERNAL_ERROR,
                "receipt_withheld",
                format!("the upstream's answer was withheld: {detail}"),
            );
            e.data["reason"] = json!(reason);
            return Err(e);
        }
        reply.map_err(|e| upstream_error(&e))
    }

    /// Takes every protocol's credential out of the request as the client
    /// sent it (a protocol's request hash may cover it without its
    /// envelope), so
    /// none of it is forwarded; the credential of the call, else the
    /// transport's header, else the session's.
    pub(super) async fn call_credential(
        &self,
        caller: Caller<'_>,
        id: &Id,
        method: &str,
        params: Map<String, Value>,
    ) -> Result<(Map<String, Value>, Option<Found>), RpcError> {
        let mut request = Map::new();
        request.insert("jsonrpc".into(), json!("2.0"));
        request.insert("id".into(), id.clone());
        request.insert("method".into(), json!(method));
        request.insert("params".into(), Value::Object(params));
        let in_request = match self.protocols.take_from_request(&mut request).await {
            Ok(None) => self.named_header_credential(caller.headers).transpose(),
            other => other,
        };
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
    ) -> Result<(Arc<CatalogTool>, Routed), RpcError> {
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
        let upstream = tool.upstream.clone();
        labels.target = Target::Tool(tool.clone());
        let rules = upstream.rules();
        let Some(rule) = rules.rule_for(&tool.original) else {
            let detail = format!("tool {name:?} is not mapped to a capability, so it is denied");
            if let Some(d) = self
                .refused_early(found, &name, caller, EarlyRefusal::UnmappedTool, &detail)
                .await
            {
                return Err(d);
            }
            return Err(call_denied("tool_not_mapped", detail));
        };
        let policy = &rule.policy;
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
        let routed = Routed {
            name: tool.exposed.clone(),
            method: "tools/call",
            cost: policy.cost_microcents(),
            presenting: rule.credentials.clone(),
            upstream,
            action,
            requests,
        };
        Ok((tool, routed))
    }

    /// Forwards under the upstream's own name, run to its end: once the
    /// upstream may act, the call ends here (answered, or cancelled upstream,
    /// and settled) even if the client goes away meanwhile, which cancels
    /// it. The protocols review a successful answer first (a receipt in it
    /// must verify). Charged once the upstream was reached
    /// (it may have acted) unless its answer was withheld (no proof, no
    /// payment); released when the call never left dgw; the protocol is
    /// told. The third value is why the answer was withheld, if it was.
    async fn forward(
        &self,
        id: &Id,
        cancel: &Cancel,
        scope: Scope,
        params: Map<String, Value>,
        routed: &Routed,
        granted: Option<Granted>,
    ) -> Result<Forwarded, RpcError> {
        let (upstream, gate) = (routed.upstream.clone(), self.gate.clone());
        let protocols = self.protocols.clone();
        let (id, cancel, method) = (id.clone(), cancel.clone(), routed.method);
        let (tool, action) = (routed.name.clone(), routed.action.clone());
        let (requests, cost) = (routed.requests.clone(), routed.cost);
        let presenting = routed.presenting.clone();
        let forwarded = run_to_end(carried(async move {
            let started = Instant::now();
            let span = dgw_core::stage_span!("upstream_call");
            if let Some(g) = &granted {
                g.grant.record_in(&span);
            }
            // Boxed where it is made, once per call: inline, the link's
            // futures (the connection's send among them) made this work
            // about 11 times larger, and it is moved into its box whole.
            let mut reply = tracing::Instrument::instrument(
                Box::pin(upstream.request(method, Some(params), &cancel, presenting)),
                span.clone(),
            )
            .await;
            dgw_core::stages::decided(
                &span,
                match &reply {
                    Ok(Reply::Result(_)) => "answered",
                    Ok(Reply::Error(_)) => "error",
                    Err(e) if e.reached() => "failed",
                    Err(_) => "unreached",
                },
            );
            drop(span);
            let took = started.elapsed();
            let call = Call {
                tool: &tool,
                action: action.as_deref().unwrap_or_default(),
                requests: &requests,
                cost_microcents: cost,
                session: &scope.name,
                in_session: scope.in_session,
            };
            let mut withheld = None;
            if let Ok(Reply::Result(result)) = &mut reply {
                if let Review::Withhold { reason, detail } = protocols.review(&call, result).await {
                    reply = Ok(Reply::Error(json!({
                        "code": INTERNAL_ERROR,
                        "message": format!("the upstream's answer was withheld: {detail}"),
                        "data": {"type": "receipt_withheld", "reason": reason},
                    })));
                    withheld = Some((reason, detail));
                }
            }
            let Some(granted) = granted else {
                return (reply, took, withheld);
            };
            if let Some(reservation) = &granted.reservation {
                let ended = match &reply {
                    Err(e) if !e.reached() => gate
                        .release(&caller::Caller::gateway(), reservation)
                        .await
                        .map(drop),
                    _ if withheld.is_some() => gate
                        .release(&caller::Caller::gateway(), reservation)
                        .await
                        .map(drop),
                    _ => gate.settle_charged(reservation, cost).await.map(drop),
                };
                if let Err(e) = ended {
                    tracing::error!(%reservation, error = %e, "ending a tool call's reservation failed");
                }
            }
            match &reply {
                Ok(r) => {
                    let response = r.clone().into_response(id);
                    let ok = matches!(r, Reply::Result(_));
                    let how = Completed::Answered {
                        response: &response,
                        ok,
                    };
                    granted.grant.completed(&call, how).await;
                }
                Err(e) if e.reached() => granted.grant.completed(&call, Completed::Failed).await,
                Err(_) => {}
            }
            (reply, took, withheld)
        }));
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
    /// credential was read (`UNKNOWN_TOOL`), if it has one.
    async fn refused_early(
        &self,
        found: Option<&Found>,
        name: &str,
        caller: Caller<'_>,
        why: EarlyRefusal,
        detail: &str,
    ) -> Option<RpcError> {
        let found = found?;
        let scope = Scope::of(caller.session, Some(found));
        let call = Call {
            tool: name,
            action: "",
            requests: &[],
            cost_microcents: 0,
            session: &scope.name,
            in_session: scope.in_session,
        };
        let d = found.credential.refused_early(&call, why, detail).await?;
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
}

/// Whether a call's params are a 2026-07-28 caller's (`_meta` names its
/// revision).
fn is_stateless(params: &Map<String, Value>) -> bool {
    params
        .get("_meta")
        .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
        .is_some()
}

/// `f` with the request's ID, log span and relay to its caller, for when it goes on in a task of
/// its own.
fn carried<F: std::future::Future>(f: F) -> impl std::future::Future<Output = F::Output> {
    tracing::Instrument::instrument(
        dgw_core::request_id::carried(super::relay::carried(f)),
        tracing::Span::current(),
    )
}
