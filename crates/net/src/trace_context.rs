//! W3C trace context (`traceparent`, `tracestate`): a caller's becomes the
//! parent of its request's span, and the current span's travels on to the
//! services dgw calls, when traces are on (`[telemetry] otlp_endpoint`).
//! Off, nothing is read, parsed or made: one relaxed load per request
//! ([`dgw_core::stages::on`]), before any header is looked at.
//!
//! A caller's header is hostile input: one longer than a W3C header can
//! need, not ASCII, or malformed is ignored (the request starts a new
//! trace), never an error.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The longest `traceparent` read: version 00 is 55 bytes; a later
/// version may append fields, within reason.
pub const MAX_TRACEPARENT: usize = 128;
/// The longest `tracestate` read (W3C: 32 members, 512 bytes is what a
/// vendor must pass on).
pub const MAX_TRACESTATE: usize = 512;

/// Traces are on from now on (the binary, once it installed the layer).
pub fn enable() {
    dgw_core::stages::turn_on();
}

/// Whether traces are on.
#[inline]
pub fn enabled() -> bool {
    dgw_core::stages::on()
}

/// The span request `request_id` runs in on the front `front` names
/// (`jsonrpc`, `mcp`, `http`, `grpc`), parented to the caller's trace
/// context in `headers` when it is well formed; [`Span::none`] when traces
/// are off, `front` not called and no header read.
pub fn request_span(
    front: impl FnOnce() -> &'static str,
    headers: &hyper::HeaderMap,
    request_id: &str,
) -> Span {
    if !enabled() {
        return Span::none();
    }
    let span = tracing::trace_span!(
        target: dgw_core::telemetry::TRACE_TARGET,
        "request",
        otel.kind = "server",
        dgw.front = front(),
        request_id = request_id,
    );
    let header = |name| headers.get(name).map(|v| v.as_bytes());
    if let Some(parent) = parent(header("traceparent"), header("tracestate")) {
        // Only fails when the span is disabled or already started.
        let _ = span.set_parent(parent);
    }
    span
}

pin_project_lite::pin_project! {
    /// A request's work in its log span and its trace span: one wrapper
    /// for both, so the work (a front's whole route, many kilobytes) is
    /// moved into it once, as it was before traces existed.
    pub struct InRequest<F> {
        log: Span,
        traced: Span,
        #[pin]
        work: F,
    }
}

/// `work` run inside `log` (the logs' request span) and `traced` (its
/// [`request_span`]), in that order.
pub fn in_request<F: Future>(work: F, log: Span, traced: Span) -> InRequest<F> {
    InRequest { log, traced, work }
}

impl<F: Future> Future for InRequest<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _log = this.log.enter();
        let _traced = this.traced.enter();
        this.work.poll(cx)
    }
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
        let mut headers = hyper::HeaderMap::new();
        headers.insert("traceparent", hyper::header::HeaderValue::from_static(GOOD));
        let span = request_span(|| unreachable!("no front named"), &headers, "r1");
        assert!(span.is_none());
        let mut set = Vec::new();
        inject(|k, v| set.push((k, v)));
        assert!(set.is_empty());
    }
}
