//! W3C trace context (`traceparent`, `tracestate`): a caller's becomes the
//! parent of its request's span, and the current span's travels on to the
//! services dgw calls, when traces are on (`[telemetry] otlp_endpoint`).
//! Off, nothing is read, parsed or made: one relaxed load per request.
//!
//! A caller's header is hostile input: one longer than a W3C header can
//! need, not ASCII, or malformed is ignored (the request starts a new
//! trace), never an error.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Set once the exporter's layer is installed.
static ON: AtomicBool = AtomicBool::new(false);

/// The longest `traceparent` read: version 00 is 55 bytes; a later
/// version may append fields, within reason.
pub const MAX_TRACEPARENT: usize = 128;
/// The longest `tracestate` read (W3C: 32 members, 512 bytes is what a
/// vendor must pass on).
pub const MAX_TRACESTATE: usize = 512;

/// Traces are on from now on (the binary, once it installed the layer).
pub fn enable() {
    ON.store(true, Ordering::Relaxed);
}

/// Whether traces are on.
#[inline]
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The span a request runs in on `front` (`http`, `grpc`), parented to
/// the caller's trace context when it is well formed; a disabled span
/// when traces are off.
pub fn request_span(
    front: &'static str,
    traceparent: Option<&[u8]>,
    tracestate: Option<&[u8]>,
) -> tracing::Span {
    if !enabled() {
        return tracing::Span::none();
    }
    let span = tracing::trace_span!(
        target: dgw_core::telemetry::TRACE_TARGET,
        "request",
        otel.kind = "server",
        dgw.front = front,
        request_id = tracing::field::Empty,
    );
    if let Some(parent) = parent(traceparent, tracestate) {
        // Only fails when the span is disabled or already started.
        let _ = span.set_parent(parent);
    }
    span
}

/// The caller's context, if its `traceparent` is well formed.
fn parent(traceparent: Option<&[u8]>, tracestate: Option<&[u8]>) -> Option<opentelemetry::Context> {
    let carrier = Carrier {
        traceparent: text(traceparent, MAX_TRACEPARENT)?,
        tracestate: text(tracestate, MAX_TRACESTATE),
    };
    let cx = TraceContextPropagator::new().extract(&carrier);
    cx.span().span_context().is_valid().then_some(cx)
}

/// A header's value as text, if it is ASCII of at most `max` bytes.
fn text(v: Option<&[u8]>, max: usize) -> Option<&str> {
    v.filter(|v| v.len() <= max && v.is_ascii())
        .and_then(|v| std::str::from_utf8(v).ok())
}

/// The current span's context as `traceparent` (and `tracestate`) for a
/// request dgw sends; nothing when traces are off or no span is current.
pub fn inject(mut set: impl FnMut(&'static str, String)) {
    if !enabled() {
        return;
    }
    let cx = tracing::Span::current().context();
    if !cx.span().span_context().is_valid() {
        return;
    }
    let mut headers = Headers(Vec::new());
    TraceContextPropagator::new().inject_context(&cx, &mut headers);
    for (name, value) in headers.0 {
        set(name, value);
    }
}

/// [`inject`] into a hyper request's headers.
pub fn inject_headers(headers: &mut hyper::HeaderMap) {
    inject(|name, value| {
        if let Ok(v) = hyper::header::HeaderValue::from_str(&value) {
            headers.insert(name, v);
        }
    });
}

struct Carrier<'a> {
    traceparent: &'a str,
    tracestate: Option<&'a str>,
}

impl Extractor for Carrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => Some(self.traceparent),
            "tracestate" => self.tracestate,
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec!["traceparent", "tracestate"]
    }
}

/// The headers the propagator writes (only its two names are kept).
struct Headers(Vec<(&'static str, String)>);

impl Injector for Headers {
    fn set(&mut self, key: &str, value: String) {
        let name = match key {
            "traceparent" => "traceparent",
            "tracestate" => "tracestate",
            _ => return,
        };
        if !value.is_empty() {
            self.0.push((name, value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_well_formed_traceparent_is_the_parent() {
        let cx = parent(Some(GOOD.as_bytes()), Some(b"vendor=x")).unwrap();
        let sc = cx.span().span_context().clone();
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
        assert!(sc.is_remote() && sc.is_sampled());
        assert_eq!(sc.trace_state().header(), "vendor=x");
    }

    #[test]
    fn anything_else_is_ignored() {
        let long = format!("{GOOD}-{}", "a".repeat(MAX_TRACEPARENT));
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e473é-00f067aa0ba902b7-01",
            "garbage",
            long.as_str(),
        ] {
            assert!(parent(Some(bad.as_bytes()), None).is_none(), "{bad:?}");
        }
        assert!(parent(None, Some(b"vendor=x")).is_none());
        assert!(parent(Some(&[0xff, 0xfe]), None).is_none());
        // A tracestate too long is dropped; the parent stays.
        let state = "k=v,".repeat(200);
        let cx = parent(Some(GOOD.as_bytes()), Some(state.as_bytes())).unwrap();
        assert_eq!(cx.span().span_context().trace_state().header(), "");
    }

    #[test]
    fn off_nothing_is_made() {
        // Not enabled in this test binary's other tests either.
        assert!(!enabled());
        assert!(request_span("http", Some(GOOD.as_bytes()), None).is_none());
        let mut set = Vec::new();
        inject(|k, v| set.push((k, v)));
        assert!(set.is_empty());
    }
}
