//! A protocol's own HTTP endpoints (`/<protocol>/v0/…`): the HTTP
//! front reads the request within its limits and hands it over; the
//! protocol answers with a status and a JSON body. No hyper types cross the
//! seam.

use serde_json::Value;

use crate::caller::Caller;

/// An HTTP request to a protocol's endpoint, as the front read it.
#[derive(Debug)]
pub struct HttpRequest<'a> {
    /// `GET`, `POST`, …
    pub method: &'a str,
    /// The path, without the query.
    pub path: &'a str,
    /// The query, without the `?`, as sent.
    pub query: Option<&'a str>,
    /// The `Authorization` header as sent (a protocol may take its own
    /// schemes, such as a per-request bearer secret).
    pub authorization: Option<&'a str>,
    /// Who is calling, as the gateway's admin rules see it (anonymous when
    /// the header is not an administrator's).
    pub caller: &'a Caller,
    pub body: &'a [u8],
}

/// A protocol's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpAnswer {
    pub status: u16,
    pub body: Value,
}

impl HttpAnswer {
    pub fn new(status: u16, body: Value) -> Self {
        Self { status, body }
    }

    /// `404` with a protocol-neutral error object.
    pub fn not_found() -> Self {
        Self::new(
            404,
            serde_json::json!({"error": {"code": "not_found", "message": "no such endpoint"}}),
        )
    }
}

/// Whether `path` is under one of `prefixes` (the prefix itself, or below it).
pub fn under(path: &str, prefixes: &[&str]) -> bool {
    prefixes.iter().any(|p| {
        path == *p
            || path
                .strip_prefix(p)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

#[cfg(test)]
mod tests {
    use super::under;

    #[test]
    fn paths_are_under_a_prefix_only_at_a_segment() {
        let p = ["/proto/v0", "/.well-known/agent.json"];
        assert!(under("/proto/v0", &p));
        assert!(under("/proto/v0/offers/x", &p));
        assert!(under("/.well-known/agent.json", &p));
        assert!(!under("/proto/v01", &p));
        assert!(!under("/proto", &p));
        assert!(!under("/.well-known/agent.jsonx", &p));
    }
}
