//! The grant types the token endpoint answers, as `grant_type` names them.

pub const CLIENT_CREDENTIALS: &str = "client_credentials";
/// RFC 8693.
pub const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// RFC 7523, with an identity assertion (ID-JAG).
pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
