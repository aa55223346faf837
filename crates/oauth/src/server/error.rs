//! The token endpoint's refusals (RFC 6749 §5.2): one typed error, its
//! code (also the denial reason in metrics and audit) and HTTP status,
//! mapped once to the wire.

use serde_json::{json, Value};

/// An RFC 6749 §5.2 error, or a failure to decide.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("the client is unknown or its secret is wrong")]
    InvalidClient { basic: bool },
    #[error("{0}")]
    InvalidGrant(String),
    #[error("{0}")]
    UnsupportedGrantType(String),
    #[error("{0}")]
    InvalidScope(String),
    #[error("{0}")]
    InvalidTarget(String),
    #[error("{0}")]
    AccessDenied(String),
    #[error("{0}")]
    ServerError(String),
    /// An identity provider's keys cannot be had, or the store of used
    /// assertions is full: 503, try again later.
    #[error("{0}")]
    Unavailable(String),
    /// Over the rate limit of its source or its client: 429.
    #[error("too many token requests from this {0}; try again in a minute")]
    RateLimited(&'static str),
}

impl TokenError {
    /// The RFC's error code, also the denial reason in metrics and audit.
    pub fn code(&self) -> &'static str {
        match self {
            TokenError::InvalidRequest(_) => "invalid_request",
            TokenError::InvalidClient { .. } => "invalid_client",
            TokenError::InvalidGrant(_) => "invalid_grant",
            TokenError::UnsupportedGrantType(_) => "unsupported_grant_type",
            TokenError::InvalidScope(_) => "invalid_scope",
            TokenError::InvalidTarget(_) => "invalid_target",
            TokenError::AccessDenied(_) => "access_denied",
            TokenError::ServerError(_) => "server_error",
            TokenError::RateLimited(_) | TokenError::Unavailable(_) => "temporarily_unavailable",
        }
    }

    /// The HTTP status (RFC 6749 §5.2: 401 for a client that tried Basic).
    pub fn status(&self) -> u16 {
        match self {
            TokenError::InvalidClient { .. } => 401,
            TokenError::ServerError(_) => 500,
            TokenError::RateLimited(_) => 429,
            TokenError::Unavailable(_) => 503,
            _ => 400,
        }
    }
}

/// The token endpoint's answer.
#[derive(Debug, Clone)]
pub struct TokenAnswer {
    pub status: u16,
    pub body: Value,
    /// `WWW-Authenticate`, for a client that authenticated with Basic.
    pub www_authenticate: Option<&'static str>,
}

/// `error` as the token endpoint answers it (RFC 6749 §5.2).
pub fn error_answer(error: &TokenError) -> TokenAnswer {
    TokenAnswer {
        status: error.status(),
        body: json!({"error": error.code(), "error_description": error.to_string()}),
        www_authenticate: match error {
            TokenError::InvalidClient { basic: true } => Some("Basic realm=\"dgw\""),
            _ => None,
        },
    }
}
