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

use crate::protocol::{Denial, Grant};

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

/// Records who a grant speaks for.
pub fn record_grant(span: &Span, grant: &Grant) {
    if span.is_disabled() {
        return;
    }
    span.record("dgw.protocol", grant.protocol.name);
    span.record("dgw.tenant", grant.tenant.as_str());
    if let Some(leaf) = grant.chain.last() {
        span.record("dgw.delegation", tracing::field::display(leaf));
    }
}

/// Records a stage's outcome: allowed, or denied with the denial's type.
pub fn record_outcome(span: &Span, outcome: Result<(), &Denial>) {
    if span.is_disabled() {
        return;
    }
    match outcome {
        Ok(()) => {
            span.record("dgw.decision", "allowed");
        }
        Err(d) => {
            span.record("dgw.decision", "denied");
            span.record("dgw.protocol", d.protocol.name);
            span.record("dgw.denial", d.kind.as_str());
        }
    }
}
