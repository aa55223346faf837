//! The DelegateOS pivot model (protocol v0.2): keys, canonical JSON,
//! Delegation Capability Tokens, revocation, resource globs, task contracts,
//! output verification, attestations, delegation chains and the §9 messages.
//!
//! Pure: no I/O, no clocks, no randomness, no global state. Callers pass in
//! the time, the seeds and the bytes.

#![deny(missing_docs)]

pub mod attestation;
pub mod base64url;
pub mod canonical;
pub mod capability;
mod check;
mod checks;
pub mod contract;
pub mod dct;
pub mod delegation;
pub mod denial;
pub mod glob;
pub mod ids;
pub mod messages;
pub mod principal;
pub mod resource;
pub mod revocation;
pub mod signing;
pub mod timestamp;
pub mod verification;
pub mod version;

pub use attestation::{Attestation, AttestationReport};
pub use capability::{Capability, CapabilityRequest};
pub use contract::TaskContract;
pub use dct::{AuthorizedScope, Dct, VerificationContext, VerifiedDct};
pub use delegation::{Delegation, DelegationStatus};
pub use denial::{DenialReason, DenialType};
pub use ids::{AttestationId, ContractId, DelegationId};
pub use principal::{KeyFile, Keypair, PrincipalId};
pub use revocation::{
    RevocationCheck, RevocationEntry, RevocationList, RevocationScope, VerifiedRevocation,
};
pub use timestamp::Timestamp;
pub use verification::{CheckFunctionRegistry, CheckResult, VerificationPlan, VerificationSpec};
