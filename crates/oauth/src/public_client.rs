//! The clients of the authorization code flow: MCP hosts, public clients
//! (no secret: PKCE binds a code to the one that asked for it). Each is
//! either registered in config (`[[oauth.public_clients]]`) or identified
//! by a client ID metadata document ([`crate::client_metadata`]); there is
//! no dynamic client registration.

use crate::client_metadata::{self, ClientMetadataDocuments, DocumentError};
use crate::redirect::RedirectUri;

/// A client that may ask for codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicClient {
    pub client_id: String,
    /// What it calls itself (for the record).
    pub name: Option<String>,
    pub redirect_uris: Vec<RedirectUri>,
}

/// Why a `client_id` names no client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    #[error("client_id is required")]
    Missing,
    #[error("the client is not registered")]
    Unknown,
    #[error(transparent)]
    Document(#[from] DocumentError),
}

/// The registered clients, and where documents may come from.
#[derive(Debug, Default)]
pub struct PublicClients {
    registered: Vec<PublicClient>,
    /// `None`: `client_id` URLs are refused.
    documents: Option<ClientMetadataDocuments>,
}

impl PublicClients {
    /// `registered` clients, and documents from `document_hosts` (none:
    /// documents are not accepted).
    pub fn new(registered: Vec<PublicClient>, document_hosts: Vec<String>) -> Self {
        Self {
            registered,
            documents: (!document_hosts.is_empty())
                .then(|| ClientMetadataDocuments::new(document_hosts)),
        }
    }

    /// Whether client ID metadata documents are accepted.
    pub fn accepts_documents(&self) -> bool {
        self.documents.is_some()
    }

    /// The client `client_id` names: a registered one, or the one its
    /// metadata document describes (fetched now).
    pub async fn resolve(&self, client_id: Option<&str>) -> Result<PublicClient, ClientError> {
        let id = client_id
            .filter(|c| !c.is_empty())
            .ok_or(ClientError::Missing)?;
        if client_metadata::is_document_id(id) {
            let documents = self.documents.as_ref().ok_or(DocumentError::Disabled)?;
            let described = documents.fetch(id).await?;
            return Ok(PublicClient {
                client_id: id.to_owned(),
                name: described.name,
                redirect_uris: described.redirect_uris,
            });
        }
        self.registered
            .iter()
            .find(|c| c.client_id == id)
            .cloned()
            .ok_or(ClientError::Unknown)
    }
}
