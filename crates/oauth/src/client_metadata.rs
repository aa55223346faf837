//! Client ID metadata documents (draft-ietf-oauth-client-id-metadata-
//! document, the MCP authorization spec's way for a host to identify
//! itself without registering): a `client_id` that is a URL names the
//! JSON document, served there, that says the client's name and redirect
//! URIs. dgw fetches one only from the hosts `[oauth]
//! client_id_metadata_document_hosts` lists, through dgw-net's outbound
//! client (no redirects followed), within [`MAX_DOCUMENT_BYTES`] and
//! [`FETCH_TIMEOUT`], and takes it only if its `client_id` is that URL
//! exactly and it claims no shared secret.

use std::time::Duration;

use dgw_net::outbound::{JsonClient, OutboundError};
use serde_json::Value;

use crate::redirect::RedirectUri;

/// The most bytes of a document read (the draft suggests 5 KB).
pub const MAX_DOCUMENT_BYTES: usize = 5 * 1024;
/// How long a fetch may take, connection included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(3);
/// The most redirect URIs a document may list.
const MAX_REDIRECT_URIS: usize = 16;
/// The longest `client_id` URL taken.
const MAX_URL_BYTES: usize = 2048;

/// Why a document was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    #[error("client ID metadata documents are not accepted here")]
    Disabled,
    #[error("a client ID metadata document's URL must be https:// (http:// on loopback), with a path, and no fragment, credentials or dot segments")]
    BadUrl,
    #[error("the host {0:?} is not one client ID metadata documents are fetched from")]
    ForbiddenHost(String),
    #[error("the client ID metadata document could not be fetched: {0}")]
    Fetch(String),
    #[error("the client ID metadata document is not valid: {0}")]
    Invalid(String),
}

/// What a document says of its client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// What it calls itself (for the record).
    pub name: Option<String>,
    pub redirect_uris: Vec<RedirectUri>,
}

/// Fetches documents from the allowed hosts.
pub struct ClientMetadataDocuments {
    /// Host names (lowercase), any port.
    allowed_hosts: Vec<String>,
    http: JsonClient,
}

impl std::fmt::Debug for ClientMetadataDocuments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientMetadataDocuments")
            .field("allowed_hosts", &self.allowed_hosts)
            .finish_non_exhaustive()
    }
}

/// Whether a `client_id` names a metadata document (a URL) rather than a
/// registered client.
pub fn is_document_id(client_id: &str) -> bool {
    client_id.starts_with("https://") || client_id.starts_with("http://")
}

/// The host of a document URL, checked as the draft requires.
fn host_of(url: &str) -> Result<String, DocumentError> {
    if url.len() > MAX_URL_BYTES || url.bytes().any(|b| !(0x21..=0x7e).contains(&b)) {
        return Err(DocumentError::BadUrl);
    }
    let (secure, rest) = match (url.strip_prefix("https://"), url.strip_prefix("http://")) {
        (Some(r), _) => (true, r),
        (None, Some(r)) => (false, r),
        _ => return Err(DocumentError::BadUrl),
    };
    let (authority, path) = rest.split_at(rest.find('/').ok_or(DocumentError::BadUrl)?);
    let path = path.split('?').next().unwrap_or_default();
    let dotted = path.split('/').any(|s| s == "." || s == "..");
    if authority.is_empty()
        || authority.contains(['@', '?'])
        || url.contains('#')
        || path.len() < 2
        || dotted
    {
        return Err(DocumentError::BadUrl);
    }
    let host = if authority.starts_with('[') {
        authority
            .find(']')
            .map_or(authority, |end| &authority[..=end])
    } else {
        authority.split(':').next().unwrap_or_default()
    }
    .to_ascii_lowercase();
    if !secure && !["localhost", "127.0.0.1", "[::1]"].contains(&host.as_str()) {
        return Err(DocumentError::BadUrl);
    }
    Ok(host)
}

impl ClientMetadataDocuments {
    /// Fetching from `allowed_hosts` (host names, compared without case;
    /// any port).
    pub fn new(allowed_hosts: Vec<String>) -> Self {
        Self {
            allowed_hosts: allowed_hosts
                .into_iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
            http: JsonClient::new(FETCH_TIMEOUT).with_max_answer_bytes(MAX_DOCUMENT_BYTES),
        }
    }

    /// The client the document at `url` describes.
    pub async fn fetch(&self, url: &str) -> Result<Described, DocumentError> {
        let host = host_of(url)?;
        if !self.allowed_hosts.contains(&host) {
            return Err(DocumentError::ForbiddenHost(host));
        }
        let doc = self.http.get(url).await.map_err(|e| {
            DocumentError::Fetch(match e {
                OutboundError::Unreadable(_) => {
                    format!("not JSON of at most {MAX_DOCUMENT_BYTES} bytes")
                }
                other => other.to_string(),
            })
        })?;
        parse(url, &doc)
    }
}

/// A fetched document as a client, if it describes `url`'s client.
fn parse(url: &str, doc: &Value) -> Result<Described, DocumentError> {
    let invalid = |why: &str| DocumentError::Invalid(why.to_owned());
    let doc = doc
        .as_object()
        .ok_or_else(|| invalid("not a JSON object"))?;
    if doc.get("client_id").and_then(Value::as_str) != Some(url) {
        return Err(invalid("its client_id is not the URL it was fetched from"));
    }
    if doc.contains_key("client_secret") || doc.contains_key("client_secret_expires_at") {
        return Err(invalid("it names a client secret"));
    }
    match doc.get("token_endpoint_auth_method") {
        None => {}
        Some(Value::String(m)) if m == "none" => {}
        Some(_) => return Err(invalid("token_endpoint_auth_method must be none")),
    }
    let uris = doc
        .get("redirect_uris")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty() && a.len() <= MAX_REDIRECT_URIS)
        .ok_or_else(|| invalid("redirect_uris must list 1-16 URIs"))?;
    let redirect_uris = uris
        .iter()
        .map(|u| {
            u.as_str()
                .ok_or_else(|| invalid("a redirect URI is not a string"))
                .and_then(|s| {
                    RedirectUri::parse(s).map_err(|e| DocumentError::Invalid(e.to_string()))
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let name = doc
        .get("client_name")
        .and_then(Value::as_str)
        .map(|n| n.chars().filter(|c| !c.is_control()).take(128).collect());
    Ok(Described {
        name,
        redirect_uris,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn document_urls_are_checked_as_the_draft_says() {
        assert_eq!(
            host_of("https://App.example/client.json").unwrap(),
            "app.example"
        );
        assert_eq!(host_of("http://127.0.0.1:9/c").unwrap(), "127.0.0.1");
        for bad in [
            "https://app.example",
            "https://app.example/",
            "https://app.example/a/../c",
            "https://app.example/./c",
            "https://app.example/c#x",
            "https://u@app.example/c",
            "http://app.example/c",
            "ftp://app.example/c",
            "https://app.example/c d",
        ] {
            assert_eq!(host_of(bad), Err(DocumentError::BadUrl), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_host_not_listed_is_never_fetched() {
        let docs = ClientMetadataDocuments::new(vec!["app.example".into()]);
        assert_eq!(
            docs.fetch("https://evil.example/client").await.unwrap_err(),
            DocumentError::ForbiddenHost("evil.example".into())
        );
        assert_eq!(
            docs.fetch("https://app.example.evil.example/client")
                .await
                .unwrap_err(),
            DocumentError::ForbiddenHost("app.example.evil.example".into())
        );
    }

    #[test]
    fn a_document_must_describe_the_client_at_its_url() {
        let url = "https://app.example/client.json";
        let good = json!({"client_id": url, "client_name": "App\u{7}", "redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "none"});
        let c = parse(url, &good).unwrap();
        assert_eq!(c.name.as_deref(), Some("App"));
        assert_eq!(c.redirect_uris.len(), 1);
        for (doc, _why) in [
            (
                json!({"client_id": "https://other.example/c", "redirect_uris": ["http://127.0.0.1/cb"]}),
                "client_id",
            ),
            (json!({"client_id": url, "redirect_uris": []}), "no uris"),
            (
                json!({"client_id": url, "redirect_uris": ["http://evil.example/cb"]}),
                "http",
            ),
            (
                json!({"client_id": url, "redirect_uris": ["http://127.0.0.1/cb"], "client_secret": "x"}),
                "secret",
            ),
            (
                json!({"client_id": url, "redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "client_secret_basic"}),
                "auth",
            ),
            (json!([url]), "array"),
        ] {
            assert!(
                matches!(parse(url, &doc), Err(DocumentError::Invalid(_))),
                "{doc}"
            );
        }
    }
}
