//! Tasks in a session: a TASK_SUBMIT reserved through the pipeline with
//! the router's DCT, its contract signed, forwarded; how the delegate's
//! answer ends it is in `ending`.

use ldp::identity::IdentityCard;
use ldp::message::{Body, Envelope};
use ldp::session::{Side, State};
use ldp::{Reason, Refusal};
use serde_json::{json, Value};
use time::OffsetDateTime;

use super::config::Delegate;
use super::payer::NoPayer;
use super::refused::Refused;
use super::sessions::TaskRecord;
use super::Ldp;
use dgw_core::budget::Hold;
use dgw_core::caller::Caller;
use dgw_core::protocol::Decision;

fn unix_ms(t: OffsetDateTime) -> u64 {
    (t.unix_timestamp_nanos() / 1_000_000).max(0) as u64
}

impl Ldp {
    /// TASK_SUBMIT: the router's DCT reserves the task's cost through the
    /// pipeline (a refusal is a TASK_FAILED, nothing forwarded); the task
    /// opens in the session; the delegate's answer settles or releases it.
    pub(super) async fn submit(
        &self,
        d: &Delegate,
        card: &IdentityCard,
        message: &Envelope,
        authorization: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<Envelope, Refused> {
        let Body::TaskSubmit {
            task_id,
            skill,
            contract: asked_contract,
            ..
        } = &message.body
        else {
            return Err(Refused::new(500, "internal_error", "not a task"));
        };
        let Some(record) = self.sessions.get(&d.name, &message.session_id).await? else {
            return Err(Refusal::new(
                Reason::IllegalInState,
                format!("no session {:?} with this delegate", message.session_id),
            )
            .into());
        };
        if record.session.state != State::Active || record.session.is_expired(now.unix_timestamp())
        {
            // The machine says why (expired, suspended, closed…).
            let mut probe = record.session.clone();
            probe.apply(Side::Initiator, &message.body, now.unix_timestamp())?;
        }
        let cost = d.cost(skill);
        let expires = unix_ms(now) + record.session.ttl_secs.saturating_mul(1000);
        let asked = [ldp::translate::task_request(skill, &d.name)];
        let Some(payer) = record.payer.clone() else {
            return Err(Refusal::new(
                Reason::IllegalInState,
                "the session was opened without a payer (by an older dgw): open another",
            )
            .into());
        };
        // The router's own cap on the task (its contract's budget) first.
        let capped = asked_contract
            .as_ref()
            .is_some_and(|c| !c.admits_cost(cost));
        let grant = match capped {
            true => Err(NoPayer::Denied(format!(
                "budget_exceeded: the task costs {cost} microcents, above its contract's max_cost_usd"
            ))),
            false => self.task_grant(d, &payer, record.budget.as_ref(), authorization),
        };
        let decision = match grant {
            Err(NoPayer::Missing(r)) => return Err(r),
            Err(NoPayer::Denied(why)) => Err(why),
            Ok((grant, presented)) => match self
                .gate
                .authorize_grant(
                    &grant,
                    &presented,
                    &asked,
                    cost,
                    Hold::brokered_until(expires),
                )
                .await
            {
                Ok(Decision::Allowed(a)) => Ok(a.reservation.map(|r| r.reservation_id)),
                Ok(Decision::Denied(d)) => Err(super::payer::denied(&d)),
                Err(e) => return Err(Refused::new(503, "state_unavailable", e.to_string())),
            },
        };
        let reservation = match decision {
            Ok(r) => r,
            Err(why) => {
                self.audit(
                    "deny",
                    json!({"delegate": d.name, "task_id": task_id, "skill": skill, "detail": why}),
                )
                .await;
                // A refused authorization is the task's end, in LDP terms.
                let body = Body::TaskFailed {
                    task_id: task_id.clone(),
                    error: super::replies::policy_error("DENIED", "error", &why),
                };
                return Ok(super::replies::reply(
                    d,
                    card,
                    message,
                    body,
                    message.payload_mode,
                    now,
                ));
            }
        };
        let contract = match self.task_contract_signed(d, card, message, expires).await {
            Ok(c) => c,
            Err(r) => {
                self.release(reservation.as_deref()).await;
                return Err(r);
            }
        };
        let at = now.unix_timestamp();
        let task = TaskRecord {
            reservation: reservation.clone(),
            contract: Some(contract.id.to_string()),
            attestation: None,
            in_flight: true,
            cancelled: false,
        };
        let created = self
            .sessions
            .create_task(&d.name, &message.session_id, task_id, &task)
            .await;
        if !matches!(created, Ok(true)) {
            self.release(reservation.as_deref()).await;
            return Err(match created {
                Err(e) => e.into(),
                Ok(_) => Refusal::new(
                    Reason::IllegalInState,
                    format!("task {task_id:?} was submitted in this session before"),
                )
                .into(),
            });
        }
        let opened = self
            .sessions
            .update(&d.name, &message.session_id, |r| {
                r.session.use_mode(message.payload_mode)?;
                r.session
                    .apply(Side::Initiator, &message.body, at)
                    .map(drop)
            })
            .await;
        if let Err(e) = opened {
            self.release(reservation.as_deref()).await;
            let _ = self
                .sessions
                .remove_task(&d.name, &message.session_id, task_id)
                .await;
            return Err(e.into());
        }
        self.audit("task", json!({"delegate": d.name, "task_id": task_id, "skill": skill, "cost_microcents": cost})).await;
        let task = super::ending::Submitted {
            task_id,
            cost,
            reserved: reservation.is_some(),
            contract: &contract.id,
            delegation: payer.delegation(),
        };
        match self.forward(d, card, message, now).await {
            Ok(answer) => self.answered(d, card, message, &task, answer, now).await,
            Err(r) => {
                self.unanswered(d, &message.session_id, task_id).await;
                Err(r)
            }
        }
    }

    /// A result as a gateway-signed attestation, stored; its ID.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn attest(
        &self,
        d: &Delegate,
        card: &IdentityCard,
        session_id: &str,
        task_id: &str,
        output: &Value,
        provenance: &ldp::message::Provenance,
        cost: u64,
        contract_id: &delegateos::ContractId,
        payer: Option<&str>,
    ) -> Option<String> {
        // Filed under the paying DCT's delegation, else one derived from
        // the task (a paying trust domain has no delegation).
        let delegation_id = payer
            .and_then(|p| delegateos::DelegationId::parse(p).ok())
            .unwrap_or_else(|| {
                let seed = format!("delegation\0{}\0{session_id}\0{task_id}", d.name);
                let h = delegateos::signing::blake2b256(seed.as_bytes());
                let mut b = [0u8; 6];
                b.copy_from_slice(&h[..6]);
                delegateos::DelegationId::from_bytes(b)
            });
        let context = ldp::translate::ResultContext {
            session_id,
            task_id,
            delegate_id: &card.delegate_id,
            cost_microcents: cost,
            contract_id,
            delegation_id: &delegation_id,
        };
        let draft = ldp::translate::result_to_attestation(output, provenance, &context).ok()?;
        let signed = draft
            .sign(
                &self.key,
                dgw_core::random::attestation_id().ok()?,
                dgw_core::gatekeeper::now().0,
            )
            .ok()?;
        if let Err(e) = self.delegations.put_attestation(&signed).await {
            tracing::error!(error = %e, "storing an LDP attestation failed");
            return None;
        }
        Some(signed.id.to_string())
    }

    pub(super) async fn release(&self, reservation: Option<&str>) {
        if let Some(id) = reservation {
            let _ = self.gate.release(&Caller::gateway(), id).await;
        }
    }
}

impl Ldp {
    /// The task's DelegateOS contract, signed by the gateway and stored.
    fn task_contract_draft(
        d: &Delegate,
        card: &IdentityCard,
        message: &Envelope,
        deadline_ms: u64,
    ) -> Result<delegateos::contract::ContractDraft, Refused> {
        let Body::TaskSubmit {
            task_id,
            skill,
            input,
            ..
        } = &message.body
        else {
            return Err(Refused::new(500, "internal_error", "not a task"));
        };
        let deadline =
            time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(deadline_ms) * 1_000_000)
                .map(delegateos::Timestamp::from_instant)
                .map_err(|e| Refused::new(500, "internal_error", e.to_string()))?;
        ldp::translate::task_contract(
            skill,
            &card.delegate_id,
            &message.session_id,
            task_id,
            input,
            d.cost(skill),
            &deadline,
        )
        .map_err(Refused::from)
    }

    pub(super) async fn task_contract_signed(
        &self,
        d: &Delegate,
        card: &IdentityCard,
        message: &Envelope,
        deadline_ms: u64,
    ) -> Result<delegateos::TaskContract, Refused> {
        let draft = Self::task_contract_draft(d, card, message, deadline_ms)?;
        let id = dgw_core::random::contract_id()
            .map_err(|e| Refused::new(503, "random_unavailable", e.to_string()))?;
        let contract = draft
            .sign(
                &self.key,
                id,
                dgw_core::gatekeeper::now().0,
                &delegateos::CheckFunctionRegistry::with_builtins(),
            )
            .map_err(|e| Refused::new(500, "internal_error", e.to_string()))?;
        self.delegations.put_contract(&contract).await?;
        Ok(contract)
    }
}
