//! The HTTP/1 connections to one upstream, kept open between calls: a
//! request takes an idle one (or dials one) and gives it back once its
//! answer was read in full. hyper's pooled client did the same at a higher
//! price per call (a pool key built, a checkout raced against a lazy
//! connect, and a task spawned per request to hand the connection back;
//! issue 36); here the call that read the answer hands it back.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderValue, HOST};
use hyper::{Request, Response, Uri};
use tower_service::Service;

type Connector = hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>;
type Sender = SendRequest<Full<Bytes>>;

/// A connection idle longer than this is closed rather than reused (what
/// hyper's pool did by default): the upstream may have forgotten it.
const IDLE: Duration = Duration::from_secs(90);
/// Idle connections kept; more are closed when handed back.
const MAX_IDLE: usize = 256;

/// Why a request got no answer.
#[derive(Debug)]
pub enum SendError {
    /// No connection could be made: nothing was sent.
    Connect(String),
    /// Sent (or perhaps sent) on a connection that then failed.
    Send(String),
}

/// The connections to one upstream URL.
pub struct Conns {
    url: Uri,
    /// `Host` for every request (its authority).
    host: Option<HeaderValue>,
    connector: Connector,
    idle: Mutex<Vec<(Instant, Sender)>>,
}

/// A connection lent to one request; [`Lease::done`] hands it back.
pub struct Lease<'a> {
    conns: &'a Conns,
    sender: Sender,
}

impl Lease<'_> {
    /// The answer was read to its end: the connection can carry another
    /// request. (Dropped instead, it closes once its answer is done.)
    pub fn done(self) {
        let Lease { conns, sender } = self;
        if sender.is_closed() {
            return;
        }
        let mut idle = conns.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push((Instant::now(), sender));
        }
    }
}

impl Conns {
    /// `url` is `http://` or `https://` (verified against `ca_file`, else
    /// the system's roots).
    pub fn new(url: Uri, ca_file: Option<&std::path::Path>) -> Result<Self, String> {
        let tls = dgw_net::tls::client_config(ca_file).map_err(|e| e.to_string())?;
        let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
        http.set_nodelay(true);
        http.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let host = url
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok());
        Ok(Self {
            url,
            host,
            connector,
            idle: Mutex::new(Vec::new()),
        })
    }

    /// Sends `req` (its URI replaced by the upstream's path, its `Host`
    /// set) on an idle connection, or a new one when none is left or an
    /// idle one turns out closed before the request went out.
    pub async fn send(
        &self,
        mut req: Request<Full<Bytes>>,
    ) -> Result<(Response<hyper::body::Incoming>, Lease<'_>), SendError> {
        *req.uri_mut() = self
            .url
            .path_and_query()
            .map_or_else(|| Uri::from_static("/"), |p| Uri::from(p.clone()));
        if let Some(host) = &self.host {
            req.headers_mut().insert(HOST, host.clone());
        }
        loop {
            let (mut sender, fresh) = match self.take().await {
                Some(s) => (s, false),
                // Boxed: dialing (the connector's and the handshake's
                // futures) is rare and large, and inlined it made every
                // call's future, copied twice per call, 20 times larger.
                None => (Box::pin(self.dial()).await?, true),
            };
            match sender.try_send_request(req).await {
                Ok(resp) => {
                    return Ok((
                        resp,
                        Lease {
                            conns: self,
                            sender,
                        },
                    ))
                }
                Err(mut e) => match e.take_message() {
                    // Never sent: an idle connection the upstream closed.
                    Some(back) if !fresh => req = back,
                    Some(_) => return Err(SendError::Connect(e.into_error().to_string())),
                    None => return Err(SendError::Send(e.into_error().to_string())),
                },
            }
        }
    }

    /// The most recently used idle connection still open and fresh.
    async fn take(&self) -> Option<Sender> {
        loop {
            let (at, mut sender) = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop()?;
            if sender.is_closed() || at.elapsed() > IDLE {
                continue;
            }
            // Handed back once its answer was read: ready at once, or as
            // soon as its connection task has seen the answer's end.
            if sender.ready().await.is_ok() {
                return Some(sender);
            }
        }
    }

    async fn dial(&self) -> Result<Sender, SendError> {
        let io = self
            .connector
            .clone()
            .call(self.url.clone())
            .await
            .map_err(|e| SendError::Connect(e.to_string()))?;
        let (sender, conn) = http1::handshake(io)
            .await
            .map_err(|e| SendError::Connect(e.to_string()))?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "upstream connection ended");
            }
        });
        Ok(sender)
    }
}
