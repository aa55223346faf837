//! Origins (scheme, host, port) for `buyer_callback_hosts`: a buyer's
//! callback is called only when its URL's origin is one listed, so another
//! port or scheme on a listed host (another service there, plain HTTP to a
//! TLS service) is never reached. A bare host keeps its meaning from before
//! origins: `https` on 443.

use hyper::Uri;

/// A scheme, a host (lowercase) and a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    https: bool,
    host: String,
    port: u16,
}

impl Origin {
    /// An entry of `buyer_callback_hosts`: `https://host[:port]`,
    /// `http://host[:port]`, or a bare `host` (`https` on 443). No path,
    /// query or user.
    pub fn parse_entry(entry: &str) -> Result<Origin, String> {
        let bare = !entry.contains("://");
        let text = if bare {
            format!("https://{entry}")
        } else {
            entry.to_owned()
        };
        let uri: Uri = text
            .parse()
            .map_err(|_| format!("{entry:?} is not a host or an http(s) origin"))?;
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or_default();
        if bare && uri.port().is_some() {
            return Err(format!(
                "{entry:?} has a port but no scheme: write \"https://{entry}\" or \"http://{entry}\""
            ));
        }
        if authority.contains('@') || uri.query().is_some() || !matches!(uri.path(), "" | "/") {
            return Err(format!(
                "{entry:?} must be an origin only (scheme, host, port), without user, path or query"
            ));
        }
        Self::of(&uri).ok_or_else(|| format!("{entry:?} is not an http(s) origin with a host"))
    }

    /// The origin of a callback URL (`None`: not an http(s) URL with a
    /// host, or one with a user in it).
    pub fn of_url(url: &str) -> Option<Origin> {
        let uri: Uri = url.parse().ok()?;
        if uri.authority()?.as_str().contains('@') {
            return None;
        }
        Self::of(&uri)
    }

    fn of(uri: &Uri) -> Option<Origin> {
        let https = match uri.scheme_str()?.to_ascii_lowercase().as_str() {
            "https" => true,
            "http" => false,
            _ => return None,
        };
        let host = uri.host().filter(|h| !h.is_empty())?.to_ascii_lowercase();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        Some(Origin { https, host, port })
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}:{}", self.host, self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_host_is_https_on_443() {
        let bare = Origin::parse_entry("Agents.Example").unwrap();
        assert_eq!(bare.to_string(), "https://agents.example:443");
        assert_eq!(
            Origin::of_url("https://agents.example/receipts"),
            Some(bare.clone())
        );
        assert_eq!(
            Origin::of_url("https://AGENTS.example:443/r?x=1"),
            Some(bare.clone())
        );
        for other in [
            "http://agents.example/receipts",
            "https://agents.example:8443/receipts",
            "http://agents.example:443/receipts",
            "https://agents.example.evil/receipts",
        ] {
            assert_ne!(Origin::of_url(other), Some(bare.clone()), "{other}");
        }
    }

    #[test]
    fn origins_keep_their_scheme_and_port() {
        let o = Origin::parse_entry("http://127.0.0.1:8080").unwrap();
        assert_eq!(Origin::of_url("http://127.0.0.1:8080/cb"), Some(o.clone()));
        assert_ne!(Origin::of_url("http://127.0.0.1:8081/cb"), Some(o.clone()));
        assert_ne!(Origin::of_url("https://127.0.0.1:8080/cb"), Some(o));
        assert_eq!(
            Origin::parse_entry("https://[::1]").unwrap().to_string(),
            "https://[::1]:443"
        );
        assert_eq!(
            Origin::parse_entry("http://h.example/")
                .unwrap()
                .to_string(),
            "http://h.example:80"
        );
    }

    #[test]
    fn anything_but_an_origin_is_refused() {
        for bad in [
            "",
            "h.example:8443",
            "ftp://h.example",
            "https://h.example/path",
            "https://h.example?q=1",
            "https://user@h.example",
            "https://",
            "not a host",
        ] {
            assert!(Origin::parse_entry(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            Origin::of_url("https://allowed.example@evil.example/"),
            None
        );
        assert_eq!(Origin::of_url("/relative"), None);
    }
}
