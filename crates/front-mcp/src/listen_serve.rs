//! Serving `subscriptions/listen` ([`super::listen`]) for a 2026-07-28
//! caller: its filter narrowed by its credential, relayed to the upstream
//! serving resources, what comes back let through by the narrowed filter
//! onto the request's own event stream.

use serde_json::{json, Map, Value};

use super::data_rules::DataKind;
use super::listen::{stamped, Filter, LIFETIME, SUBSCRIPTION_ID};
use super::message::Reply;
use super::proxy::{invalid_params, upstream_error, Caller, McpProxy};
use super::relay;
use dgw_front_jsonrpc::{RpcError, INTERNAL_ERROR, INVALID_REQUEST};

impl McpProxy {
    /// `subscriptions/listen` of a 2026-07-28 caller whose request accepts
    /// an event stream: the acknowledgement and the notifications go on
    /// the request's relay; the answer ends the stream.
    pub(super) async fn listen(
        &self,
        caller: Caller<'_>,
        id: &Value,
        params: Option<Map<String, Value>>,
    ) -> Result<Reply, RpcError> {
        let Some(relay) = relay::current() else {
            return Err(RpcError::new(
                INVALID_REQUEST,
                "event_stream_required",
                "subscriptions/listen is answered on an event stream: send Accept: text/event-stream",
            ));
        };
        let mut params = params.unwrap_or_default();
        let asked = Filter::parse(params.get("notifications"))
            .map_err(|e| invalid_params("invalid_params", e))?;
        let (viewer, holder) = self.viewer(caller, &mut params).await?;
        let _slot = self
            .listens
            .open(holder.map_or([0; 32], |h| h.0))
            .map_err(|r| RpcError::new(INTERNAL_ERROR, r.kind(), r.to_string()))?;
        let upstream = self
            .family_upstream("subscriptions/listen", "resources")
            .ok();
        let narrowed = match &upstream {
            Some(up) => {
                let rules = up.data_rules();
                asked.narrowed(|uri| {
                    rules
                        .policy_for(DataKind::Resource, uri)
                        .is_some_and(|p| viewer.sees(p, uri))
                })
            }
            None => Filter::default(),
        };
        let done = Reply::Result(json!({"_meta": {SUBSCRIPTION_ID: id}}));
        let relayed = upstream.filter(|up| !narrowed.is_empty() && up.listens());
        let Some(up) = relayed else {
            // Nothing dgw can deliver: acknowledged as nothing, and ended
            // (the revision's answer when a server honours nothing).
            let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                "params": {"notifications": {}}});
            relay.pass("dgw", stamped(ack, id));
            // Lets the acknowledgement open the stream before the answer.
            tokio::task::yield_now().await;
            return Ok(done);
        };
        params.insert("notifications".into(), narrowed.to_value());
        let name = up.name.clone();
        let mut each = |item: Value| {
            if let Some(item) = narrowed.admit(item, id) {
                relay.pass(&name, item);
            }
        };
        let listened = tokio::select! {
            r = up.listen(params, &mut each) => r,
            // The caller went: the upstream's stream is closed with it.
            () = relay.closed() => return Ok(done),
            () = tokio::time::sleep(LIFETIME) => return Ok(done),
        };
        match listened.map_err(|e| upstream_error(&e))? {
            Some(Reply::Error(e)) => Ok(Reply::Error(e)),
            _ => Ok(done),
        }
    }
}
