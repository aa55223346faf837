//! The protocols this gateway speaks, each on the seam of [`crate::protocol`]:
//! the only modules that name a protocol's types. `serve.rs` registers them.

pub mod agenta;
pub mod delegateos;
pub mod ldp;
pub mod motebit;
pub mod talos;

use std::sync::Arc;

use crate::gatekeeper::Gatekeeper;
use crate::revocations::Revocations;
use crate::state::{AuditSink, DelegationStore, RecordStore, ReplayStore};

/// What the gateway hands a protocol binding: the one pipeline, the
/// shared state, and the key the gateway signs with. Built once in
/// `serve`; each binding keeps the parts it uses.
#[derive(Clone)]
pub struct Services {
    pub gate: Arc<Gatekeeper>,
    pub revocations: Arc<Revocations>,
    pub records: Arc<dyn RecordStore>,
    pub replay: Arc<dyn ReplayStore>,
    pub delegations: Arc<dyn DelegationStore>,
    pub audit: Arc<dyn AuditSink>,
    pub key: Arc<::delegateos::Keypair>,
}
