//! Talos v1 (`../shared/specs/talos-v1.0.md`) as the gateway speaks it:
//! parse and verify capabilities in both formats the Talos implementations
//! emit, authorize them per §4.2, read MCP envelopes (§3) and frames, keep
//! the replay cache (§6), sign audit events (§5), and translate a scope into
//! DelegateOS capabilities so the central pipeline can enforce it.
//!
//! Pure: no I/O, no async, no global state. Time, issuer keys and
//! revocations come in as arguments.

#![deny(missing_docs)]

pub mod audit;
pub mod authorize;
pub mod canonical;
pub mod capability;
pub mod denial;
pub mod envelope;
pub mod frame;
pub mod keys;
pub mod replay;
pub mod revocation;
pub mod scope;
pub mod translate;

pub use authorize::{authorize, Authorized, Context, TalosRequest};
pub use capability::{Capability, Format};
pub use denial::{Denied, TalosDenial};
pub use scope::Scope;

/// The clock skew §2.4 allows, in seconds.
pub const SKEW_SECS: i64 = 60;
/// The deepest delegation chain accepted.
pub const MAX_CHAIN_DEPTH: usize = 3;
