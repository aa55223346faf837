//! Motebit (`../shared/interop/motebit/spec/`): signed execution receipts
//! (single, nested chains, flat sequences), delegation tokens with their
//! standing grants and revocations, signed bearer tokens (`auth-token@1.0`),
//! the `VerificationVerdict`, and translation to and from DelegateOS.
//!
//! Two kinds of answers, on purpose: [`verdict`] reports what an artifact
//! establishes axis by axis exactly as the reference `verifyReceiptVerdict`
//! and `verifyDelegationTokenVerdict` do; the `verify` functions of
//! [`receipt`], [`token`] and [`bearer`] decide whether the gateway accepts
//! one, and are stricter (lowercase hex keys, hash formats, every window
//! checked now). Pure: no I/O, and the clock is always a parameter.

#![deny(missing_docs)]

pub mod bearer;
pub mod ceiling;
pub mod delegation;
pub mod encoding;
mod failure;
pub mod identity;
pub mod js;
pub mod receipt;
pub mod scope;
pub mod token;
pub mod translate;
pub mod verdict;

pub use failure::{Failure, Reason};

/// The cryptosuite of receipts, delegation tokens, grants and revocations:
/// JCS, Ed25519 over the raw canonical bytes, base64url signatures, hex keys.
pub const SUITE: &str = "motebit-jcs-ed25519-b64-v1";

/// The cryptosuite of signed bearer tokens.
pub const BEARER_SUITE: &str = "motebit-jwt-ed25519-v1";

/// Deepest nesting of `delegation_receipts` followed (execution-ledger §11.5).
pub const MAX_CHAIN_DEPTH: usize = 10;

/// Largest artifact (receipt tree, token, chain) accepted, in bytes.
pub const MAX_ARTIFACT_BYTES: usize = 1 << 20;

/// Longest delegation-token chain followed.
pub const MAX_TOKEN_CHAIN: usize = 10;
