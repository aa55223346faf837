//! The calls dgw makes to other services: one POST (or GET) of JSON
//! within a set time, the answer read up to a size limit (a protocol's
//! call to a peer it brokers for, a notice to a caller's callback, an
//! admin command to a running gateway; an OAuth form to an identity
//! provider's token endpoint, a client's metadata document).

use std::time::Duration;

use crate::tls::HttpClient;
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use hyper::{Request, Uri};
use serde_json::Value;
use tracing::Instrument;

/// The most an answer may hold, unless set lower.
const MAX_ANSWER_BYTES: usize = 1 << 20;

/// Why a service gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum OutboundError {
    #[error("the endpoint {0:?} is not an http(s) URL")]
    BadEndpoint(String),
    #[error("no answer within {}", dgw_core::units::show_duration(*.0))]
    Timeout(Duration),
    #[error("could not be reached: {0}")]
    Unreachable(String),
    #[error("answered HTTP {0}")]
    Status(u16),
    #[error("the answer is not JSON within the size limit: {0}")]
    Unreadable(String),
    #[error("HTTPS is not available: {0}")]
    Tls(String),
}

/// What a request carries.
enum Payload {
    None,
    Json(String),
    Form(String),
}

/// The HTTP(S) client other services are called with.
#[derive(Clone)]
pub struct JsonClient {
    client: Result<HttpClient, String>,
    timeout: Duration,
    max_answer_bytes: usize,
}

impl JsonClient {
    pub fn new(timeout: Duration) -> Self {
        Self {
            client: crate::tls::http_client(None, Some(timeout)),
            timeout,
            max_answer_bytes: MAX_ANSWER_BYTES,
        }
    }

    /// The same client reading at most `bytes` of an answer (never more
    /// than 1 MiB).
    pub fn with_max_answer_bytes(mut self, bytes: usize) -> Self {
        self.max_answer_bytes = bytes.min(MAX_ANSWER_BYTES);
        self
    }

    /// Whether `endpoint` is a URL a service can be called at.
    pub fn check_endpoint(endpoint: &str) -> Result<Uri, OutboundError> {
        let uri: Uri = endpoint
            .parse()
            .map_err(|_| OutboundError::BadEndpoint(endpoint.to_owned()))?;
        match (uri.scheme_str(), uri.host()) {
            (Some("http" | "https"), Some(_)) => Ok(uri),
            _ => Err(OutboundError::BadEndpoint(endpoint.to_owned())),
        }
    }

    /// POSTs `message` to `endpoint` (with `Authorization: Bearer
    /// <bearer>` when given); the JSON the service answered with.
    pub async fn post(
        &self,
        endpoint: &str,
        message: &Value,
        bearer: Option<&str>,
    ) -> Result<Value, OutboundError> {
        let body = self.send(endpoint, message, bearer).await?;
        serde_json::from_slice(&body).map_err(|e| OutboundError::Unreadable(e.to_string()))
    }

    /// POSTs `message` to a buyer's callback in a task of its own (with
    /// `Authorization: Bearer <auth_reference>` when the buyer gave one);
    /// a failure is logged: the buyer can always read the state.
    pub fn notify(&self, url: String, message: Value, bearer: Option<String>) {
        let this = self.clone();
        tokio::spawn(
            async move {
                if let Err(e) = this.send(&url, &message, bearer.as_deref()).await {
                    tracing::warn!(%url, error = %e, "notifying a buyer's callback");
                }
            }
            .instrument(tracing::Span::current()),
        );
    }

    /// GETs `endpoint`; the JSON the service answered with.
    pub async fn get(&self, endpoint: &str) -> Result<Value, OutboundError> {
        let body = self.exchange(endpoint, Payload::None, None).await?;
        serde_json::from_slice(&body).map_err(|e| OutboundError::Unreadable(e.to_string()))
    }

    /// POSTs `form` as `application/x-www-form-urlencoded` to `endpoint`
    /// (RFC 6749 §4.1.3), with `Authorization: Basic` of `basic` (client ID
    /// and secret, form-encoded first as §2.3.1 says) when given; the JSON
    /// answered. An OAuth error answer (400, 401) is `Status`.
    pub async fn post_form(
        &self,
        endpoint: &str,
        form: &[(&str, &str)],
        basic: Option<(&str, &str)>,
    ) -> Result<Value, OutboundError> {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let authorization = basic.map(|(id, secret)| {
            let enc = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let pair = format!("{}:{}", enc(id), enc(secret));
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        });
        let body = self
            .exchange(endpoint, Payload::Form(body), authorization.as_deref())
            .await?;
        serde_json::from_slice(&body).map_err(|e| OutboundError::Unreadable(e.to_string()))
    }

    async fn send(
        &self,
        endpoint: &str,
        message: &Value,
        bearer: Option<&str>,
    ) -> Result<Bytes, OutboundError> {
        let authorization = bearer.map(|b| format!("Bearer {b}"));
        self.exchange(
            endpoint,
            Payload::Json(message.to_string()),
            authorization.as_deref(),
        )
        .await
    }

    /// A POST of `payload`, or a GET without one.
    async fn exchange(
        &self,
        endpoint: &str,
        payload: Payload,
        authorization: Option<&str>,
    ) -> Result<Bytes, OutboundError> {
        let uri = Self::check_endpoint(endpoint)?;
        let client = self
            .client
            .as_ref()
            .map_err(|e| OutboundError::Tls(e.clone()))?;
        let (builder, content_type, body) = match payload {
            Payload::None => (Request::get(uri), "application/json", String::new()),
            Payload::Json(b) => (Request::post(uri), "application/json", b),
            Payload::Form(b) => (Request::post(uri), "application/x-www-form-urlencoded", b),
        };
        let mut request = builder
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| OutboundError::Unreachable(e.to_string()))?;
        let headers = request.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        if let Some(secret) = authorization {
            let mut value = HeaderValue::from_str(secret)
                .map_err(|e| OutboundError::Unreachable(e.to_string()))?;
            value.set_sensitive(true);
            request.headers_mut().insert(AUTHORIZATION, value);
        }
        // The call is a stage of the trace it serves; the service's own
        // spans join it through traceparent.
        let span = dgw_core::stage_span!("upstream_call");
        let _in = span.enter();
        crate::trace_context::inject_headers(request.headers_mut());
        drop(_in);
        let exchange = async {
            let response = client
                .request(request)
                .await
                .map_err(|e| OutboundError::Unreachable(e.to_string()))?;
            let status = response.status();
            if !status.is_success() {
                return Err(OutboundError::Status(status.as_u16()));
            }
            Ok(Limited::new(response.into_body(), self.max_answer_bytes)
                .collect()
                .await
                .map_err(|e| OutboundError::Unreadable(e.to_string()))?
                .to_bytes())
        };
        let answer = tokio::time::timeout(self.timeout, exchange)
            .instrument(span.clone())
            .await
            .map_err(|_| OutboundError::Timeout(self.timeout))
            .and_then(|a| a);
        dgw_core::stages::decided(&span, if answer.is_ok() { "answered" } else { "failed" });
        answer
    }
}
