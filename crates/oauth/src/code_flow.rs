//! The authorization code flow's parts (issue 35): who may ask for codes
//! ([`PublicClients`]), the identity provider people log in at
//! ([`Login`]), and the short-lived records it keeps in the state backend:
//! pending logins, codes and refresh token families, each space capped.
//! [`crate::authorize`] and [`crate::callback`] serve its two browser
//! endpoints, [`crate::code`] and [`crate::refresh`] its two grants.

use std::sync::Arc;
use std::time::Duration;

use dgw_net::outbound::JsonClient;
use serde_json::json;

use crate::expiring::Expiring;
use crate::idp::IdentityProvider;
use crate::limit::RateLimit;
use crate::public_client::PublicClients;

/// The authorization endpoint's path.
pub const AUTHORIZE_PATH: &str = "/oauth/authorize";
/// Where the identity provider sends the user back (dgw's redirect URI
/// at the provider: `public_url` + this).
pub const CALLBACK_PATH: &str = "/oauth/callback";
/// Browser requests (authorize and callback) a source may make per minute.
pub const BROWSER_PER_SOURCE_PER_MINUTE: u32 = 60;
/// The most logins pending at once (each lives [`PENDING_TTL_SECS`]).
const MAX_PENDING: usize = 10_000;
/// The most codes kept at once (each lives [`crate::code::CODE_TTL_SECS`]).
const MAX_CODES: usize = 10_000;
/// The most refresh token families kept at once.
const MAX_FAMILIES: usize = 100_000;
/// How long a user has to log in at the identity provider.
pub const PENDING_TTL_SECS: i64 = 600;

/// dgw as a client of the identity provider people log in at.
pub struct Login {
    /// The provider (its verifier; its grants are the authorization
    /// server's, by its name).
    pub idp: Arc<IdentityProvider>,
    /// For the provider's token endpoint.
    pub(crate) http: JsonClient,
    /// dgw's client ID there (also the ID token's audience).
    pub client_id: String,
    /// dgw's client secret there: sent to its token endpoint only.
    pub client_secret: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("idp", &self.idp.name())
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// How long the provider's token endpoint may take.
const IDP_TIMEOUT: Duration = Duration::from_secs(10);
/// The most bytes of its answer read.
const IDP_MAX_ANSWER_BYTES: usize = 64 * 1024;

impl Login {
    pub fn new(idp: Arc<IdentityProvider>, client_id: String, client_secret: String) -> Self {
        Self {
            idp,
            http: JsonClient::new(IDP_TIMEOUT).with_max_answer_bytes(IDP_MAX_ANSWER_BYTES),
            client_id,
            client_secret,
        }
    }

    /// The provider's name.
    pub fn name(&self) -> &str {
        self.idp.name()
    }
}

/// The code flow, when `[oauth]` configures an identity provider with a
/// `client_id` (dgw's at the provider).
pub struct CodeFlow {
    pub(crate) clients: PublicClients,
    pub(crate) login: Login,
    pub(crate) pending: Expiring,
    pub(crate) codes: Expiring,
    pub(crate) families: Expiring,
    pub(crate) by_source: RateLimit,
}

impl CodeFlow {
    pub fn new(
        clients: PublicClients,
        login: Login,
        records: Arc<dyn dgw_core::state::RecordStore>,
    ) -> Self {
        Self {
            clients,
            login,
            pending: Expiring::new(records.clone(), "oauth_pending_logins", MAX_PENDING),
            codes: Expiring::new(records.clone(), "oauth_codes", MAX_CODES),
            families: Expiring::new(records, "oauth_refresh_families", MAX_FAMILIES),
            by_source: RateLimit::new(
                BROWSER_PER_SOURCE_PER_MINUTE,
                Duration::from_secs(60),
                100_000,
            ),
        }
    }

    /// Adds what the code flow supports to the metadata (RFC 8414).
    pub fn describe(&self, issuer: &str, metadata: &mut serde_json::Value) {
        let Some(m) = metadata.as_object_mut() else {
            return;
        };
        m.insert(
            "authorization_endpoint".into(),
            format!("{issuer}{AUTHORIZE_PATH}").into(),
        );
        m.insert("response_types_supported".into(), json!(["code"]));
        m.insert("response_modes_supported".into(), json!(["query"]));
        m.insert("code_challenge_methods_supported".into(), json!(["S256"]));
        m.insert(
            "authorization_response_iss_parameter_supported".into(),
            true.into(),
        );
        m.insert(
            "client_id_metadata_document_supported".into(),
            self.clients.accepts_documents().into(),
        );
        if let Some(methods) = m
            .get_mut("token_endpoint_auth_methods_supported")
            .and_then(serde_json::Value::as_array_mut)
        {
            methods.push("none".into());
        }
    }
}
