//! The protocol seam: what every delegation protocol provides the gateway,
//! and the registry the fronts ask which protocol a request carries.
//!
//! A protocol turns a presented credential into a [`Grant`] (the neutral
//! form of "who may do what, under which budget, proven how"); the one
//! pipeline (the gatekeeper's `authorize_grant`) then
//! matches every request against the grant and reserves its cost. Fronts
//! never name a protocol: they hand the registry what the transport carried
//! (an `Authorization` scheme, the request's own members) and map the typed
//! [`Denial`] to their wire format in one place each.
//!
//! Adding a protocol is one type implementing [`Protocol`] and one
//! [`Registry::register`] line (`docs/architecture.md`, "Adding a protocol").

mod credentials;
mod denial;
pub mod endpoint;
pub mod event;
mod hosts;
mod method;
mod registry;
mod translates;

/// Capability sets as an [`Authority`].
pub mod capabilities;

use std::sync::Arc;

use async_trait::async_trait;
use delegateos::{AuthorizedScope, CapabilityRequest, DenialReason};
use serde_json::Value;

use crate::budget::BudgetKey;

pub use credentials::{admitting, Admits, Credential, Credentials, Outcome, Presented};
pub use denial::{Decision, Denial, DenialKind, MALFORMED_CREDENTIAL, MAX_ECHOED_BYTES};
pub use endpoint::{HttpAnswer, HttpRequest};
pub use hosts::{Hosted, Hosts};
pub use method::{parse_params, MethodAnswer, MethodResult};
pub use registry::{Found, Registry};
pub use translates::{Translates, Translation};

/// A protocol's name, as metrics, audit and `data.protocol` label it
/// (`delegateos`), and as people read it (`DelegateOS`).
#[derive(Debug)]
pub struct ProtocolInfo {
    pub name: &'static str,
    pub title: &'static str,
    /// The message of its denials, when it has a fixed one (DelegateOS:
    /// `DCT verification failed`).
    pub denial_message: Option<&'static str>,
}

/// A protocol, by its [`ProtocolInfo`]: one pointer, so denials stay small.
#[derive(Debug, Clone, Copy)]
pub struct ProtocolId(&'static ProtocolInfo);

impl ProtocolId {
    pub const fn new(info: &'static ProtocolInfo) -> Self {
        Self(info)
    }
}

impl std::ops::Deref for ProtocolId {
    type Target = ProtocolInfo;
    fn deref(&self) -> &ProtocolInfo {
        self.0
    }
}

impl PartialEq for ProtocolId {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for ProtocolId {}

impl std::fmt::Display for ProtocolId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// A call to authorize, as a front describes it.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The tool (MCP) or the requested action (JSON-RPC, gRPC).
    pub tool: &'a str,
    /// The action the tool maps to.
    pub action: &'a str,
    /// What it asks, in DelegateOS capability terms.
    pub requests: &'a [CapabilityRequest],
    pub cost_microcents: u64,
    /// The front's session (MCP), for protocols that scope replay by it;
    /// the front's name when its requests stand alone.
    pub session: &'a str,
    /// Whether `session` is a session (an MCP session's ID) whose requests
    /// one presentation of a credential may cover, or only a front's name.
    pub in_session: bool,
}

impl<'a> Call<'a> {
    /// A call asking one capability, named by its namespace (the JSON-RPC
    /// and gRPC `Authorize` requests).
    pub fn one(request: &'a CapabilityRequest, cost_microcents: u64, session: &'a str) -> Self {
        Self {
            tool: &request.namespace,
            action: &request.action,
            requests: std::slice::from_ref(request),
            cost_microcents,
            session,
            in_session: false,
        }
    }
}

/// Whether a grant permits a request: the protocol's own rule (a DCT's
/// verification with its revocation and expiry checks at this instant; a
/// translated capability set).
pub trait Authority: Send + Sync {
    /// `Ok` when `request` is permitted with `spent` already spent at the
    /// grant's last level (with the DelegateOS scope, for a DCT); the
    /// pipeline has checked the request is canonical.
    fn permits(
        &self,
        request: &CapabilityRequest,
        spent: u64,
    ) -> Result<Option<AuthorizedScope>, DenialReason>;
}

/// A verified credential in pipeline terms. `G` is what it remembers for
/// the events after it: a protocol's own type when it makes one
/// ([`Credentials::grant`]), its [`Outcome`] once the pipeline holds it.
pub struct Grant<G = Box<dyn Outcome>> {
    pub protocol: ProtocolId,
    pub tenant: String,
    /// The budget nodes of its chain, root first, with their limits.
    pub levels: Vec<(BudgetKey, u64)>,
    /// The delegation IDs of its chain, for decisions (DelegateOS only).
    pub chain: Vec<delegateos::DelegationId>,
    pub authority: Box<dyn Authority>,
    /// The requests the pipeline matches, when the protocol states a call
    /// in its own terms (its namespace being the tool); else the front's.
    pub requests: Option<Vec<CapabilityRequest>>,
    /// The DelegateOS scope, when the credential is a DCT.
    pub scope: Option<AuthorizedScope>,
    /// The protocol's own record of the grant, for [`Credentials::allowed`],
    /// [`Credentials::denied`] and [`Credentials::completed`].
    pub context: G,
    /// A budget of the gateway's own below the credential's last level
    /// (a session's, where a protocol opens sessions), set by [`Grant::within`].
    pub within: Option<(BudgetKey, u64)>,
}

impl<G> Grant<G> {
    /// The same grant remembering `f(context)` instead.
    pub fn map_context<H>(self, f: impl FnOnce(G) -> H) -> Grant<H> {
        Grant {
            protocol: self.protocol,
            tenant: self.tenant,
            levels: self.levels,
            chain: self.chain,
            authority: self.authority,
            requests: self.requests,
            scope: self.scope,
            context: f(self.context),
            within: self.within,
        }
    }

    /// Records who this grant speaks for on a stage's span.
    pub fn record_in(&self, span: &tracing::Span) {
        crate::stages::record_grant(
            span,
            self.protocol.name,
            &self.tenant,
            self.chain.last().map(|d| d.as_str()),
        );
    }

    /// Narrows the grant to a budget of `limit` named `name` below its
    /// last level: a reservation must fit there too. The authority still
    /// judges the credential by what its own last level has spent.
    pub fn within(mut self, name: &str, limit: u64) -> Self {
        self.within = self
            .levels
            .last()
            .map(|(leaf, _)| (leaf.child(name), limit));
        self
    }

    /// Every level a reservation under this grant holds, root first.
    pub fn budget_levels(&self) -> std::borrow::Cow<'_, [(BudgetKey, u64)]> {
        match &self.within {
            None => std::borrow::Cow::Borrowed(&self.levels),
            Some(own) => {
                let mut all = self.levels.clone();
                all.push(own.clone());
                std::borrow::Cow::Owned(all)
            }
        }
    }
}

impl Grant {
    /// The pipeline allowed a call under it ([`Credentials::allowed`]).
    pub async fn allowed(&self, call: &Call<'_>) {
        self.context.allowed(call).await
    }

    /// The pipeline refused a call under it ([`Credentials::denied`]).
    pub async fn denied(&self, call: &Call<'_>, denial: &Denial) {
        self.context.denied(call, denial).await
    }

    /// A call under it was forwarded and ended so ([`Credentials::completed`]).
    pub async fn completed(&self, call: &Call<'_>, how: Completed<'_>) {
        self.context.completed(call, how).await
    }
}

/// How a forwarded call ended, for [`Credentials::completed`].
pub enum Completed<'a> {
    /// The upstream answered: the JSON-RPC response, and whether it was a result.
    Answered { response: &'a Value, ok: bool },
    /// The upstream was reached but gave no answer.
    Failed,
}

/// What a protocol makes of an upstream's answer ([`Protocol::review`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Review {
    /// Nothing of this protocol's in it, or what there is holds.
    Pass,
    /// It carries this protocol's proof of the work and the proof fails:
    /// the answer is withheld from the caller and the call is not charged
    /// (no proof, no payment).
    Withhold {
        /// The reason, as the protocol names it.
        reason: &'static str,
        /// What, for people.
        detail: String,
    },
}

/// A refusal made before any credential was checked (the tool is unknown
/// or maps to no capability): protocols that audit their denials see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EarlyRefusal {
    UnknownTool,
    UnmappedTool,
}

/// A delegation protocol, as the gateway registers it: its name and the
/// jobs it has, each a trait of its own it implements only if it has that
/// job: credentials ([`Protocol::admits`], typed in [`Credentials`]),
/// translation ([`Translates`]) and hosting ([`Hosts`]).
#[async_trait]
pub trait Protocol: Send + Sync {
    /// Its name.
    fn id(&self) -> ProtocolId;

    /// Its credentials job, when it admits callers with a credential of
    /// its own: `Some(admitting(self))` from a protocol implementing
    /// [`Credentials`]. A protocol without one (its endpoints are paid with
    /// a DCT) is never handed a credential.
    fn admits(self: Arc<Self>) -> Option<Arc<dyn Admits>> {
        None
    }

    /// An upstream's successful answer to a forwarded call (whoever's
    /// credential it carried), before anything is settled or the caller
    /// sees it: a protocol whose proofs of work travel in answers (signed
    /// receipts) checks them here, and may add to the result.
    async fn review(&self, _call: &Call<'_>, _result: &mut Value) -> Review {
        Review::Pass
    }

    /// Its translation job, when it translates its messages to DelegateOS
    /// contracts and attestations: `Some(self)` from a protocol
    /// implementing [`Translates`].
    fn translates(self: Arc<Self>) -> Option<Arc<dyn Translates>> {
        None
    }

    /// Its hosting job, when it serves JSON-RPC methods, HTTP paths or MCP
    /// tools of its own: `Some(self)` from a protocol implementing
    /// [`Hosts`].
    fn hosts(self: Arc<Self>) -> Option<Arc<dyn Hosts>> {
        None
    }

    /// The budget-key roots of its grants, with their tenants (for gauges).
    fn budget_roots(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// Periodic upkeep (forgetting expired replay entries).
    async fn sweep(&self) {}
}
