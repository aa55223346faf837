//! Who is calling: an administrator or not, and the credential presented
//! with the call. Every front builds a [`Caller`] from its transport (the
//! `Authorization` header or gRPC metadata, and which listener took the
//! connection) before it reads the request; the gatekeeper decides with it.
//!
//! Administrators present `Authorization: Bearer <secret>`; the config holds
//! only the SHA-256 of each secret (`[[admin.tokens]]`), compared in
//! constant time. A gateway with no admin tokens treats callers on a
//! loopback listener as administrators for the admin methods (the default
//! configuration), but never for ending someone else's reservation
//! (decisions.md).

use std::sync::Arc;

use arc_swap::ArcSwap;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// One configured admin token: a name for logs and the SHA-256 of its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminToken {
    pub name: String,
    pub sha256: [u8; 32],
}

impl AdminToken {
    /// The SHA-256 of `secret`, as the config stores it.
    pub fn digest(secret: &str) -> [u8; 32] {
        Sha256::digest(secret.as_bytes()).into()
    }
}

/// How an administrator was recognised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admin {
    /// By the named `[[admin.tokens]]` entry.
    Token(String),
    /// By a client certificate whose subject `[[admin.certs]]` lists.
    Certificate(String),
    /// No admin tokens are configured and the call came in on a loopback
    /// listener.
    Loopback,
    /// The gateway itself, ending reservations it made (never from a front).
    Gateway,
}

pub use crate::budget::HolderDigest;

/// Who is calling.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    admin: Option<Admin>,
    /// A protocol's credential presented as `Authorization: <scheme> <credential>`.
    credential: Option<String>,
    /// Its scheme (`DCT`).
    scheme: Option<String>,
}

impl Caller {
    /// A caller with no admin standing and no credential.
    pub fn anonymous() -> Self {
        Self::default()
    }

    /// The gateway acting for itself.
    pub fn gateway() -> Self {
        Self {
            admin: Some(Admin::Gateway),
            credential: None,
            scheme: None,
        }
    }

    /// An administrator a front recognised itself (the console's session,
    /// made by signing in with a secret or a listed certificate).
    pub fn admin(admin: Admin) -> Self {
        Self {
            admin: Some(admin),
            credential: None,
            scheme: None,
        }
    }

    /// How the administrator was recognised (`None`: not one).
    pub fn admin_kind(&self) -> Option<&Admin> {
        self.admin.as_ref()
    }

    /// Whether this caller may use the admin methods.
    pub fn is_admin(&self) -> bool {
        self.admin.is_some()
    }

    /// Whether this caller proved itself an administrator with a secret,
    /// which ending another holder's reservation requires.
    pub fn is_authenticated_admin(&self) -> bool {
        matches!(
            self.admin,
            Some(Admin::Token(_) | Admin::Certificate(_) | Admin::Gateway)
        )
    }

    /// How the administrator is known, for the record (`None`: not one).
    pub fn admin_name(&self) -> Option<String> {
        self.admin.as_ref().map(|a| match a {
            Admin::Token(name) => format!("token:{name}"),
            Admin::Certificate(subject) => format!("cert:{subject}"),
            Admin::Loopback => "loopback".to_owned(),
            Admin::Gateway => "gateway".to_owned(),
        })
    }

    /// The credential from the transport, if any.
    pub fn credential(&self) -> Option<&str> {
        self.credential.as_deref()
    }

    /// The credential from the transport with its scheme, for the protocol
    /// registry (`("DCT", token)`).
    pub fn presented(&self) -> Option<(&str, &str)> {
        Some((self.scheme.as_deref()?, self.credential.as_deref()?))
    }

    /// `self` with the credential a request carried in its params when the
    /// transport carried none; a different one in each is refused.
    pub fn with_param_credential(mut self, param: Option<String>) -> Result<Self, AuthError> {
        match (&self.credential, param) {
            (_, None) => {}
            (None, Some(p)) => self.credential = Some(p),
            (Some(h), Some(p)) if *h == p => {}
            (Some(_), Some(_)) => return Err(AuthError::TwoCredentials),
        }
        Ok(self)
    }
}

/// An `Authorization` header value as `(scheme, credential)`, trimmed; the
/// credential may be empty.
pub fn split_authorization(value: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = value.trim().split_once(' ')?;
    Some((scheme, rest.trim()))
}

/// The scheme DCTs travel under (`Authorization: DCT <token>`), the pivot
/// protocol's; a DCT sent as `Bearer <token>` is read as if sent under it.
pub const DCT_SCHEME: &str = "DCT";

/// What an `Authorization: Bearer` value is. dgw reads it in one order
/// (docs/oauth.md): a registered protocol's prefix (`Bearer <prefix>…`),
/// then a DCT (a value that decodes as one), then an administrator's
/// secret; a value that is none of them is refused, never taken as
/// another kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bearer {
    /// A protocol's credential, by its prefix.
    Prefixed,
    /// A DCT (an OAuth access token dgw issued, or one minted offline).
    Dct,
    /// Neither: an admin secret if it matches one, else refused.
    Other,
}

/// Which [`Bearer`] `value` is, given the registered `prefixes`.
pub fn read_bearer(value: &str, prefixes: &[&str]) -> Bearer {
    if prefixes.iter().any(|p| value.starts_with(p)) {
        Bearer::Prefixed
    } else if delegateos::Dct::decode(value).is_ok() {
        Bearer::Dct
    } else {
        Bearer::Other
    }
}

/// Why a caller could not be established.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// A bearer secret that matches no configured admin token.
    #[error(
        "the bearer token is none of a protocol's credential, a DCT or a configured admin token"
    )]
    InvalidAdminToken,
    /// An `Authorization` header of a scheme dgw does not take.
    #[error("the Authorization header must be `Bearer <admin secret>` or a protocol's credential, such as `DCT <token>`")]
    UnknownScheme,
    /// The header and the params name different credentials.
    #[error("the Authorization header and the params carry different credentials")]
    TwoCredentials,
}

impl AuthError {
    /// The stable wire name (`data.type`, gRPC reason).
    pub fn kind(&self) -> &'static str {
        match self {
            AuthError::InvalidAdminToken => "invalid_admin_token",
            AuthError::UnknownScheme => "invalid_authorization",
            AuthError::TwoCredentials => "conflicting_credentials",
        }
    }
}

/// The administrators: `[[admin.tokens]]` and `[[admin.certs]]`, shared by
/// every listener's [`Authenticator`] and replaced whole on reload.
#[derive(Debug, Clone)]
pub struct Admins {
    list: Arc<ArcSwap<AdminList>>,
    /// Counts replacements, so what an admin holds open (a decision
    /// stream) checks its credential again when the list changes.
    replaced: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Default for Admins {
    fn default() -> Self {
        Self::new(Vec::new(), Vec::new())
    }
}

#[derive(Debug, Default)]
struct AdminList {
    tokens: Vec<AdminToken>,
    /// Client certificate subjects that are admins.
    certs: Vec<String>,
}

impl Admins {
    /// These tokens and certificate subjects.
    pub fn new(tokens: Vec<AdminToken>, certs: Vec<String>) -> Self {
        Self {
            list: Arc::new(ArcSwap::from_pointee(AdminList { tokens, certs })),
            replaced: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }

    /// Replaces the list for every authenticator that shares it; calls
    /// already authenticated keep the standing they were given, and
    /// [`Admins::changes`] tells what is held open.
    pub fn replace(&self, tokens: Vec<AdminToken>, certs: Vec<String>) {
        self.list.store(Arc::new(AdminList { tokens, certs }));
        self.replaced.send_modify(|n| *n += 1);
    }

    /// Changes whenever the list is replaced.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.replaced.subscribe()
    }
}

/// Recognises callers for one listener.
#[derive(Debug, Clone)]
pub struct Authenticator {
    admins: Admins,
    /// The listener is on loopback: with no tokens or certificates
    /// configured, its callers are admins for the methods that read.
    loopback_listener: bool,
    /// The schemes the registered protocols' credentials travel under.
    schemes: Vec<&'static str>,
    /// The prefixes of protocol credentials sent as `Bearer` values.
    bearer_prefixes: Vec<&'static str>,
}

impl Authenticator {
    /// An authenticator for a listener bound to `listener`.
    pub fn new(
        tokens: Vec<AdminToken>,
        certs: Vec<String>,
        listener: std::net::SocketAddr,
    ) -> Self {
        Self::sharing(&Admins::new(tokens, certs), listener)
    }

    /// An authenticator for a listener bound to `listener` that follows
    /// `admins` as it is replaced.
    pub fn sharing(admins: &Admins, listener: std::net::SocketAddr) -> Self {
        Self {
            admins: admins.clone(),
            loopback_listener: listener.ip().is_loopback(),
            schemes: vec![DCT_SCHEME],
            bearer_prefixes: Vec::new(),
        }
    }

    /// Changes whenever the administrators are replaced (reload): a stream
    /// an admin opened authenticates its credential again then.
    pub fn admin_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.admins.changes()
    }

    /// Takes credentials under exactly these schemes (the registry's).
    pub fn with_schemes(mut self, schemes: Vec<&'static str>) -> Self {
        self.schemes = schemes;
        self
    }

    /// Takes `Bearer <prefix>…` values as protocol credentials (the
    /// registry's bearer prefixes), not admin secrets.
    pub fn with_bearer_prefixes(mut self, prefixes: Vec<&'static str>) -> Self {
        self.bearer_prefixes = prefixes;
        self
    }

    /// The caller behind an `Authorization` header value (absent: none)
    /// on a connection whose client certificate has `subject` (mTLS).
    pub fn caller(
        &self,
        authorization: Option<&[u8]>,
        subject: Option<&str>,
    ) -> Result<Caller, AuthError> {
        let admins = self.admins.list.load();
        let by_cert = subject
            .filter(|s| admins.certs.iter().any(|c| c == s))
            .map(|s| Admin::Certificate(s.to_owned()));
        let loopback_admin =
            self.loopback_listener && admins.tokens.is_empty() && admins.certs.is_empty();
        let mut caller = Caller {
            admin: by_cert.or(loopback_admin.then_some(Admin::Loopback)),
            credential: None,
            scheme: None,
        };
        let Some(value) = authorization else {
            return Ok(caller);
        };
        let value = std::str::from_utf8(value).map_err(|_| AuthError::UnknownScheme)?;
        let (scheme, rest) = split_authorization(value).ok_or(AuthError::UnknownScheme)?;
        if scheme.eq_ignore_ascii_case("bearer") {
            match read_bearer(rest, &self.bearer_prefixes) {
                Bearer::Prefixed => {
                    caller.credential = Some(rest.to_owned());
                    caller.scheme = Some("Bearer".to_owned());
                }
                Bearer::Dct if self.schemes.contains(&DCT_SCHEME) => {
                    caller.credential = Some(rest.to_owned());
                    caller.scheme = Some(DCT_SCHEME.to_owned());
                }
                Bearer::Dct | Bearer::Other => {
                    caller.admin = Some(
                        admin_token(&admins.tokens, rest).ok_or(AuthError::InvalidAdminToken)?,
                    );
                }
            }
        } else if let Some(s) = self.schemes.iter().find(|s| s.eq_ignore_ascii_case(scheme)) {
            caller.credential = Some(rest.to_owned());
            caller.scheme = Some((*s).to_owned());
        } else {
            return Err(AuthError::UnknownScheme);
        }
        Ok(caller)
    }
}

/// The admin token `secret` is, comparing every configured digest in
/// constant time (no early exit, so timing does not tell which).
fn admin_token(tokens: &[AdminToken], secret: &str) -> Option<Admin> {
    let digest = AdminToken::digest(secret);
    let mut found = None;
    for t in tokens {
        if bool::from(t.sha256.ct_eq(&digest)) {
            found = Some(Admin::Token(t.name.clone()));
        }
    }
    found
}

/// A fresh admin secret: 256 random bits, base64url.
pub fn new_admin_secret() -> Result<String, crate::random::RandomError> {
    Ok(delegateos::base64url::encode(&crate::random::bytes::<32>()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Authenticator {
        fn caller_h(&self, authorization: Option<&[u8]>) -> Result<Caller, AuthError> {
            self.caller(authorization, None)
        }
    }

    #[test]
    fn listed_certificate_subjects_are_admins() {
        let auth = Authenticator::new(
            vec![],
            vec!["CN=ops".into()],
            "127.0.0.1:1".parse().unwrap(),
        );
        let c = auth.caller(None, Some("CN=ops")).unwrap();
        assert!(c.is_authenticated_admin());
        assert!(!auth.caller(None, Some("CN=agent")).unwrap().is_admin());
        // With certificates configured, loopback alone is not admin.
        assert!(!auth.caller(None, None).unwrap().is_admin());
    }

    fn token(name: &str, secret: &str) -> AdminToken {
        AdminToken {
            name: name.into(),
            sha256: AdminToken::digest(secret),
        }
    }

    #[test]
    fn replaced_admins_apply_to_every_sharing_authenticator() {
        let admins = Admins::new(vec![token("ops", "s3cret")], vec![]);
        let http = Authenticator::sharing(&admins, "127.0.0.1:1".parse().unwrap());
        let grpc = Authenticator::sharing(&admins, "127.0.0.1:2".parse().unwrap());
        assert!(http.caller_h(Some(b"Bearer s3cret")).is_ok());
        admins.replace(vec![token("ci", "other")], vec!["CN=ops".into()]);
        for auth in [&http, &grpc] {
            assert_eq!(
                auth.caller_h(Some(b"Bearer s3cret")).unwrap_err(),
                AuthError::InvalidAdminToken
            );
            assert!(auth
                .caller_h(Some(b"Bearer other"))
                .unwrap()
                .is_authenticated_admin());
            assert!(auth.caller(None, Some("CN=ops")).unwrap().is_admin());
        }
        // Emptied: loopback listeners fall back to loopback admins.
        admins.replace(vec![], vec![]);
        assert_eq!(http.caller_h(None).unwrap().admin, Some(Admin::Loopback));
    }

    #[test]
    fn bearer_secrets_are_checked_against_digests() {
        let auth = Authenticator::new(
            vec![token("ops", "s3cret"), token("ci", "other")],
            vec![],
            "127.0.0.1:1".parse().unwrap(),
        );
        let c = auth.caller_h(Some(b"Bearer s3cret")).unwrap();
        assert_eq!(c.admin, Some(Admin::Token("ops".into())));
        assert!(c.is_authenticated_admin());
        assert_eq!(
            auth.caller_h(Some(b"Bearer wrong")).unwrap_err(),
            AuthError::InvalidAdminToken
        );
        // With tokens configured, loopback alone is no longer admin.
        assert!(!auth.caller_h(None).unwrap().is_admin());
        assert_eq!(
            auth.caller_h(Some(b"Basic abc")).unwrap_err(),
            AuthError::UnknownScheme
        );
    }

    #[test]
    fn loopback_is_admin_only_without_tokens_and_never_authenticated() {
        let local = Authenticator::new(vec![], vec![], "127.0.0.1:1".parse().unwrap());
        let c = local.caller_h(None).unwrap();
        assert!(c.is_admin() && !c.is_authenticated_admin());
        let public = Authenticator::new(vec![], vec![], "0.0.0.0:1".parse().unwrap());
        assert!(!public.caller_h(None).unwrap().is_admin());
        // Bearer secrets are refused when none are configured.
        assert_eq!(
            local.caller_h(Some(b"Bearer x")).unwrap_err(),
            AuthError::InvalidAdminToken
        );
    }

    /// A DCT, serialized as it travels.
    fn a_dct() -> String {
        use delegateos::dct::CreateParams;
        use delegateos::{ContractId, Dct, DelegationId, Keypair, Timestamp};
        let (root, agent) = (Keypair::from_seed([1; 32]), Keypair::from_seed([2; 32]));
        let now = time::OffsetDateTime::now_utc();
        Dct::create(
            &root,
            CreateParams {
                delegatee: agent.principal_id().clone(),
                capabilities: vec!["docs:read:/a/**".parse().unwrap()],
                contract_id: ContractId::from_bytes([1; 6]),
                delegation_id: DelegationId::from_bytes([1; 6]),
                parent_delegation_id: DelegationId::root_parent(),
                chain_depth: 0,
                max_chain_depth: 2,
                max_budget_microcents: 100,
                expires_at: Timestamp::from_instant(now + time::Duration::hours(1)),
                issued_at: Timestamp::from_instant(now),
            },
        )
        .unwrap()
        .encode()
    }

    #[test]
    fn bearer_values_are_read_prefix_then_dct_then_admin_secret() {
        let auth = Authenticator::new(
            vec![token("ops", "s3cret")],
            vec![],
            "10.0.0.1:1".parse().unwrap(),
        )
        .with_bearer_prefixes(vec!["toy:"]);
        let prefixed = auth.caller_h(Some(b"Bearer toy:abc")).unwrap();
        assert_eq!(prefixed.presented(), Some(("Bearer", "toy:abc")));
        let dct = a_dct();
        let c = auth
            .caller_h(Some(format!("Bearer {dct}").as_bytes()))
            .unwrap();
        assert_eq!(c.presented(), Some((DCT_SCHEME, dct.as_str())));
        assert!(!c.is_admin());
        assert!(auth
            .caller_h(Some(b"Bearer s3cret"))
            .unwrap()
            .is_authenticated_admin());
        // Neither a prefix, a DCT nor a secret: refused, whatever it resembles.
        for other in [&dct[..dct.len() - 4], "eyJmb3JtYXQiOiJ4In0", "wrong"] {
            assert_eq!(
                auth.caller_h(Some(format!("Bearer {other}").as_bytes()))
                    .unwrap_err(),
                AuthError::InvalidAdminToken,
                "{other}"
            );
        }
        assert_eq!(read_bearer(&dct, &["toy:"]), Bearer::Dct);
        assert_eq!(read_bearer("toy:x", &["toy:"]), Bearer::Prefixed);
        assert_eq!(read_bearer("x", &["toy:"]), Bearer::Other);
    }

    #[test]
    fn credentials_come_from_the_header_or_the_params_not_both() {
        let auth = Authenticator::new(vec![], vec![], "10.0.0.1:1".parse().unwrap());
        let c = auth.caller_h(Some(b"DCT abc")).unwrap();
        assert_eq!(c.credential(), Some("abc"));
        let same = c.clone().with_param_credential(Some("abc".into())).unwrap();
        assert_eq!(same.credential(), Some("abc"));
        assert_eq!(
            c.with_param_credential(Some("xyz".into())).unwrap_err(),
            AuthError::TwoCredentials
        );
        let from_params = Caller::anonymous()
            .with_param_credential(Some("p".into()))
            .unwrap();
        assert_eq!(from_params.credential(), Some("p"));
        assert!(HolderDigest::of("a").matches(&HolderDigest::of("a")));
        assert!(HolderDigest::of("a\n").matches(&HolderDigest::of("a")));
        assert!(!HolderDigest::of("a").matches(&HolderDigest::of("b")));
    }
}
