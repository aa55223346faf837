//! What the two upstream links (stdio, Streamable HTTP) share, and the
//! [`Host`] they drive: the upstream that owns them, seen only through this
//! trait so that links and upstream do not depend on each other.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::oneshot;

use super::message::{Message, Reply};

/// Largest message accepted from an upstream.
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// What a link needs of the upstream that owns it.
#[async_trait]
pub trait Host: Send + Sync {
    /// The upstream's name, for errors and logs.
    fn name(&self) -> &str;
    /// Initializes the upstream over its link (`initialize`, then
    /// `notifications/initialized` and `tools/list`).
    async fn handshake(&self) -> Result<(), UpstreamError>;
    /// Whether requests may be sent.
    fn set_ready(&self, ready: bool);
    /// How many tools the upstream listed (for logs).
    fn tool_count(&self) -> usize;
    /// Routes a message the upstream sent: an answer goes to its waiting
    /// request in `pending`; anything else is returned.
    fn on_message(&self, pending: &Pending, value: Value) -> Option<Message>;
    /// What dgw presents to an HTTP upstream on every request.
    fn credentials(&self) -> std::sync::Arc<super::auth::HttpCredentials>;
    /// `text` without the upstream's secrets (for its stderr in our logs).
    fn redact(&self, text: &str) -> String;
    /// What the upstream may ask of callers (sampling, elicitation, roots).
    fn server_requests(&self) -> super::server_requests::ServerRequestPolicy {
        super::server_requests::ServerRequestPolicy {
            sampling: false,
            elicitation: false,
            roots: false,
        }
    }
    /// The input schema of the upstream's tool `name`, as it listed it.
    fn tool_schema(&self, _name: &str) -> Option<Value> {
        None
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    /// The request was never sent.
    #[error("upstream {upstream:?} is not available: {detail}")]
    Unavailable { upstream: String, detail: String },
    /// The request was sent (so the upstream may have acted on it) but no
    /// answer came back.
    #[error("upstream {upstream:?} did not answer: {detail}")]
    NoAnswer { upstream: String, detail: String },
    /// The client cancelled the request after it was sent; the upstream
    /// was told to stop, but may have acted on it.
    #[error("the client cancelled its request to upstream {upstream:?}")]
    Cancelled { upstream: String },
    /// The upstream forgot our HTTP session; the request was not processed.
    #[error("upstream {upstream:?} ended our session")]
    SessionExpired { upstream: String },
    /// An upstream that said it speaks only 2026-07-28 refused a request of
    /// that revision without the revision's error; it was not processed.
    #[error("upstream {upstream:?} no longer answers as a server of MCP 2026-07-28")]
    EraChanged { upstream: String },
}

impl UpstreamError {
    /// Whether the request reached the upstream, so a tool may have run.
    pub fn reached(&self) -> bool {
        matches!(
            self,
            UpstreamError::NoAnswer { .. } | UpstreamError::Cancelled { .. }
        )
    }
}

/// Requests sent and waiting for their answers, by the gateway's IDs.
#[derive(Default)]
pub struct Pending(Mutex<HashMap<u64, oneshot::Sender<Reply>>>);

impl Pending {
    pub fn insert(&self, id: u64) -> oneshot::Receiver<Reply> {
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id, tx);
        rx
    }

    pub fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Whether request `id` still waits for its answer.
    pub fn contains(&self, id: u64) -> bool {
        self.lock().contains_key(&id)
    }

    /// Hands an answer to its waiting request; false when nobody waits.
    pub fn answer(&self, id: &Value, reply: Reply) -> bool {
        let Some(id) = id.as_u64() else { return false };
        match self.lock().remove(&id) {
            Some(tx) => tx.send(reply).is_ok(),
            None => false,
        }
    }

    /// Drops every waiting request: their callers see `NoAnswer`.
    pub fn fail_all(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Reply>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Exponential back-off between restarts: 100 ms doubling to 30 s, back to
/// the start after a connection that lived a minute.
pub(crate) struct Backoff {
    next: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_secs(30);
    const HEALTHY: Duration = Duration::from_secs(60);

    pub fn new() -> Self {
        Self { next: Self::FIRST }
    }

    /// The wait before the next attempt, given how long the last one lived.
    pub fn after(&mut self, lived: Duration) -> Duration {
        if lived >= Self::HEALTHY {
            self.next = Self::FIRST;
        }
        let wait = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        wait
    }
}
