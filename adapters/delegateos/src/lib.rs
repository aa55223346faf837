//! The DelegateOS pivot model (protocol v0.2): keys, canonical JSON,
//! Delegation Capability Tokens, revocation, and resource globs.
//!
//! Pure: no I/O, no clocks, no randomness, no global state. Callers pass in
//! the time, the seeds and the bytes.

pub mod base64url;
pub mod canonical;
pub mod capability;
pub mod dct;
pub mod denial;
pub mod glob;
pub mod ids;
pub mod principal;
pub mod revocation;
pub mod signing;
pub mod timestamp;

pub use capability::{Capability, CapabilityRequest};
pub use dct::{AuthorizedScope, Dct, VerificationContext, VerifiedDct};
pub use denial::{DenialReason, DenialType};
pub use ids::{AttestationId, ContractId, DelegationId};
pub use principal::{KeyFile, Keypair, PrincipalId};
pub use revocation::{RevocationCheck, RevocationEntry, RevocationList, RevocationScope};
pub use timestamp::Timestamp;
