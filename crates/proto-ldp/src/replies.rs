//! Messages dgw itself answers a router with, in the delegate's name (it
//! holds the secret the router checks): a SESSION_REJECT or TASK_FAILED
//! dgw decided, with an LDP error of category `policy`.

use ldp::identity::IdentityCard;
use ldp::message::{Body, Envelope, LdpError};
use ldp::signing;
use time::OffsetDateTime;

use super::config::Delegate;

/// dgw's SESSION_REJECT of a proposal (`code`, category `policy`).
pub(super) fn reject(
    d: &Delegate,
    card: &IdentityCard,
    to: &Envelope,
    code: &str,
    why: String,
    now: OffsetDateTime,
) -> Envelope {
    let error = policy_error(code, "fatal", &why);
    let body = Body::SessionReject {
        reason: why,
        error: Some(error),
    };
    reply(d, card, to, body, ldp::mode::PayloadMode::Text, now)
}

/// An LDP error of category `policy` (a decision of dgw's).
pub(super) fn policy_error(code: &str, severity: &str, message: &str) -> LdpError {
    LdpError {
        code: code.into(),
        category: "policy".into(),
        message: message.into(),
        severity: severity.into(),
        retryable: false,
        partial_output: None,
    }
}

/// A message of dgw's own to the router that sent `to`, in the delegate's
/// name (a SESSION_REJECT or TASK_FAILED dgw decided), signed with the
/// shared secret.
pub(super) fn reply(
    d: &Delegate,
    card: &IdentityCard,
    to: &Envelope,
    body: Body,
    payload_mode: ldp::mode::PayloadMode,
    now: OffsetDateTime,
) -> Envelope {
    let mut e = Envelope {
        message_id: dgw_core::random::session_id().unwrap_or_default(),
        session_id: to.session_id.clone(),
        from: card.delegate_id.clone(),
        to: to.from.clone(),
        body,
        payload_mode,
        timestamp: now
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
        provenance: None,
        signature: None,
        signature_algorithm: None,
        nonce: None,
        payload_digest: None,
    };
    signing::apply(&mut e, &d.secret, d.payload_digest);
    e
}
