//! The credentials job of a protocol, in its own types ([`Credentials`]),
//! and the one adapter that hides those types from the registry, the
//! fronts and the pipeline ([`admitting`]): a [`Credential`] carries its
//! protocol with it, so nothing ever asks what type it holds (no `Any`, no
//! downcast; `tests/layers.rs` keeps it so).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::{Call, Completed, Decision, Denial, EarlyRefusal, Grant, Protocol};
use crate::budget::HolderDigest;
use crate::error::GateError;

/// A credential as a protocol read it: what its holder presented (the
/// bytes reservations and sessions are bound to) and the protocol's own
/// parsed form.
pub struct Presented<C> {
    pub presented: String,
    pub credential: C,
}

impl<C> Presented<C> {
    pub fn new(presented: impl Into<String>, credential: C) -> Self {
        Self {
            presented: presented.into(),
            credential,
        }
    }
}

/// A protocol that admits callers with a credential of its own: how the
/// credential travels, how it is read, and how it becomes a [`Grant`].
/// `Credential` is what a request presented, `Granted` what a grant
/// remembers for the events after it (`()` when nothing). Registered with
/// [`Protocol::admits`] returning [`admitting`]`(self)`.
#[async_trait]
pub trait Credentials: Protocol + 'static {
    type Credential: Send + Sync + 'static;
    type Granted: Send + Sync + 'static;

    /// The `Authorization` scheme its credentials travel under on every
    /// front (`DCT`), if any.
    fn scheme(&self) -> Option<&'static str> {
        None
    }

    /// The prefix of its credentials inside `Authorization: Bearer`
    /// (`<protocol>:`), for peers that send theirs as bearer tokens;
    /// a Bearer value no protocol claims stays an administrator's secret.
    fn bearer_prefix(&self) -> Option<&'static str> {
        None
    }

    /// Reads a credential sent under [`Credentials::scheme`] (or, without
    /// its prefix, under `Bearer` with [`Credentials::bearer_prefix`]).
    fn read_header(&self, _credentials: &str) -> Result<Presented<Self::Credential>, Denial> {
        Err(Denial::protocol(
            self.id(),
            "unsupported_scheme",
            "this protocol takes no Authorization header",
        ))
    }

    /// The prefix of the members its envelope adds beside `method` in a
    /// JSON-RPC request: they travel in `params` until taken.
    fn envelope_prefix(&self) -> Option<&'static str> {
        None
    }

    /// Takes its credential out of a JSON-RPC request object (members beside
    /// `method`, or in `params`), so nothing of it is forwarded. `Ok(None)`
    /// when the request carries none; a malformed one is a denial.
    async fn take_from_request(
        &self,
        _request: &mut Map<String, Value>,
    ) -> Result<Option<Presented<Self::Credential>>, Denial> {
        Ok(None)
    }

    /// A request header of its own its credential (or a half of it) may
    /// travel in on HTTP fronts (`<Protocol>-Delegation`), read by
    /// [`Credentials::read_named_header`] as if the request carried it.
    fn credential_header(&self) -> Option<&'static str> {
        None
    }

    /// Reads [`Credentials::credential_header`]'s value.
    fn read_named_header(&self, _value: &str) -> Result<Presented<Self::Credential>, Denial> {
        Err(Denial::protocol(
            self.id(),
            "unsupported_header",
            "this protocol takes no header of its own",
        ))
    }

    /// One credential from the two parts of a credential that comes in two
    /// (a bearer token in the header, a delegation in the
    /// request's `_meta` or the session's): `header` as the header's half
    /// was presented (it read once, so it reads again), `carried` as the
    /// request or the session carried it. `None`: they do not combine, and
    /// the front's precedence applies.
    fn combine(
        &self,
        _header: &str,
        _carried: &Self::Credential,
        _carried_presented: &str,
    ) -> Option<Presented<Self::Credential>> {
        None
    }

    /// Verifies a credential (its holder `presented` it so) for a call:
    /// signature chain, expiry, revocation, replay, the protocol's own
    /// scope. The pipeline then matches the requests and reserves the cost.
    async fn grant(
        &self,
        credential: &Self::Credential,
        presented: &str,
        call: &Call<'_>,
    ) -> Result<Decision<Grant<Self::Granted>>, GateError>;

    /// What a credential may do now, without a call to match (MCP
    /// `tools/list` filters with it; `initialize` refuses one that can do
    /// nothing). `None`: the protocol cannot say before a call.
    async fn standing(
        &self,
        _credential: &Self::Credential,
    ) -> Result<Option<Vec<delegateos::Capability>>, Denial> {
        Ok(None)
    }

    /// A call with this protocol's credential was refused before it was
    /// read; the denial to send (`None`: the front's own error).
    async fn refused_early(
        &self,
        _credential: &Self::Credential,
        _call: &Call<'_>,
        _why: EarlyRefusal,
        _detail: &str,
    ) -> Option<Denial> {
        None
    }

    /// The pipeline refused a call with this protocol's credential (not
    /// canonical; capability or budget), after a grant or before one:
    /// seen by protocols that audit their denials.
    async fn denied(
        &self,
        _granted: Option<&Self::Granted>,
        _credential: &Self::Credential,
        _call: &Call<'_>,
        _denial: &Denial,
    ) {
    }

    /// The pipeline allowed a call it granted, and reserved its cost.
    async fn allowed(&self, _granted: &Self::Granted, _call: &Call<'_>) {}

    /// A call it granted was forwarded and ended so.
    async fn completed(&self, _granted: &Self::Granted, _call: &Call<'_>, _how: Completed<'_>) {}
}

/// A protocol's credentials job with its types hidden: what the registry
/// asks of a protocol that admits callers ([`admitting`] makes it).
#[async_trait]
pub trait Admits: Send + Sync {
    fn scheme(&self) -> Option<&'static str>;
    fn bearer_prefix(&self) -> Option<&'static str>;
    fn envelope_prefix(&self) -> Option<&'static str>;
    fn credential_header(&self) -> Option<&'static str>;
    fn read_header(&self, credentials: &str) -> Result<Credential, Denial>;
    fn read_named_header(&self, value: &str) -> Result<Credential, Denial>;
    async fn take_from_request(
        &self,
        request: &mut Map<String, Value>,
    ) -> Result<Option<Credential>, Denial>;
}

/// `protocol`'s credentials job for the registry: what
/// [`Protocol::admits`] returns for a protocol implementing [`Credentials`].
pub fn admitting<P: Credentials>(protocol: Arc<P>) -> Arc<dyn Admits> {
    Arc::new(Admitting(protocol))
}

struct Admitting<P>(Arc<P>);

impl<P: Credentials> Admitting<P> {
    fn bind(&self, read: Presented<P::Credential>) -> Credential {
        Credential {
            presented: read.presented,
            held: Arc::new(Bound {
                protocol: self.0.clone(),
                credential: Arc::new(read.credential),
            }),
        }
    }
}

#[async_trait]
impl<P: Credentials> Admits for Admitting<P> {
    fn scheme(&self) -> Option<&'static str> {
        self.0.scheme()
    }
    fn bearer_prefix(&self) -> Option<&'static str> {
        self.0.bearer_prefix()
    }
    fn envelope_prefix(&self) -> Option<&'static str> {
        self.0.envelope_prefix()
    }
    fn credential_header(&self) -> Option<&'static str> {
        self.0.credential_header()
    }
    fn read_header(&self, credentials: &str) -> Result<Credential, Denial> {
        self.0.read_header(credentials).map(|r| self.bind(r))
    }
    fn read_named_header(&self, value: &str) -> Result<Credential, Denial> {
        self.0.read_named_header(value).map(|r| self.bind(r))
    }
    async fn take_from_request(
        &self,
        request: &mut Map<String, Value>,
    ) -> Result<Option<Credential>, Denial> {
        Ok(self
            .0
            .take_from_request(request)
            .await?
            .map(|r| self.bind(r)))
    }
}

/// A credential as a protocol took it from a request, bound to that
/// protocol: it is granted, stood by, refused and combined by it alone.
#[derive(Clone)]
pub struct Credential {
    /// The bytes the holder presented, digested to bind what it reserves
    /// and the sessions it opens to it.
    presented: String,
    held: Arc<dyn Held>,
}

impl Credential {
    /// What the holder presented.
    pub fn presented(&self) -> &str {
        &self.presented
    }

    /// The digest reservations and sessions are bound with.
    pub fn holder(&self) -> HolderDigest {
        HolderDigest::of(&self.presented)
    }

    /// Its protocol's grant of it for `call` ([`Credentials::grant`]).
    pub async fn grant(&self, call: &Call<'_>) -> Result<Decision<Grant>, GateError> {
        self.held.grant(&self.presented, call).await
    }

    /// [`Credentials::standing`].
    pub async fn standing(&self) -> Result<Option<Vec<delegateos::Capability>>, Denial> {
        self.held.standing().await
    }

    /// [`Credentials::refused_early`].
    pub async fn refused_early(
        &self,
        call: &Call<'_>,
        why: EarlyRefusal,
        detail: &str,
    ) -> Option<Denial> {
        self.held.refused_early(call, why, detail).await
    }

    /// [`Credentials::denied`] before any grant was made.
    pub async fn denied(&self, call: &Call<'_>, denial: &Denial) {
        self.held.denied(call, denial).await
    }

    /// This credential (carried by a request or a session) combined with
    /// the other half its protocol read from a header
    /// ([`Credentials::combine`]). The caller checks both are one
    /// protocol's.
    pub fn with_header(&self, header: &Credential) -> Option<Credential> {
        self.held.with_header(&header.presented, &self.presented)
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the credential itself: it is a secret.
        f.write_str("Credential(…)")
    }
}

/// A protocol's credential with its protocol, types hidden.
#[async_trait]
trait Held: Send + Sync {
    async fn grant(&self, presented: &str, call: &Call<'_>) -> Result<Decision<Grant>, GateError>;
    async fn standing(&self) -> Result<Option<Vec<delegateos::Capability>>, Denial>;
    async fn refused_early(
        &self,
        call: &Call<'_>,
        why: EarlyRefusal,
        detail: &str,
    ) -> Option<Denial>;
    async fn denied(&self, call: &Call<'_>, denial: &Denial);
    fn with_header(&self, header: &str, presented: &str) -> Option<Credential>;
}

struct Bound<P: Credentials> {
    protocol: Arc<P>,
    credential: Arc<P::Credential>,
}

#[async_trait]
impl<P: Credentials> Held for Bound<P> {
    async fn grant(&self, presented: &str, call: &Call<'_>) -> Result<Decision<Grant>, GateError> {
        Ok(
            match self
                .protocol
                .grant(&self.credential, presented, call)
                .await?
            {
                Decision::Allowed(grant) => Decision::Allowed(grant.map_context(|granted| {
                    Box::new(GrantedBy {
                        protocol: self.protocol.clone(),
                        credential: self.credential.clone(),
                        granted,
                    }) as Box<dyn Outcome>
                })),
                Decision::Denied(d) => Decision::Denied(d),
            },
        )
    }

    async fn standing(&self) -> Result<Option<Vec<delegateos::Capability>>, Denial> {
        self.protocol.standing(&self.credential).await
    }

    async fn refused_early(
        &self,
        call: &Call<'_>,
        why: EarlyRefusal,
        detail: &str,
    ) -> Option<Denial> {
        self.protocol
            .refused_early(&self.credential, call, why, detail)
            .await
    }

    async fn denied(&self, call: &Call<'_>, denial: &Denial) {
        self.protocol
            .denied(None, &self.credential, call, denial)
            .await
    }

    fn with_header(&self, header: &str, presented: &str) -> Option<Credential> {
        let read = self.protocol.combine(header, &self.credential, presented)?;
        Some(Admitting(self.protocol.clone()).bind(read))
    }
}

/// What a grant remembers, as the pipeline and the fronts tell it how
/// the call went ([`Grant::allowed`], [`Grant::denied`],
/// [`Grant::completed`]). `()` remembers nothing.
#[async_trait]
pub trait Outcome: Send + Sync {
    async fn allowed(&self, _call: &Call<'_>) {}
    async fn denied(&self, _call: &Call<'_>, _denial: &Denial) {}
    async fn completed(&self, _call: &Call<'_>, _how: Completed<'_>) {}
}

impl Outcome for () {}

/// A protocol's own record of a grant, with its protocol and credential.
struct GrantedBy<P: Credentials> {
    protocol: Arc<P>,
    credential: Arc<P::Credential>,
    granted: P::Granted,
}

#[async_trait]
impl<P: Credentials> Outcome for GrantedBy<P> {
    async fn allowed(&self, call: &Call<'_>) {
        self.protocol.allowed(&self.granted, call).await
    }
    async fn denied(&self, call: &Call<'_>, denial: &Denial) {
        self.protocol
            .denied(Some(&self.granted), &self.credential, call, denial)
            .await
    }
    async fn completed(&self, call: &Call<'_>, how: Completed<'_>) {
        self.protocol.completed(&self.granted, call, how).await
    }
}
