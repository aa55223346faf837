//! Redirect URIs: where `/oauth/authorize` may send a code. Each client
//! registers them (in config or in its metadata document); a request's
//! `redirect_uri` must be one of them exactly, character for character,
//! except that on a loopback IP literal the port may differ (RFC 8252
//! §7.3: a native app listens on whatever port it got). `localhost` is
//! matched exactly like any other host (decision 472).

/// Why a redirect URI was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedirectError {
    #[error("redirect_uri is required")]
    Missing,
    #[error("{0:?} is not an https:// URL (http:// only on a loopback host) without a fragment or credentials")]
    Malformed(String),
    #[error("redirect_uri is not one the client registered")]
    NotRegistered,
}

/// The hosts whose `http://` redirect URIs are allowed.
const LOOPBACK: &[&str] = &["127.0.0.1", "[::1]", "localhost"];
/// The loopback IP literals on which any port matches.
const ANY_PORT: &[&str] = &["127.0.0.1", "[::1]"];
/// The longest redirect URI taken.
const MAX_LEN: usize = 2048;

/// A redirect URI a client registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedirectUri(String);

impl RedirectUri {
    /// A registered redirect URI: `https://`, or `http://` on a loopback
    /// host; printable ASCII, no fragment, no user or password.
    pub fn parse(text: &str) -> Result<Self, RedirectError> {
        let malformed = || RedirectError::Malformed(text.chars().take(128).collect());
        if text.len() > MAX_LEN || text.bytes().any(|b| !(0x21..=0x7e).contains(&b)) {
            return Err(malformed());
        }
        let (secure, rest) = if let Some(r) = text.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = text.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(malformed());
        };
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        if authority.is_empty() || authority.contains('@') || text.contains('#') {
            return Err(malformed());
        }
        if !secure && !LOOPBACK.contains(&host_of(authority)) {
            return Err(malformed());
        }
        Ok(Self(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `asked` is this URI (the port aside on a loopback IP).
    pub fn matches(&self, asked: &str) -> bool {
        if self.0 == asked {
            return true;
        }
        match (loopback_parts(&self.0), loopback_parts(asked)) {
            (Some((host, rest)), Some((asked_host, asked_rest))) => {
                host == asked_host && rest == asked_rest
            }
            _ => false,
        }
    }
}

/// The registered URI `asked` names, among `registered`.
pub fn choose<'a>(
    registered: &'a [RedirectUri],
    asked: Option<&str>,
) -> Result<&'a RedirectUri, RedirectError> {
    let asked = asked.ok_or(RedirectError::Missing)?;
    registered
        .iter()
        .find(|r| r.matches(asked))
        .ok_or(RedirectError::NotRegistered)
}

/// `host` of `host[:port]` (an IPv6 literal keeps its brackets).
fn host_of(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority
            .find(']')
            .map_or(authority, |end| &authority[..=end]);
    }
    authority.split(':').next().unwrap_or_default()
}

/// An `http://` URI on a loopback IP literal: its host and everything
/// after the port.
fn loopback_parts(uri: &str) -> Option<(&str, &str)> {
    let rest = uri.strip_prefix("http://")?;
    let host = ANY_PORT.iter().find(|h| rest.starts_with(*h))?;
    let after = &rest[host.len()..];
    let after = match after.strip_prefix(':') {
        Some(port) => {
            let digits = port.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 || digits > 5 {
                return None;
            }
            &port[digits..]
        }
        None => after,
    };
    (after.is_empty() || after.starts_with(['/', '?'])).then_some((*host, after))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_uris_are_https_or_loopback_http() {
        for ok in [
            "https://app.example/cb",
            "http://127.0.0.1/cb",
            "http://[::1]:8080/cb?x=1",
            "http://localhost:3000/callback",
        ] {
            assert!(RedirectUri::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://app.example/cb",
            "http://127.0.0.1.evil.example/cb",
            "https://app.example/cb#frag",
            "https://u:p@app.example/cb",
            "javascript:alert(1)",
            "https:///cb",
            "https://app.example/c b",
            "com.example.app:/cb",
        ] {
            assert!(RedirectUri::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn matching_is_exact_but_for_the_port_of_a_loopback_ip() {
        let https = RedirectUri::parse("https://app.example/cb").unwrap();
        assert!(https.matches("https://app.example/cb"));
        for other in [
            "https://app.example/cb/",
            "https://APP.example/cb",
            "https://app.example:443/cb",
            "https://app.example/cb?x",
            "https://app.example/cbx",
        ] {
            assert!(!https.matches(other), "{other}");
        }
        let lo = RedirectUri::parse("http://127.0.0.1/callback").unwrap();
        assert!(lo.matches("http://127.0.0.1:49152/callback"));
        assert!(lo.matches("http://127.0.0.1/callback"));
        for other in [
            "http://127.0.0.1:49152/other",
            "http://127.0.0.1:/callback",
            "http://127.0.0.1:123456/callback",
            "http://[::1]:49152/callback",
            "http://127.0.0.1.evil.example/callback",
            "http://127.0.0.1:80@evil.example/callback",
            "https://127.0.0.1:49152/callback",
        ] {
            assert!(!lo.matches(other), "{other}");
        }
        let v6 = RedirectUri::parse("http://[::1]:1/cb").unwrap();
        assert!(v6.matches("http://[::1]:65535/cb"));
        // localhost is not an IP literal: its port is part of the match.
        let local = RedirectUri::parse("http://localhost:3000/cb").unwrap();
        assert!(!local.matches("http://localhost:3001/cb"));
    }

    #[test]
    fn a_request_must_name_a_registered_uri() {
        let registered = vec![RedirectUri::parse("https://app.example/cb").unwrap()];
        assert_eq!(choose(&registered, None), Err(RedirectError::Missing));
        assert_eq!(
            choose(&registered, Some("https://evil.example/cb")),
            Err(RedirectError::NotRegistered)
        );
        assert!(choose(&registered, Some("https://app.example/cb")).is_ok());
    }
}
