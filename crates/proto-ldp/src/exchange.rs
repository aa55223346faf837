//! `POST /ldp/{name}/messages`: one message from a router, checked,
//! forwarded to the delegate, and the delegate's answer checked and
//! passed back (docs/adapters/ldp.md, "What dgw does with each message").

use ldp::identity::IdentityCard;
use ldp::message::{Body, Envelope};
use ldp::session::{Session, Side};
use ldp::{freshness, signing, Reason, Refusal};
use serde_json::{json, Value};
use time::OffsetDateTime;

use super::config::Delegate;
use super::ending::not_a_result;
use super::payer::{session_budget, NoPayer};
use super::refused::{no_session, Refused};
use super::replies::reject;
use super::sessions::Record;
use super::{Ldp, ID};
use dgw_core::protocol::{HttpAnswer, HttpRequest};

/// The replay namespace of routers' message IDs.
const REPLAY: &str = "ldp_messages";

impl Ldp {
    pub(super) async fn exchange(
        &self,
        delegate: &Delegate,
        request: &HttpRequest<'_>,
    ) -> HttpAnswer {
        match self.handle(delegate, request).await {
            Ok(answer) => answer,
            Err(r) => {
                dgw_core::telemetry::record_denial(ID.name, r.reason);
                self.audit(
                    "refuse",
                    json!({"delegate": delegate.name, "reason": r.reason, "detail": r.detail}),
                )
                .await;
                r.answer()
            }
        }
    }

    async fn handle(&self, d: &Delegate, request: &HttpRequest<'_>) -> Result<HttpAnswer, Refused> {
        let now = OffsetDateTime::now_utc();
        let message = Envelope::parse(request.body)?;
        let card = self
            .cards
            .get(d)
            .await
            .map_err(|e| Refused::new(502, "delegate_unavailable", e))?;
        // The delegate's ID, or its endpoint at dgw: the PyPI client
        // addresses HELLO and SESSION_PROPOSE to the URL it posts to
        // (decision 168).
        if message.to != card.delegate_id && message.to.trim_end_matches('/') != self.endpoint(d) {
            return Err(Refused::new(
                400,
                "wrong_recipient",
                format!(
                    "this endpoint is {:?}'s, not {:?}'s",
                    card.delegate_id, message.to
                ),
            ));
        }
        freshness::check(&message.timestamp, now, self.config.freshness_secs)?;
        // The router's own secret when routers are listed (decision 145).
        let Some(secret) = d.router_secret(&message.from) else {
            return Err(Refused::new(
                401,
                "unknown_router",
                format!("{:?} is not a router of this delegate", message.from),
            ));
        };
        signing::verify(&message, secret, d.payload_digest)?;
        let window = self.config.freshness_secs;
        let key = format!("{}\0{}\0{}", d.name, message.from, message.message_id);
        let seconds = now.unix_timestamp();
        if !self
            .replay
            .insert_new(REPLAY, key.as_bytes(), seconds, seconds + 2 * window)
            .await?
        {
            return Err(Refusal::new(
                Reason::Replayed,
                format!("message {:?} was seen before", message.message_id),
            )
            .into());
        }
        let mut answer = match &message.body {
            Body::Hello { .. } => not_a_result(self.forward(d, &card, &message, now).await?)?,
            Body::SessionPropose { .. } => {
                self.propose(d, &card, &message, request.authorization, now)
                    .await?
            }
            Body::TaskSubmit { .. } => {
                self.submit(d, &card, &message, request.authorization, now)
                    .await?
            }
            Body::TaskCancel { task_id } => {
                self.payer_ends(d, &message, request.authorization).await?;
                self.step(d, &message, Side::Initiator, now).await?;
                self.cancel(d, &card, &message, task_id, now).await?
            }
            Body::Attestation { claim, evidence } => {
                // A DelegateOS attestation carried along must verify.
                if let Some(Err(r)) = ldp::translate::attestation_of(claim, evidence) {
                    return Err(r.into());
                }
                self.step(d, &message, Side::Initiator, now).await?;
                not_a_result(self.forward(d, &card, &message, now).await?)?
            }
            Body::SessionClose { .. } => {
                self.payer_ends(d, &message, request.authorization).await?;
                self.close(d, &card, &message, now).await?
            }
            Body::TaskUpdate { .. }
            | Body::TaskResult { .. }
            | Body::TaskFailed { .. }
            | Body::CapabilityManifest { .. }
            | Body::SessionAccept { .. }
            | Body::SessionReject { .. } => {
                return Err(Refusal::new(
                    Reason::IllegalInState,
                    format!("{} is the delegate's to send", message.body.kind()),
                )
                .into())
            }
        };
        if !d.routers.is_empty() {
            // The router cannot check the delegate's secret: dgw, having
            // checked the answer, signs it with the router's.
            signing::apply(&mut answer, secret, d.payload_digest);
        }
        Ok(HttpAnswer::new(
            200,
            serde_json::to_value(&answer).unwrap_or(Value::Null),
        ))
    }

    /// Applies `message` from `side` to its session.
    async fn step(
        &self,
        d: &Delegate,
        message: &Envelope,
        side: Side,
        now: OffsetDateTime,
    ) -> Result<Record, Refused> {
        let at = now.unix_timestamp();
        match self
            .sessions
            .update(&d.name, &message.session_id, |r| {
                r.session.apply(side, &message.body, at).map(drop)
            })
            .await?
        {
            Some((record, ())) => Ok(record),
            None => Err(no_session(&message.session_id)),
        }
    }

    /// A SESSION_CLOSE or TASK_CANCEL must come with the credential that
    /// pays for the session (decision 145): the shared secret says only
    /// that a router of this delegate sent it.
    async fn payer_ends(
        &self,
        d: &Delegate,
        message: &Envelope,
        authorization: Option<&str>,
    ) -> Result<(), Refused> {
        let Some(record) = self.sessions.get(&d.name, &message.session_id).await? else {
            return Err(no_session(&message.session_id));
        };
        self.may_end(d, &record, &message.from, authorization)
    }

    /// Re-signs `message` toward the delegate (its nonce as configured),
    /// posts it, and checks the answer: from the delegate, fresh, signed.
    pub(super) async fn forward(
        &self,
        d: &Delegate,
        card: &IdentityCard,
        message: &Envelope,
        now: OffsetDateTime,
    ) -> Result<Envelope, Refused> {
        let mut out = message.clone();
        // Addressed to the delegate by its ID, whichever way the router
        // named it.
        out.to = card.delegate_id.clone();
        out.nonce = d
            .nonce
            .then(|| dgw_core::random::session_id().unwrap_or_default());
        out.payload_digest = None;
        signing::apply(&mut out, &d.secret, d.payload_digest);
        let body = serde_json::to_value(&out)
            .map_err(|e| Refused::new(500, "internal_error", e.to_string()))?;
        let answer = self
            .client
            .post(&format!("{}/ldp/messages", d.url), &body, None)
            .await
            .map_err(|e| Refused::new(502, "delegate_unavailable", e.to_string()))?;
        let answer = Envelope::from_value(answer)
            .map_err(|r| Refused::new(502, "delegate_answer_invalid", r.to_string()))?;
        let invalid = |why: String| Refused::new(502, "delegate_answer_invalid", why);
        if answer.from != card.delegate_id {
            return Err(invalid(format!("the answer is from {:?}", answer.from)));
        }
        freshness::check(&answer.timestamp, now, self.config.freshness_secs)
            .map_err(|r| invalid(r.to_string()))?;
        signing::verify(&answer, &d.secret, d.payload_digest)
            .map_err(|r| invalid(r.to_string()))?;
        Ok(answer)
    }

    /// SESSION_PROPOSE: the trust domains first (dgw rejects itself), then
    /// the delegate's answer opens (or fails) the session.
    async fn propose(
        &self,
        d: &Delegate,
        card: &IdentityCard,
        message: &Envelope,
        authorization: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<Envelope, Refused> {
        let Body::SessionPropose { config } = &message.body else {
            return Err(Refused::new(500, "internal_error", "not a proposal"));
        };
        // The router holds this delegate's secret: without a domain of its
        // own it is in the delegate's (decision 110); a listed router's
        // pinned domain is its only one (decision 145).
        let pinned = d.router_domain(&message.from);
        let mismatch = match (pinned, &config.trust_domain) {
            (Some(pin), Some(named)) if pin != named => Some(format!(
                "router {:?} is in trust domain {pin:?}, not {named:?}",
                message.from
            )),
            _ => None,
        };
        let initiator = ldp::trust::TrustDomain {
            name: pinned
                .map(str::to_owned)
                .or_else(|| config.trust_domain.clone())
                .unwrap_or_else(|| d.trust_domain.name.clone()),
            allow_cross_domain: true,
            trusted_peers: vec![d.trust_domain.name.clone()],
        };
        let checked = ldp::trust::check_session(
            &initiator,
            &d.trust_domain,
            config.required_trust_domain.as_deref(),
        );
        let refused = match (mismatch, checked) {
            (Some(why), _) => Some(("TRUST_VIOLATION", why)),
            (None, Err(r)) => Some(("TRUST_VIOLATION", r.detail)),
            (None, Ok(())) => None,
        };
        // Who pays, decided before the delegate hears of the session.
        let paid = match refused {
            Some(r) => Err(r),
            None => match self.proposal_payer(d, card, &initiator.name, authorization) {
                Ok(p) => Ok(p),
                Err(NoPayer::Missing(r)) => return Err(r),
                Err(NoPayer::Denied(why)) => Err(("DENIED", why)),
            },
        };
        let (payer, grant) = match paid {
            Ok(p) => p,
            Err((code, why)) => {
                self.audit(
                    "session_reject",
                    json!({"delegate": d.name, "router": message.from, "reason": why}),
                )
                .await;
                return Ok(reject(d, card, message, code, why, now));
            }
        };
        let at = now.unix_timestamp();
        let new_record = |session_id: &str| -> Result<Record, Refusal> {
            let mut session = Session::new(at);
            session.apply(Side::Initiator, &message.body, at)?;
            Ok(Record {
                delegate: d.name.clone(),
                router: message.from.clone(),
                domain: initiator.name.clone(),
                session,
                payer: Some(payer.clone()),
                budget: session_budget(d, config, &grant, session_id),
            })
        };
        if !message.session_id.is_empty()
            && !self
                .sessions
                .create(&message.session_id, &new_record(&message.session_id)?)
                .await?
        {
            return Err(Refusal::new(
                Reason::IllegalInState,
                format!("session {:?} exists", message.session_id),
            )
            .into());
        }
        let answer = self.forward(d, card, message, now).await?;
        let session_id = match &answer.body {
            Body::SessionAccept { session_id, .. } if !session_id.is_empty() => session_id.clone(),
            _ => message.session_id.clone(),
        };
        if session_id != message.session_id {
            // The delegate named the session (the PyPI package's always
            // does): dgw keeps it by that name, the proposal's record
            // forgotten (decision 169). A name taken is not the delegate's
            // to reuse.
            let created = self
                .sessions
                .create(&session_id, &new_record(&session_id)?)
                .await?;
            if !message.session_id.is_empty() {
                self.sessions.remove(&d.name, &message.session_id).await?;
            }
            if !created {
                return Err(Refused::new(
                    502,
                    "delegate_answer_invalid",
                    format!("the delegate accepted the session as {session_id:?}, which exists"),
                ));
            }
        }
        self.sessions
            .update(&d.name, &session_id, |r| {
                r.session.apply(Side::Responder, &answer.body, at).map(drop)
            })
            .await
            .map_err(Refused::from)?;
        self.audit(
            "session",
            json!({"delegate": d.name, "router": message.from, "session_id": session_id,
            "answer": answer.body.kind()}),
        )
        .await;
        Ok(answer)
    }
}
