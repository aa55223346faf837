//! Requests an upstream sends to its client (`sampling/createMessage`,
//! `elicitation/create`, `roots/list`) while it serves a caller's call:
//! what policy lets an upstream ask at all, why dgw refuses one, and the
//! table of a caller's outstanding ones, under IDs dgw gave them, so a
//! caller answers only what was asked of it (issue 33).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde_json::{json, Map, Value};
use tokio::sync::oneshot;

use super::message::Reply;

/// Most requests one caller may have outstanding at once; another is
/// refused upstream (`too_many_server_requests`).
pub const MAX_OPEN: usize = 16;

/// What an upstream may ask of a caller (`[[upstreams]] server_requests`).
/// The default refuses sampling (it spends the caller's model budget on
/// the upstream's prompt) and allows elicitation and roots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerRequestPolicy {
    pub sampling: bool,
    pub elicitation: bool,
    pub roots: bool,
}

impl Default for ServerRequestPolicy {
    fn default() -> Self {
        Self {
            sampling: false,
            elicitation: true,
            roots: true,
        }
    }
}

/// The server-to-client methods dgw knows, with the client capability
/// each needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    Sampling,
    Elicitation,
    Roots,
}

impl Asked {
    pub fn of(method: &str) -> Option<Self> {
        match method {
            "sampling/createMessage" => Some(Asked::Sampling),
            "elicitation/create" => Some(Asked::Elicitation),
            "roots/list" => Some(Asked::Roots),
            _ => None,
        }
    }

    /// The method's name, for metrics.
    pub fn method(self) -> &'static str {
        match self {
            Asked::Sampling => "sampling/createMessage",
            Asked::Elicitation => "elicitation/create",
            Asked::Roots => "roots/list",
        }
    }

    /// The client capability that offers it.
    pub fn capability(self) -> &'static str {
        match self {
            Asked::Sampling => "sampling",
            Asked::Elicitation => "elicitation",
            Asked::Roots => "roots",
        }
    }
}

impl ServerRequestPolicy {
    pub fn allows(&self, asked: Asked) -> bool {
        match asked {
            Asked::Sampling => self.sampling,
            Asked::Elicitation => self.elicitation,
            Asked::Roots => self.roots,
        }
    }

    /// The client capabilities dgw declares to the upstream: what policy
    /// allows. A caller that did not declare one is refused it per request
    /// ([`Refusal::NotDeclared`]): the upstream session is shared.
    pub fn capabilities(&self) -> Map<String, Value> {
        let mut caps = Map::new();
        for asked in [Asked::Sampling, Asked::Elicitation, Asked::Roots] {
            if self.allows(asked) {
                caps.insert(asked.capability().into(), json!({}));
            }
        }
        caps
    }
}

/// Why dgw refused an upstream's request to a caller, answered to the
/// upstream as a JSON-RPC error whose `data.type` is [`Refusal::kind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("this gateway's policy does not let the upstream ask its callers for this ([[upstreams]] server_requests)")]
    Policy,
    #[error("the caller did not declare this capability")]
    NotDeclared,
    #[error("the caller's request has no stream for requests to it (it did not accept text/event-stream)")]
    NoStream,
    #[error("the caller speaks a protocol revision in which servers send no requests (2026-07-28: return an input-required result)")]
    Revision,
    #[error("dgw cannot tell which caller a request on a shared stdio upstream is for")]
    Unattributable,
    #[error("the caller already has {MAX_OPEN} requests from upstreams outstanding")]
    TooMany,
    #[error("the caller went away before answering")]
    CallerGone,
    #[error("dgw does not relay this method to callers")]
    Unknown,
}

impl Refusal {
    pub fn kind(self) -> &'static str {
        match self {
            Refusal::Policy => "server_request_refused",
            Refusal::NotDeclared => "capability_not_declared",
            Refusal::NoStream => "no_stream_to_caller",
            Refusal::Revision => "server_request_not_in_revision",
            Refusal::Unattributable => "server_request_unattributable",
            Refusal::TooMany => "too_many_server_requests",
            Refusal::CallerGone => "caller_gone",
            Refusal::Unknown => "method_not_relayed",
        }
    }

    /// The error the upstream gets: -32601 for a method the caller's side
    /// does not offer, -32603 when it does but the answer could not come.
    pub fn reply(self, method: &str) -> Reply {
        let code = match self {
            Refusal::TooMany | Refusal::CallerGone => -32603,
            _ => -32601,
        };
        Reply::Error(json!({
            "code": code,
            "message": format!("dgw refused {method}: {self}"),
            "data": {"type": self.kind(), "method": method},
        }))
    }
}

/// A caller's outstanding requests from upstreams, by the IDs dgw gave
/// them on the caller's stream. One table per session: a caller can only
/// answer what was asked of it.
#[derive(Debug, Default)]
pub struct Asks {
    next: AtomicU64,
    open: Mutex<HashMap<String, oneshot::Sender<Reply>>>,
}

impl Asks {
    /// A new ID and where its answer will come; `None` when [`MAX_OPEN`]
    /// are outstanding.
    pub fn open(&self) -> Option<(String, oneshot::Receiver<Reply>)> {
        let mut open = self.lock();
        if open.len() >= MAX_OPEN {
            return None;
        }
        let id = format!("dgw-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        open.insert(id.clone(), tx);
        Some((id, rx))
    }

    /// Forgets `id` (answered, refused, or timed out).
    pub fn close(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Hands the caller's answer to the request dgw sent it under `id`;
    /// false when dgw sent this caller no such request (or it is over).
    pub fn answer(&self, id: &Value, reply: Reply) -> bool {
        let Some(id) = id.as_str() else { return false };
        match self.lock().remove(id) {
            Some(tx) => tx.send(reply).is_ok(),
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Reply>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_policy_refuses_sampling_only() {
        let p = ServerRequestPolicy::default();
        assert!(!p.allows(Asked::Sampling));
        assert!(p.allows(Asked::Elicitation) && p.allows(Asked::Roots));
        let caps = p.capabilities();
        assert!(!caps.contains_key("sampling"));
        assert!(caps.contains_key("elicitation") && caps.contains_key("roots"));
    }

    #[test]
    fn an_answer_is_taken_once_and_only_for_an_id_dgw_gave() {
        let asks = Asks::default();
        let (id, mut rx) = asks.open().unwrap();
        assert!(!asks.answer(&json!("dgw-999"), Reply::Result(json!({}))));
        assert!(!asks.answer(&json!(0), Reply::Result(json!({}))));
        assert!(asks.answer(&json!(id), Reply::Result(json!({"ok": true}))));
        assert_eq!(rx.try_recv().unwrap(), Reply::Result(json!({"ok": true})));
        // Replayed: nobody waits any more.
        assert!(!asks.answer(&json!(id), Reply::Result(json!({}))));
    }

    #[test]
    fn outstanding_requests_are_bounded() {
        let asks = Asks::default();
        let held: Vec<_> = (0..MAX_OPEN).map(|_| asks.open().unwrap()).collect();
        assert!(asks.open().is_none());
        asks.close(&held[0].0);
        assert!(asks.open().is_some());
    }
}
