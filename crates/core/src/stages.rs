//! A span per pipeline stage (credential verify, capability match,
//! reserve, upstream call, settle, audit), exported as traces when
//! `[telemetry]` installs the exporter's layer: at TRACE level under
//! [`TRACE_TARGET`](crate::telemetry::TRACE_TARGET), so with traces off
//! each is a disabled call site (no allocation, no field evaluated).
//!
//! They carry what an operator follows a call by: tenant, delegation (the
//! leaf's ID), protocol, decision and the denial's type. Never a
//! credential, a secret, a header's value or a denial's detail (which may
//! echo the caller's input).

use tracing::Span;

/// A stage's span, its fields to be recorded as they become known.
#[macro_export]
macro_rules! stage_span {
    ($name:literal) => {
        ::tracing::trace_span!(
            target: $crate::telemetry::TRACE_TARGET,
            $name,
            dgw.protocol = ::tracing::field::Empty,
            dgw.tenant = ::tracing::field::Empty,
            dgw.delegation = ::tracing::field::Empty,
            dgw.decision = ::tracing::field::Empty,
            dgw.denial = ::tracing::field::Empty,
        )
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
    span.record("dgw.decision", "allowed");
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
