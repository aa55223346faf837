//! What the pipeline and the protocols' methods report besides an
//! authorization denial. A module of its own, beside `gatekeeper` and
//! `protocol`, which both use it (neither uses the other through it).

use crate::state::StorageError;
use crate::telemetry::Outcome;

/// Failures that are not authorization denials.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// The request itself is wrong.
    #[error("{0}")]
    InvalidParams(String),
    /// Something named does not exist.
    #[error("{kind} {id} not found")]
    NotFound { kind: Missing, id: String },
    /// The request conflicts with the state it would change.
    #[error("{detail}")]
    Conflict { kind: Conflict, detail: String },
    /// An input was refused (a forged attestation, an invalid revocation).
    #[error("{detail}")]
    Rejected { kind: String, detail: String },
    /// The caller may not do this (`admin_required`,
    /// `not_reservation_holder`, `untrusted_revoker`): nothing changed.
    #[error("{detail}")]
    Forbidden { kind: Forbidden, detail: String },
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl GateError {
    /// How a request that failed so counts, on every front.
    pub fn outcome(&self) -> Outcome {
        match self {
            GateError::Rejected { .. } | GateError::Forbidden { .. } => Outcome::Denied,
            _ => Outcome::Error,
        }
    }
}

/// Declares a closed set of wire names: the enum, `as_str` and `Display`.
macro_rules! wire_names {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $text:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl $name {
            /// The wire name (`data.type`, the gRPC reason).
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

wire_names! {
    /// What a request named that does not exist.
    Missing {
        Reservation => "reservation",
        Delegation => "delegation",
        Contract => "contract",
        Attestation => "attestation",
        /// No chain of budget levels ends at the delegation.
        BudgetForDelegation => "budget for delegation",
        /// No issuing delegation is configured for the tenant.
        IssuingDelegation => "issuing delegation for tenant",
    }
}

wire_names! {
    /// Why a change conflicts with the state it would change.
    Conflict {
        SettlementExceedsReservation => "settlement_exceeds_reservation",
        NotChargedOnExpiry => "not_charged_on_expiry",
        BudgetExceeded => "budget_exceeded",
        TooManyReservations => "too_many_reservations",
        DelegationNotActive => "delegation_not_active",
        /// The recorded delegation's token no longer verifies.
        TokenInvalid => "token_invalid",
        /// Another writer changed the record first.
        ConcurrentUpdate => "concurrent_update",
    }
}

wire_names! {
    /// Why a caller may not do what it asked (nothing changed).
    Forbidden {
        AdminRequired => "admin_required",
        NotReservationHolder => "not_reservation_holder",
        UntrustedRevoker => "untrusted_revoker",
    }
}
