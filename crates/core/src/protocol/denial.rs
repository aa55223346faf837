//! The one denial type every protocol and the pipeline produce; each front
//! maps it to its wire format in one place (JSON-RPC `data.type`, gRPC
//! `ErrorInfo`).

use delegateos::{Capability, CapabilityRequest, DenialReason, DenialType};

use super::ProtocolId;

/// Why a call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenialKind {
    /// A reason of the DelegateOS vocabulary, which the pipeline speaks for
    /// every protocol (`capability_not_granted`, `budget_exceeded`).
    Pipeline(DenialType),
    /// A protocol's own reason, as its specification names it (`REPLAY`).
    Protocol(&'static str),
    /// The credential is malformed: a bad request more than a refusal
    /// (JSON-RPC `-32602`, gRPC `INVALID_ARGUMENT`), with its wire type.
    Malformed(&'static str),
}

impl DenialKind {
    /// The wire name (`data.type`, the gRPC `ErrorInfo` reason).
    pub fn as_str(&self) -> &'static str {
        match self {
            DenialKind::Pipeline(t) => t.as_str(),
            DenialKind::Protocol(r) | DenialKind::Malformed(r) => r,
        }
    }
}

/// A refused authorization: by which protocol, why, and what was asked.
#[derive(Debug, Clone)]
pub struct Denial {
    pub protocol: ProtocolId,
    pub kind: DenialKind,
    pub detail: String,
    /// What the credential grants, when that helps the caller.
    pub granted: Option<Vec<Capability>>,
    /// The request refused (each field cut to [`MAX_ECHOED_BYTES`]).
    pub requested: Option<Box<CapabilityRequest>>,
}

/// The wire type of a malformed credential ([`Denial::malformed`]).
pub const MALFORMED_CREDENTIAL: &str = "invalid_params";

/// Most bytes of each caller-supplied field a denial echoes back.
pub const MAX_ECHOED_BYTES: usize = 256;

impl Denial {
    /// Records this denial on a stage's span (its protocol and type, never
    /// its detail).
    pub fn record_in(&self, span: &tracing::Span) {
        crate::stages::denied(span, self.protocol.name, self.kind.as_str());
    }

    /// A DelegateOS-vocabulary denial for `protocol`.
    pub fn pipeline(protocol: ProtocolId, reason: DenialReason) -> Self {
        Self {
            protocol,
            kind: DenialKind::Pipeline(reason.kind),
            detail: reason.detail,
            granted: reason.granted,
            requested: None,
        }
    }

    /// A malformed credential, reported as an invalid request.
    pub fn malformed(protocol: ProtocolId, detail: impl Into<String>) -> Self {
        Self {
            protocol,
            kind: DenialKind::Malformed(MALFORMED_CREDENTIAL),
            detail: detail.into(),
            granted: None,
            requested: None,
        }
    }

    /// A protocol's own reason.
    pub fn protocol(protocol: ProtocolId, reason: &'static str, detail: impl Into<String>) -> Self {
        Self {
            protocol,
            kind: DenialKind::Protocol(reason),
            detail: detail.into(),
            granted: None,
            requested: None,
        }
    }

    /// The same denial, naming the request refused.
    pub fn for_request(mut self, request: &CapabilityRequest) -> Self {
        self.requested = Some(Box::new(echoed(request)));
        self
    }

    /// Whether a budget refused it (gRPC `RESOURCE_EXHAUSTED`).
    pub fn is_budget(&self) -> bool {
        self.kind == DenialKind::Pipeline(DenialType::BudgetExceeded)
    }

    /// The human message: the protocol's own, else `<Protocol>
    /// authorization denied: <reason>: <detail>`.
    pub fn message(&self) -> String {
        match self.protocol.denial_message {
            Some(m) => m.to_owned(),
            None => format!(
                "{} authorization denied: {}: {}",
                self.protocol.title,
                self.kind.as_str(),
                self.detail
            ),
        }
    }
}

/// `request` as a denial may echo it: each field cut to
/// [`MAX_ECHOED_BYTES`] (at a character boundary), so a huge request never
/// earns a larger answer.
fn echoed(request: &CapabilityRequest) -> CapabilityRequest {
    fn cap(s: &str) -> String {
        if s.len() <= MAX_ECHOED_BYTES {
            return s.to_owned();
        }
        let mut end = MAX_ECHOED_BYTES;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    }
    CapabilityRequest {
        namespace: cap(&request.namespace),
        action: cap(&request.action),
        resource: cap(&request.resource),
    }
}

/// The pipeline's answer to what it could judge: allowed (with what was
/// granted or held), or denied and why. Failures to judge at all (a bad
/// request, a storage error) are the `GateError` around it.
#[must_use]
#[derive(Debug)]
pub enum Decision<T> {
    Allowed(T),
    Denied(Denial),
}

impl<T> Decision<T> {
    /// The allowed value, or the denial as an error.
    pub fn into_result(self) -> Result<T, Denial> {
        match self {
            Decision::Allowed(t) => Ok(t),
            Decision::Denied(d) => Err(d),
        }
    }
}
