//! How a task ends, and a session (issue 30, decisions 143-146). A result
//! reaches the router only if it was charged: the delegate's answer to a
//! TASK_SUBMIT ends its reservation (settled for a result, released
//! otherwise), decided in one change of the task's record, so a cancel
//! that comes while dgw waits on the delegate marks the task cancelled
//! and leaves the reservation to the answer; a result that comes after
//! is charged (the delegate did the work) and withheld. A task not in
//! flight (answered with an update) is released by its cancel. Closing a
//! session (its payer, an administrator, its expiry) cancels its tasks.

use ldp::identity::IdentityCard;
use ldp::message::{Body, Envelope};
use ldp::session::{Side, State};
use serde_json::{json, Value};
use time::OffsetDateTime;

use super::config::Delegate;
use super::refused::{no_session, Refused};
use super::replies::{policy_error, reply};
use super::sessions::Change;
use super::{Ldp, ID};
use dgw_core::caller::Caller;
use dgw_core::gatekeeper::GateError;

/// A task forwarded to its delegate, as `answered` needs it.
pub(super) struct Submitted<'a> {
    pub task_id: &'a str,
    pub cost: u64,
    /// Whether its authorization reserved anything (a free task does not).
    pub reserved: bool,
    pub contract: &'a delegateos::ContractId,
    /// The paying DCT's delegation, if a DCT pays.
    pub delegation: Option<&'a str>,
}

/// The task a task message is about.
pub(super) fn task_of(body: &Body) -> Option<&str> {
    match body {
        Body::TaskSubmit { task_id, .. }
        | Body::TaskUpdate { task_id, .. }
        | Body::TaskResult { task_id, .. }
        | Body::TaskFailed { task_id, .. }
        | Body::TaskCancel { task_id } => Some(task_id),
        _ => None,
    }
}

/// The delegate's answer to anything but a TASK_SUBMIT: never a result
/// (it would reach the router unpaid).
pub(super) fn not_a_result(answer: Envelope) -> Result<Envelope, Refused> {
    match answer.body {
        Body::TaskResult { .. } => Err(Refused::new(
            502,
            "delegate_answer_invalid",
            "a TASK_RESULT answers only its TASK_SUBMIT; withheld",
        )),
        _ => Ok(answer),
    }
}

impl Ldp {
    /// The delegate answered a TASK_SUBMIT: the task's record says
    /// whether it was cancelled meanwhile and gives up its reservation
    /// (kept only for an update of a task still wanted); a result is
    /// passed on only once settled.
    pub(super) async fn answered(
        &self,
        d: &Delegate,
        card: &IdentityCard,
        message: &Envelope,
        task: &Submitted<'_>,
        answer: Envelope,
        now: OffsetDateTime,
    ) -> Result<Envelope, Refused> {
        let session_id = &message.session_id;
        let task_id = task.task_id;
        let answer_is_task = matches!(
            answer.body,
            Body::TaskResult { .. } | Body::TaskFailed { .. } | Body::TaskUpdate { .. }
        );
        if !answer_is_task || task_of(&answer.body) != Some(task_id) {
            self.unanswered(d, session_id, task_id).await;
            return Err(Refused::new(
                502,
                "delegate_answer_invalid",
                format!(
                    "the answer to task {task_id:?} is a {} about {:?}",
                    answer.body.kind(),
                    task_of(&answer.body)
                ),
            ));
        }
        let update = matches!(answer.body, Body::TaskUpdate { .. });
        let (mut cancelled, mut taken) = (false, None);
        self.sessions
            .update_task(&d.name, session_id, task_id, |t| {
                t.in_flight = false;
                cancelled = t.cancelled;
                taken = match update && !t.cancelled {
                    true => None,
                    false => t.reservation.take(),
                };
            })
            .await
            .map_err(|e| {
                // Undecided: the reservation stays until its deadline and
                // the answer is withheld.
                tracing::error!(error = %e, "recording an LDP task's answer failed");
                Refused::from(e)
            })?;
        if !cancelled {
            // The machine: the task leaves the session's open tasks (an
            // update keeps it). A session that expired meanwhile refuses,
            // and is left for the sweep to close; the task's record has
            // decided already, so the task only leaves its open tasks.
            let at = now.unix_timestamp();
            let _ = self
                .sessions
                .update(&d.name, session_id, |r| {
                    let before = r.session.clone();
                    if r.session.apply(Side::Responder, &answer.body, at).is_err() {
                        r.session = before;
                        if !update {
                            r.session.open_tasks.remove(task_id);
                        }
                    }
                    Ok::<(), ()>(())
                })
                .await;
        }
        let Body::TaskResult {
            output, provenance, ..
        } = &answer.body
        else {
            if !update || cancelled {
                self.release(taken.as_deref()).await;
                self.ended(d, session_id, task_id, "task_ended", None).await;
            }
            return Ok(answer);
        };
        // A result: charged at the task's cost, or withheld.
        let charged = match (&taken, task.reserved) {
            (Some(id), _) => self
                .gate
                .settle(&Caller::gateway(), id, task.cost)
                .await
                .map(|_| dgw_core::telemetry::record_protocol_settled(ID.name, task.cost))
                .map_err(|e| e.to_string()),
            (None, false) => Ok(()),
            (None, true) => Err("its reservation had ended".to_owned()),
        };
        if let Err(why) = charged {
            tracing::warn!(task_id, error = %why, "an LDP result could not be charged; withheld");
            self.ended(d, session_id, task_id, "result_withheld", None)
                .await;
            return Err(Refused::new(
                503,
                "state_unavailable",
                format!("the result of task {task_id:?} could not be charged ({why}); withheld"),
            ));
        }
        let attestation = self
            .attest(
                d,
                card,
                session_id,
                task_id,
                output,
                provenance,
                task.cost,
                task.contract,
                task.delegation,
            )
            .await;
        if let Some(a) = &attestation {
            let recorded = self
                .sessions
                .update_task(&d.name, session_id, task_id, |t| {
                    t.attestation = Some(a.clone());
                })
                .await;
            if let Err(e) = recorded {
                tracing::error!(error = %e, "recording an LDP attestation failed");
            }
        }
        if cancelled {
            self.ended(d, session_id, task_id, "result_withheld", attestation)
                .await;
            let why = format!(
                "task {task_id:?} was cancelled while the delegate worked on it; its result is withheld \
                 ({} microcents charged for the work)",
                task.cost
            );
            let body = Body::TaskFailed {
                task_id: task_id.to_owned(),
                error: policy_error("CANCELLED", "error", &why),
            };
            return Ok(reply(d, card, message, body, message.payload_mode, now));
        }
        self.ended(d, session_id, task_id, "result", attestation)
            .await;
        Ok(answer)
    }

    /// The delegate did not answer a TASK_SUBMIT (unreachable, an invalid
    /// answer): the task ends, released.
    pub(super) async fn unanswered(&self, d: &Delegate, session_id: &str, task_id: &str) {
        let mut taken = None;
        let recorded = self
            .sessions
            .update_task(&d.name, session_id, task_id, |t| {
                t.in_flight = false;
                taken = t.reservation.take();
            })
            .await;
        if let Err(e) = recorded {
            // The reservation stays open until its deadline, then is released.
            tracing::error!(error = %e, "recording the end of an LDP task failed");
        }
        self.release(taken.as_deref()).await;
        let _ = self
            .sessions
            .update(&d.name, session_id, |r| {
                r.session.open_tasks.remove(task_id);
                Ok::<(), ()>(())
            })
            .await;
        self.ended(d, session_id, task_id, "task_ended", None).await;
    }

    /// Cancels a task (it has left its session's open tasks): marked
    /// cancelled; released now unless dgw still waits on the delegate's
    /// answer to it, which then ends it.
    pub(super) async fn cancel_task(&self, d: &Delegate, session_id: &str, task_id: &str) {
        let (mut taken, mut in_flight) = (None, false);
        let recorded = self
            .sessions
            .update_task(&d.name, session_id, task_id, |t| {
                t.cancelled = true;
                in_flight = t.in_flight;
                taken = match t.in_flight {
                    true => None,
                    false => t.reservation.take(),
                };
            })
            .await;
        if let Err(e) = recorded {
            tracing::error!(error = %e, "recording an LDP task's cancel failed");
        }
        self.release(taken.as_deref()).await;
        self.audit(
            "task_cancelled",
            json!({"delegate": d.name, "session_id": session_id, "task_id": task_id,
                   "in_flight": in_flight}),
        )
        .await;
    }

    /// A router's TASK_CANCEL (its payer checked, the task open): the
    /// task cancelled, the cancel forwarded; a result answering it is
    /// withheld.
    pub(super) async fn cancel(
        &self,
        d: &Delegate,
        card: &IdentityCard,
        message: &Envelope,
        task_id: &str,
        now: OffsetDateTime,
    ) -> Result<Envelope, Refused> {
        self.cancel_task(d, &message.session_id, task_id).await;
        let answer = self.forward(d, card, message, now).await?;
        if !matches!(answer.body, Body::TaskResult { .. }) {
            return Ok(answer);
        }
        self.ended(d, &message.session_id, task_id, "result_withheld", None)
            .await;
        let why = format!("task {task_id:?} is cancelled; the delegate's result is withheld");
        let body = Body::TaskFailed {
            task_id: task_id.to_owned(),
            error: policy_error("CANCELLED", "error", &why),
        };
        Ok(reply(d, card, message, body, message.payload_mode, now))
    }

    async fn ended(
        &self,
        d: &Delegate,
        session_id: &str,
        task_id: &str,
        event: &'static str,
        attestation: Option<String>,
    ) {
        self.audit(
            event,
            json!({"delegate": d.name, "session_id": session_id, "task_id": task_id,
                   "attestation": attestation}),
        )
        .await;
    }

    /// A router's SESSION_CLOSE (its payer checked): closed, its open
    /// tasks cancelled, forwarded.
    pub(super) async fn close(
        &self,
        d: &Delegate,
        card: &IdentityCard,
        message: &Envelope,
        now: OffsetDateTime,
    ) -> Result<Envelope, Refused> {
        let at = now.unix_timestamp();
        let closed = self
            .sessions
            .update(&d.name, &message.session_id, |r| {
                r.session.apply(Side::Initiator, &message.body, at)?;
                Ok::<_, ldp::Refusal>(std::mem::take(&mut r.session.open_tasks))
            })
            .await?;
        let Some((_, open)) = closed else {
            return Err(no_session(&message.session_id));
        };
        for task in &open {
            self.cancel_task(d, &message.session_id, task).await;
        }
        not_a_result(self.forward(d, card, message, now).await?)
    }

    /// `ldp/session/close`: an administrator closes a session (open,
    /// proposed or suspended), its tasks cancelled, and tells the
    /// delegate in the router's name.
    pub(super) async fn close_by_admin(
        &self,
        caller: &Caller,
        delegate: &str,
        session_id: &str,
        reason: Option<&str>,
    ) -> Result<Value, GateError> {
        let d = self
            .delegate(delegate)
            .ok_or_else(|| GateError::InvalidParams(format!("no LDP delegate {delegate:?}")))?;
        let now = OffsetDateTime::now_utc();
        let closed = self
            .sessions
            .update(&d.name, session_id, |r| match r.session.state {
                State::Active | State::Suspended | State::Proposed => {
                    r.session.state = State::Closed;
                    Ok(std::mem::take(&mut r.session.open_tasks))
                }
                s => Err(s),
            })
            .await;
        let (record, open) = match closed {
            Ok(Some(done)) => done,
            Ok(None) => {
                return Err(GateError::InvalidParams(format!(
                    "no session {session_id:?} with {delegate:?}"
                )))
            }
            Err(Change::Refused(s)) => {
                // Its wire name (`SUSPENDED`), not the Rust variant.
                let state = serde_json::to_value(s)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                return Err(GateError::InvalidParams(format!(
                    "session {session_id:?} is {state}, not open"
                )));
            }
            Err(Change::Storage(e)) => return Err(e.into()),
        };
        for task in &open {
            self.cancel_task(d, session_id, task).await;
        }
        let why = format!(
            "closed by an administrator of dgw{}",
            reason.map(|r| format!(": {r}")).unwrap_or_default()
        );
        let notified = self
            .tell_closed(d, session_id, &record.router, &why, now)
            .await;
        self.audit(
            "session_closed",
            json!({"delegate": d.name, "session_id": session_id, "by": caller.admin_name(),
                   "reason": reason, "cancelled_tasks": open, "delegate_notified": notified}),
        )
        .await;
        Ok(json!({
            "delegate": d.name, "session_id": session_id, "state": State::Closed,
            "cancelled_tasks": open, "delegate_notified": notified,
        }))
    }

    /// A SESSION_CLOSE to the delegate from `router` (dgw signs every
    /// router's message toward it); whether it answered.
    async fn tell_closed(
        &self,
        d: &Delegate,
        session_id: &str,
        router: &str,
        why: &str,
        now: OffsetDateTime,
    ) -> bool {
        let Ok(card) = self.cards.get(d).await else {
            return false;
        };
        let message = Envelope {
            message_id: dgw_core::random::session_id().unwrap_or_default(),
            session_id: session_id.to_owned(),
            from: router.to_owned(),
            to: card.delegate_id.clone(),
            body: Body::SessionClose {
                reason: Some(why.to_owned()),
            },
            payload_mode: ldp::mode::PayloadMode::Text,
            timestamp: now
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default(),
            provenance: None,
            signature: None,
            signature_algorithm: None,
            nonce: None,
            payload_digest: None,
        };
        self.forward(d, &card, &message, now).await.is_ok()
    }

    /// Closes sessions idle past their TTL and cancels their tasks.
    pub(super) async fn expire_sessions(&self) {
        let now = OffsetDateTime::now_utc().unix_timestamp();
        let Ok(all) = self.sessions.all().await else {
            return;
        };
        for (id, record) in all {
            if !record.session.is_expired(now) {
                continue;
            }
            let Some(d) = self.delegate(&record.delegate) else {
                continue;
            };
            let closed = self
                .sessions
                .update(&d.name, &id, |r| {
                    if r.session.is_expired(now) {
                        r.session.state = State::Closed;
                        Ok(std::mem::take(&mut r.session.open_tasks))
                    } else {
                        Err(())
                    }
                })
                .await;
            if let Ok(Some((_, open))) = closed {
                for task in &open {
                    self.cancel_task(d, &id, task).await;
                }
                self.audit(
                    "session_expired",
                    json!({"delegate": d.name, "session_id": id, "released": open.len()}),
                )
                .await;
            }
        }
    }
}
