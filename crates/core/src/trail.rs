//! The tamper-evident trail: every decision, settlement, revocation and
//! administrative action, handed to a writer that chains and seals them
//! (the binary's audit log, `crates/audit-log`). Handing an entry over
//! never blocks and never fails a call: the writer owns durability.

use std::sync::{Arc, OnceLock};

use serde_json::{json, Value};

/// Something the writer turns into its record off the caller's path.
pub trait Record: Send + Sync + std::fmt::Debug {
    /// Writes the record as one JSON object.
    fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
}

/// One entry for the trail.
#[derive(Debug, Clone)]
pub enum TrailEntry {
    /// An allow/deny decision (the same event `WatchDecisions` sees),
    /// turned into JSON by the writer.
    Decision(Arc<dyn Record>),
    /// A record of the gateway's own, written by the writer without a
    /// JSON value built first (a reservation's end: once per call).
    Typed(Arc<dyn Record>),
    /// Anything else, already as its record (revocations, protocol events,
    /// admin actions).
    Event(Value),
}

impl TrailEntry {
    /// Writes the entry as the JSON object the trail records.
    pub fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        match self {
            TrailEntry::Decision(d) => d.write_json(out),
            TrailEntry::Typed(r) => r.write_json(out),
            TrailEntry::Event(v) => serde_json::to_writer(out, v),
        }
    }
}

/// Where trail entries go.
pub trait Trail: Send + Sync {
    /// Takes an entry; must not block.
    fn record(&self, entry: TrailEntry);
}

/// A trail set once at start (absent: nothing recorded).
#[derive(Default)]
pub struct TrailSlot(OnceLock<Arc<dyn Trail>>);

impl TrailSlot {
    /// Sends entries to `trail` from now on; a second call is ignored.
    pub fn set(&self, trail: Arc<dyn Trail>) {
        let _ = self.0.set(trail);
    }

    /// Whether a trail is set (to build entries only then).
    pub fn is_set(&self) -> bool {
        self.0.get().is_some()
    }

    /// Records `make()` when a trail is set.
    pub fn record(&self, make: impl FnOnce() -> TrailEntry) {
        if let Some(t) = self.0.get() {
            t.record(make());
        }
    }

    /// The `at` of an event: Unix milliseconds now.
    pub fn now_ms() -> u64 {
        (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000).max(0) as u64
    }

    /// Records an event of `kind` with `fields` (an object).
    pub fn event(&self, kind: &str, fields: Value) {
        self.record(|| {
            let mut record = json!({"event": kind, "at": Self::now_ms()});
            if let (Some(r), Some(id)) = (record.as_object_mut(), crate::request_id::current()) {
                r.insert("requestId".into(), id.as_ref().into());
            }
            if let (Some(r), Value::Object(f)) = (record.as_object_mut(), fields) {
                r.extend(f);
            }
            TrailEntry::Event(record)
        });
    }
}
