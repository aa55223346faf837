//! What dgw presents to an upstream on its own behalf: headers (an API
//! key, a bearer token) toward an HTTP upstream. The caller's credential is
//! never among them: a link builds each request from nothing but these.

use hyper::header::{HeaderName, HeaderValue};

use super::secret::Secret;

/// One header dgw adds to every request to an HTTP upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderCredential {
    pub name: HeaderName,
    /// Written before the value (`Bearer ` for a bearer token).
    pub scheme: Option<&'static str>,
    pub secret: Secret,
}

impl HeaderCredential {
    /// The header's value; `None` when it is not a valid header value
    /// (refused when the config was read, so never in practice).
    pub fn value(&self) -> Option<HeaderValue> {
        let text = match self.scheme {
            Some(s) => format!("{s}{}", self.secret.expose()),
            None => self.secret.expose().to_owned(),
        };
        let mut v = HeaderValue::from_str(&text).ok()?;
        v.set_sensitive(self.secret.is_secret());
        Some(v)
    }
}

/// Everything dgw presents to one HTTP upstream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HttpCredentials {
    pub headers: Vec<HeaderCredential>,
    /// A bearer token fetched by client credentials (never with `bearer`).
    pub oauth: Option<super::oauth::OAuth>,
}

impl HttpCredentials {
    pub fn secrets(&self) -> impl Iterator<Item = &Secret> {
        self.headers
            .iter()
            .map(|h| &h.secret)
            .chain(self.oauth.iter().map(|o| &o.config.client_secret))
    }

    /// Sets every header on `headers`, replacing what is there.
    pub fn apply(&self, headers: &mut hyper::HeaderMap) {
        for h in &self.headers {
            if let Some(v) = h.value() {
                headers.insert(h.name.clone(), v);
            }
        }
    }
}
