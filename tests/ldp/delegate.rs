//! The reference crate's echo delegate behind an HTTP/1.1 listener, for
//! the LDP tests and the LDP bench.

// Test helpers outside #[test] functions: a failure should stop the test
// loudly, and clippy's allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use ldp_protocol::types::messages::LdpEnvelope;
use serde_json::Value;

use super::{ECHO, SECRET};

/// The crate's echo delegate behind an HTTP/1.1 listener: its routes
/// `GET /ldp/identity` and `POST /ldp/messages`.
pub fn echo_delegate(rt: &tokio::runtime::Runtime) -> String {
    use http_body_util::{BodyExt, Full};
    use hyper::body::{Bytes, Incoming};
    use hyper::{Request, Response};
    let server =
        Arc::new(ldp_protocol::LdpServer::echo_server(ECHO, "Echo").with_signing_secret(SECRET));
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let server = server.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let server = server.clone();
                    async move {
                        let path = req.uri().path().to_owned();
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let answer: Value = match path.as_str() {
                            "/ldp/identity" => server.handle_identity_request(),
                            _ => {
                                let envelope: LdpEnvelope = serde_json::from_slice(&body).unwrap();
                                match server.handle_message(envelope).await {
                                    Ok(a) => {
                                        let mut v = serde_json::to_value(a).unwrap();
                                        // A hostile delegate: a result without
                                        // provenance (its signature, over the
                                        // header fields only, still verifies).
                                        let bare = v["body"]["task_id"]
                                            .as_str()
                                            .is_some_and(|t| t.starts_with("no-provenance"));
                                        if bare {
                                            v["body"].as_object_mut().unwrap().remove("provenance");
                                        }
                                        v
                                    }
                                    Err(e) => {
                                        return Ok::<_, std::convert::Infallible>(
                                            Response::builder()
                                                .status(400)
                                                .body(Full::new(Bytes::from(e)))
                                                .unwrap(),
                                        )
                                    }
                                }
                            }
                        };
                        Ok(Response::new(Full::new(Bytes::from(answer.to_string()))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("http://{addr}")
}
