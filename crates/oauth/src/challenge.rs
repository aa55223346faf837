//! Which refusals carry an OAuth challenge (RFC 6750 §3.1), read from the
//! wire type every front already gives a refusal (JSON-RPC `data.type`,
//! the gRPC reason): no credential where one is needed → 401; a credential
//! that is not one, or is no longer good → 401 `invalid_token`; a good one
//! too narrow for the call → 403 `insufficient_scope` naming the
//! capability needed (the client may ask for it: step-up).

use delegateos::DenialType;
use dgw_core::caller::AuthError;
use serde_json::Value;

/// The wire types of "this call needs a credential and carried none"
/// (`/mcp`'s `initialize` and stateless requests, a gated tool, `/rpc`'s
/// `dgw/authorize`, gRPC's `Authorize`).
pub const MISSING: &[&str] = &["credential_required", "dct_required"];

/// A challenge to answer a refused call with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    /// No credential: 401 naming the metadata only.
    Missing,
    /// Not a credential dgw takes, or one expired, revoked or forged: 401
    /// `invalid_token`.
    InvalidToken,
    /// A good credential without the capability: 403 `insufficient_scope`,
    /// with the capability as a scope when it can be written as one.
    InsufficientScope(Option<String>),
}

/// The token types that mean the credential itself is no good.
const INVALID_TOKEN: &[DenialType] = &[
    DenialType::MalformedToken,
    DenialType::Revoked,
    DenialType::InvalidSignature,
    DenialType::Expired,
    DenialType::TokenNotYetValid,
    DenialType::UnsupportedTokenFormat,
    DenialType::UnsupportedTokenVersion,
];

/// The Authorization header refusals (the caller could not be established).
const BAD_HEADER: &[AuthError] = &[AuthError::InvalidAdminToken, AuthError::UnknownScheme];

impl Challenge {
    /// The HTTP status it is answered with.
    pub fn status(&self) -> u16 {
        match self {
            Challenge::Missing | Challenge::InvalidToken => 401,
            Challenge::InsufficientScope(_) => 403,
        }
    }

    /// The challenge a refusal of wire type `kind` calls for, with the
    /// request it refused (`{namespace, action, resource}`) when it names
    /// one; `None`: answered as without `[oauth]`.
    pub fn for_refusal(kind: &str, requested: Option<&Value>) -> Option<Self> {
        if MISSING.contains(&kind) {
            Some(Challenge::Missing)
        } else if INVALID_TOKEN.iter().any(|t| t.as_str() == kind)
            || BAD_HEADER.iter().any(|e| e.kind() == kind)
        {
            Some(Challenge::InvalidToken)
        } else if kind == DenialType::CapabilityNotGranted.as_str() {
            Some(Challenge::InsufficientScope(requested.and_then(scope_of)))
        } else {
            None
        }
    }

    /// The challenge a JSON-RPC answer calls for: one response (never a
    /// batch) whose error's `data.type` is a refusal above.
    pub fn for_rpc_answer(body: &Value) -> Option<Self> {
        let data = body.get("error")?.get("data")?;
        Self::for_refusal(data.get("type")?.as_str()?, data.get("requested"))
    }
}

/// The most bytes of a scope a challenge echoes.
const MAX_SCOPE_BYTES: usize = 512;

/// A refused request as the scope that would allow it
/// (`namespace:action:resource`), when it is a scope token RFC 6750 allows
/// in a quoted header value (`%x21 / %x23-5B / %x5D-7E`) and not too long:
/// the request is the caller's, so nothing else is echoed.
fn scope_of(requested: &Value) -> Option<String> {
    let part = |k: &str| requested.get(k)?.as_str();
    let scope = format!(
        "{}:{}:{}",
        part("namespace")?,
        part("action")?,
        part("resource")?
    );
    let allowed = |b: u8| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b);
    (scope.len() <= MAX_SCOPE_BYTES && scope.bytes().all(allowed)).then_some(scope)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(kind: &str, requested: Option<Value>) -> Value {
        let mut data = json!({"type": kind});
        if let Some(r) = requested {
            data["requested"] = r;
        }
        json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "m", "data": data}})
    }

    #[test]
    fn refusals_map_to_their_challenge_and_others_to_none() {
        assert_eq!(
            Challenge::for_rpc_answer(&answer("credential_required", None)),
            Some(Challenge::Missing)
        );
        assert_eq!(
            Challenge::for_rpc_answer(&answer("dct_required", None)),
            Some(Challenge::Missing)
        );
        for invalid in [
            "expired",
            "revoked",
            "invalid_signature",
            "invalid_admin_token",
        ] {
            assert_eq!(
                Challenge::for_rpc_answer(&answer(invalid, None)),
                Some(Challenge::InvalidToken),
                "{invalid}"
            );
        }
        let req = json!({"namespace": "docs", "action": "read", "resource": "/p/a.txt"});
        let c = Challenge::for_rpc_answer(&answer("capability_not_granted", Some(req))).unwrap();
        assert_eq!(
            c,
            Challenge::InsufficientScope(Some("docs:read:/p/a.txt".into()))
        );
        assert_eq!(c.status(), 403);
        for other in ["budget_exceeded", "admin_required", "invalid_params"] {
            assert_eq!(
                Challenge::for_rpc_answer(&answer(other, None)),
                None,
                "{other}"
            );
        }
        assert_eq!(
            Challenge::for_rpc_answer(&json!([answer("dct_required", None)])),
            None
        );
        assert_eq!(Challenge::for_rpc_answer(&json!({"result": {}})), None);
    }

    #[test]
    fn a_scope_that_cannot_be_quoted_safely_is_left_out() {
        for resource in ["/a b", "/a\"b", "/a\\b", "/é", &"x".repeat(600)] {
            let req = json!({"namespace": "docs", "action": "read", "resource": resource});
            assert_eq!(
                Challenge::for_rpc_answer(&answer("capability_not_granted", Some(req))),
                Some(Challenge::InsufficientScope(None)),
                "{resource}"
            );
        }
    }
}
