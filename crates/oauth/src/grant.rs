//! The grant types the token endpoint answers, as `grant_type` names them.

pub const CLIENT_CREDENTIALS: &str = "client_credentials";
/// RFC 8693.
pub const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// RFC 7523, with an identity assertion (ID-JAG).
pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// RFC 6749 §4.1.3, for the code flow's public clients.
pub const AUTHORIZATION_CODE: &str = "authorization_code";
/// RFC 6749 §6, rotated (OAuth 2.1 §4.3).
pub const REFRESH_TOKEN: &str = "refresh_token";
