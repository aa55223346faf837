//! The tamper-evident audit log. Every entry of the core's trail (each
//! decision, settlement, revocation, protocol event and admin action)
//! becomes one JSON line in a segment file under the log's directory:
//!
//! ```text
//! {"seq":7,"at":"2026-11-24T06:41:00.123Z","prev":"<hash of seq 6>","event":{…},"hash":"<hash of this record>"}
//! ```
//!
//! `hash` is the BLAKE2b-256 of the canonical JSON (RFC 8785) of the other
//! four members, so each record carries the hash of the one before: a
//! changed, removed or reordered record breaks the chain where it happened.
//! Every `seal_interval` the writer appends a seal, a record whose event
//! holds the gateway key's signature over the chain's head, its kind and
//! the seal before it, and syncs the file: a rewritten chain cannot be
//! sealed again without that key, and a seal removed is a gap. A clean
//! stop ends the log with a `shutdown` seal ([`AuditLog::close`]); each
//! synced seal is handed to the gateway (`on_seal`), which keeps it in the
//! state store as the log's anchor, and the log is checked against that
//! anchor before anything is written at the next start ([`Start`]).
//! Segments rotate by size and age; the chain runs on across them, and
//! retention removes whole old segments after recording, in the chain, the
//! head it pruned through.
//!
//! Writing happens on a thread of its own: [`AuditLog::record`] never
//! blocks a call. An entry that finds the queue full is counted and the
//! count recorded (`dropped`), so a loss is itself in the chain.

mod record;
mod report;
mod scan;
mod segments;
mod sink;
mod start;
mod verify;
mod writer;

pub use dgw_core::state::AuditAnchor;
pub use record::{Record, Seal, SealKind, GENESIS};
pub use report::{Problem, Report};
pub use sink::Trailed;
pub use start::Start;
pub use verify::{export, verify, Expect};
pub use writer::{AuditLog, Settings};

/// Why the log could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Record(String),
    /// The log does not reach its anchor, or was changed: the writer will
    /// not seal over it.
    #[error("{0}")]
    Tampered(String),
}
