//! The method table: each method's typed params, and what it asks of the
//! gatekeeper or of a protocol. The gateway's own are `dgw/*`; a protocol
//! serves its own (`<protocol>/revoke`) and may name the gateway's by its
//! specification's words (aliases of `dgw/settle`, …).

use delegateos::messages::RevokeParams;
use delegateos::{CapabilityRequest, DelegationId};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use dgw_core::budget::OnExpiry;
use dgw_core::caller::Caller;
use dgw_core::gatekeeper::GateError;
use dgw_core::protocol::{parse_params, Call, Decision, Denial, DenialKind, Found, MethodAnswer};
use dgw_core::telemetry::Outcome;

use super::error::*;
use super::JsonRpc;

/// Methods this front serves: the gateway's own (the protocols' are theirs).
pub const METHODS: &[&str] = &[
    "dgw/authorize",
    "dgw/settle",
    "dgw/release",
    "dgw/budget",
    "dgw/delegation",
    "dgw/revocations/submit",
    "dgw/audit",
    "dgw/audit/head",
    "dgw/revoke",
    "dgw/reload",
    "dgw/oauth/revoke",
];

/// `dgw/settle` params; `dct` (or `Authorization: DCT …`) proves
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

/// `dgw/revocations/submit` params: the §9.5 entry, and the DCT that
/// shows a non-root signer may revoke its block.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RevokeWithProof {
    revocation: delegateos::RevocationEntry,
    #[serde(default)]
    dct: Option<String>,
}

/// Params of methods that take none.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EmptyParams {}

/// `dgw/authorize` params: the request, and the credential of any
/// registered protocol in its members (`_delegateos`, an envelope) or
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

/// `dgw/budget` and `dgw/delegation` params; a holder presents its own
/// DCT (or an admin token in the header).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BudgetParams {
    delegation_id: DelegationId,
    #[serde(default)]
    dct: Option<String>,
}

fn params<T: DeserializeOwned>(params: Option<Value>) -> Result<T, RpcError> {
    parse_params(params).map_err(|e| gate_error(&e))
}

impl JsonRpc {
    pub(super) async fn dispatch(
        &self,
        caller: &Caller,
        method: &str,
        p: Option<Value>,
    ) -> (Result<Value, RpcError>, Outcome) {
        // Each boxed: a call's future holds only the method it runs, not
        // the largest of them (docs/performance.md).
        let result = match method {
            "dgw/settle" => Box::pin(self.settle(caller, p)).await,
            "dgw/release" => Box::pin(self.release(caller, p)).await,
            "dgw/budget" => Box::pin(self.budget(caller, p)).await,
            "dgw/delegation" => Box::pin(self.delegation(caller, p)).await,
            "dgw/revocations/submit" => Box::pin(self.revoke(caller, p)).await,
            "dgw/authorize" => Box::pin(self.authorize_any(caller, p)).await,
            "dgw/audit" => Box::pin(self.audit(caller, p)).await,
            "dgw/audit/head" => Box::pin(self.audit_head(caller, p)).await,
            "dgw/revoke" => Box::pin(self.admin_revoke(caller, p)).await,
            "dgw/reload" => Box::pin(self.reload(caller, p)).await,
            "dgw/oauth/revoke" => Box::pin(self.subject_revoke(caller, p)).await,
            other if self.protocols.serving(other).is_some() => {
                Box::pin(self.protocol_method(caller, other, p)).await
            }
            other => Err(method_not_found(format!("method {other:?} not found"))),
        };
        match result {
            Ok((v, outcome)) => (Ok(v), outcome),
            Err((e, outcome)) => (Err(e), outcome),
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

    /// A method a protocol serves (`<protocol>/revoke`).
    async fn protocol_method(
        &self,
        caller: &Caller,
        method: &str,
        p: Option<Value>,
    ) -> Result<(Value, Outcome), (RpcError, Outcome)> {
        let Some(protocol) = self.protocols.serving(method) else {
            return Err(method_not_found(method));
        };
        match protocol.answer_method(caller, method, p).await {
            Ok(MethodAnswer::Done(value)) => Ok((value, Outcome::Ok)),
            Ok(MethodAnswer::Refused(value)) => Ok((value, Outcome::Denied)),
            Ok(MethodAnswer::Denied(d)) => Err((denial_error(&d), Outcome::Denied)),
            Err(e) => Err(gate(&e)),
        }
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
        let in_params = self.protocols.take_from_params(&mut members).await;
        let p: GenericAuthorizeParams = params(Some(Value::Object(members))).map_err(err)?;
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
            // Two parts of one credential (a header's and the params') combine; two
            // credentials conflict.
            (Some(carried), Some(header)) => {
                let header = header.map_err(|d| denied(&d))?;
                self.protocols
                    .combine(&header, &carried)
                    .ok_or_else(|| {
                        err(RpcError::new(
                            INVALID_PARAMS,
                            "conflicting_credentials",
                            "the Authorization header and the params carry credentials both",
                        ))
                    })?
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
        let mut call = Call::one(&request, p.cost_microcents, "jsonrpc");
        if let Some(tool) = &p.tool {
            call.tool = tool;
        }
        match self
            .gate
            .authorize_with(&found, &call, OnExpiry::Release)
            .await
        {
            Ok(Decision::Allowed((a, _))) => Ok((json!(a), Outcome::Ok)),
            Ok(Decision::Denied(d)) => Err(denied(&d)),
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
                kind: dgw_core::gatekeeper::Forbidden::AdminRequired,
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

    /// The anchor the state store keeps for the tamper-evident log: its
    /// latest seal's `seq` and hash, what `dgw audit verify
    /// --gateway-url` checks the files against.
    async fn audit_head(
        &self,
        caller: &Caller,
        p: Option<Value>,
    ) -> Result<(Value, Outcome), (RpcError, Outcome)> {
        if !caller.is_admin() {
            return Err(gate(&GateError::Forbidden {
                kind: dgw_core::gatekeeper::Forbidden::AdminRequired,
                detail: "dgw/audit/head needs an admin token".into(),
            }));
        }
        let _: EmptyParams = params(p.or_else(|| Some(json!({})))).map_err(err)?;
        let Some(log) = &self.audit_log else {
            return Err(method_not_found(
                "this gateway keeps no audit log (--ephemeral, or [audit] enabled = false)",
            ));
        };
        let anchor = self
            .audit
            .anchor(log)
            .await
            .map_err(|e| gate(&GateError::Storage(e)))?;
        let sealed = anchor.as_ref().map_or(0, |a| a.seq.saturating_add(1));
        Ok((
            json!({"log": log, "anchor": anchor, "sealedRecords": sealed}),
            Outcome::Ok,
        ))
    }

    /// Reads the config file again (an authenticated admin: it changes who
    /// is trusted, as a forced revocation does).
    async fn reload(
        &self,
        caller: &Caller,
        p: Option<Value>,
    ) -> Result<(Value, Outcome), (RpcError, Outcome)> {
        if !caller.is_authenticated_admin() {
            return Err(gate(&GateError::Forbidden {
                kind: dgw_core::gatekeeper::Forbidden::AdminRequired,
                detail: "dgw/reload needs an admin token or certificate".into(),
            }));
        }
        let _: EmptyParams = params(p.or_else(|| Some(json!({})))).map_err(err)?;
        let Some(reload) = &self.reload else {
            return Err(method_not_found("this gateway does not reload"));
        };
        let by = caller.admin_name().unwrap_or_default();
        match reload(by).await {
            Ok(report) => Ok((report, Outcome::Ok)),
            Err(problem) => Err((
                RpcError::new(REJECTED, "config_invalid", problem),
                Outcome::Error,
            )),
        }
    }

    /// Revokes an OAuth subject's delegation (an authenticated admin).
    async fn subject_revoke(
        &self,
        caller: &Caller,
        p: Option<Value>,
    ) -> Result<(Value, Outcome), (RpcError, Outcome)> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct SubjectRevokeParams {
            tenant: String,
            subject: String,
        }
        let p: SubjectRevokeParams = params(p).map_err(err)?;
        let Some(revoke) = &self.subject_revoke else {
            return Err(method_not_found(
                "this gateway issues no OAuth tokens ([oauth])",
            ));
        };
        match revoke(caller.clone(), p.tenant, p.subject).await {
            Ok(v) => Ok((v, Outcome::Ok)),
            Err(e) => Err(gate(&e)),
        }
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

fn err(e: RpcError) -> (RpcError, Outcome) {
    (e, Outcome::Error)
}

/// `-32601`: no such method, or a method whose part this gateway lacks.
fn method_not_found(message: impl Into<String>) -> (RpcError, Outcome) {
    err(RpcError::new(METHOD_NOT_FOUND, "method_not_found", message))
}

fn gate(e: &GateError) -> (RpcError, Outcome) {
    (gate_error(e), e.outcome())
}
