//! A token request's parameters: the form (each parameter at most once),
//! the `resource` (RFC 8707) and the `scope` (capabilities, narrowing
//! within a grant).

use delegateos::Capability;

use super::{AuthorizationServer, TokenError, MAX_SCOPES};

/// A form's parameters, each at most once (RFC 6749 §3.1).
pub(crate) fn form(body: &[u8]) -> Result<Vec<(String, String)>, TokenError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (k, v) in form_urlencoded::parse(body) {
        if out.iter().any(|(o, _)| *o == k) {
            return Err(TokenError::InvalidRequest(format!(
                "{k} is given more than once"
            )));
        }
        out.push((k.into_owned(), v.into_owned()));
    }
    Ok(out)
}

pub(crate) fn param<'a>(form: &'a [(String, String)], name: &str) -> Option<&'a str> {
    form.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

impl AuthorizationServer {
    /// RFC 8707: a `resource` must be dgw's (its root or `/mcp`).
    pub(crate) fn check_resource(&self, resource: Option<&str>) -> Result<(), TokenError> {
        let Some(r) = resource else { return Ok(()) };
        let base = self.resource.public_url();
        if r == base || r == format!("{base}/") || r == format!("{base}/mcp") {
            Ok(())
        } else {
            Err(TokenError::InvalidTarget(format!(
                "resource must be {base} or {base}/mcp"
            )))
        }
    }

    /// `scope`: capabilities, each within `allowed`; none: all of them.
    pub(crate) fn scope(
        &self,
        scope: Option<&str>,
        allowed: &[Capability],
    ) -> Result<Vec<Capability>, TokenError> {
        let Some(text) = scope.filter(|s| !s.trim().is_empty()) else {
            return Ok(allowed.to_vec());
        };
        let asked: Vec<&str> = text.split(' ').filter(|s| !s.is_empty()).collect();
        if asked.len() > MAX_SCOPES {
            return Err(TokenError::InvalidScope(format!(
                "at most {MAX_SCOPES} scopes"
            )));
        }
        asked
            .iter()
            .map(|s| {
                let cap = s.parse::<Capability>().map_err(|e| {
                    TokenError::InvalidScope(format!("{s:?} is not a capability: {e}"))
                })?;
                // Checked before anything is made or stored.
                if cap.is_covered_by(allowed) {
                    Ok(cap)
                } else {
                    Err(TokenError::InvalidScope(format!(
                        "{s:?} is wider than the grant"
                    )))
                }
            })
            .collect()
    }
}
