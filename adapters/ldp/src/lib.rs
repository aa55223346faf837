//! LDP, the LLM Delegate Protocol (`../shared/specs/ldp-v0.1.md`), as the
//! reference `ldp-protocol` 0.2.0 speaks it on the wire: identity cards,
//! the message envelope and its 12 message types, envelope signatures
//! (HMAC-SHA256 over the pipe-joined header fields, byte-compatible with
//! the reference), message freshness, the session state machine,
//! payload-mode negotiation with its fallback chain, and trust domains.
//!
//! Stricter than the reference where it is lax, on purpose (see
//! `docs/adapters/ldp.md`): unknown message types and members are refused,
//! a timestamp that does not parse is stale, and replay is always checked
//! (by the gateway's replay store). Pure: no I/O, the clock a parameter.

#![deny(missing_docs)]

mod refusal;

pub mod freshness;
pub mod identity;
pub mod message;
pub mod mode;
pub mod session;
pub mod signing;
pub mod translate;
pub mod trust;

pub use refusal::{Reason, Refusal};

/// Largest message accepted, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;
