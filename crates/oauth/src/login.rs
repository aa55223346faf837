//! A login dgw sent to the identity provider, kept (under the digest of
//! dgw's `state` there) until the provider sends the user back, and the
//! cookie that binds it to the browser that started it (decision 476).

use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use crate::code_flow::{CALLBACK_PATH, PENDING_TTL_SECS};
use crate::expiring::key_of;

/// A login dgw sent to the identity provider, kept until it comes back.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pending {
    pub client_id: String,
    pub redirect_uri: String,
    /// The client's `state`, echoed back to it.
    pub state: Option<String>,
    pub challenge: String,
    pub resource: String,
    /// The capabilities asked for (`None`: not said).
    pub scope: Option<Vec<String>>,
    /// The `nonce` the ID token must carry.
    pub nonce: String,
    /// dgw's PKCE verifier at the identity provider.
    pub verifier: String,
    /// The digest of the browser's cookie value.
    pub binding: String,
    pub idp: String,
}

/// The cookie binding a pending login (kept under `key`) to the browser.
const COOKIE_PREFIX: &str = "dgw_login_";

/// The cookie's name for the login kept under `key`.
fn cookie_name(key: &str) -> String {
    format!("{COOKIE_PREFIX}{}", &key[..16.min(key.len())])
}

/// `Set-Cookie` for a pending login: only sent back to the callback.
pub fn pending_cookie(key: &str, binding: &str, secure: bool) -> String {
    format!(
        "{}={binding}; Path={CALLBACK_PATH}; Max-Age={PENDING_TTL_SECS}; HttpOnly; SameSite=Lax{}",
        cookie_name(key),
        if secure { "; Secure" } else { "" }
    )
}

/// Whether the `Cookie` header carries the login's binding.
pub fn bound(cookie_header: Option<&str>, key: &str, binding_digest: &str) -> bool {
    let name = cookie_name(key);
    cookie_header
        .into_iter()
        .flat_map(|h| h.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .filter(|(n, _)| *n == name)
        .any(|(_, v)| bool::from(key_of(v).as_bytes().ct_eq(binding_digest.as_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_login_cookie_binds_one_login_to_one_browser() {
        let key = key_of("state");
        let cookie = pending_cookie(&key, "B1", false);
        assert!(cookie.contains("HttpOnly; SameSite=Lax"), "{cookie}");
        assert!(!cookie.contains("Secure"));
        assert!(pending_cookie(&key, "B1", true).ends_with("; Secure"));
        let pair = cookie.split(';').next().unwrap();
        assert!(bound(Some(&format!("x=1; {pair}")), &key, &key_of("B1")));
        assert!(!bound(Some(pair), &key, &key_of("B2")));
        assert!(!bound(None, &key, &key_of("B1")));
        // Another login's cookie does not stand for this one.
        let other = pending_cookie(&key_of("other"), "B1", false);
        assert!(!bound(other.split(';').next(), &key, &key_of("B1")));
    }
}
