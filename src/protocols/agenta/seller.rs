//! The calls dgw makes: an execution request forwarded to its seller (one
//! POST of JSON to the offer's `seller_agent.endpoint`, within the
//! configured time, the answer read up to a size limit), and receipts passed
//! on to a buyer's callback on an allowed host.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use hyper::{Request, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// The most a seller's answer may hold.
const MAX_ANSWER_BYTES: usize = 1 << 20;

/// Why a seller gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum SellerError {
    #[error("the seller endpoint {0:?} is not an http(s) URL")]
    BadEndpoint(String),
    #[error("the seller did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the seller could not be reached: {0}")]
    Unreachable(String),
    #[error("the seller answered HTTP {0}")]
    Status(u16),
    #[error("the seller's answer is not JSON of at most 1 MiB: {0}")]
    Unreadable(String),
    #[error("HTTPS to sellers is not available: {0}")]
    Tls(String),
}

/// The HTTP(S) client sellers (and buyers' callbacks) are called with.
#[derive(Clone)]
pub struct Sellers {
    client: Result<Client<HttpsConnector<HttpConnector>, Full<Bytes>>, String>,
    timeout: Duration,
}

impl Sellers {
    pub fn new(timeout: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(timeout));
        connector.enforce_http(false);
        let client = dgw_net::tls::client_config(None)
            .map(|tls| {
                let https = hyper_rustls::HttpsConnectorBuilder::new()
                    .with_tls_config(tls)
                    .https_or_http()
                    .enable_http1()
                    .wrap_connector(connector);
                Client::builder(TokioExecutor::new()).build(https)
            })
            .map_err(|e| e.to_string());
        Self { client, timeout }
    }

    /// Whether `endpoint` is a URL sellers can be called at.
    pub fn check_endpoint(endpoint: &str) -> Result<Uri, SellerError> {
        let uri: Uri = endpoint
            .parse()
            .map_err(|_| SellerError::BadEndpoint(endpoint.to_owned()))?;
        match (uri.scheme_str(), uri.host()) {
            (Some("http" | "https"), Some(_)) => Ok(uri),
            _ => Err(SellerError::BadEndpoint(endpoint.to_owned())),
        }
    }

    /// POSTs `message` to `endpoint`; the JSON the seller answered with.
    pub async fn post(&self, endpoint: &str, message: &Value) -> Result<Value, SellerError> {
        let body = self.send(endpoint, message, None).await?;
        serde_json::from_slice(&body).map_err(|e| SellerError::Unreadable(e.to_string()))
    }

    /// POSTs `message` to a buyer's callback in a task of its own (with
    /// `Authorization: Bearer <auth_reference>` when the buyer gave one);
    /// a failure is logged: the buyer can always read the state.
    pub fn notify(&self, url: String, message: Value, bearer: Option<String>) {
        let this = self.clone();
        tokio::spawn(async move {
            if let Err(e) = this.send(&url, &message, bearer.as_deref()).await {
                tracing::warn!(%url, error = %e, "notifying a buyer's callback");
            }
        });
    }

    async fn send(
        &self,
        endpoint: &str,
        message: &Value,
        bearer: Option<&str>,
    ) -> Result<Bytes, SellerError> {
        let uri = Self::check_endpoint(endpoint)?;
        let client = self
            .client
            .as_ref()
            .map_err(|e| SellerError::Tls(e.clone()))?;
        let mut request = Request::post(uri)
            .body(Full::new(Bytes::from(message.to_string())))
            .map_err(|e| SellerError::Unreachable(e.to_string()))?;
        request
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(secret) = bearer {
            let value = HeaderValue::from_str(&format!("Bearer {secret}"))
                .map_err(|e| SellerError::Unreachable(e.to_string()))?;
            request.headers_mut().insert(AUTHORIZATION, value);
        }
        let exchange = async {
            let response = client
                .request(request)
                .await
                .map_err(|e| SellerError::Unreachable(e.to_string()))?;
            let status = response.status();
            if !status.is_success() {
                return Err(SellerError::Status(status.as_u16()));
            }
            Ok(Limited::new(response.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| SellerError::Unreadable(e.to_string()))?
                .to_bytes())
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| SellerError::Timeout(self.timeout))?
    }
}
