//! A span per pipeline stage (credential verify, capability match,
//! reserve, upstream call, settle, audit), exported as traces when
//! `[telemetry]` installs the exporter's layer: at TRACE level under
//! [`TRACE_TARGET`](crate::telemetry::TRACE_TARGET). With traces off
//! ([`on`] false) a stage's span is [`Span::none`]: one relaxed load, no
//! call site consulted, no field looked up, nothing allocated, and every
//! record on it a single branch.
//!
//! They carry what an operator follows a call by: tenant, delegation (the
//! leaf's ID), protocol, decision and the denial's type. Never a
//! credential, a secret, a header's value or a denial's detail (which may
//! echo the caller's input).

use std::sync::atomic::{AtomicBool, Ordering};

use tracing::Span;

/// Set once the exporter's layer is installed (the binary, at start).
static ON: AtomicBool = AtomicBool::new(false);

/// Traces are on from now on: call it once the exporter's layer is
/// installed, never otherwise (a span made before would go nowhere).
pub fn turn_on() {
    ON.store(true, Ordering::Relaxed);
}

/// Whether traces are on: what every trace site checks first.
#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// A stage's span, its fields to be recorded as they become known; with
/// traces off, [`Span::none`].
#[macro_export]
macro_rules! stage_span {
    ($name:literal) => {
        if $crate::stages::on() {
            ::tracing::trace_span!(
                target: $crate::telemetry::TRACE_TARGET,
                $name,
                dgw.protocol = ::tracing::field::Empty,
                dgw.tenant = ::tracing::field::Empty,
                dgw.delegation = ::tracing::field::Empty,
                dgw.decision = ::tracing::field::Empty,
                dgw.denial = ::tracing::field::Empty,
            )
        } else {
            ::tracing::Span::none()
        }
    };
}

/// Records who a grant speaks for (`Grant::record_in`).
pub fn record_grant(span: &Span, protocol: &'static str, tenant: &str, delegation: Option<&str>) {
    if span.is_disabled() {
        return;
    }
    span.record("dgw.protocol", protocol);
    span.record("dgw.tenant", tenant);
    if let Some(leaf) = delegation {
        span.record("dgw.delegation", leaf);
    }
}

/// Records that the stage allowed the call.
pub fn allowed(span: &Span) {
    decided(span, "allowed");
}

/// Records the stage's outcome (`allowed`, `charged`, `answered`, …).
pub fn decided(span: &Span, decision: &'static str) {
    if span.is_disabled() {
        return;
    }
    span.record("dgw.decision", decision);
}

/// Records a denial by its protocol and type (`Denial::record_in`).
pub fn denied(span: &Span, protocol: &'static str, denial: &'static str) {
    if span.is_disabled() {
        return;
    }
    span.record("dgw.decision", "denied");
    span.record("dgw.protocol", protocol);
    span.record("dgw.denial", denial);
}
