//! A refusal as the router gets it: an HTTP status and
//! `{"error": {"type", "message"}}`.

use ldp::{Reason, Refusal};
use serde_json::json;

use super::sessions::Change;
use dgw_core::protocol::HttpAnswer;

/// A refusal as the router gets it.
#[derive(Debug)]
pub struct Refused {
    /// The HTTP status.
    pub status: u16,
    /// The reason, as dgw names it (`error.type`).
    pub reason: &'static str,
    /// What, for people.
    pub detail: String,
}

impl Refused {
    /// A refusal of `reason` with `status`.
    pub fn new(status: u16, reason: &'static str, detail: impl Into<String>) -> Self {
        Self {
            status,
            reason,
            detail: detail.into(),
        }
    }

    /// As the router gets it.
    pub fn answer(&self) -> HttpAnswer {
        HttpAnswer::new(
            self.status,
            json!({"error": {"type": self.reason, "message": self.detail}}),
        )
    }
}

impl From<Refusal> for Refused {
    fn from(r: Refusal) -> Self {
        let status = match r.reason {
            Reason::BadSignature | Reason::UnsupportedAlgorithm => 401,
            Reason::TrustDomain => 403,
            Reason::Replayed | Reason::IllegalInState | Reason::NoFallback => 409,
            Reason::SessionExpired => 410,
            _ => 400,
        };
        Self::new(status, r.reason.as_str(), r.detail)
    }
}

impl From<dgw_core::state::StorageError> for Refused {
    fn from(e: dgw_core::state::StorageError) -> Self {
        Self::new(503, "state_unavailable", e.to_string())
    }
}

impl<E: Into<Refused>> From<Change<E>> for Refused {
    fn from(c: Change<E>) -> Self {
        match c {
            Change::Refused(e) => e.into(),
            Change::Storage(e) => e.into(),
        }
    }
}

/// The refusal of a message for a session dgw does not hold.
pub(super) fn no_session(session_id: &str) -> Refused {
    Refusal::new(
        Reason::IllegalInState,
        format!("no session {session_id:?} with this delegate"),
    )
    .into()
}
