//! `--serve-proxy`: the least an HTTP/1.1 proxy can do on the gateway's
//! stack (tokio, hyper): each client connection gets its own upstream
//! connection, and every request is read whole, sent on with its headers,
//! and its answer read whole and sent back, nothing parsed, checked or
//! recorded. What it costs per call over calling the upstream directly is
//! the floor of any proxy hop on this machine (benches/compare/run.sh).

use std::net::SocketAddr;

use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper::service::service_fn;
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::sync::Mutex;

/// Serves on `addr`, forwarding to the HTTP/1.1 server at `upstream`.
pub async fn serve(addr: SocketAddr, upstream: SocketAddr) -> Result<(), String> {
    let listener = super::listen(addr, "proxy listening addr").await?;
    loop {
        let (stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let Ok(out) = tokio::net::TcpStream::connect(upstream).await else {
                return;
            };
            let _ = out.set_nodelay(true);
            let Ok((sender, conn)) = http1::handshake(TokioIo::new(out)).await else {
                return;
            };
            tokio::spawn(conn);
            // HTTP/1.1 answers one request at a time per connection, and so
            // does this one's upstream connection.
            let sender = std::sync::Arc::new(Mutex::new(sender));
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let sender = sender.clone();
                async move {
                    let (parts, body) = req.into_parts();
                    let body = body.collect().await?.to_bytes();
                    let forwarded = Request::from_parts(parts, Full::new(body));
                    let answer = sender.lock().await.send_request(forwarded).await?;
                    let (parts, body) = answer.into_parts();
                    let body = body.collect().await?.to_bytes();
                    Ok::<_, hyper::Error>(hyper::Response::from_parts(parts, Full::new(body)))
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
