//! `ldp/session`, `ldp/sessions`, `ldp/attestation`, `ldp/contract` (JSON-RPC, and gRPC's
//! `CallProtocol`): what dgw holds of sessions, for administrators, and
//! for a router presenting a DCT whose delegation paid in the session;
//! `ldp/session/close`, for administrators only.

use serde_json::{json, Value};

use super::sessions::Record;
use super::Ldp;
use dgw_core::budget::BudgetKey;
use dgw_core::caller::Caller;
use dgw_core::gatekeeper::{Forbidden, GateError};
use dgw_core::protocol::MethodResult;

fn field(params: &Value, f: &str) -> Result<String, GateError> {
    params
        .get(f)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| GateError::InvalidParams(format!("params.{f} is required")))
}

pub(super) async fn call(l: &Ldp, caller: &Caller, method: &str, params: Value) -> MethodResult {
    if method == "ldp/session/close" {
        // Ending someone's session: an admin secret or certificate, never
        // a loopback caller alone nor a DCT (routers send SESSION_CLOSE).
        if !caller.is_authenticated_admin() {
            return Err(GateError::Forbidden {
                kind: Forbidden::AdminRequired,
                detail: "ldp/session/close needs an admin token or certificate".into(),
            });
        }
        let reason = params.get("reason").and_then(Value::as_str);
        return l
            .close_by_admin(
                caller,
                &field(&params, "delegate")?,
                &field(&params, "session_id")?,
                reason,
            )
            .await;
    }
    // Whose sessions the caller may read: all (admin), or those its DCT's
    // delegation paid in.
    let payer = if caller.is_admin() {
        None
    } else {
        let leaf = caller
            .presented()
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("DCT"))
            .and_then(|(_, token)| l.gate.dct_grant(token).ok())
            .and_then(|g| g.chain.last().map(ToString::to_string));
        match leaf {
            Some(leaf) => Some(leaf),
            None => {
                return Err(GateError::Forbidden {
                    kind: Forbidden::AdminRequired,
                    detail: format!(
                        "{method} needs an admin token or the DCT that paid in the session"
                    ),
                })
            }
        }
    };
    let readable = |r: &Record| {
        payer
            .as_ref()
            .is_none_or(|p| r.payer.as_ref().and_then(|x| x.delegation()) == Some(p.as_str()))
    };
    let session = |delegate: String, id: String| async move {
        match l.sessions.get(&delegate, &id).await? {
            Some(r) if readable(&r) => Ok(r),
            _ => Err(GateError::InvalidParams(format!(
                "no session {id:?} with {delegate:?} that you may read"
            ))),
        }
    };
    // A task of a session the caller may read: its ID and record.
    let task = |params: &Value| {
        let fields = (
            field(params, "delegate"),
            field(params, "session_id"),
            field(params, "task_id"),
        );
        async move {
            let (delegate, id, task) = (fields.0?, fields.1?, fields.2?);
            session(delegate.clone(), id.clone()).await?;
            match l.sessions.task(&delegate, &id, &task).await? {
                Some(t) => Ok((task, t)),
                None => Err(GateError::InvalidParams(format!(
                    "no task {task:?} in session {id:?}"
                ))),
            }
        }
    };
    match method {
        "ldp/task" => {
            let (task, t) = task(&params).await?;
            Ok(json!({
                "task_id": task, "reservation": t.reservation, "contract": t.contract,
                "attestation": t.attestation, "in_flight": t.in_flight, "cancelled": t.cancelled,
            }))
        }
        "ldp/session" => {
            let r = session(field(&params, "delegate")?, field(&params, "session_id")?).await?;
            let mut out = serde_json::to_value(&r).unwrap_or(Value::Null);
            if let Some(b) = &r.budget {
                // What the session's own level holds now.
                let level = [(BudgetKey::from_stored(&b.key), b.budget_microcents)];
                let report = l.gate.budgets().report_levels(&level).await?;
                if let (Some(level), Some(o)) = (report.first(), out.as_object_mut()) {
                    o.insert(
                        "spending".into(),
                        json!({
                            "budget_microcents": level.budget_microcents,
                            "spent_microcents": level.spent_microcents,
                            "reserved_microcents": level.reserved_microcents,
                            "remaining_microcents": level.remaining_microcents,
                        }),
                    );
                }
            }
            Ok(out)
        }
        "ldp/attestation" => {
            // A task's attestation as an LDP ATTESTATION body, for a router
            // to hand on.
            let (task, t) = task(&params).await?;
            let id = t
                .attestation
                .as_deref()
                .and_then(|a| delegateos::AttestationId::parse(a).ok())
                .ok_or_else(|| {
                    GateError::InvalidParams(format!("task {task:?} has no attestation"))
                })?;
            let signed = l.delegations.attestation(&id).await?.ok_or_else(|| {
                GateError::InvalidParams(format!("attestation {id} is not stored"))
            })?;
            Ok(
                serde_json::to_value(ldp::translate::attestation_body(&signed))
                    .unwrap_or(Value::Null),
            )
        }
        "ldp/contract" => {
            // The DelegateOS contract a task was done under.
            let (task, t) = task(&params).await?;
            let id = t
                .contract
                .as_deref()
                .and_then(|c| delegateos::ContractId::parse(c).ok())
                .ok_or_else(|| {
                    GateError::InvalidParams(format!("task {task:?} has no contract"))
                })?;
            let contract =
                l.delegations.contract(&id).await?.ok_or_else(|| {
                    GateError::InvalidParams(format!("contract {id} is not stored"))
                })?;
            Ok(serde_json::to_value(contract).unwrap_or(Value::Null))
        }
        "ldp/sessions" => {
            let all = l.sessions.all().await?;
            let sessions: Vec<Value> = all
                .into_iter()
                .filter(|(_, r)| readable(r))
                .map(|(id, r)| {
                    json!({
                        "session_id": id, "delegate": r.delegate, "router": r.router,
                        "state": r.session.state, "open_tasks": r.session.open_tasks,
                        "task_count": r.session.task_count,
                    })
                })
                .collect();
            Ok(json!({ "sessions": sessions }))
        }
        _ => Err(GateError::InvalidParams(format!("{method} is not served"))),
    }
}
