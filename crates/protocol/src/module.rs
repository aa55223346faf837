//! The registration value: one per protocol, listed once by the binary.

use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use dgw_core::gatekeeper::Gatekeeper;
use dgw_core::protocol::Protocol;
use dgw_core::revocations::Revocations;
use dgw_core::state::{AuditSink, DelegationStore, RecordStore, ReplayStore};

use crate::{CommandError, Document, Exit, SectionError};

/// What the gateway hands a module it builds: the one pipeline (with the
/// tenants and budgets), the shared state behind its traits, and the key
/// the gateway signs with. Built once in `serve`; each protocol keeps the
/// parts it uses.
#[derive(Clone)]
pub struct Services {
    pub gate: Arc<Gatekeeper>,
    pub revocations: Arc<Revocations>,
    pub records: Arc<dyn RecordStore>,
    pub replay: Arc<dyn ReplayStore>,
    pub delegations: Arc<dyn DelegationStore>,
    pub audit: Arc<dyn AuditSink>,
    pub key: Arc<delegateos::Keypair>,
    /// The tenants' issuing delegations (`dgw/tokens/issue`).
    pub issuing: Arc<dgw_core::issuing::Issuing>,
}

/// One protocol as the gateway's binary lists it.
///
/// Its section is read from the config file's whole text
/// ([`crate::section`]) so that it owns its keys and their checks: the
/// gateway validates it with the rest of the file (start, reload,
/// `dgw config check`) and hands the text again to [`Module::build`] and
/// [`Running::stage`], which read it the same way.
#[async_trait]
pub trait Module: Send + Sync {
    /// Its config section's name (`[toy]`), which also names its
    /// `dgw <section> …` commands.
    fn section(&self) -> &'static str;

    /// Checks its section of the config `document`; `tenants` are the
    /// configured tenants' names (a section naming another is refused).
    /// Errors name the full key (`toy.issuers[0].tenant`).
    fn check(&self, document: &Document<'_>, tenants: &[&str]) -> Result<(), SectionError>;

    /// Builds it from its section (checked) and the gateway's context.
    async fn build(
        &self,
        document: &Document<'_>,
        services: &Services,
    ) -> Result<Arc<dyn Running>, String>;

    /// Its section's part of `dgw config schema` (its raw section type's
    /// schema); `None`: any table.
    fn schema(&self, _generator: &mut schemars::SchemaGenerator) -> Option<schemars::Schema> {
        None
    }

    /// Its `dgw <section> …` commands, if it has any: a clap command
    /// named [`Module::section`].
    fn command(&self) -> Option<clap::Command> {
        None
    }

    /// Runs one of its commands, parsed by [`Module::command`].
    fn run_command(&self, _matches: &clap::ArgMatches) -> Result<Exit, CommandError> {
        Err(CommandError(format!("{} has no commands", self.section())))
    }
}

/// A built module, as the running gateway holds it.
pub trait Running: Send + Sync {
    /// The protocol it registers (none when its section leaves it off):
    /// its credentials, and the JSON-RPC methods, MCP tools and HTTP paths
    /// it serves.
    fn protocol(&self) -> Option<Arc<dyn Protocol>>;

    /// The gateway's HTTP listener is at `addr` (with TLS or not): where
    /// the peers it calls call back.
    fn listening_at(&self, _addr: SocketAddr, _tls: bool) {}

    /// Reads its section of a reloaded config `document` (checked): what
    /// applying it will do. Nothing changes until every module has staged,
    /// so a refusal here keeps the running configuration whole.
    fn stage(&self, document: &Document<'_>) -> Result<Staged, SectionError>;

    /// Its panel on the operator console's "Upstreams & protocols" page
    /// (none: it shows nothing there), read when the page is shown (from
    /// its records in the state store, so every replica shows the same).
    /// The console names no protocol: each says what an operator should
    /// see of it.
    fn panel(&self) -> PanelFuture<'_> {
        Box::pin(async { None })
    }
}

/// What [`Running::panel`] returns.
pub type PanelFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Option<Panel>> + Send + 'a>>;

/// What a protocol shows an operator on the console: a title and rows of
/// label and value, as words (the console escapes every one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Panel {
    pub title: String,
    pub rows: Vec<(String, String)>,
}

/// What a reloaded section does to a running module.
pub enum Staged {
    /// Applies it (trusted issuers, delegators): the reload reports the
    /// section applied.
    Apply(Box<dyn FnOnce() + Send>),
    /// Only a restart applies the change (it holds open work); it keeps
    /// running as it was.
    RestartNeeded,
    /// Nothing of it changed, and nothing applies live.
    Unchanged,
}
