//! Cancellation of forwarded requests (MCP `notifications/cancelled`): a
//! client names one of its own requests by ID; dgw stops waiting for the
//! upstream, tells the upstream under the ID dgw gave the request there,
//! and sends the client no answer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde_json::Value;
use tokio::sync::watch;

/// The requests of one downstream session that its client may cancel.
#[derive(Debug, Default)]
pub struct InFlight {
    /// By the request ID's JSON text (so `1` and `"1"` differ), with the
    /// generation that registered it.
    by_id: Mutex<HashMap<String, (u64, watch::Sender<bool>)>>,
    generation: AtomicU64,
}

impl InFlight {
    /// Registers request `id`, cancellable until the returned guard drops.
    /// A client reusing the ID of a request still in flight can from then
    /// on cancel only the newer one.
    pub fn begin(&self, id: &Value) -> Cancellable<'_> {
        let key = id.to_string();
        let generation = self.generation.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = watch::channel(false);
        self.lock().insert(key.clone(), (generation, tx.clone()));
        Cancellable {
            registry: self,
            key,
            generation,
            tx,
            signal: Cancel(Some(rx)),
        }
    }

    /// Cancels request `id`; false when no request of that ID is in flight.
    pub fn cancel(&self, id: &Value) -> bool {
        match self.lock().get(&id.to_string()) {
            Some((_, tx)) => {
                tx.send_replace(true);
                true
            }
            None => false,
        }
    }

    /// Cancels every request in flight (the session ended).
    pub fn cancel_all(&self) {
        for (_, tx) in self.lock().values() {
            tx.send_replace(true);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (u64, watch::Sender<bool>)>> {
        self.by_id.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One request in flight. Dropped, it leaves the registry and cancels
/// whatever still works for it: dropped unfinished means the client went
/// away (its connection closed).
pub struct Cancellable<'a> {
    registry: &'a InFlight,
    key: String,
    generation: u64,
    tx: watch::Sender<bool>,
    signal: Cancel,
}

impl Cancellable<'_> {
    pub fn signal(&self) -> &Cancel {
        &self.signal
    }
}

impl Drop for Cancellable<'_> {
    fn drop(&mut self) {
        let mut map = self.registry.lock();
        if map
            .get(&self.key)
            .is_some_and(|(g, _)| *g == self.generation)
        {
            map.remove(&self.key);
        }
        self.tx.send_replace(true);
    }
}

/// Whether, and when, a request is cancelled.
#[derive(Debug, Clone)]
pub struct Cancel(Option<watch::Receiver<bool>>);

impl Cancel {
    /// For the gateway's own requests, which no client can cancel.
    pub fn never() -> Self {
        Cancel(None)
    }

    /// Resolves once the request is cancelled; never, if it is not.
    pub async fn cancelled(&self) {
        if let Some(rx) = &self.0 {
            let mut rx = rx.clone();
            if rx.wait_for(|c| *c).await.is_ok() {
                return;
            }
        }
        std::future::pending().await
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.as_ref().is_some_and(|rx| *rx.borrow())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn cancels_only_the_named_request_while_in_flight() {
        let in_flight = InFlight::default();
        let one = in_flight.begin(&json!(1));
        let text_one = in_flight.begin(&json!("1"));
        assert!(in_flight.cancel(&json!(1)));
        one.signal().cancelled().await;
        assert!(one.signal().is_cancelled());
        assert!(
            !text_one.signal().is_cancelled(),
            "1 and \"1\" are different IDs"
        );
        let signal = text_one.signal().clone();
        drop(one);
        assert!(!in_flight.cancel(&json!(1)), "gone once answered");
        assert!(!signal.is_cancelled());
        drop(text_one);
        assert!(
            signal.is_cancelled(),
            "dropped unfinished: the client went away"
        );
        assert!(!in_flight.cancel(&json!(7)), "never in flight");
        let other = in_flight.begin(&json!(2));
        in_flight.cancel_all();
        assert!(other.signal().is_cancelled());
    }

    #[tokio::test]
    async fn a_reused_id_cancels_the_newer_request_and_the_older_guard_leaves_it() {
        let in_flight = InFlight::default();
        let older = in_flight.begin(&json!("x"));
        let newer = in_flight.begin(&json!("x"));
        drop(older);
        assert!(
            in_flight.cancel(&json!("x")),
            "the newer one is still registered"
        );
        assert!(newer.signal().is_cancelled());
        let never = Cancel::never();
        assert!(!never.is_cancelled());
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(20), never.cancelled()).await;
        assert!(waited.is_err(), "never resolves");
    }
}
