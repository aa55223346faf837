//! The one mapping from gatekeeper decisions and errors to gRPC statuses with
//! `google.rpc` details (`tonic-types`).

use std::collections::HashMap;

use delegateos::DenialType;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use dgw_core::gatekeeper::{Conflict, GateError};
use dgw_core::protocol::{Denial, DenialKind};
use dgw_core::state::StorageError;

/// The `ErrorInfo.domain` of the pipeline's denial types (the DelegateOS
/// vocabulary, whichever protocol the credential was).
pub const DOMAIN: &str = "delegateos";
/// The `ErrorInfo.domain` of the gateway's own conditions.
pub const GATEWAY_DOMAIN: &str = "delegate-gateway";

/// `expired` → `EXPIRED`, as google.rpc reasons are written.
fn reason(kind: &str) -> String {
    kind.to_ascii_uppercase()
}

/// A denied authorization: `PERMISSION_DENIED` (`RESOURCE_EXHAUSTED` for
/// a budget, `INVALID_ARGUMENT` for a malformed credential) with an
/// `ErrorInfo` whose reason is the denial type, whose domain is the
/// vocabulary it comes from (`delegateos` for the pipeline's, else the
/// protocol's name) and whose metadata carry the protocol, the detail, the
/// request and the granted scope.
pub fn denial(d: &Denial) -> Status {
    let mut metadata = HashMap::new();
    metadata.insert("detail".to_owned(), d.detail.clone());
    metadata.insert("protocol".to_owned(), d.protocol.name.to_owned());
    if let Some(r) = &d.requested {
        metadata.insert("requested_namespace".to_owned(), r.namespace.clone());
        metadata.insert("requested_action".to_owned(), r.action.clone());
        metadata.insert("requested_resource".to_owned(), r.resource.clone());
    }
    if let Some(granted) = &d.granted {
        let text: Vec<String> = granted.iter().map(|c| c.to_string()).collect();
        metadata.insert("granted".to_owned(), text.join(" "));
    }
    let (code, domain) = match d.kind {
        DenialKind::Pipeline(DenialType::BudgetExceeded) => (Code::ResourceExhausted, DOMAIN),
        DenialKind::Pipeline(_) => (Code::PermissionDenied, DOMAIN),
        DenialKind::Protocol(_) => (Code::PermissionDenied, d.protocol.name),
        DenialKind::Malformed(_) => (Code::InvalidArgument, d.protocol.name),
    };
    let details = ErrorDetails::with_error_info(reason(d.kind.as_str()), domain, metadata);
    Status::with_error_details(code, d.detail.clone(), details)
}

/// Malformed input: `INVALID_ARGUMENT` with a `BadRequest` naming the field.
pub fn bad_field(field: &str, description: impl Into<String>) -> Status {
    let description = description.into();
    Status::with_error_details(
        Code::InvalidArgument,
        format!("{field}: {description}"),
        ErrorDetails::with_bad_request_violation(field, description),
    )
}

/// A caller that could not be established: `UNAUTHENTICATED`.
pub fn unauthenticated(e: &dgw_core::caller::AuthError) -> Status {
    Status::with_error_details(
        Code::Unauthenticated,
        e.to_string(),
        ErrorDetails::with_error_info(reason(e.kind()), GATEWAY_DOMAIN, HashMap::new()),
    )
}

/// A stream's end when a reload removed or changed the admin credential
/// that opened it.
pub fn credential_withdrawn() -> Status {
    Status::with_error_details(
        Code::Unauthenticated,
        "the credential this stream was opened with was removed or changed by a reload; open it again with a current one",
        ErrorDetails::with_error_info(reason("credential_withdrawn"), GATEWAY_DOMAIN, HashMap::new()),
    )
}

/// A failure of a protocol's own method: a refusal in the protocol's
/// vocabulary names the protocol as its domain; anything else as
/// [`gate_error`].
pub fn protocol_error(protocol: &str, e: &GateError) -> Status {
    match e {
        GateError::Rejected { kind, detail } => {
            let mut metadata = HashMap::new();
            metadata.insert("detail".to_owned(), detail.clone());
            Status::with_error_details(
                Code::PermissionDenied,
                detail.clone(),
                ErrorDetails::with_error_info(reason(kind), protocol, metadata),
            )
        }
        other => gate_error(other),
    }
}

/// Every other gatekeeper failure.
pub fn gate_error(e: &GateError) -> Status {
    match e {
        GateError::InvalidParams(m) => bad_field("request", m.clone()),
        GateError::NotFound { kind, id } => Status::with_error_details(
            Code::NotFound,
            e.to_string(),
            ErrorDetails::with_resource_info(kind.as_str(), id.clone(), "", e.to_string()),
        ),
        GateError::Conflict { kind, detail } => Status::with_error_details(
            if *kind == Conflict::BudgetExceeded {
                Code::ResourceExhausted
            } else {
                Code::FailedPrecondition
            },
            detail.clone(),
            ErrorDetails::with_error_info(reason(kind.as_str()), GATEWAY_DOMAIN, HashMap::new()),
        ),
        GateError::Forbidden { kind, detail } => Status::with_error_details(
            Code::PermissionDenied,
            detail.clone(),
            ErrorDetails::with_error_info(reason(kind.as_str()), GATEWAY_DOMAIN, HashMap::new()),
        ),
        GateError::Rejected { kind, detail } => {
            let mut metadata = HashMap::new();
            metadata.insert("detail".to_owned(), detail.clone());
            Status::with_error_details(
                Code::PermissionDenied,
                detail.clone(),
                ErrorDetails::with_error_info(reason(kind), DOMAIN, metadata),
            )
        }
        GateError::Storage(s @ StorageError::Unavailable(_)) => Status::with_error_details(
            Code::Unavailable,
            s.to_string(),
            ErrorDetails::with_error_info(
                reason("state_unavailable"),
                GATEWAY_DOMAIN,
                HashMap::new(),
            ),
        ),
        GateError::Storage(s) => Status::internal(s.to_string()),
    }
}
