//! The JSON-RPC 2.0 front: framing (`frame.rs`: envelopes, batches,
//! notifications), the method table (`methods.rs`: the gateway's `dgw/*`,
//! the protocols' own and their aliases of the gateway's), and the one
//! mapping from decisions to JSON-RPC errors (`error.rs`). It names no
//! protocol.
//!
//! Error codes: the standard -32700/-32600/-32601/-32602/-32603, and
//! -32001 authorization denied (§11.2), -32003 input rejected, -32004 not
//! found, -32005 conflict. Every error carries `data.type`.

mod error;
mod frame;
mod methods;

use std::sync::Arc;

use dgw_core::caller::Caller;
use dgw_core::gatekeeper::Gatekeeper;
use dgw_core::protocol::Registry;
use dgw_core::state::AuditSink;

pub use error::*;
pub use frame::MAX_BATCH;
pub use methods::METHODS;

/// The JSON-RPC front over a gatekeeper.
pub struct JsonRpc {
    gate: Arc<Gatekeeper>,
    protocols: Arc<Registry>,
    audit: Arc<dyn AuditSink>,
    max_body_bytes: usize,
    reload: Option<Reload>,
    /// `dgw/oauth/revoke`, when `[oauth]` issues tokens.
    subject_revoke: Option<SubjectRevoke>,
    /// The name the tamper-evident log's anchor is kept under, when the
    /// gateway keeps one (`dgw/audit/head`).
    audit_log: Option<String>,
}

/// Reloads the gateway's configuration for `dgw/reload`: called with the
/// admin's name, it answers the report, or why the file was refused.
pub type Reload = Arc<
    dyn Fn(
            String,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<serde_json::Value, String>> + Send>,
        > + Send
        + Sync,
>;

/// Revokes an OAuth subject's delegation for `dgw/oauth/revoke`: called
/// with the caller, the tenant and the subject.
pub type SubjectRevoke = Arc<
    dyn Fn(
            Caller,
            String,
            String,
        ) -> std::pin::Pin<
            Box<
                dyn std::future::Future<
                        Output = Result<serde_json::Value, dgw_core::gatekeeper::GateError>,
                    > + Send,
            >,
        > + Send
        + Sync,
>;

impl JsonRpc {
    pub fn new(
        gate: Arc<Gatekeeper>,
        protocols: Arc<Registry>,
        audit: Arc<dyn AuditSink>,
        max_body_bytes: usize,
    ) -> Self {
        Self {
            gate,
            protocols,
            audit,
            max_body_bytes,
            reload: None,
            subject_revoke: None,
            audit_log: None,
        }
    }

    /// Serves `dgw/audit/head`: the anchor kept under `log`.
    pub fn with_audit_log(mut self, log: String) -> Self {
        self.audit_log = Some(log);
        self
    }

    /// Serves `dgw/oauth/revoke` with `revoke`.
    pub fn with_subject_revoke(mut self, revoke: SubjectRevoke) -> Self {
        self.subject_revoke = Some(revoke);
        self
    }

    /// Serves `dgw/reload` with `reload`.
    pub fn with_reload(mut self, reload: Reload) -> Self {
        self.reload = Some(reload);
        self
    }
}
