//! Which `Host` and `Origin` headers the HTTP listener answers: the defence
//! against DNS rebinding, where a web page an agent's user opens names an
//! attacker's host that resolves to 127.0.0.1, and the browser then talks to
//! dgw with the page's origin. The MCP Streamable HTTP transport requires
//! servers to validate `Origin`; the same holds for `/rpc`.
//!
//! - A request whose `Origin` is present and not in `[server]
//!   allowed_origins` is refused (403). With no `allowed_origins`
//!   configured, dgw's own origins are accepted (a page dgw itself served):
//!   the listener's scheme with each `Host` it accepts (so, by default on
//!   loopback, its own address and the `localhost` names with its port); on
//!   a listener that takes any host, no origin.
//! - `Host` must be one of `[server] allowed_hosts`; by default, on a
//!   loopback listener, the listener's own address and the `localhost`
//!   names with its port; on any other address, any host (dgw cannot know
//!   the names it is reached by).

use std::net::SocketAddr;

/// Why a request was refused before routing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    #[error("Origin {0:?} is not in server.allowed_origins")]
    Origin(String),
    #[error("Host {0:?} is not in server.allowed_hosts")]
    Host(String),
    #[error("a Host header is required")]
    NoHost,
}

impl GuardError {
    /// The stable wire name (`data.type`).
    pub fn kind(&self) -> &'static str {
        match self {
            GuardError::Origin(_) => "origin_not_allowed",
            GuardError::Host(_) | GuardError::NoHost => "host_not_allowed",
        }
    }
}

/// The listener's rules.
#[derive(Debug, Clone)]
pub struct HttpGuard {
    origins: Vec<String>,
    /// `allowed_origins` was given: only it counts.
    configured_origins: bool,
    /// `None`: any host.
    hosts: Option<Vec<String>>,
}

impl HttpGuard {
    /// Rules for a listener bound to `listener`, from the config's lists
    /// (`allowed_hosts` empty: the default above).
    pub fn new(listener: SocketAddr, origins: Vec<String>, hosts: Vec<String>) -> Self {
        let hosts = if !hosts.is_empty() {
            Some(hosts.iter().map(|h| h.to_ascii_lowercase()).collect())
        } else if listener.ip().is_loopback() {
            let port = listener.port();
            Some(vec![
                listener.to_string(),
                format!("localhost:{port}"),
                format!("127.0.0.1:{port}"),
                format!("[::1]:{port}"),
            ])
        } else {
            None
        };
        let configured_origins = !origins.is_empty();
        let mut guard = Self {
            origins: origins
                .iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
            configured_origins,
            hosts,
        };
        guard.own_origins("http");
        guard
    }

    /// The listener serves TLS: its own origins are `https://`.
    pub fn over_tls(mut self, tls: bool) -> Self {
        self.own_origins(if tls { "https" } else { "http" });
        self
    }

    /// Without `allowed_origins`, dgw's own origins: `scheme` with each
    /// accepted host.
    fn own_origins(&mut self, scheme: &str) {
        if self.configured_origins {
            return;
        }
        self.origins = self
            .hosts
            .iter()
            .flatten()
            .map(|h| format!("{scheme}://{h}"))
            .collect();
    }

    /// Checks a request's `Host` and `Origin` values.
    /// Compares without allocating: it runs on every request.
    pub fn check(&self, host: Option<&[u8]>, origin: Option<&[u8]>) -> Result<(), GuardError> {
        let listed = |list: &[String], value: &[u8]| {
            list.iter()
                .any(|x| x.as_bytes().eq_ignore_ascii_case(value))
        };
        if let Some(origin) = origin {
            if !listed(&self.origins, origin) {
                return Err(GuardError::Origin(capped(origin)));
            }
        }
        if let Some(allowed) = &self.hosts {
            let host = host.ok_or(GuardError::NoHost)?;
            if !listed(allowed, host) {
                return Err(GuardError::Host(capped(host)));
            }
        }
        Ok(())
    }
}

/// A header value as an error may echo it.
fn capped(value: &[u8]) -> String {
    String::from_utf8_lossy(value).chars().take(128).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_listeners_answer_only_their_own_names() {
        let g = HttpGuard::new("127.0.0.1:8080".parse().unwrap(), vec![], vec![]);
        for ok in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST:8080",
            "[::1]:8080",
        ] {
            assert_eq!(g.check(Some(ok.as_bytes()), None), Ok(()), "{ok}");
        }
        for bad in ["evil.example:8080", "localhost:9090", "127.0.0.1"] {
            assert_eq!(
                g.check(Some(bad.as_bytes()), None).unwrap_err().kind(),
                "host_not_allowed"
            );
        }
        assert_eq!(g.check(None, None), Err(GuardError::NoHost));
        let e = g
            .check(Some(b"localhost:8080"), Some(b"http://evil.example"))
            .unwrap_err();
        assert_eq!(e.kind(), "origin_not_allowed");
    }

    #[test]
    fn without_allowed_origins_only_dgws_own_origins_are_accepted() {
        let g = HttpGuard::new("127.0.0.1:8080".parse().unwrap(), vec![], vec![]);
        let host = Some(&b"127.0.0.1:8080"[..]);
        for ok in [
            "http://127.0.0.1:8080",
            "http://localhost:8080",
            "HTTP://LOCALHOST:8080",
        ] {
            assert_eq!(g.check(host, Some(ok.as_bytes())), Ok(()), "{ok}");
        }
        for bad in [
            "http://127.0.0.1:9090",
            "https://127.0.0.1:8080",
            "http://evil.example:8080",
            "http://127.0.0.1:8080.evil.example",
            "null",
            "",
        ] {
            assert_eq!(
                g.check(host, Some(bad.as_bytes())).unwrap_err().kind(),
                "origin_not_allowed",
                "{bad}"
            );
        }
        let g = g.over_tls(true);
        assert_eq!(g.check(host, Some(b"https://127.0.0.1:8080")), Ok(()));
        assert!(g.check(host, Some(b"http://127.0.0.1:8080")).is_err());
        // Configured hosts give their origins; configured origins rule alone.
        let g = HttpGuard::new(
            "0.0.0.0:8080".parse().unwrap(),
            vec![],
            vec!["dgw.internal:8080".into()],
        );
        assert_eq!(
            g.check(
                Some(b"dgw.internal:8080"),
                Some(b"http://dgw.internal:8080")
            ),
            Ok(())
        );
        let g = HttpGuard::new(
            "127.0.0.1:8080".parse().unwrap(),
            vec!["https://console.example.com".into()],
            vec![],
        );
        assert!(g.check(host, Some(b"http://127.0.0.1:8080")).is_err());
        // A listener taking any host has no origin of its own.
        let g = HttpGuard::new("0.0.0.0:8080".parse().unwrap(), vec![], vec![]);
        assert!(g.check(Some(b"x:8080"), Some(b"http://x:8080")).is_err());
    }

    #[test]
    fn configured_lists_rule_and_other_listeners_take_any_host() {
        let g = HttpGuard::new(
            "0.0.0.0:8080".parse().unwrap(),
            vec!["https://console.example.com/".into()],
            vec![],
        );
        assert_eq!(g.check(Some(b"dgw.internal:8080"), None), Ok(()));
        assert_eq!(
            g.check(Some(b"x"), Some(b"https://console.example.com")),
            Ok(())
        );
        let g = HttpGuard::new(
            "0.0.0.0:8080".parse().unwrap(),
            vec![],
            vec!["dgw.internal:8080".into()],
        );
        assert!(g.check(Some(b"other:8080"), None).is_err());
        assert_eq!(g.check(Some(b"dgw.internal:8080"), None), Ok(()));
    }
}
