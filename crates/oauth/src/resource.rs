//! dgw as an OAuth 2.1 protected resource: its public URL, the metadata
//! that names its authorization server (RFC 9728), and the challenge each
//! refused call carries pointing at that metadata (RFC 6750 §3).

use serde_json::{json, Value};

use crate::challenge::Challenge;

/// Where a resource's metadata lives, before the resource's own path
/// (RFC 9728 §3.1: `/mcp`'s is `…/oauth-protected-resource/mcp`).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The resources dgw names by path: `/mcp` has metadata of its own, as
/// MCP clients look for it; `/rpc` and gRPC are the gateway's root
/// resource.
const SUFFIXED: &[&str] = &["/mcp"];

/// Why a `public_url` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublicUrlError {
    #[error("must start with https:// (http:// only for localhost, 127.0.0.1 or [::1])")]
    Scheme,
    #[error("must name a host")]
    NoHost,
    #[error("must be an origin alone: no user, path, query or fragment (the metadata is served at the host's root)")]
    NotAnOrigin,
    #[error("must be printable ASCII without spaces, quotes or backslashes")]
    Characters,
}

/// The gateway as a protected resource: its public origin (the issuer and
/// the resource base clients see) and the scopes its grants can give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedResource {
    public_url: String,
    scopes: Vec<String>,
}

impl ProtectedResource {
    /// The resource at `public_url` (an origin: `https://dgw.example`, a
    /// trailing `/` dropped), advertising `scopes`.
    pub fn new(public_url: &str, scopes: Vec<String>) -> Result<Self, PublicUrlError> {
        Ok(Self {
            public_url: parse_origin(public_url)?,
            scopes,
        })
    }

    /// The scopes advertised.
    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }

    /// The public origin, without a trailing `/`.
    pub fn public_url(&self) -> &str {
        &self.public_url
    }

    /// The metadata served at `path`, if it is one of the well-known paths
    /// (`None`: not a metadata path).
    pub fn metadata_at(&self, path: &str) -> Option<Value> {
        let rest = path.strip_prefix(METADATA_PATH)?;
        let resource = match rest {
            "" | "/" => self.public_url.clone(),
            suffix if SUFFIXED.contains(&suffix) => format!("{}{suffix}", self.public_url),
            _ => return None,
        };
        Some(json!({
            "resource": resource,
            "authorization_servers": [self.public_url],
            "scopes_supported": self.scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "dgw",
        }))
    }

    /// The metadata URL for a call that came in on `path` (`/mcp`: its own;
    /// anything else, `/rpc` and gRPC included: the root resource's).
    pub fn metadata_url(&self, path: &str) -> String {
        let suffix = SUFFIXED.iter().find(|s| **s == path).copied().unwrap_or("");
        format!("{}{METADATA_PATH}{suffix}", self.public_url)
    }

    /// The `WWW-Authenticate` value for `challenge` to a call on `path`.
    pub fn www_authenticate(&self, path: &str, challenge: &Challenge) -> String {
        let metadata = self.metadata_url(path);
        match challenge {
            Challenge::Missing => format!("Bearer resource_metadata=\"{metadata}\""),
            Challenge::InvalidToken => {
                format!("Bearer error=\"invalid_token\", resource_metadata=\"{metadata}\"")
            }
            Challenge::InsufficientScope(Some(scope)) => format!(
                "Bearer error=\"insufficient_scope\", scope=\"{scope}\", resource_metadata=\"{metadata}\""
            ),
            Challenge::InsufficientScope(None) => format!(
                "Bearer error=\"insufficient_scope\", resource_metadata=\"{metadata}\""
            ),
        }
    }
}

/// `text` as an origin dgw can be reached at, without a trailing `/`.
fn parse_origin(text: &str) -> Result<String, PublicUrlError> {
    if text
        .bytes()
        .any(|b| !(0x21..=0x7e).contains(&b) || b == b'"' || b == b'\\')
    {
        return Err(PublicUrlError::Characters);
    }
    let (secure, authority) = if let Some(rest) = text.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = text.strip_prefix("http://") {
        (false, rest)
    } else {
        return Err(PublicUrlError::Scheme);
    };
    let authority = authority.strip_suffix('/').unwrap_or(authority);
    if authority.is_empty() {
        return Err(PublicUrlError::NoHost);
    }
    if authority.contains(['/', '?', '#', '@']) {
        return Err(PublicUrlError::NotAnOrigin);
    }
    if !secure && !is_loopback(authority) {
        return Err(PublicUrlError::Scheme);
    }
    let scheme = if secure { "https" } else { "http" };
    Ok(format!("{scheme}://{authority}"))
}

/// Whether an authority (`host[:port]`) names the loopback interface.
fn is_loopback(authority: &str) -> bool {
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    host.eq_ignore_ascii_case("localhost") || host == "127.0.0.1" || host == "::1"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_urls_are_origins_over_https_or_loopback_http() {
        let r = ProtectedResource::new("https://dgw.example/", vec![]).unwrap();
        assert_eq!(r.public_url(), "https://dgw.example");
        for ok in [
            "http://127.0.0.1:8080",
            "http://localhost",
            "http://[::1]:9",
        ] {
            assert!(ProtectedResource::new(ok, vec![]).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("http://dgw.example", PublicUrlError::Scheme),
            ("http://127.0.0.1.evil.example", PublicUrlError::Scheme),
            ("ftp://dgw.example", PublicUrlError::Scheme),
            ("https://", PublicUrlError::NoHost),
            ("https://dgw.example/base", PublicUrlError::NotAnOrigin),
            ("https://u:p@dgw.example", PublicUrlError::NotAnOrigin),
            ("https://dgw.example?x", PublicUrlError::NotAnOrigin),
            ("https://dgw.example\"", PublicUrlError::Characters),
            ("https://dgw .example", PublicUrlError::Characters),
        ] {
            assert_eq!(
                ProtectedResource::new(bad, vec![]).unwrap_err(),
                why,
                "{bad}"
            );
        }
    }

    #[test]
    fn metadata_names_the_resource_by_path_and_dgw_as_its_server() {
        let r =
            ProtectedResource::new("https://dgw.example", vec!["docs:read:/p/**".into()]).unwrap();
        let root = r.metadata_at(METADATA_PATH).unwrap();
        assert_eq!(root["resource"], "https://dgw.example");
        assert_eq!(
            root["authorization_servers"],
            json!(["https://dgw.example"])
        );
        assert_eq!(root["scopes_supported"], json!(["docs:read:/p/**"]));
        assert_eq!(root["bearer_methods_supported"], json!(["header"]));
        let mcp = r.metadata_at(&format!("{METADATA_PATH}/mcp")).unwrap();
        assert_eq!(mcp["resource"], "https://dgw.example/mcp");
        assert!(r.metadata_at(&format!("{METADATA_PATH}/other")).is_none());
        assert!(r
            .metadata_at("/.well-known/oauth-protected-resourcex")
            .is_none());
    }

    #[test]
    fn challenges_point_at_the_metadata_of_the_path_called() {
        let r = ProtectedResource::new("https://dgw.example", vec![]).unwrap();
        assert_eq!(
            r.www_authenticate("/mcp", &Challenge::Missing),
            "Bearer resource_metadata=\"https://dgw.example/.well-known/oauth-protected-resource/mcp\""
        );
        assert_eq!(
            r.www_authenticate("/rpc", &Challenge::InvalidToken),
            "Bearer error=\"invalid_token\", resource_metadata=\"https://dgw.example/.well-known/oauth-protected-resource\""
        );
        assert_eq!(
            r.www_authenticate("/rpc", &Challenge::InsufficientScope(Some("a:b:c".into()))),
            "Bearer error=\"insufficient_scope\", scope=\"a:b:c\", resource_metadata=\"https://dgw.example/.well-known/oauth-protected-resource\""
        );
    }
}
