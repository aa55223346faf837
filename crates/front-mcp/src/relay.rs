//! What an upstream sends toward the caller whose request it is serving
//! (issue 33): its progress and log notifications, and its own requests
//! (sampling, elicitation, roots). Only messages on that request's own
//! upstream stream are attributed to it, and the caller's [`Relay`] is the
//! request's context (a task-local, like its request ID), so they reach
//! exactly that caller and no other: nothing is broadcast.
//!
//! A relay is bounded: [`QUEUE`] messages wait for the caller's stream;
//! past that, notifications are dropped and counted
//! (`dgw_mcp_relay_dropped_total{reason="full"}`), so an upstream flooding
//! notifications cannot grow dgw's memory. A request to the caller waits
//! for room instead (it is bounded by the caller's [`MAX_OPEN`] and the
//! upstream's timeout).
//!
//! [`MAX_OPEN`]: super::server_requests::MAX_OPEN

use std::future::Future;
use std::sync::{Arc, RwLock};

use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use super::message::{Message, Reply};
use super::server_requests::{Asked, Asks, Refusal, ServerRequestPolicy};
use dgw_core::telemetry;

/// Messages one request's stream holds before notifications are dropped.
pub const QUEUE: usize = 64;

tokio::task_local! {
    static CURRENT: Relay;
}

/// What a downstream session keeps for the upstreams' requests to it: the
/// client capabilities it declared, and its outstanding requests.
#[derive(Debug, Default)]
pub struct ToCaller {
    pub asks: Arc<Asks>,
    /// The session's recent answer events, for resumption.
    pub replay: Arc<super::resume::Replay>,
    declared: RwLock<Arc<Map<String, Value>>>,
}

impl ToCaller {
    /// Keeps the capabilities `initialize`'s params declare.
    pub fn declare(&self, params: &Map<String, Value>) {
        let caps = match params.get("capabilities") {
            Some(Value::Object(c)) => c.clone(),
            _ => Map::new(),
        };
        *self.declared.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(caps);
    }

    pub fn declared(&self) -> Arc<Map<String, Value>> {
        self.declared
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// The way back to the caller of one request: its stream's queue.
#[derive(Clone)]
pub struct Relay {
    tx: mpsc::Sender<Value>,
    asks: Arc<Asks>,
    declared: Arc<Map<String, Value>>,
    /// Whether requests may be sent to this caller: not in 2026-07-28,
    /// whose servers ask with input-required results instead.
    requests: bool,
}

impl Relay {
    /// A relay for a caller of a session revision (requests allowed) or
    /// of 2026-07-28 (notifications only), and its stream's receiving end.
    pub fn channel(to_caller: Option<&ToCaller>) -> (Self, mpsc::Receiver<Value>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let relay = match to_caller {
            Some(c) => Relay {
                tx,
                asks: c.asks.clone(),
                declared: c.declared(),
                requests: true,
            },
            None => Relay {
                tx,
                asks: Arc::default(),
                declared: Arc::default(),
                requests: false,
            },
        };
        (relay, rx)
    }

    /// `f` with this relay as its request's way back to the caller.
    pub fn scope<F: Future>(self, f: F) -> impl Future<Output = F::Output> {
        CURRENT.scope(self, f)
    }

    /// Queues a notification; drops it (counted) when the queue is full or
    /// the caller's stream is gone.
    fn notify(&self, upstream: &str, message: Value) {
        match self.tx.try_send(message) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                telemetry::record_mcp_relay_dropped(upstream, "full")
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                telemetry::record_mcp_relay_dropped(upstream, "gone")
            }
        }
    }

    /// Queues a notification from `upstream` for the caller (dropped,
    /// counted, when its queue is full).
    pub fn pass(&self, upstream: &str, message: Value) {
        self.notify(upstream, message);
    }

    /// Resolves once the caller's stream is gone.
    pub async fn closed(&self) {
        self.tx.closed().await
    }

    /// Sends `asked` to the caller under an ID of dgw's and waits for its
    /// answer (bounded by the upstream's timeout, which covers the call).
    async fn ask(
        &self,
        asked: Asked,
        params: Option<Map<String, Value>>,
    ) -> Result<Reply, Refusal> {
        if !self.requests {
            return Err(Refusal::Revision);
        }
        if !self.declared.contains_key(asked.capability()) {
            return Err(Refusal::NotDeclared);
        }
        let (id, answer) = self.asks.open().ok_or(Refusal::TooMany)?;
        // Forgotten however this ends: answered, refused, or dropped with
        // the call (cancelled, timed out), so no entry outlives its call.
        let open = Open {
            asks: &self.asks,
            id,
        };
        let request = Message::Request {
            id: json!(open.id),
            method: asked.method().to_owned(),
            params,
        };
        self.tx
            .send(request.to_value())
            .await
            .map_err(|_| Refusal::CallerGone)?;
        tokio::select! {
            r = answer => r.map_err(|_| Refusal::CallerGone),
            () = self.tx.closed() => Err(Refusal::CallerGone),
        }
    }
}

/// A request outstanding with the caller, forgotten when dropped.
struct Open<'a> {
    asks: &'a Asks,
    id: String,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.asks.close(&self.id);
    }
}

/// The relay of the request this task serves, if its caller has a stream.
pub fn current() -> Option<Relay> {
    CURRENT.try_with(Clone::clone).ok()
}

/// `f` with the current relay, for when it goes on in a task of its own.
pub fn carried<F: Future>(f: F) -> impl Future<Output = F::Output> {
    let relay = current();
    async move {
        match relay {
            Some(r) => CURRENT.scope(r, f).await,
            None => f.await,
        }
    }
}

/// What became of a message an upstream sent on a request's stream that
/// is not the request's answer.
pub enum Routed {
    /// Relayed to the caller, or dropped.
    Done,
    /// Send this back to the upstream (the answer to its request).
    Answer(Message),
    /// Not about the caller: the upstream's own business.
    NotMine(Value),
}

/// Routes `item`, sent by `upstream` on the stream of the request this
/// task serves: progress and log notifications to the caller; a request
/// to the caller when `policy` allows it and the caller declared it,
/// else refused with a typed error; every request counted.
pub async fn route(upstream: &str, policy: ServerRequestPolicy, item: Value) -> Routed {
    let method = item.get("method").and_then(Value::as_str);
    let is_request = item.get("id").is_some();
    match (method, is_request) {
        (Some("notifications/progress" | "notifications/message"), false) => {
            // Without a relay the caller asked for one JSON answer: there
            // is nowhere to put them.
            if let Some(relay) = current() {
                relay.notify(upstream, item);
            }
            Routed::Done
        }
        (Some(_), true) => match Message::parse(item, &[]) {
            Ok(Message::Request { id, method, params }) => {
                let reply = ask(upstream, policy, &method, params).await;
                Routed::Answer(Message::Response { id, reply })
            }
            Ok(_) | Err(_) => Routed::Done,
        },
        _ => Routed::NotMine(item),
    }
}

/// The caller's answer to an upstream's request, or dgw's refusal.
async fn ask(
    upstream: &str,
    policy: ServerRequestPolicy,
    method: &str,
    params: Option<Map<String, Value>>,
) -> Reply {
    let Some(asked) = Asked::of(method) else {
        telemetry::record_mcp_server_request(upstream, "other", Refusal::Unknown.kind());
        return Refusal::Unknown.reply(method);
    };
    let answered = if !policy.allows(asked) {
        Err(Refusal::Policy)
    } else {
        match current() {
            None => Err(Refusal::NoStream),
            Some(relay) => relay.ask(asked, params).await,
        }
    };
    match answered {
        Ok(reply) => {
            telemetry::record_mcp_server_request(upstream, asked.method(), "relayed");
            reply
        }
        Err(refusal) => {
            tracing::info!(%upstream, method = asked.method(), why = refusal.kind(), "refused an upstream's request to a caller");
            telemetry::record_mcp_server_request(upstream, asked.method(), refusal.kind());
            refusal.reply(method)
        }
    }
}

/// An upstream's request that dgw cannot attribute to one caller (a
/// shared stdio upstream's), refused and counted.
pub fn unattributable(upstream: &str, method: &str) -> Reply {
    refused_outright(upstream, method, Refusal::Unattributable)
}

/// An upstream's request refused for `refusal` before any caller is asked,
/// counted.
pub fn refused_outright(upstream: &str, method: &str, refusal: Refusal) -> Reply {
    let (label, refusal) = match Asked::of(method) {
        Some(a) => (a.method(), refusal),
        None => ("other", Refusal::Unknown),
    };
    telemetry::record_mcp_server_request(upstream, label, refusal.kind());
    refusal.reply(method)
}

#[cfg(test)]
mod tests {
    use super::super::server_requests::MAX_OPEN;
    use super::*;

    fn declaring(caps: Value) -> ToCaller {
        let c = ToCaller::default();
        let mut params = Map::new();
        params.insert("capabilities".into(), caps);
        c.declare(&params);
        c
    }

    /// A call cancelled while its caller is being asked leaves no
    /// outstanding request behind (else 16 such calls would lock the
    /// session out of every later one).
    #[tokio::test]
    async fn a_request_dropped_with_its_call_is_forgotten() {
        let to_caller = declaring(json!({"elicitation": {}}));
        let (relay, mut relayed) = Relay::channel(Some(&to_caller));
        {
            let ask = relay.ask(Asked::Elicitation, None);
            tokio::pin!(ask);
            tokio::select! {
                _ = &mut ask => panic!("nobody answered"),
                m = relayed.recv() => assert_eq!(m.unwrap()["method"], "elicitation/create"),
            }
        }
        for _ in 0..MAX_OPEN {
            assert!(to_caller.asks.open().is_some());
        }
    }

    #[tokio::test]
    async fn undeclared_and_stateless_callers_are_not_asked() {
        let to_caller = declaring(json!({"roots": {}}));
        let (relay, mut relayed) = Relay::channel(Some(&to_caller));
        assert_eq!(
            relay.ask(Asked::Sampling, None).await,
            Err(Refusal::NotDeclared)
        );
        let (stateless, _rx) = Relay::channel(None);
        assert_eq!(
            stateless.ask(Asked::Roots, None).await,
            Err(Refusal::Revision)
        );
        assert!(relayed.try_recv().is_err());
    }
}
