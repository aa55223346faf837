//! A protocol's own audit events (a purchase, a grant, a verified
//! receipt): one JSON line with the protocol, the event and the time,
//! counted in `dgw_protocol_events_total`, logged under `dgw::audit` and
//! appended to the audit log.

use serde_json::{json, Value};

use super::ProtocolId;
use crate::state::AuditSink;

/// Records `event` of `protocol` with its `fields` (an object).
pub async fn record(
    sink: &dyn AuditSink,
    protocol: ProtocolId,
    event: &'static str,
    fields: Value,
) {
    crate::telemetry::record_protocol_event(protocol.name, event);
    let mut record = json!({
        "protocol": protocol.name,
        "event": event,
        "at": crate::trail::TrailSlot::now_ms(),
    });
    if let (Some(r), Value::Object(f)) = (record.as_object_mut(), fields) {
        r.extend(f);
        if let Some(id) = crate::request_id::current() {
            r.insert("requestId".into(), id.as_ref().into());
        }
    }
    tracing::info!(target: "dgw::audit", event = %record, "audit");
    if let Err(e) = sink.append(&record).await {
        tracing::error!(%protocol, error = %e, "appending an audit event failed");
    }
}
