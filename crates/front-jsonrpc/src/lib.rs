//! The JSON-RPC 2.0 front: envelopes, batches and notifications, the
//! DelegateOS methods, and the one mapping from gatekeeper decisions to
//! JSON-RPC errors.
//!
//! Error codes: the standard -32700/-32600/-32601/-32602/-32603, and
//! -32001 authorization denied (§11.2), -32003 input rejected, -32004 not
//! found, -32005 conflict. Every error carries `data.type`.

// Untrusted input never panics the gateway: no unwrap outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

use std::sync::Arc;

use delegateos::messages::{CompleteParams, DelegateParams, DelegateResponse, RevokeParams};
use delegateos::{CapabilityRequest, DelegationId};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use dgw_core::budget::OnExpiry;
use dgw_core::caller::{AuthError, Caller};
use dgw_core::gatekeeper::{GateError, Gatekeeper};
use dgw_core::protocol::{Call, Denial, DenialKind, Found, Registry};
use dgw_core::state::AuditSink;
use dgw_core::telemetry::{Outcome, RequestRecord};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const DENIED: i64 = -32001;
pub const REJECTED: i64 = -32003;
pub const NOT_FOUND: i64 = -32004;
pub const CONFLICT: i64 = -32005;

/// Most requests in one batch.
pub const MAX_BATCH: usize = 1000;

/// Methods this front serves.
pub const METHODS: &[&str] = &[
    "delegateos/delegate",
    "delegateos/complete",
    "delegateos/revoke",
    "delegateos/authorize",
    "delegateos/settle",
    "delegateos/release",
    "delegateos/budget",
    "delegateos/delegation",
    "dgw/authorize",
    "dgw/audit",
    "dgw/revoke",
];

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Value,
}

impl RpcError {
    pub fn new(code: i64, kind: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: json!({ "type": kind }),
        }
    }

    fn to_json(&self) -> Value {
        json!({"code": self.code, "message": self.message, "data": self.data})
    }

    /// A full response object carrying this error.
    pub fn response(&self, id: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "error": self.to_json()})
    }
}

/// §11.2: a denial as `-32001` (`-32602` for a malformed credential) with
/// `data.type`, `detail`, `protocol`, `requested` and `granted`.
pub fn denial_error(d: &Denial) -> RpcError {
    let mut data = json!({
        "type": d.kind.as_str(),
        "detail": d.detail,
        "protocol": d.protocol.name,
    });
    if let Some(requested) = &d.requested {
        data["requested"] = json!(requested);
    }
    if let Some(granted) = &d.granted {
        data["granted"] = json!(granted);
    }
    let code = match d.kind {
        DenialKind::Malformed(_) => INVALID_PARAMS,
        _ => DENIED,
    };
    RpcError {
        code,
        message: d.message(),
        data,
    }
}

/// The one mapping of gatekeeper failures to JSON-RPC errors.
pub fn gate_error(e: &GateError) -> RpcError {
    match e {
        GateError::InvalidParams(m) => RpcError::new(INVALID_PARAMS, "invalid_params", m.clone()),
        GateError::NotFound { kind, id } => {
            let mut err = RpcError::new(NOT_FOUND, "not_found", e.to_string());
            err.data["what"] = json!(kind);
            err.data["id"] = json!(id);
            err
        }
        GateError::Conflict { kind, detail } => RpcError::new(CONFLICT, kind, detail.clone()),
        GateError::Rejected { kind, detail } => RpcError::new(REJECTED, kind, detail.clone()),
        GateError::Forbidden { kind, detail } => RpcError::new(DENIED, kind, detail.clone()),
        GateError::Storage(s) => RpcError::new(INTERNAL_ERROR, "storage_error", s.to_string()),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AuthorizeParams {
    dct: String,
    namespace: String,
    action: String,
    resource: String,
    #[serde(default)]
    cost_microcents: u64,
}

/// `delegateos/settle` params; `dct` (or `Authorization: DCT …`) proves
/// the caller holds the reservation.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SettleParams {
    reservation_id: String,
    actual_microcents: u64,
    #[serde(default)]
    dct: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReleaseParams {
    reservation_id: String,
    #[serde(default)]
    dct: Option<String>,
}

/// `delegateos/revoke` params: the §9.5 entry, and the DCT that shows a
/// non-root signer may revoke its block.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RevokeWithProof {
    revocation: delegateos::RevocationEntry,
    #[serde(default)]
    dct: Option<String>,
}

/// `dgw/authorize` params: the request, and the credential of any
/// registered protocol in its members (`_delegateos`, a Talos envelope) or
/// the `Authorization` header.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GenericAuthorizeParams {
    namespace: String,
    action: String,
    resource: String,
    #[serde(default)]
    cost_microcents: u64,
    /// The tool, for protocols that name calls by it (default: the namespace).
    #[serde(default)]
    tool: Option<String>,
}

/// `dgw/revoke` params: the block to revoke, whoever signed it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AdminRevokeParams {
    revocation_id: String,
}

/// `dgw/audit` params.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditParams {
    #[serde(default)]
    limit: Option<usize>,
}

/// `delegateos/budget` and `delegateos/delegation` params; a holder
/// presents its own DCT (or an admin token in the header).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BudgetParams {
    delegation_id: DelegationId,
    #[serde(default)]
    dct: Option<String>,
}

fn params<T: DeserializeOwned>(params: Option<Value>) -> Result<T, RpcError> {
    match params {
        Some(Value::Object(map)) => serde_json::from_value(Value::Object(map)).map_err(|e| {
            RpcError::new(
                INVALID_PARAMS,
                "invalid_params",
                format!("invalid params: {e}"),
            )
        }),
        Some(_) => Err(RpcError::new(
            INVALID_PARAMS,
            "invalid_params",
            "params must be an object",
        )),
        None => Err(RpcError::new(
            INVALID_PARAMS,
            "invalid_params",
            "params are required",
        )),
    }
}

/// The JSON-RPC front over a gatekeeper.
pub struct JsonRpc {
    gate: Arc<Gatekeeper>,
    protocols: Arc<Registry>,
    audit: Arc<dyn AuditSink>,
    max_body_bytes: usize,
}

impl JsonRpc {
    pub fn new(
        gate: Arc<Gatekeeper>,
        protocols: Arc<Registry>,
        audit: Arc<dyn AuditSink>,
        max_body_bytes: usize,
    ) -> Self {
        Self {
            gate,
            protocols,
            audit,
            max_body_bytes,
        }
    }

    /// Handles one HTTP body from `caller`: a request or a batch. `None`
    /// when nothing is to be sent back (only notifications).
    pub async fn handle(&self, caller: &Caller, body: &[u8]) -> Option<Value> {
        let value = match delegateos::canonical::parse_strict(body, self.max_body_bytes) {
            Ok(v) => v,
            Err(e) => {
                return malformed(
                    RpcError::new(PARSE_ERROR, "parse_error", format!("parse error: {e}")),
                    Value::Null,
                )
            }
        };
        match value {
            Value::Array(items) if items.is_empty() => malformed(
                RpcError::new(INVALID_REQUEST, "invalid_request", "empty batch"),
                Value::Null,
            ),
            Value::Array(items) if items.len() > MAX_BATCH => malformed(
                RpcError::new(
                    INVALID_REQUEST,
                    "batch_too_large",
                    format!(
                        "a batch of {} requests is more than {MAX_BATCH}",
                        items.len()
                    ),
                ),
                Value::Null,
            ),
            Value::Array(items) => {
                let mut out = Vec::new();
                for item in items {
                    if let Some(r) = self.call(caller, item).await {
                        out.push(r);
                    }
                }
                (!out.is_empty()).then_some(Value::Array(out))
            }
            other => self.call(caller, other).await,
        }
    }

    /// One request object.
    async fn call(&self, caller: &Caller, request: Value) -> Option<Value> {
        let Value::Object(mut obj) = request else {
            return malformed(
                RpcError::new(
                    INVALID_REQUEST,
                    "invalid_request",
                    "a request must be an object",
                ),
                Value::Null,
            );
        };
        let id = obj.remove("id");
        let id_ok = matches!(
            id,
            None | Some(Value::Null | Value::String(_) | Value::Number(_))
        );
        let reply_id = if id_ok {
            id.clone().unwrap_or(Value::Null)
        } else {
            Value::Null
        };
        let invalid = |m: &str| {
            malformed(
                RpcError::new(INVALID_REQUEST, "invalid_request", m),
                reply_id.clone(),
            )
        };
        if !id_ok {
            return invalid("id must be a string, a number or null");
        }
        if obj.get("jsonrpc") != Some(&json!("2.0")) {
            return invalid("jsonrpc must be \"2.0\"");
        }
        let method = match obj.remove("method") {
            Some(Value::String(m)) => m,
            _ => return invalid("method must be a string"),
        };
        let params = obj.remove("params");
        if matches!(params, Some(ref p) if !p.is_object() && !p.is_array()) {
            return invalid("params must be an object or an array");
        }
        obj.remove("jsonrpc");
        if let Some(extra) = obj.keys().next() {
            return invalid(&format!("unknown member {extra:?}"));
        }
        let known = METHODS.contains(&method.as_str()) || self.protocols.serving(&method).is_some();
        let record =
            RequestRecord::start("jsonrpc", if known { method.as_str() } else { "unknown" });
        let (result, outcome) = self.dispatch(caller, &method, params).await;
        record.end(outcome);
        let id = id?; // a notification gets no response
        Some(match result {
            Ok(value) => json!({"jsonrpc": "2.0", "id": id, "result": value}),
            Err(e) => e.response(id),
        })
    }

    async fn dispatch(
        &self,
        caller: &Caller,
        method: &str,
        p: Option<Value>,
    ) -> (Result<Value, RpcError>, Outcome) {
        let result = match method {
            "delegateos/authorize" => self.authorize(p).await,
            "delegateos/settle" => self.settle(caller, p).await,
            "delegateos/release" => self.release(caller, p).await,
            "delegateos/budget" => self.budget(caller, p).await,
            "delegateos/delegation" => self.delegation(caller, p).await,
            "dgw/authorize" => self.authorize_any(caller, p).await,
            "dgw/audit" => self.audit(caller, p).await,
            "dgw/revoke" => self.admin_revoke(caller, p).await,
            "delegateos/delegate" => self.delegate(p).await,
            "delegateos/complete" => self.complete(p).await,
            "delegateos/revoke" => self.revoke(caller, p).await,
            other if self.protocols.serving(other).is_some() => {
                self.protocol_method(caller, other, p).await
            }
            other => Err((
                RpcError::new(
                    METHOD_NOT_FOUND,
                    "method_not_found",
                    format!("method {other:?} not found"),
                ),
                Outcome::Error,
            )),
        };
        match result {
            Ok((v, outcome)) => (Ok(v), outcome),
            Err((e, outcome)) => (Err(e), outcome),
        }
    }

    async fn authorize(&self, p: Option<Value>) -> Result<(Value, Outcome), (RpcError, Outcome)> {
        let p: AuthorizeParams = params(p).map_err(err)?;
        let request = CapabilityRequest {
            namespace: p.namespace,
            action: p.action,
            resource: p.resource,
        };
        match self
            .gate
            .authorize(
                &p.dct,
                std::slice::from_ref(&request),
                p.cost_microcents,
                OnExpiry::Release,
            )
            .await
        {
            Ok(Ok(a)) => Ok((json!(a), Outcome::Ok)),
            Ok(Err(d)) => Err((denial_error(&d), Outcome::Denied)),
            Err(e) => Err(gate(&e)),
        }
    }

    async fn settle(
        &self,
        caller: &Caller,
        p: Option<Value>,
    ) -> Result<(Value, Outcome), (RpcError, Outcome)> {
        let p: SettleParams = params(p).map_err(err)?;
        let caller = with_credential(caller, p.dct)?;
        let s = self
            .gate
            .settle(&caller, &p.reservation_id, p.actual_microcents)
            .await
            .map_err(|e| gate(&e))?;
        Ok((
            json!({"settled": true, "reservationId": s.reservation_id, "chargedMicrocents": s.charged_microcents, "releasedMicrocents": s.released_microcents}),
            Outcome::Ok,
        ))
    }

    async fn release(
        &self,
        caller: &Caller,
        p: Option<Value>,
    ) -> Result<(Value, Outcome), (RpcError, Outcome)> {
        let p: ReleaseParams = params(p).map_err(err)?;
        let caller = with_credential(caller, p.dct)?;
        let released = self
            .gate
            .release(&caller, &p.reservation_id)
            .await
            .map_err(|e| gate(&e))?;
        Ok((
            json!({"released": true, "reservationId": p.reservation_id, "releasedMicrocents": released}),
            Outcome::Ok,
        ))
    }

    async fn budget(
        &self,
        caller: &Caller,
        p: Option<Value>,
    ) -> Result<(Value, Outcome), (RpcError, Outcome)> {
        let p: BudgetParams = params(p).map_err(err)?;
        let caller = with_credential(caller, p.dct)?;
        let report = self
            .gate
            .budget(&caller, &p.delegation_id)
            .await
            .map_err(|e| gate(&e))?;
        Ok((json!(report), Outcome::Ok))
    }

    async fn delegation(
        &self,
        caller: &Caller,
        p: Option<Value>,
    ) -> Result<(Value, Outcome), (RpcError, Outcome)> {
        let p: BudgetParams = params(p).map_err(err)?;
        let caller = with_credential(caller, p.dct)?;
        let d = self
            .gate
            .delegation(&caller, &p.delegation_id)
            .await
            .map_err(|e| gate(&e))?;
        Ok((json!(d), Outcome::Ok))
    }

    /// A method a protocol serves (`talos/revoke`).
    async fn protocol_method(
        &self,
        caller: &Caller,
        method: &str,
        p: Option<Value>,
    ) -> Result<(Value, Outcome), (RpcError, Outcome)> {
        let Some(protocol) = self.protocols.serving(method) else {
            return Err(err(RpcError::new(
                METHOD_NOT_FOUND,
                "method_not_found",
                method,
            )));
        };
        let value = protocol
            .call_method(caller, method, p.unwrap_or_else(|| json!({})))
            .await
            .map_err(|e| gate(&e))?;
        Ok((value, Outcome::Ok))
    }

    /// `dgw/authorize`: the credential of whichever protocol the request
    /// carries, through the one pipeline.
    async fn authorize_any(
        &self,
        caller: &Caller,
        p: Option<Value>,
    ) -> Result<(Value, Outcome), (RpcError, Outcome)> {
        let mut members = match p {
            Some(Value::Object(m)) => m,
            _ => {
                return Err(err(RpcError::new(
                    INVALID_PARAMS,
                    "invalid_params",
                    "params must be an object",
                )))
            }
        };
        let mut request = serde_json::Map::new();
        request.insert("params".into(), Value::Object(std::mem::take(&mut members)));
        let in_params = self.protocols.take_from_request(&mut request).await;
        let rest = request.remove("params").unwrap_or_else(|| json!({}));
        let p: GenericAuthorizeParams = params(Some(rest)).map_err(err)?;
        let denied = |d: &Denial| {
            let outcome = match d.kind {
                DenialKind::Malformed(_) => Outcome::Error,
                _ => Outcome::Denied,
            };
            (denial_error(d), outcome)
        };
        let from_header = caller
            .presented()
            .and_then(|(scheme, credentials)| self.protocols.from_scheme(scheme, credentials));
        let found: Found = match (in_params.map_err(|d| denied(&d))?, from_header) {
            (Some(f), None) => f,
            (None, Some(f)) => f.map_err(|d| denied(&d))?,
            (Some(_), Some(_)) => {
                return Err(err(RpcError::new(
                    INVALID_PARAMS,
                    "conflicting_credentials",
                    "the Authorization header and the params carry credentials both",
                )))
            }
            (None, None) => {
                return Err(err(RpcError::new(
                    INVALID_PARAMS,
                    "credential_required",
                    "dgw/authorize needs a protocol's credential in the params or the Authorization header",
                )))
            }
        };
        let request = CapabilityRequest {
            namespace: p.namespace,
            action: p.action,
            resource: p.resource,
        };
        let call = Call {
            tool: p.tool.as_deref().unwrap_or(&request.namespace),
            action: &request.action,
            requests: std::slice::from_ref(&request),
            cost_microcents: p.cost_microcents,
            session: "jsonrpc",
        };
        match self
            .gate
            .authorize_with(&found, &call, OnExpiry::Release)
            .await
        {
            Ok(Ok((a, _))) => Ok((json!(a), Outcome::Ok)),
            Ok(Err(d)) => Err(denied(&d)),
            Err(e) => Err(gate(&e)),
        }
    }

    async fn audit(
        &self,
        caller: &Caller,
        p: Option<Value>,
    ) -> Result<(Value, Outcome), (RpcError, Outcome)> {
        if !caller.is_admin() {
            return Err(gate(&GateError::Forbidden {
                kind: "admin_required",
                detail: "dgw/audit needs an admin token".into(),
            }));
        }
        let p: AuditParams = params(p.or_else(|| Some(json!({})))).map_err(err)?;
        let events = self
            .audit
            .recent(p.limit.unwrap_or(100).min(10_000))
            .await
            .map_err(|e| gate(&GateError::Storage(e)))?;
        Ok((json!({"events": events}), Outcome::Ok))
    }

    async fn admin_revoke(
        &self,
        caller: &Caller,
        p: Option<Value>,
    ) -> Result<(Value, Outcome), (RpcError, Outcome)> {
        let p: AdminRevokeParams = params(p).map_err(err)?;
        let r = self
            .gate
            .revoke_by_admin(caller, &p.revocation_id)
            .await
            .map_err(|e| gate(&e))?;
        Ok((
            json!({"revocationId": r.revocation_id, "newlyRecorded": r.newly_recorded,
                   "revokedDelegations": r.revoked_delegations}),
            Outcome::Ok,
        ))
    }

    async fn delegate(&self, p: Option<Value>) -> Result<(Value, Outcome), (RpcError, Outcome)> {
        let p: DelegateParams = params(p).map_err(err)?;
        let response = self.gate.delegate(p).await.map_err(|e| gate(&e))?;
        let outcome = match response {
            DelegateResponse::Accept(_) => Outcome::Ok,
            DelegateResponse::Reject(_) => Outcome::Denied,
        };
        Ok((json!(response), outcome))
    }

    async fn complete(&self, p: Option<Value>) -> Result<(Value, Outcome), (RpcError, Outcome)> {
        let p: CompleteParams = params(p).map_err(err)?;
        let c = self.gate.complete(p).await.map_err(|e| gate(&e))?;
        Ok((json!(c), Outcome::Ok))
    }

    async fn revoke(
        &self,
        caller: &Caller,
        p: Option<Value>,
    ) -> Result<(Value, Outcome), (RpcError, Outcome)> {
        let p: RevokeWithProof = params(p).map_err(err)?;
        let caller = with_credential(caller, p.dct)?;
        let params = RevokeParams {
            revocation: p.revocation,
        };
        let r = self
            .gate
            .revoke(&caller, params)
            .await
            .map_err(|e| gate(&e))?;
        Ok((json!(r), Outcome::Ok))
    }
}

/// `caller` with a credential from the params.
fn with_credential(caller: &Caller, dct: Option<String>) -> Result<Caller, (RpcError, Outcome)> {
    caller
        .clone()
        .with_param_credential(dct)
        .map_err(|e| (auth_error(&e), Outcome::Denied))
}

/// A caller that could not be established, as a JSON-RPC error.
pub fn auth_error(e: &AuthError) -> RpcError {
    RpcError::new(DENIED, e.kind(), e.to_string())
}

fn err(e: RpcError) -> (RpcError, Outcome) {
    (e, Outcome::Error)
}

/// The answer to a request too malformed to have a method, counted (and
/// logged) as method `-` with outcome `error`.
fn malformed(error: RpcError, id: Value) -> Option<Value> {
    RequestRecord::start("jsonrpc", "-").end(Outcome::Error);
    Some(error.response(id))
}

fn gate(e: &GateError) -> (RpcError, Outcome) {
    (gate_error(e), e.outcome())
}
