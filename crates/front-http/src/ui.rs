//! The seam for a web UI the HTTP listener serves under `/ui` (the operator
//! console, its own crate above this one): the listener checks `Host` as
//! for every path, reads the body within its limits and the time limit,
//! and hands over plain values, no hyper types. `Origin` is the UI's to
//! judge: its pages post only to their own origin (same-origin, whatever
//! `[server] allowed_origins` lets browser MCP clients do).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE, COOKIE, HOST, ORIGIN};
use hyper::{Request, Response, StatusCode};

use super::{HttpFront, PeerSubject};

/// Where the UI is mounted.
pub const UI_PREFIX: &str = "/ui";

/// Whether `path` is the UI's.
pub(crate) fn is_ui_path(path: &str) -> bool {
    path == UI_PREFIX
        || path
            .strip_prefix(UI_PREFIX)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// One request to the UI, as the listener read it.
#[derive(Debug, Clone)]
pub struct UiRequest {
    pub method: String,
    /// The path under `/ui` (`/ui/budgets`).
    pub path: String,
    pub query: Option<String>,
    /// The `Host` header (checked against `allowed_hosts` already).
    pub host: Option<String>,
    pub origin: Option<String>,
    /// `Sec-Fetch-Site`, which browsers send with every request.
    pub fetch_site: Option<String>,
    pub cookie: Option<String>,
    pub content_type: Option<String>,
    /// The client certificate's subject (mTLS).
    pub subject: Option<String>,
    /// The listener serves TLS.
    pub tls: bool,
    pub body: Bytes,
}

/// The UI's answer.
#[derive(Debug, Clone)]
pub struct UiAnswer {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
}

/// A web UI served under [`UI_PREFIX`].
pub trait Ui: Send + Sync {
    /// Answers one request.
    fn serve(&self, request: UiRequest) -> Pin<Box<dyn Future<Output = UiAnswer> + Send + '_>>;
}

fn header(req: &Request<Incoming>, name: impl hyper::header::AsHeaderName) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

impl HttpFront {
    /// A request under `/ui`: `Host` checked, the body read within the
    /// limits, the UI's answer within the time limit.
    pub(crate) async fn serve_ui(
        &self,
        ui: Arc<dyn Ui>,
        req: Request<Incoming>,
    ) -> Response<super::Body> {
        let host = header(&req, HOST).or_else(|| req.uri().authority().map(|a| a.to_string()));
        if let Err(e) = self.guard.check(host.as_deref().map(str::as_bytes), None) {
            return super::text_response(StatusCode::FORBIDDEN, format!("{e}\n"), "text/plain");
        }
        let request = UiRequest {
            method: req.method().to_string(),
            path: req.uri().path().to_owned(),
            query: req.uri().query().map(str::to_owned),
            host,
            origin: header(&req, ORIGIN),
            fetch_site: header(&req, "sec-fetch-site"),
            cookie: header(&req, COOKIE),
            content_type: header(&req, CONTENT_TYPE),
            subject: req
                .extensions()
                .get::<PeerSubject>()
                .and_then(|s| s.0.clone()),
            tls: self.guard.tls(),
            body: Bytes::new(),
        };
        self.limited(async move {
            let body = match self.read_body(req.into_body()).await {
                Ok(b) => b,
                Err(r) => return r,
            };
            let answer = ui.serve(UiRequest { body, ..request }).await;
            let mut r = Response::new(super::full(answer.body));
            *r.status_mut() =
                StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            for (name, value) in answer.headers {
                if let Ok(v) = HeaderValue::from_str(&value) {
                    r.headers_mut().append(HeaderName::from_static(name), v);
                }
            }
            r
        })
        .await
    }
}
