//! The authorization server's metrics: tokens issued by grant and identity
//! provider, refusals by their RFC error; every series exported at zero
//! from the first scrape when `[oauth]` is on, so a rate or an alert on
//! them reads 0, not nothing.

use dgw_core::telemetry::Metric;
use metrics::counter;

/// Tokens issued, by `grant` (its `grant_type`) and `idp` (the identity
/// provider's name; `-` for a registered client's own, which no identity
/// provider vouches for).
pub const TOKENS_ISSUED: &str = "dgw_oauth_tokens_issued_total";
/// Token requests refused, by `reason` (the RFC 6749 error).
pub const TOKEN_DENIALS: &str = "dgw_oauth_token_denials_total";
/// Authorization codes issued, by `idp` (the provider the user logged in at).
pub const CODES_ISSUED: &str = "dgw_oauth_codes_issued_total";
/// Authorization requests and logins refused, by `reason` (the RFC 6749
/// §4.1.2.1 error).
pub const AUTHORIZATION_DENIALS: &str = "dgw_oauth_authorization_denials_total";

/// What the binary describes when it installs the recorder.
pub const METRICS: &[Metric] = &[
    Metric::counter(
        TOKENS_ISSUED,
        "OAuth access tokens (DCTs) issued, by grant type and identity provider.",
    ),
    Metric::counter(
        TOKEN_DENIALS,
        "OAuth token requests refused, by RFC 6749 error.",
    ),
    Metric::counter(
        CODES_ISSUED,
        "OAuth authorization codes issued after a login at an identity provider, by provider.",
    ),
    Metric::counter(
        AUTHORIZATION_DENIALS,
        "OAuth authorization requests and logins refused, by RFC 6749 error.",
    ),
];

/// Every refusal reason the authorization endpoint and callback answer with.
pub const AUTHORIZATION_REASONS: &[&str] = &[
    "invalid_request",
    "invalid_client",
    "unsupported_response_type",
    "invalid_scope",
    "invalid_target",
    "access_denied",
    "server_error",
    "temporarily_unavailable",
];

/// The grants of the code flow, counted under the provider's name.
pub const CODE_FLOW_GRANTS: &[&str] = &["authorization_code", "refresh_token"];

/// Every refusal reason the token endpoint answers with.
pub const REASONS: &[&str] = &[
    "invalid_request",
    "invalid_client",
    "invalid_grant",
    "unsupported_grant_type",
    "invalid_scope",
    "invalid_target",
    "access_denied",
    "server_error",
    "temporarily_unavailable",
];

/// The grants built, with the `idp` label each is counted under.
pub const GRANTS: &[(&str, &str)] = &[("client_credentials", "-")];

/// Exports every series at zero (adds 0: a value already counted stays).
pub fn export_at_zero() {
    for (grant, idp) in GRANTS {
        counter!(TOKENS_ISSUED, "grant" => *grant, "idp" => *idp).increment(0);
    }
    for reason in REASONS {
        counter!(TOKEN_DENIALS, "reason" => *reason).increment(0);
    }
}

/// The code flow's series at zero, for identity provider `idp`.
pub fn export_code_flow_at_zero(idp: &str) {
    for grant in CODE_FLOW_GRANTS {
        counter!(TOKENS_ISSUED, "grant" => *grant, "idp" => idp.to_owned()).increment(0);
    }
    counter!(CODES_ISSUED, "idp" => idp.to_owned()).increment(0);
    for reason in AUTHORIZATION_REASONS {
        counter!(AUTHORIZATION_DENIALS, "reason" => *reason).increment(0);
    }
}

/// Exports at zero the series of the grants an identity provider
/// (`idp`, its configured name) vouches for.
pub fn export_idp_at_zero(idp: &str) {
    for grant in [crate::grant::TOKEN_EXCHANGE, crate::grant::JWT_BEARER] {
        counter!(TOKENS_ISSUED, "grant" => grant, "idp" => idp.to_owned()).increment(0);
    }
}

/// One token issued.
pub fn issued(grant: &'static str, idp: &str) {
    counter!(TOKENS_ISSUED, "grant" => grant, "idp" => idp.to_owned()).increment(1);
}

/// One authorization code issued.
pub fn code_issued(idp: &str) {
    counter!(CODES_ISSUED, "idp" => idp.to_owned()).increment(1);
}

/// One authorization request or login refused.
pub fn authorization_denied(reason: &'static str) {
    counter!(AUTHORIZATION_DENIALS, "reason" => reason).increment(1);
}

/// One token request refused.
pub fn denied(reason: &'static str) {
    counter!(TOKEN_DENIALS, "reason" => reason).increment(1);
}
