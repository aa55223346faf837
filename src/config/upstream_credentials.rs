//! What dgw presents to an upstream, as the config gives it: `headers`,
//! `bearer` and `oauth` on an `[[upstreams]]` entry or on one of its tool
//! rules, each value read now from a file or dgw's environment (inline only
//! for headers that carry no credential).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::{Check, ConfigError};
use crate::mcp::auth::{HeaderCredential, HttpCredentials};
use crate::mcp::secret::{names_a_credential, Secret};

/// `headers`, `bearer` and `oauth` as one entry of the config wrote them.
pub(super) struct RawCredentials {
    pub(super) headers: Vec<RawNamedValue>,
    pub(super) bearer: Option<RawValue>,
    pub(super) oauth: Option<RawOAuth>,
}

impl RawCredentials {
    /// The key of the first credential given, for errors about where
    /// credentials may not be; `None` when there are none.
    pub(super) fn first_key(&self) -> Option<&'static str> {
        if self.bearer.is_some() {
            Some("bearer")
        } else if self.oauth.is_some() {
            Some("oauth")
        } else if !self.headers.is_empty() {
            Some("headers")
        } else {
            None
        }
    }

    /// The credentials, every value read now; `key` names a field of the
    /// entry they sit on, `timeout` is the upstream's.
    pub(super) fn read(
        self,
        timeout: Duration,
        key: &dyn Fn(&str) -> String,
        check: &Check<'_>,
    ) -> Result<HttpCredentials, ConfigError> {
        let mut credentials = headers_and_bearer(self.headers, self.bearer, key, check)?;
        if let Some(o) = self.oauth {
            credentials.oauth = Some(oauth(o, &credentials, timeout, key, check)?);
        }
        Ok(credentials)
    }

    /// [`read`](Self::read), `None` when the entry gives no credential.
    pub(super) fn read_some(
        self,
        timeout: Duration,
        key: &dyn Fn(&str) -> String,
        check: &Check<'_>,
    ) -> Result<Option<Arc<HttpCredentials>>, ConfigError> {
        if self.first_key().is_none() {
            return Ok(None);
        }
        self.read(timeout, key, check).map(|c| Some(Arc::new(c)))
    }
}

/// `oauth = { token_url, client_id, client_secret_file, scope?, audience? }`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOAuth {
    token_url: String,
    client_id: String,
    /// The client secret, from a file only (checked like `value_file`).
    client_secret_file: PathBuf,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    audience: Option<String>,
}

/// A value given inline, from a file or from dgw's environment.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawValue {
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    value_file: Option<PathBuf>,
    #[serde(default)]
    value_env: Option<String>,
}

/// A named [`RawValue`] (a header, an environment variable).
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNamedValue {
    pub(super) name: String,
    #[serde(flatten)]
    pub(super) value: RawValue,
}

/// Headers that carry the protocol itself: dgw sets them, a config may not.
const RESERVED_HEADERS: [&str; 10] = [
    "host",
    "content-type",
    "content-length",
    "accept",
    "connection",
    "transfer-encoding",
    "mcp-session-id",
    "mcp-protocol-version",
    "x-request-id",
    "te",
];

/// An upstream's `headers` and `bearer`, each value read now.
fn headers_and_bearer(
    headers: Vec<RawNamedValue>,
    bearer: Option<RawValue>,
    key: &dyn Fn(&str) -> String,
    check: &Check<'_>,
) -> Result<HttpCredentials, ConfigError> {
    let mut out = HttpCredentials::default();
    for (j, h) in headers.into_iter().enumerate() {
        let k = key(&format!("headers[{j}]"));
        let name = hyper::header::HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| {
            check.invalid(
                &format!("{k}.name"),
                format!("{:?} is not a header name", h.name),
            )
        })?;
        if RESERVED_HEADERS.contains(&name.as_str()) {
            return Err(check.invalid(&format!("{k}.name"), format!("{name} is set by dgw itself")));
        }
        if out.headers.iter().any(|x| x.name == name) {
            return Err(check.invalid(&format!("{k}.name"), format!("{name} is set twice")));
        }
        let secret = read_value(h.value, &h.name, &k, check)?;
        out.headers.push(HeaderCredential {
            name,
            scheme: None,
            secret,
        });
    }
    if let Some(b) = bearer {
        let k = key("bearer");
        if out
            .headers
            .iter()
            .any(|x| x.name == hyper::header::AUTHORIZATION)
        {
            return Err(check.invalid(&k, "sets Authorization, which `headers` sets too".into()));
        }
        let secret = read_value(b, "Authorization", &k, check)?;
        out.headers.push(HeaderCredential {
            name: hyper::header::AUTHORIZATION,
            scheme: Some("Bearer "),
            secret,
        });
    }
    Ok(out)
}

/// An upstream's `oauth`: a token URL dgw can reach, a client id, the
/// secret read from its file now; never beside another Authorization.
fn oauth(
    o: RawOAuth,
    credentials: &HttpCredentials,
    timeout: Duration,
    key: &dyn Fn(&str) -> String,
    check: &Check<'_>,
) -> Result<crate::mcp::oauth::OAuth, ConfigError> {
    let k = key("oauth");
    if credentials
        .headers
        .iter()
        .any(|x| x.name == hyper::header::AUTHORIZATION)
    {
        return Err(check.invalid(
            &k,
            "sets Authorization, which `bearer` or `headers` sets too: give one".into(),
        ));
    }
    let token_url: hyper::Uri = o
        .token_url
        .parse()
        .ok()
        .filter(|u: &hyper::Uri| {
            matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some()
        })
        .ok_or_else(|| {
            check.invalid(
                &format!("{k}.token_url"),
                format!("{:?} is not an http:// or https:// URL", o.token_url),
            )
        })?;
    let printable =
        |v: &str| !v.is_empty() && v.len() <= 1024 && v.chars().all(|c| !c.is_control());
    if !printable(&o.client_id) {
        return Err(check.invalid(
            &format!("{k}.client_id"),
            "must be 1-1024 printable characters".into(),
        ));
    }
    for (name, v) in [("scope", &o.scope), ("audience", &o.audience)] {
        if v.as_deref().is_some_and(|v| !printable(v)) {
            return Err(check.invalid(
                &format!("{k}.{name}"),
                "must be 1-1024 printable characters".into(),
            ));
        }
    }
    let client_secret = crate::mcp::secret::Secret::from_file(&check.file(o.client_secret_file))
        .map_err(|e| check.invalid(&format!("{k}.client_secret_file"), e.to_string()))?;
    Ok(crate::mcp::oauth::OAuth::new(
        crate::mcp::oauth::OAuthConfig {
            token_url,
            client_id: o.client_id,
            client_secret,
            scope: o.scope,
            audience: o.audience,
            timeout,
        },
    ))
}

/// Reads one value: exactly one of `value` (refused for a credential's
/// `name`), `value_file` or `value_env`. Errors name the file or variable,
/// never what it holds.
pub(super) fn read_value(
    raw: RawValue,
    name: &str,
    key: &str,
    check: &Check<'_>,
) -> Result<Secret, ConfigError> {
    let read = match (raw.value, raw.value_file, raw.value_env) {
        (Some(v), None, None) => {
            if names_a_credential(name) {
                return Err(check.invalid(
                    &format!("{key}.value"),
                    format!("{name} carries a credential: give it with value_file or value_env, never in the config"),
                ));
            }
            Secret::inline(&v)
        }
        (None, Some(f), None) => Secret::from_file(&check.file(f)),
        (None, None, Some(e)) => Secret::from_env(&e),
        _ => {
            return Err(check.invalid(
                key,
                "give exactly one of value, value_file or value_env".into(),
            ))
        }
    };
    read.map_err(|e| check.invalid(key, e.to_string()))
}

impl RawValue {
    /// The file the value is read from, if it is.
    pub(super) fn value_file(&self) -> Option<&PathBuf> {
        self.value_file.as_ref()
    }
}

impl RawNamedValue {
    /// The file the value is read from, if it is.
    pub(super) fn value_file(&self) -> Option<&PathBuf> {
        self.value.value_file()
    }
}

impl RawOAuth {
    /// The client secret's file.
    pub(super) fn client_secret_file(&self) -> &PathBuf {
        &self.client_secret_file
    }
}
