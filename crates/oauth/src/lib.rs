//! dgw's OAuth 2.1 side (issue 35, docs/oauth.md). The fronts hold one
//! [`resource::ProtectedResource`] when `[oauth]` is configured: its
//! metadata (RFC 9728) is served at `/.well-known/oauth-protected-resource`
//! (and the path-suffixed form for `/mcp`), and a call that needed a
//! credential and carried none, or carried one too narrow, is answered with
//! its challenge ([`challenge`]). Without `[oauth]` the fronts answer as
//! they always did. [`server::AuthorizationServer`] is the authorization
//! server: its metadata (RFC 8414) and token endpoint. [`idp`] verifies
//! the tokens a trusted identity provider signs ([`jwt`]: any signed JWT).

pub mod authorize;
pub mod callback;
pub mod challenge;
pub mod client_metadata;
pub mod code;
pub mod code_flow;
pub mod expiring;
pub mod grant;
pub mod idp;
pub mod jwt;
pub mod limit;
pub mod login;
pub mod metrics;
pub mod pkce;
pub mod public_client;
pub mod redirect;
pub mod refresh;
pub mod resource;
pub mod server;

pub use challenge::Challenge;
pub use resource::{ProtectedResource, PublicUrlError};
